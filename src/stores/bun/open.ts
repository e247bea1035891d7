/**
 * The lock stores on Bun's built-in Redis client (stores/bun/client.ts): the same exports as
 * stores/open.ts, which the compiled agent's entry provides to acquire() and `exec --store`
 * (client/store-loader.ts) in place of the ioredis stores. Same scripts, same lock backend and
 * Redlock algorithm (redis/lock-backend.ts, redlock/master-port.ts, redlock/quorum.ts).
 */
import type { TimerClock } from '../../runtime/clock.ts';
import { lockKeys } from '../redis/keys.ts';
import { redisLockBackend } from '../redis/lock-backend.ts';
import { ACQUIRE_KEYS, ACQUIRE_LUA, RELEASE_LUA, RENEW_LUA } from '../redis/scripts.ts';
import { masterPort } from '../redlock/master-port.ts';
import { MASTER_TIMEOUT_MS, Outstanding, redlockBackend } from '../redlock/quorum.ts';
import { shardedLock, shardIdentity, type Shard } from '../shards.ts';
import { REDLOCK_ACQUIRE_KEYS, REDLOCK_ACQUIRE_LUA, REDLOCK_RAISE_LUA } from '../redlock/scripts.ts';
import type { LockStore } from '../store.ts';
import { parseStoreUrl, storeTargets, type RedisTarget } from '../url.ts';
import { bunRuntime, BunConnection, targetUrl } from './client.ts';

export type { LockStore } from '../store.ts';
export { holdLock, type HoldResult, type StoreHold } from '../hold.ts';
export { checkTtl, DEFAULT_TTL_MS } from '../redis/timing.ts';

/** openStore: stores/open.ts's openStore, on Bun's client. Throws on Node (no Bun.RedisClient). */
export async function openStore(
  url: string,
  what: string,
  clock: TimerClock,
  readyWithinMs?: number,
): Promise<LockStore> {
  const spec = parseStoreUrl(url, what);
  const bun = bunRuntime();
  if (bun === undefined) throw new Error(`${what}: stores/bun needs the Bun runtime (Bun.RedisClient)`);
  const targets = storeTargets(spec);
  // One connection per Redis (a shard named in both sets is one Redis).
  const conns = new Map<string, BunConnection>();
  for (const t of targets) {
    const id = t.mode === 'standalone' ? shardIdentity(t) : spec.display;
    if (!conns.has(id)) conns.set(id, new BunConnection(bun, targetUrl(t, what), id));
  }
  // As the ioredis stores: a majority (or the one Redis) ready, or the wait is over.
  const wait = Math.min(readyWithinMs ?? 2000, spec.kind === 'redlock' ? 1000 : 2000);
  await Promise.all([...conns.values()].map((c) => c.ready(wait)));
  const close = (): Promise<void> => {
    for (const c of conns.values()) c.close();
    return Promise.resolve();
  };
  const listen = (c: BunConnection) => (channel: string, fn: (message: string) => void) => c.listen(channel, fn);
  const shard = (c: BunConnection): Shard => ({
    id: c.name,
    scripts: {
      acquire: c.script(ACQUIRE_LUA, ACQUIRE_KEYS),
      renew: c.script(RENEW_LUA, 1),
      release: c.script(RELEASE_LUA, 1),
      listen: listen(c),
    },
    master: {
      name: c.name,
      acquire: c.script(REDLOCK_ACQUIRE_LUA, REDLOCK_ACQUIRE_KEYS),
      raise: c.script(REDLOCK_RAISE_LUA, 2),
      renew: c.script(RENEW_LUA, 1),
      release: c.script(RELEASE_LUA, 1),
      listen: listen(c),
    },
  });
  const all = new Map([...conns].map(([id, c]) => [id, shard(c)]));
  const of = (list: readonly RedisTarget[]): Shard[] =>
    list.map((t) => {
      const sh = all.get(t.mode === 'standalone' ? shardIdentity(t) : spec.display);
      if (sh === undefined) throw new Error(`${what}: ${spec.display}: a Redis was not opened`);
      return sh;
    });
  switch (spec.kind) {
    case 'redis': {
      const [only] = of([spec.target]) as [Shard];
      return {
        kind: 'redis',
        display: spec.display,
        lock: (namespace, name) => redisLockBackend(only.scripts, lockKeys(namespace, name), spec.display),
        close,
      };
    }
    case 'shards': {
      const now = of(spec.shards);
      const before = spec.previous !== undefined ? of(spec.previous) : undefined;
      return {
        kind: 'redis',
        display: spec.display,
        lock: (namespace, name) => shardedLock(now, before, namespace, name, clock, spec.display),
        close,
      };
    }
    case 'redlock': {
      const masters = of(spec.masters).map((m) => m.master);
      const outstanding = new Outstanding();
      return {
        kind: 'redlock',
        display: spec.display,
        lock: (namespace, name) =>
          redlockBackend(
            masters.map((m) => masterPort(m, lockKeys(namespace, name))),
            { clock, outstanding },
          ),
        // Releases done on a majority may still be out on the rest (redlock/quorum.ts Outstanding).
        close: () => outstanding.settled(clock, MASTER_TIMEOUT_MS).then(close),
      };
    }
  }
}
