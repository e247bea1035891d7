/**
 * Retry rate limiters for the work queue, ported from client-go's `workqueue` package.
 *
 * A limiter answers "how long should this key wait before its next retry?" and remembers failures
 * per key until told to forget them. Only retries go through a limiter (`addRateLimited`); plain
 * adds from informer events and time-driven `addAfter` requeues are never delayed by it.
 */
import type { Clock } from './clock.ts';

/**
 * RateLimiter decides retry delays for keys of type `K`.
 *
 * Contract: `when(key)` records one more failure of `key` and returns the delay in milliseconds
 * (≥ 0) before it may be retried; calling it is not idempotent. `forget(key)` clears the key's
 * failure history (call it when the key succeeded). `retries(key)` is the number of failures
 * recorded since the last `forget`. Keys are compared with SameValueZero (`Map` semantics), so use
 * strings or other primitives, not freshly built objects.
 */
export interface RateLimiter<K> {
  when(key: K): number;
  forget(key: K): void;
  retries(key: K): number;
}

/**
 * itemExponential returns a per-key exponential backoff: the n-th consecutive failure of a key
 * (counting from 0) waits `baseMs × 2^n`, capped at `maxMs` (client-go
 * `ItemExponentialFailureRateLimiter`).
 *
 * Hazard: it remembers every key that failed until `forget`; a caller that never forgets leaks one
 * map entry per key ever retried.
 *
 * @throws RangeError unless 0 ≤ baseMs ≤ maxMs and both are finite.
 */
export function itemExponential<K>(baseMs: number, maxMs: number): RateLimiter<K> {
  if (!(Number.isFinite(baseMs) && Number.isFinite(maxMs) && baseMs >= 0 && baseMs <= maxMs)) {
    throw new RangeError(`itemExponential needs 0 ≤ baseMs ≤ maxMs, got ${baseMs} and ${maxMs}`);
  }
  const failures = new Map<K, number>();
  return {
    when(key) {
      const n = failures.get(key) ?? 0;
      failures.set(key, n + 1);
      // 2 ** n is exact up to 2^1023 and Infinity beyond, so the cap also covers overflow.
      return Math.min(baseMs * 2 ** n, maxMs);
    },
    forget(key) {
      failures.delete(key);
    },
    retries(key) {
      return failures.get(key) ?? 0;
    },
  };
}

/**
 * tokenBucket returns a global limiter shared by all keys: a bucket of `burst` tokens refilled at
 * `qps` per second of monotonic time. Each `when` reserves one token and returns the wait until that
 * token exists, so concurrent callers queue up behind each other instead of all waking at once
 * (client-go `BucketRateLimiter` over `x/time/rate` `Reserve().Delay()`).
 *
 * Its purpose is to bound the total retry rate when many keys fail together (an API server outage),
 * which per-key backoff alone cannot do. `forget` is a no-op and `retries` is always 0: the bucket
 * has no per-key state.
 *
 * @throws RangeError unless `qps` is finite and > 0 and `burst` is an integer ≥ 1.
 */
export function tokenBucket<K>(qps: number, burst: number, clock: Clock): RateLimiter<K> {
  if (!(Number.isFinite(qps) && qps > 0)) throw new RangeError(`tokenBucket needs a finite qps > 0, got ${qps}`);
  if (!(Number.isInteger(burst) && burst >= 1)) {
    throw new RangeError(`tokenBucket needs an integer burst ≥ 1, got ${burst}`);
  }
  const msPerToken = 1000 / qps;
  let tokens = burst;
  let last = clock.monotonicMs();
  return {
    when() {
      const now = clock.monotonicMs();
      // Math.max guards a fake clock set backwards; the real monotonic clock cannot go back.
      tokens = Math.min(burst, tokens + Math.max(0, now - last) / msPerToken);
      last = now;
      tokens -= 1;
      return tokens >= 0 ? 0 : -tokens * msPerToken;
    },
    forget() {},
    retries() {
      return 0;
    },
  };
}

/**
 * maxOf combines limiters: `when` asks every limiter (so each records the failure and reserves its
 * token) and returns the longest delay; `retries` is the largest count; `forget` forgets everywhere
 * (client-go `MaxOfRateLimiter`).
 */
export function maxOf<K>(...limiters: readonly [RateLimiter<K>, ...RateLimiter<K>[]]): RateLimiter<K> {
  return {
    when(key) {
      return Math.max(...limiters.map((l) => l.when(key)));
    },
    forget(key) {
      for (const l of limiters) l.forget(key);
    },
    retries(key) {
      return Math.max(...limiters.map((l) => l.retries(key)));
    },
  };
}

/** ControllerRateLimits are the knobs of {@link defaultControllerRateLimiter}. */
export interface ControllerRateLimits {
  /** baseDelayMs is the first per-key retry delay. */
  readonly baseDelayMs: number;
  /** maxDelayMs caps the per-key retry delay. */
  readonly maxDelayMs: number;
  /** qps is the sustained retry rate across all keys, per second. */
  readonly qps: number;
  /** burst is how many retries may happen back to back before `qps` applies. */
  readonly burst: number;
}

/**
 * DEFAULT_CONTROLLER_RATE_LIMITS are fencepost's retry defaults: 100 ms doubling to 30 s per key,
 * and 10 qps with a burst of 100 across keys.
 *
 * Why not client-go's 5 ms → 1000 s: a lock whose reconcile keeps failing is a lock nobody can
 * acquire or fail over, so once the cause goes away (the API server or Redis is back) every such
 * lock must recover within half a minute, not after client-go's cap of almost 17 minutes. 100 ms
 * (not 5 ms) keeps the first few retries from hammering a server that has just failed; it reaches
 * the 30 s cap after 9 consecutive failures (≈ 51 s of cumulative backoff). The bucket is
 * client-go's 10 qps / 100 burst, which bounds the retry load during an outage however many locks
 * exist.
 */
export const DEFAULT_CONTROLLER_RATE_LIMITS: ControllerRateLimits = Object.freeze({
  baseDelayMs: 100,
  maxDelayMs: 30_000,
  qps: 10,
  burst: 100,
});

/**
 * defaultControllerRateLimiter is `maxOf(itemExponential(base, max), tokenBucket(qps, burst))` with
 * {@link DEFAULT_CONTROLLER_RATE_LIMITS}, each overridable through `limits` (wired from Config).
 */
export function defaultControllerRateLimiter<K>(
  clock: Clock,
  limits: Partial<ControllerRateLimits> = {},
): RateLimiter<K> {
  const l = { ...DEFAULT_CONTROLLER_RATE_LIMITS, ...limits };
  return maxOf<K>(itemExponential(l.baseDelayMs, l.maxDelayMs), tokenBucket(l.qps, l.burst, clock));
}
