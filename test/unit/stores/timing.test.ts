// The pure core of the Redis and Redlock stores (src/stores/redis/timing.ts): validity counted
// from the send, the renew schedule, what a renew's outcome means, and the waiter's backoff.
import { describe, expect, it } from 'vitest';
import {
  backoffMs,
  checkTtl,
  driftMs,
  renewPeriodMs,
  retryDelayMs,
  storeTimings,
  validUntil,
  WAIT_BACKOFF,
} from '../../../src/stores/redis/timing.ts';

describe('validity and renew schedule', () => {
  it.each([
    { ttl: 300, drift: 5, period: 100 },
    { ttl: 10_000, drift: 102, period: 3333 },
    { ttl: 15_000, drift: 152, period: 5000 },
  ])('a TTL of $ttl ms allows $drift ms of drift and renews every $period ms', ({ ttl, drift, period }) => {
    expect(driftMs(ttl)).toBe(drift);
    expect(renewPeriodMs(ttl)).toBe(period);
    expect(storeTimings(ttl)).toEqual({ leaseDurationMs: ttl, renewDeadlineMs: ttl - drift, renewPeriodMs: period });
  });

  it('counts validity from when the request was sent, less the drift', () => {
    expect(validUntil(1000, 10_000)).toBe(1000 + 10_000 - 102);
  });

  it.each([299, 86_400_001, 1.5, Number.NaN, -1])('refuses a TTL of %s, naming the field and the value', (ttl) => {
    expect(() => checkTtl(ttl, 'options.ttlMs')).toThrow(
      `options.ttlMs: must be an integer number of ms in [300, 86400000], got ${ttl}`,
    );
  });

  it('accepts the bounds', () => {
    expect(checkTtl(300, 'x')).toBe(300);
    expect(checkTtl(86_400_000, 'x')).toBe(86_400_000);
  });
});

describe('backoff with full jitter', () => {
  it('is uniform below a ceiling that doubles from the base up to the cap', () => {
    const top = (attempt: number): number => backoffMs(attempt, WAIT_BACKOFF, () => 0.999999);
    expect([0, 1, 2, 3, 4, 5, 6, 10, 1000].map(top)).toEqual([49, 99, 199, 399, 799, 1599, 1999, 1999, 1999]);
    expect(backoffMs(5, WAIT_BACKOFF, () => 0)).toBe(0);
    expect(backoffMs(2, WAIT_BACKOFF, () => 0.5)).toBe(100);
  });

  it('a retry waits no longer than the holder key has left (plus 1 ms) nor than the wait has left', () => {
    const high = (): number => 0.999999;
    expect(retryDelayMs(10, WAIT_BACKOFF, high, 30, undefined)).toBe(31);
    expect(retryDelayMs(10, WAIT_BACKOFF, high, undefined, 12)).toBe(12);
    expect(retryDelayMs(10, WAIT_BACKOFF, high, -1, undefined)).toBe(1999); // PTTL -1: no TTL known
    expect(retryDelayMs(10, WAIT_BACKOFF, high, 500, -5)).toBe(0);
  });
});
