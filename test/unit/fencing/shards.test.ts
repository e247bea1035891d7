import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseShardUrls, shardFor, shardIdentity } from '../../../src/fencing/shards.ts';

const ids = (n: number): string[] => Array.from({ length: n }, (_, i) => `redis://10.0.0.${i + 1}:6379/0`);
const keys = Array.from({ length: 10_000 }, (_, i) => `fencepost:fence:ns-${i % 37}/lock-${i}`);

describe('fencing shards: rendezvous placement of counter keys', () => {
  it('spreads keys about evenly over the shards', () => {
    for (const n of [2, 3, 5]) {
      const counts = Array.from({ length: n }, () => 0);
      for (const k of keys) counts[shardFor(ids(n), k)] = (counts[shardFor(ids(n), k)] ?? 0) + 1;
      for (const c of counts) expect(c / keys.length).toBeGreaterThan(0.8 / n);
    }
  });

  it('is stable: the same set in any order places a key on the same shard', () => {
    fc.assert(
      fc.property(fc.shuffledSubarray(ids(5), { minLength: 5, maxLength: 5 }), fc.constantFrom(...keys), (order, k) => {
        expect(order[shardFor(order, k)]).toBe(ids(5)[shardFor(ids(5), k)]);
      }),
    );
  });

  it('a shard added takes keys only for itself; a shard removed gives away only its own keys', () => {
    const three = ids(3);
    const four = ids(4);
    let moved = 0;
    for (const k of keys) {
      const before = three[shardFor(three, k)];
      const after = four[shardFor(four, k)];
      if (before !== after) {
        expect(after).toBe(four[3]); // moved only to the new shard
        moved++;
      }
    }
    expect(moved / keys.length).toBeGreaterThan(0.15);
    expect(moved / keys.length).toBeLessThan(0.35); // about 1/4
  });

  it('places by host, port and database, not by credentials', () => {
    expect(shardIdentity('redis://:secret@h:6380/2')).toBe('redis://h:6380/2');
    expect(shardIdentity('rediss://user:pw@h')).toBe('rediss://h:6379/0');
  });

  it('refuses a bad list, naming the flag and the value', () => {
    expect(parseShardUrls('redis://a:1, redis://b:2', '--redis-url')).toEqual(['redis://a:1', 'redis://b:2']);
    expect(() => parseShardUrls('redis://a:1,redis://:pw@a:1', '--redis-url')).toThrow(
      '--redis-url: shard redis://a:1/0 is listed twice',
    );
    expect(() => parseShardUrls('redis://a:1,,redis://b:1', '--redis-url')).toThrow(
      '--redis-url: each URL must start with redis:// or rediss://, got ""',
    );
  });
});
