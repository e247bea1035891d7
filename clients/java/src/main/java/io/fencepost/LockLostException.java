package io.fencepost;

/**
 * The term ended without a release: its time ran out, the agent said lost, or the agent no longer
 * holds the lock with this token (409 not-held). Stop writing.
 */
public final class LockLostException extends FencepostException {
  private static final long serialVersionUID = 1L;

  LockLostException(String message, Problem problem, Throwable cause) {
    super(message, problem, cause);
  }

  LockLostException(String message) {
    super(message, null, null);
  }
}
