package io.fencepost.guard;

/** What a guard did with a write. */
public enum Outcome {
  /** Written (or, for advance, the mark raised or kept): the token is current. */
  APPLIED("applied"),
  /** A retried write id, already applied once: nothing was written again (Redis only). */
  DUPLICATE("duplicate"),
  /** Refused: a larger token has been seen for the lock. Nothing was written. */
  STALE("stale"),
  /** The token is current (the mark was raised), but there is no row to update (SQL only). */
  NOT_FOUND("not-found");

  private final String wire;

  Outcome(String wire) {
    this.wire = wire;
  }

  /** The outcome's name in the conformance vectors and the TS library: applied, stale, ... */
  public String wire() {
    return wire;
  }

  /** Whether the write was not refused (everything but {@link #STALE}). */
  public boolean accepted() {
    return this != STALE;
  }

  @Override
  public String toString() {
    return wire;
  }
}
