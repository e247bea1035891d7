package io.fencepost;

/**
 * Everything a lock reports: {@link NotAcquiredException}, {@link AlreadyDoneException}, {@link
 * LockLostException}, and, for other failures of the agent or the network, this class itself.
 * When the agent answered with problem details (RFC 9457), {@link #problem()} holds them.
 */
public class FencepostException extends Exception {
  private static final long serialVersionUID = 1L;

  private final transient Problem problem;

  /** An error with a message. */
  public FencepostException(String message) {
    this(message, null, null);
  }

  /** An error with a message, the agent's problem details (or null) and a cause (or null). */
  public FencepostException(String message, Problem problem, Throwable cause) {
    super(message, cause);
    this.problem = problem;
  }

  /** The agent's problem details, or null when the error is not an answer of the agent. */
  public Problem problem() {
    return problem;
  }

  /**
   * The exception for a problem answer: not-granted and held are {@link NotAcquiredException},
   * already-done {@link AlreadyDoneException}, not-held {@link LockLostException}, others this
   * class.
   */
  static FencepostException of(Problem p) {
    String msg = "fencepost agent: " + p.status() + " " + p.name() + ": " + p.detail();
    switch (p.name()) {
      case "not-granted":
      case "held":
        return new NotAcquiredException(msg, p, null);
      case "already-done":
        return new AlreadyDoneException(msg, p);
      case "not-held":
        return new LockLostException(msg, p, null);
      default:
        return new FencepostException(msg, p, null);
    }
  }
}
