package io.fencepost;

/** A fencing token that is not a canonical decimal in [0, 2^63−1]. */
public final class MalformedTokenException extends IllegalArgumentException {
  private static final long serialVersionUID = 1L;

  /** A malformed token, with why. */
  public MalformedTokenException(String why) {
    super("malformed fencing token: " + why);
  }
}
