/**
 * The pure decision core of the Redis and Redlock stores: how long a grant is trusted, when the
 * watchdog renews, what a renew's outcome means, and how long a waiter backs off. No I/O, no
 * clock reads: every function takes the times it needs (monotonic milliseconds of the holder's
 * own clock), so that each rule is a table test (test/unit/stores/timing.test.ts).
 *
 * The rule for trust: a grant's (or renew's) validity is counted from the moment the request was
 * SENT, never from when the answer came: Redis started the key's TTL no earlier than that, so
 * `sentAt + ttl` is an upper bound of the key's life as the holder's clock sees it, less the clock
 * drift between the two processes. That is node-redlock's rule (validity = ttl − elapsed − drift,
 * drift = 0.01·ttl + 2 ms), used for single Redis too.
 */
import { DEFAULT_LEASE_DURATION_SECONDS, type TermTimings } from '../../protocol/timings.ts';

/** DEFAULT_TTL_MS is a store lock's TTL when none is given: the Lease default, 15 s. */
export const DEFAULT_TTL_MS = DEFAULT_LEASE_DURATION_SECONDS * 1000;

/**
 * MIN_TTL_MS and MAX_TTL_MS bound the TTL. Below 300 ms the renew period (a third) is shorter than
 * an ordinary network round trip plus a GC pause, so a healthy holder would lose its lock; above
 * one day a crashed holder blocks the lock for longer than anyone will wait.
 */
export const MIN_TTL_MS = 300;
export const MAX_TTL_MS = 86_400_000;

/** checkTtl returns `ttlMs` if it is an integer in [MIN_TTL_MS, MAX_TTL_MS], else throws naming `what` and the value. */
export function checkTtl(ttlMs: number, what: string): number {
  if (!Number.isInteger(ttlMs) || ttlMs < MIN_TTL_MS || ttlMs > MAX_TTL_MS)
    throw new RangeError(`${what}: must be an integer number of ms in [${MIN_TTL_MS}, ${MAX_TTL_MS}], got ${ttlMs}`);
  return ttlMs;
}

/** driftMs is the clock drift a grant of `ttlMs` allows for: 1 % of the TTL plus 2 ms (node-redlock's driftFactor 0.01). */
export function driftMs(ttlMs: number): number {
  return Math.floor(ttlMs * 0.01) + 2;
}

/** validUntil is the end of trust for a grant or renew whose request was sent at `sentAtMs`. */
export function validUntil(sentAtMs: number, ttlMs: number): number {
  return sentAtMs + ttlMs - driftMs(ttlMs);
}

/** renewPeriodMs: the watchdog renews every third of the TTL, so two renews may fail before the key could expire. */
export function renewPeriodMs(ttlMs: number): number {
  return Math.floor(ttlMs / 3);
}

/**
 * storeTimings are a store grant's TermTimings: the TTL as lease duration, the validity (TTL −
 * drift) as renew deadline, a third as renew period. `fencepost exec` reads (lease − renew
 * deadline), the drift, as the window in which its command may still run after a loss.
 */
export function storeTimings(ttlMs: number): TermTimings {
  return { leaseDurationMs: ttlMs, renewDeadlineMs: ttlMs - driftMs(ttlMs), renewPeriodMs: renewPeriodMs(ttlMs) };
}

/** RENEW_RETRY_MS: how soon a renew that got no answer is tried again (less, if validity ends sooner). */
export const RENEW_RETRY_MS = 100;

/** Backoff: a waiter's retry delays, capped exponential with full jitter. */
export interface Backoff {
  readonly baseMs: number;
  readonly capMs: number;
}

/**
 * WAIT_BACKOFF: the waiter's fallback when no release notification comes (the holder crashed and
 * its key expires, a notification was lost): 50 ms doubling to 2 s. Release notifications
 * (pub/sub) wake waiters at once; this only bounds how late a missed one is noticed.
 */
export const WAIT_BACKOFF: Backoff = { baseMs: 50, capMs: 2000 };

/**
 * backoffMs is the delay before retry number `attempt` (0-based): uniform in [0, min(cap, base·2^attempt))
 * ("full jitter", so that waiters woken together do not retry together). `random` returns [0, 1).
 */
export function backoffMs(attempt: number, b: Backoff, random: () => number): number {
  const ceiling = Math.min(b.capMs, b.baseMs * 2 ** Math.min(attempt, 30));
  return Math.floor(random() * ceiling);
}

/**
 * retryDelayMs is how long a waiter sleeps before its next try: the backoff, but no longer than
 * the holder's key has left to live (`heldForMs`, when Redis said) plus a millisecond, nor than
 * what is left of the caller's wait (`leftMs`).
 */
export function retryDelayMs(
  attempt: number,
  b: Backoff,
  random: () => number,
  heldForMs: number | undefined,
  leftMs: number | undefined,
): number {
  let d = backoffMs(attempt, b, random);
  if (heldForMs !== undefined && heldForMs >= 0) d = Math.min(d, heldForMs + 1);
  if (leftMs !== undefined) d = Math.min(d, Math.max(0, leftMs));
  return d;
}
