/**
 * The single-Redis store: one client for commands and one for release notifications, shared by
 * every lock of the store. A grant is one script (stores/redis/scripts.ts ACQUIRE_LUA: SET NX PX
 * and the token together), a renew a compare-and-PEXPIRE, a release a compare-and-DEL that
 * publishes on the lock's channel.
 */
import type { LockBackend, LockStore } from '../store.ts';
import type { RedisTarget } from '../url.ts';
import { Cluster } from 'ioredis';
import { connectTarget, defineScript, SUBSCRIBER_OPTIONS, whenReady, type RedisClient } from './connect.ts';
import { lockKeys } from './keys.ts';
import { ChannelListeners } from '../channel-listeners.ts';
import { redisLockBackend } from './lock-backend.ts';
import { sentinelFailovers } from './sentinel-failovers.ts';
import { ACQUIRE_KEYS, ACQUIRE_LUA, RELEASE_LUA, RENEW_LUA } from './scripts.ts';

/** OPEN_WAIT_MS: how long opening a store waits for the first connection before going on (attempts then retry). */
const OPEN_WAIT_MS = 2000;

/** openRedisStore connects to one Redis deployment (standalone, Sentinel or Cluster). */
export async function openRedisStore(
  target: RedisTarget,
  display: string,
  readyWithinMs = OPEN_WAIT_MS,
): Promise<LockStore> {
  const client = connectTarget(target);
  await whenReady(client, Math.min(readyWithinMs, OPEN_WAIT_MS));
  const channels = new ReleaseChannels(client);
  const acquire = defineScript(client, 'fencepostStoreAcquire', ACQUIRE_KEYS, ACQUIRE_LUA, display);
  const renew = defineScript(client, 'fencepostStoreRenew', 1, RENEW_LUA, display);
  const release = defineScript(client, 'fencepostStoreRelease', 1, RELEASE_LUA, display);
  const failovers = target.mode === 'sentinel' ? sentinelFailovers(target.sentinels, target.master) : undefined;
  return {
    kind: 'redis',
    display,
    lock(namespace, name): LockBackend {
      return redisLockBackend(
        {
          acquire,
          renew,
          release,
          listen: (channel, fn) => channels.listen(channel, fn),
          ...(failovers !== undefined ? { failovers: () => failovers.current() } : {}),
        },
        lockKeys(namespace, name),
        display,
      );
    },
    async close() {
      channels.close();
      failovers?.close();
      client.disconnect();
      await Promise.resolve();
    },
  };
}

/**
 * ReleaseChannels: one subscriber connection (made on first use) for every lock's release
 * channel. ioredis re-subscribes after a reconnect; a notification lost meanwhile is found by the
 * waiter's backoff.
 */
export class ReleaseChannels {
  readonly #client: RedisClient;
  #sub: RedisClient | undefined;
  readonly #channels = new ChannelListeners(
    async (channel) => {
      await this.#subscriber().subscribe(channel);
    },
    async (channel) => {
      await this.#subscriber().unsubscribe(channel);
    },
  );

  constructor(client: RedisClient) {
    this.#client = client;
  }

  /** listen calls `fn` on every message on `channel`; resolves once subscribed; returns the unsubscribe. */
  listen(channel: string, fn: (message: string) => void): Promise<() => void> {
    return this.#channels.listen(channel, fn);
  }

  close(): void {
    this.#channels.clear();
    this.#sub?.disconnect();
  }

  #subscriber(): RedisClient {
    if (this.#sub !== undefined) return this.#sub;
    // A subscriber needs the offline queue (SUBSCRIBER_OPTIONS): SUBSCRIBE sent while it still connects must wait, not fail.
    const sub = this.#client instanceof Cluster ? this.#client.duplicate() : this.#client.duplicate(SUBSCRIBER_OPTIONS);
    sub.on('error', () => undefined);
    sub.on('message', (channel: string, message: string) => {
      this.#channels.deliver(channel, message);
    });
    this.#sub = sub;
    return sub;
  }
}
