package io.fencepost;

/**
 * The lock was not granted within the wait (423 not-granted, or the wait was interrupted), or
 * another pod holds it and the caller asked not to wait (423 held). A queued request was withdrawn.
 */
public final class NotAcquiredException extends FencepostException {
  private static final long serialVersionUID = 1L;

  NotAcquiredException(String message, Problem problem, Throwable cause) {
    super(message, problem, cause);
  }
}
