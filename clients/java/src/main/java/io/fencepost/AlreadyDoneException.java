package io.fencepost;

/** The run id was already completed by some holder (409 already-done): do not run it. */
public final class AlreadyDoneException extends FencepostException {
  private static final long serialVersionUID = 1L;

  AlreadyDoneException(String message, Problem problem) {
    super(message, problem, null);
  }
}
