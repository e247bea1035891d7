// A safety gap of the Redis store, found by the store-fault soak (docs/safety.md: `failover`, 22
// of 1,000 trials) and kept as a failing test until it was fixed: a failover to a replica that
// missed exactly the last grant made the promoted replica hand out that grant's token again. The
// old holder (still believing, within its validity) and the new holder then wrote with EQUAL
// tokens, and the Redis guard, which refuses only tokens below its mark (an equal token is the
// same holder writing again), applied the old holder's late write after the new holder's.
// The fix (fence-next.lua fence_epoch): the epoch key records the run_id of the Redis process that
// issued the last token; the promoted replica is another process, so its first token is floored at
// its clock in microseconds, above every token the old primary handed out.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acquire, redisGuard } from '../../../src/index.ts';
import { startRedis, startReplica, type RedisServer, type Replica } from '../../support/testbed/redis.ts';

describe('Redis store: failover to a replica one grant behind', () => {
  let primary: RedisServer;
  let replica: Replica;
  let guardRedis: RedisServer;
  beforeAll(async () => {
    [primary, guardRedis] = await Promise.all([startRedis(), startRedis()]);
    replica = await startReplica(primary);
  });
  afterAll(async () => {
    await Promise.allSettled([replica.stop(), primary.stop(), guardRedis.stop()]);
  });

  it("refuses the old holder's late write after the new holder's: the successor's token is larger", async () => {
    const opts = { namespace: 'gap', ttlMs: 5000 };
    // An earlier grant, replicated, released: the replica has its counter and epoch.
    const earlier = await acquire('eq', { ...opts, store: primary.url });
    await earlier.release();
    await replica.inSync();
    replica.cut(); // from now on the replica misses every write
    const old = await acquire('eq', { ...opts, store: primary.url }); // earlier + 1, on the primary only
    await replica.promote(primary); // the primary dies; the replica takes over, one grant behind
    const successor = await acquire('eq', { ...opts, store: replica.server.url, waitMs: 3000 });
    const data = new Redis(guardRedis.url);
    try {
      const guard = redisGuard(data, { lock: 'eq' });
      expect((await guard.write('report', successor.token, 'new')).accepted).toBe(true);
      expect(old.token).toBe(earlier.token + 1n);
      expect(successor.clockFloored).toBe(true); // the gap was here: successor.token was old.token
      expect(successor.token).toBeGreaterThan(old.token);
      const late = await guard.write('report', old.token, 'stale'); // the old holder, still within its validity
      expect(late.accepted).toBe(false);
    } finally {
      data.disconnect();
      await Promise.allSettled([old.release(), successor.release()]);
    }
  });
});
