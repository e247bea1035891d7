/**
 * The controller's fencing counters on several Redis shards, against the real API server and two
 * real redis-servers: each lock's counter lives on the shard its key is placed on
 * (fencing/shards.ts), and tokens keep rising when the shard set changes — the key moves to a shard
 * where it starts from nothing (or from an older value), and FENCE_NEXT re-floors it above the
 * Lease's high-water mark.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LockController } from '../../../src/controllers/distributedlock/setup.ts';
import { fenceCounterKey } from '../../../src/fencing/redis-fence.ts';
import { shardFor, shardIdentity } from '../../../src/fencing/shards.ts';
import { parseLease } from '../../../src/lease/record.ts';
import { eventually, freshNamespace, sharedKubeConfig } from '../../support/env.ts';
import {
  createLock,
  createPod,
  getLease,
  lockBody,
  releaseLease,
  testKube,
  type TestKube,
} from '../../support/fixtures.ts';
import { startRedis, type RedisServer } from '../../support/testbed/redis.ts';
import { startTestController } from '../../support/lock-controller.ts';

describe('fencing counters on Redis shards', () => {
  const kc = sharedKubeConfig();
  let t: TestKube;
  let a: RedisServer;
  let b: RedisServer;
  let controller: LockController | undefined;
  beforeAll(async () => {
    t = testKube(kc, await freshNamespace(kc, 'shards-'));
    [a, b] = await Promise.all([startRedis(), startRedis()]);
  });
  afterAll(async () => {
    await controller?.stop();
    await Promise.all([a.stop(), b.stop()]);
  });

  const run = async (redisUrl: string): Promise<void> => {
    await controller?.stop();
    controller = await startTestController({ redisUrl, namespace: t.namespace, identity: 'shards-controller' });
  };
  const tokenOf = async (lock: string): Promise<bigint | undefined> =>
    parseLease((await getLease(t, lock)) ?? {}).token;
  const counter = async (r: RedisServer, key: string): Promise<string | null> => {
    const c = r.client();
    try {
      return await c.get(key);
    } finally {
      c.disconnect();
    }
  };
  /** regrant releases the Lease (as its holder would) and waits for the next grant's token. */
  const regrant = async (lock: string, above: bigint): Promise<bigint> => {
    await releaseLease(t, lock);
    return eventually(async () => {
      const tok = await tokenOf(lock);
      expect(tok).toBeDefined();
      expect(tok).toBeGreaterThan(above);
      return tok ?? 0n;
    }, 30_000);
  };

  it('places the counter by key, and tokens keep rising when the shard set grows and shrinks', async () => {
    // A lock whose counter key {A, B} places on B: it moves when B joins, and back when B leaves.
    const both = [shardIdentity(a.url), shardIdentity(b.url)];
    const name = Array.from({ length: 64 }, (_, i) => `sh-${i}`).find(
      (n) => shardFor(both, fenceCounterKey(t.namespace, n)) === 1,
    );
    if (name === undefined) throw new Error('no lock name placed on shard B among 64');
    const key = fenceCounterKey(t.namespace, name);
    await createPod(t, `${name}-pod`, { app: name });
    await createLock(t, lockBody(name, name, { leaseDurationSeconds: 30 }));

    await run(a.url); // one shard
    const t1 = await eventually(async () => {
      const tok = await tokenOf(name);
      expect(tok).toBeDefined();
      return tok ?? 0n;
    }, 30_000);
    const t2 = await regrant(name, t1);
    expect(await counter(a, key)).toBe(t2.toString());

    await run(`${a.url},${b.url}`); // B joins: the key is placed on B, where it does not exist yet
    const t3 = await regrant(name, t2);
    expect(await counter(b, key)).toBe(t3.toString()); // re-floored above the Lease's mark
    expect(await counter(a, key)).toBe(t2.toString()); // the old shard's counter is left behind

    await run(a.url); // B leaves: back on A, whose counter is older than the last token
    const t4 = await regrant(name, t3);
    expect(await counter(a, key)).toBe(t4.toString());
    expect([t1, t2, t3, t4]).toEqual([...new Set([t1, t2, t3, t4])].sort((x, y) => (x < y ? -1 : 1)));
  }, 120_000);
});
