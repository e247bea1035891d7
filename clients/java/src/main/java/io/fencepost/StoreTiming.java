package io.fencepost;

import static io.fencepost.Protocol.MAX_TTL_MS;
import static io.fencepost.Protocol.MIN_TTL_MS;
import static io.fencepost.Protocol.RENEW_RETRY_MS;

import java.util.function.DoubleSupplier;

/**
 * The pure decisions of a store lock (clients/conformance/store.json "timing"; the TypeScript
 * reference: src/stores/redis/timing.ts): how long a grant is trusted, when the watchdog renews,
 * what a renew's outcome means, and how long a waiter backs off. No I/O and no clock reads: every
 * method takes the times it needs, in milliseconds of the holder's own monotonic clock.
 *
 * <p>Trust is counted from the moment a request was SENT, never from its answer: Redis started the
 * key's TTL no earlier than that, so {@code sent + ttl} bounds the key's life on the holder's
 * clock, less the drift between the two clocks (node-redlock's rule, for single Redis too).
 */
final class StoreTiming {
  private StoreTiming() {}

  /** Returns {@code ttlMs} if it is in [MIN_TTL_MS, MAX_TTL_MS], else throws naming {@code what} and the value. */
  static long checkTtl(long ttlMs, String what) {
    if (ttlMs < MIN_TTL_MS || ttlMs > MAX_TTL_MS) {
      throw new IllegalArgumentException(
          what + ": must be an integer number of ms in [" + MIN_TTL_MS + ", " + MAX_TTL_MS + "], got " + ttlMs);
    }
    return ttlMs;
  }

  /** The clock drift a TTL allows for: 1 % of it plus 2 ms. */
  static long driftMs(long ttlMs) {
    return ttlMs / 100 + 2;
  }

  /** The end of trust of a grant or renew whose request was sent at {@code sentAtMs}. */
  static long validUntil(long sentAtMs, long ttlMs) {
    return sentAtMs + ttlMs - driftMs(ttlMs);
  }

  /** The watchdog renews every third of the TTL: two renews may fail before the key could expire. */
  static long renewEveryMs(long ttlMs) {
    return ttlMs / 3;
  }

  /** What one renew came back with. */
  enum RenewOutcome {
    /** The key was this owner's and its TTL was reset. */
    RENEWED,
    /** The key is gone or another owner's (0). */
    NOT_OWNER,
    /** No answer: Redis down, a timeout, too few Redlock masters answered. */
    FAILED
  }

  /**
   * What the watchdog does after a renew.
   *
   * @param kind RENEWED (trust until {@code at}, next renew in {@code inMs}), RETRY (in {@code
   *     inMs}) or LOST (why: {@code reason})
   */
  record RenewDecision(Kind kind, long at, long inMs, String reason) {
    enum Kind {
      RENEWED,
      RETRY,
      LOST
    }
  }

  /**
   * The decision on a renew sent at {@code sentAtMs} that came back at {@code nowMs}, while the
   * grant was trusted until {@code validUntilMs}. A failure is retried until the validity passes;
   * an answer after the new validity would have passed is worth nothing; trust never moves back.
   */
  static RenewDecision afterRenew(RenewOutcome outcome, String error, long sentAtMs, long nowMs, long validUntilMs, long ttlMs) {
    switch (outcome) {
      case NOT_OWNER:
        return new RenewDecision(RenewDecision.Kind.LOST, 0, 0, "the key is gone or held by another owner");
      case RENEWED: {
        long until = Math.max(validUntilMs, validUntil(sentAtMs, ttlMs));
        if (nowMs >= until) {
          return new RenewDecision(RenewDecision.Kind.LOST, 0, 0, "the renew was answered after its validity had passed");
        }
        return new RenewDecision(RenewDecision.Kind.RENEWED, until, renewEveryMs(ttlMs), "");
      }
      default:
        if (nowMs >= validUntilMs) {
          return new RenewDecision(RenewDecision.Kind.LOST, 0, 0, "renews failed until the validity passed: " + error);
        }
        return new RenewDecision(RenewDecision.Kind.RETRY, 0, Math.min(RENEW_RETRY_MS, validUntilMs - nowMs), "");
    }
  }

  /** The delay before retry number {@code attempt} (0-based): uniform in [0, min(cap, base·2^attempt)) ("full jitter", so that waiters woken together do not retry together); {@code random} returns [0, 1). */
  static long backoffMs(int attempt, long baseMs, long capMs, DoubleSupplier random) {
    long ceiling = Math.min(capMs, baseMs << Math.min(attempt, 30));
    return (long) Math.floor(random.getAsDouble() * ceiling);
  }

  /**
   * How long a waiter sleeps before its next try: the backoff, but no longer than the holder's key
   * has left ({@code heldForMs} + 1, when Redis said: negative if not) nor what is left of the
   * caller's wait ({@code leftMs}; {@link Long#MAX_VALUE}: no bound).
   */
  static long retryDelayMs(int attempt, long baseMs, long capMs, DoubleSupplier random, long heldForMs, long leftMs) {
    long d = backoffMs(attempt, baseMs, capMs, random);
    if (heldForMs >= 0) d = Math.min(d, heldForMs + 1);
    d = Math.min(d, Math.max(0, leftMs));
    return d;
  }
}
