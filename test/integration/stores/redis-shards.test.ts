// The sharded Redis store (redis+shards://, stores/shards.ts) on three real redis-servers: each
// lock lives on the shard rendezvous hashing of namespace/name names, and a change of the shard
// set rolls out in two steps (`?previous=`) during which a moved lock can never be held twice and
// its tokens keep rising: a client on the old set alone, one on both, one on the new set alone.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acquire, StoreLockHeldError } from '../../../src/index.ts';
import { openStoreReader } from '../../../src/stores/observe.ts';
import { lockKeys } from '../../../src/stores/redis/keys.ts';
import { homeOf } from '../../../src/stores/shards.ts';
import { startRedis, type RedisServer } from '../../support/testbed/redis.ts';

const NS = 'shards';
let servers: RedisServer[] = [];
const hp = (s: RedisServer): string => s.url.replace(/^redis:\/\//, '');
const id = (s: RedisServer): string => `${hp(s)}/0`;

beforeAll(async () => {
  servers = await Promise.all([startRedis(), startRedis(), startRedis()]);
});
afterAll(async () => {
  await Promise.all(servers.map((s) => s.stop()));
});

describe('redis+shards://', () => {
  it('places each lock on its home shard, and only there', async () => {
    const url = `redis+shards://${servers.map(hp).join(',')}`;
    const onShard = [0, 0, 0];
    for (let i = 0; i < 24; i++) {
      const name = `job-${i}`;
      const lock = await acquire(name, { store: url, namespace: NS, ttlMs: 2000 });
      const home = homeOf(servers.map(id), NS, name);
      onShard[home] = (onShard[home] ?? 0) + 1;
      for (const [k, s] of servers.entries()) {
        const c = s.client();
        try {
          expect(await c.exists(lockKeys(NS, name).holder), `${name} on shard ${k}`).toBe(k === home ? 1 : 0);
        } finally {
          c.disconnect();
        }
      }
      await lock.release();
    }
    expect(onShard.every((n) => n > 0)).toBe(true); // 24 locks reach all three shards
  });

  it('a change of the shard set, rolled out in two steps: one holder at every step, tokens rising', async () => {
    const [a, b, c] = servers as [RedisServer, RedisServer, RedisServer];
    const oldSet = [a, b];
    const newSet = [a, b, c];
    // A lock whose home moves when the third shard joins.
    let name = '';
    for (let i = 0; name === ''; i++)
      if (oldSet[homeOf(oldSet.map(id), NS, `moving-${i}`)] !== newSet[homeOf(newSet.map(id), NS, `moving-${i}`)])
        name = `moving-${i}`;
    const oldUrl = `redis+shards://${oldSet.map(hp).join(',')}`;
    const bothUrl = `redis+shards://${newSet.map(hp).join(',')}?previous=${oldSet.map(hp).join(',')}`;
    const newUrl = `redis+shards://${newSet.map(hp).join(',')}`;
    const opts = { namespace: NS, ttlMs: 3000 };

    const first = await acquire(name, { ...opts, store: oldUrl });
    // Step 1 clients need the old home too: refused while an old-set client holds it.
    await expect(acquire(name, { ...opts, store: bothUrl, ifHeld: 'fail' })).rejects.toBeInstanceOf(StoreLockHeldError);
    await first.release();
    const second = await acquire(name, { ...opts, store: bothUrl });
    expect(second.token).toBeGreaterThan(first.token);
    // Held on both homes now: an old-set client and a new-set client are both refused.
    await expect(acquire(name, { ...opts, store: oldUrl, ifHeld: 'fail' })).rejects.toBeInstanceOf(StoreLockHeldError);
    await expect(acquire(name, { ...opts, store: newUrl, ifHeld: 'fail' })).rejects.toBeInstanceOf(StoreLockHeldError);
    // The controller's reader, given the same URL, sees the holder and its token.
    const reader = await openStoreReader(bothUrl, 'test');
    try {
      const seen = await reader.read(NS, name);
      expect(seen.owner).toBeDefined();
      expect(seen.token).toBe(second.token);
    } finally {
      await reader.close();
    }
    await second.release();
    // Step 2: the new set alone; its counter was raised by step 1, so tokens go on rising.
    const third = await acquire(name, { ...opts, store: newUrl });
    expect(third.token).toBeGreaterThan(second.token);
    await expect(acquire(name, { ...opts, store: bothUrl, ifHeld: 'fail' })).rejects.toBeInstanceOf(StoreLockHeldError);
    await third.release();
  });

  it('refuses a shard named twice, and a query other than previous, naming the option', async () => {
    const [a] = servers as [RedisServer];
    await expect(acquire('x', { store: `redis+shards://${hp(a)},${hp(a)}` })).rejects.toThrow(
      /options\.store: shard .* is named twice in the shards/,
    );
    await expect(acquire('x', { store: `redis+shards://${hp(a)}?from=${hp(a)}` })).rejects.toThrow(
      'options.store: takes one query parameter, ?previous=h1:p1,h2:p2',
    );
  });
});
