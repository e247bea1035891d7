/**
 * The lock stores on Bun's built-in Redis client (stores/bun/client.ts): the same exports as
 * stores/open.ts, which the compiled agent's entry provides to acquire() and `exec --store`
 * (client/store-loader.ts) in place of the ioredis stores. Same scripts, same lock backend and
 * Redlock algorithm (redis/lock-backend.ts, redlock/master-port.ts, redlock/quorum.ts).
 */
import type { TimerClock } from '../../runtime/clock.ts';
import { lockKeys } from '../redis/keys.ts';
import { redisLockBackend } from '../redis/lock-backend.ts';
import { ACQUIRE_LUA, RELEASE_LUA, RENEW_LUA } from '../redis/scripts.ts';
import { masterPort } from '../redlock/master-port.ts';
import { quorum, redlockBackend } from '../redlock/quorum.ts';
import { REDLOCK_ACQUIRE_LUA, REDLOCK_RAISE_LUA } from '../redlock/scripts.ts';
import type { LockStore } from '../store.ts';
import { parseStoreUrl } from '../url.ts';
import { bunRuntime, BunConnection, targetUrl } from './client.ts';

export type { LockStore } from '../store.ts';
export { holdLock, type HoldResult, type StoreEvent, type StoreHold } from '../hold.ts';
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
  const targets = spec.kind === 'redis' ? [spec.target] : spec.masters;
  const conns = targets.map(
    (t) =>
      new BunConnection(
        bun,
        targetUrl(t, what),
        t.mode === 'standalone' ? `${t.endpoint.host}:${t.endpoint.port}` : spec.display,
      ),
  );
  // As the ioredis stores: a majority (or the one Redis) ready, or the wait is over.
  await Promise.all(conns.map((c) => c.ready(Math.min(readyWithinMs ?? 2000, spec.kind === 'redis' ? 2000 : 1000))));
  const close = (): Promise<void> => {
    for (const c of conns) c.close();
    return Promise.resolve();
  };
  if (spec.kind === 'redis') {
    const [c] = conns as [BunConnection];
    const scripts = {
      acquire: c.script(ACQUIRE_LUA, 2),
      renew: c.script(RENEW_LUA, 1),
      release: c.script(RELEASE_LUA, 1),
      listen: (channel: string, fn: (message: string) => void) => c.listen(channel, fn),
    };
    return {
      kind: 'redis',
      display: spec.display,
      lock: (namespace, name) => redisLockBackend(scripts, lockKeys(namespace, name), clock, spec.display),
      close,
    };
  }
  if (conns.length < 3 || quorum(conns.length) > conns.length) throw new Error(`${what}: too few Redlock masters`);
  const masters = conns.map((c) => ({
    name: c.name,
    acquire: c.script(REDLOCK_ACQUIRE_LUA, 2),
    raise: c.script(REDLOCK_RAISE_LUA, 2),
    renew: c.script(RENEW_LUA, 1),
    release: c.script(RELEASE_LUA, 1),
    listen: (channel: string, fn: (message: string) => void) => c.listen(channel, fn),
  }));
  return {
    kind: 'redlock',
    display: spec.display,
    lock: (namespace, name) =>
      redlockBackend(
        masters.map((m) => masterPort(m, lockKeys(namespace, name))),
        { clock },
      ),
    close,
  };
}
