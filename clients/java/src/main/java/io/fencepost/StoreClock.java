package io.fencepost;

import java.time.Instant;

/**
 * The time of a store's locks, in milliseconds: it never runs slower than either the monotonic
 * clock ({@link System#nanoTime()}) or the wall clock (the TypeScript reference:
 * src/runtime/clock.ts conservativeClock). Between two readings it advances by the larger progress
 * of the two, never backwards: a VM pause stops the monotonic clock, but the wall clock, set
 * right after the resume, still ends a term that passed during it; a wall clock stepped back is
 * ignored. Safe for concurrent use.
 */
final class StoreClock {
  private long lastNanos = System.nanoTime();
  private long lastWallNanos = wallNanos();
  private long elapsedNanos;

  /** The wall clock in nanoseconds, at its own resolution (microseconds on Linux): a wall clock read in whole milliseconds would add up to a millisecond per reading. */
  private static long wallNanos() {
    Instant now = Instant.now();
    return now.getEpochSecond() * 1_000_000_000L + now.getNano();
  }

  /** Milliseconds since the clock was made (see the class comment). */
  synchronized long nowMs() {
    long nanos = System.nanoTime();
    long wall = wallNanos();
    elapsedNanos += Math.max(Math.max(nanos - lastNanos, wall - lastWallNanos), 0);
    lastNanos = nanos;
    lastWallNanos = wall;
    return elapsedNanos / 1_000_000L;
  }
}
