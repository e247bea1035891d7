/**
 * The sharded Redis store on ioredis: one client (and one release subscriber) per shard named in
 * the URL, old and new sets together, and stores/shards.ts to place each lock.
 */
import type { TimerClock } from '../../runtime/clock.ts';
import { REDLOCK_ACQUIRE_KEYS, REDLOCK_ACQUIRE_LUA, REDLOCK_RAISE_LUA } from '../redlock/scripts.ts';
import { shardedLock, shardIdentity, type Shard } from '../shards.ts';
import type { LockStore } from '../store.ts';
import type { RedisTarget } from '../url.ts';
import { ReleaseChannels } from './backend.ts';
import { connectTarget, defineScript, whenReady } from './connect.ts';
import { ACQUIRE_KEYS, ACQUIRE_LUA, RELEASE_LUA, RENEW_LUA } from './scripts.ts';

/** openShardedStore connects to every shard of both sets (in the background, up to 2 s each) and returns the store. */
export async function openShardedStore(
  shards: readonly RedisTarget[],
  previous: readonly RedisTarget[] | undefined,
  display: string,
  clock: TimerClock,
  readyWithinMs = 2000,
): Promise<LockStore> {
  const open = new Map<string, { shard: Shard; close: () => void; ready: Promise<void> }>();
  for (const t of [...shards, ...(previous ?? [])]) {
    const id = shardIdentity(t);
    if (open.has(id)) continue;
    const client = connectTarget(t);
    const channels = new ReleaseChannels(client);
    const listen = (channel: string, fn: (message: string) => void) => channels.listen(channel, fn);
    const renew = defineScript(client, 'fencepostStoreRenew', 1, RENEW_LUA, id);
    const release = defineScript(client, 'fencepostStoreRelease', 1, RELEASE_LUA, id);
    open.set(id, {
      shard: {
        id,
        scripts: {
          acquire: defineScript(client, 'fencepostStoreAcquire', ACQUIRE_KEYS, ACQUIRE_LUA, id),
          renew,
          release,
          listen,
        },
        master: {
          name: id,
          acquire: defineScript(client, 'fencepostRedlockAcquire', REDLOCK_ACQUIRE_KEYS, REDLOCK_ACQUIRE_LUA, id),
          raise: defineScript(client, 'fencepostRedlockRaise', 2, REDLOCK_RAISE_LUA, id),
          renew,
          release,
          listen,
        },
      },
      close: () => {
        channels.close();
        client.disconnect();
      },
      ready: whenReady(client, Math.min(readyWithinMs, 2000)),
    });
  }
  await Promise.all([...open.values()].map((o) => o.ready));
  const of = (list: readonly RedisTarget[]): Shard[] =>
    list.map((t) => {
      const o = open.get(shardIdentity(t));
      if (o === undefined) throw new Error(`shard ${shardIdentity(t)} not opened`);
      return o.shard;
    });
  const now = of(shards);
  const before = previous !== undefined ? of(previous) : undefined;
  return {
    kind: 'redis',
    display,
    lock: (namespace, name) => shardedLock(now, before, namespace, name, clock, display),
    close: () => {
      for (const o of open.values()) o.close();
      return Promise.resolve();
    },
  };
}
