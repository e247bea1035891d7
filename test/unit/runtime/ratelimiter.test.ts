import { describe, it, expect } from 'vitest';
import {
  DEFAULT_CONTROLLER_RATE_LIMITS,
  defaultControllerRateLimiter,
  itemExponential,
  maxOf,
  tokenBucket,
} from '../../../src/runtime/ratelimiter.ts';
import type { RateLimiter } from '../../../src/runtime/ratelimiter.ts';
import { FakeClock } from '../../support/fake-clock.ts';

function delays<K>(limiter: RateLimiter<K>, key: K, n: number): number[] {
  return Array.from({ length: n }, () => limiter.when(key));
}

describe('itemExponential', () => {
  const cases: { name: string; baseMs: number; maxMs: number; failures: number; want: number[] }[] = [
    {
      name: 'doubles the delay on each failure',
      baseMs: 100,
      maxMs: 10_000,
      failures: 5,
      want: [100, 200, 400, 800, 1600],
    },
    {
      name: 'caps the delay at the maximum',
      baseMs: 100,
      maxMs: 1000,
      failures: 6,
      want: [100, 200, 400, 800, 1000, 1000],
    },
    { name: 'stays at the base when base equals max', baseMs: 500, maxMs: 500, failures: 3, want: [500, 500, 500] },
    { name: 'never delays with a zero base', baseMs: 0, maxMs: 1000, failures: 3, want: [0, 0, 0] },
  ];
  it.each(cases)('$name', ({ baseMs, maxMs, failures, want }) => {
    expect(delays(itemExponential(baseMs, maxMs), 'a', failures)).toEqual(want);
  });

  it('stays at the cap instead of overflowing after thousands of failures', () => {
    const limiter = itemExponential<string>(100, 30_000);
    const all = delays(limiter, 'a', 2000);
    expect(all.at(-1)).toBe(30_000);
    expect(all.every((d) => Number.isFinite(d))).toBe(true);
  });

  it('counts retries and resets them on forget', () => {
    const limiter = itemExponential<string>(100, 10_000);
    delays(limiter, 'a', 3);
    expect(limiter.retries('a')).toBe(3);
    limiter.forget('a');
    expect(limiter.retries('a')).toBe(0);
    expect(limiter.when('a')).toBe(100);
  });

  it('backs off each key independently', () => {
    const limiter = itemExponential<string>(100, 10_000);
    delays(limiter, 'a', 3);
    expect(limiter.when('b')).toBe(100);
    expect(limiter.when('a')).toBe(800);
    limiter.forget('b');
    expect(limiter.retries('a')).toBe(4);
  });

  it.each([
    { name: 'a negative base', baseMs: -1, maxMs: 100 },
    { name: 'a base above the max', baseMs: 200, maxMs: 100 },
    { name: 'an infinite max', baseMs: 1, maxMs: Number.POSITIVE_INFINITY },
    { name: 'a NaN base', baseMs: Number.NaN, maxMs: 100 },
  ])('rejects $name', ({ baseMs, maxMs }) => {
    expect(() => itemExponential(baseMs, maxMs)).toThrow(RangeError);
  });
});

describe('tokenBucket', () => {
  it('allows a burst without delay, then spaces reservations at the rate', () => {
    const clock = new FakeClock();
    const limiter = tokenBucket<string>(10, 3, clock);
    // Distinct keys: the bucket is global, so keys do not matter.
    expect(['a', 'b', 'c', 'd', 'e'].map((k) => limiter.when(k))).toEqual([0, 0, 0, 100, 200]);
  });

  it('refills at qps, up to the burst', () => {
    const clock = new FakeClock();
    const limiter = tokenBucket<string>(10, 3, clock);
    delays(limiter, 'a', 3);
    clock.advance(50);
    expect(limiter.when('a')).toBeCloseTo(50); // half a token was refilled
    clock.advance(10_000);
    expect(delays(limiter, 'a', 4)).toEqual([0, 0, 0, 100]);
  });

  it('repays reservations made in debt before granting new tokens', () => {
    const clock = new FakeClock();
    const limiter = tokenBucket<string>(10, 1, clock);
    expect(delays(limiter, 'a', 3)).toEqual([0, 100, 200]);
    clock.advance(200);
    // The two reserved tokens have just been repaid; the next one is 100 ms away.
    expect(limiter.when('a')).toBeCloseTo(100);
  });

  it('has no per-key state', () => {
    const clock = new FakeClock();
    const limiter = tokenBucket<string>(10, 1, clock);
    limiter.when('a');
    limiter.forget('a');
    expect(limiter.retries('a')).toBe(0);
    expect(limiter.when('a')).toBe(100);
  });

  it.each([
    { name: 'a zero qps', qps: 0, burst: 1 },
    { name: 'an infinite qps', qps: Number.POSITIVE_INFINITY, burst: 1 },
    { name: 'a zero burst', qps: 10, burst: 0 },
    { name: 'a fractional burst', qps: 10, burst: 1.5 },
  ])('rejects $name', ({ qps, burst }) => {
    expect(() => tokenBucket(qps, burst, new FakeClock())).toThrow(RangeError);
  });
});

describe('maxOf', () => {
  function fixed(delayMs: number, retries: number): RateLimiter<string> & { calls: string[] } {
    const calls: string[] = [];
    return {
      calls,
      when: (k) => (calls.push(`when ${k}`), delayMs),
      forget: (k) => void calls.push(`forget ${k}`),
      retries: () => retries,
    };
  }

  it('returns the longest delay and asks every limiter', () => {
    const a = fixed(10, 1);
    const b = fixed(30, 4);
    const c = fixed(20, 2);
    const limiter = maxOf(a, b, c);
    expect(limiter.when('k')).toBe(30);
    expect(limiter.retries('k')).toBe(4);
    expect([a.calls, b.calls, c.calls]).toEqual([['when k'], ['when k'], ['when k']]);
  });

  it('forgets in every limiter', () => {
    const a = fixed(10, 1);
    const b = fixed(30, 4);
    maxOf(a, b).forget('k');
    expect([a.calls, b.calls]).toEqual([['forget k'], ['forget k']]);
  });
});

describe('defaultControllerRateLimiter', () => {
  it('states its defaults', () => {
    expect(DEFAULT_CONTROLLER_RATE_LIMITS).toEqual({ baseDelayMs: 100, maxDelayMs: 30_000, qps: 10, burst: 100 });
  });

  it('backs one key off from 100 ms to a 30 s cap', () => {
    const limiter = defaultControllerRateLimiter<string>(new FakeClock());
    expect(delays(limiter, 'a', 11)).toEqual([100, 200, 400, 800, 1600, 3200, 6400, 12_800, 25_600, 30_000, 30_000]);
    limiter.forget('a');
    expect(limiter.when('a')).toBe(100);
  });

  it('throttles many failing keys to 10 qps once the burst of 100 is spent', () => {
    const limiter = defaultControllerRateLimiter<string>(new FakeClock());
    const first = Array.from({ length: 103 }, (_, i) => limiter.when(`key-${i}`));
    expect(first.slice(0, 101).every((d) => d === 100)).toBe(true);
    expect(first.slice(101)).toEqual([200, 300]);
  });

  it('takes overrides for each limit', () => {
    const limiter = defaultControllerRateLimiter<string>(new FakeClock(), {
      baseDelayMs: 1000,
      maxDelayMs: 2000,
      burst: 1,
    });
    expect(delays(limiter, 'a', 3)).toEqual([1000, 2000, 2000]);
  });
});
