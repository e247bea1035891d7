/**
 * The single-Redis store: one client for commands and one for release notifications, shared by
 * every lock of the store. A grant is one script (stores/redis/scripts.ts ACQUIRE_LUA: SET NX PX
 * and the token together), a renew a compare-and-PEXPIRE, a release a compare-and-DEL that
 * publishes on the lock's channel.
 */
import { parseToken } from '../../protocol/token.ts';
import type { Clock } from '../../runtime/clock.ts';
import type { LockBackend, LockStore } from '../store.ts';
import type { RedisTarget } from '../url.ts';
import { Cluster } from 'ioredis';
import { connectTarget, defineScript, whenReady, type RedisClient } from './connect.ts';
import { lockKeys } from './keys.ts';
import { ACQUIRE_LUA, RELEASE_LUA, RENEW_LUA } from './scripts.ts';
import { validUntil } from './timing.ts';

/** OPEN_WAIT_MS: how long opening a store waits for the first connection before going on (attempts then retry). */
const OPEN_WAIT_MS = 2000;

/** openRedisStore connects to one Redis deployment (standalone, Sentinel or Cluster). */
export async function openRedisStore(
  target: RedisTarget,
  display: string,
  clock: Clock,
  readyWithinMs = OPEN_WAIT_MS,
): Promise<LockStore> {
  const client = connectTarget(target);
  await whenReady(client, Math.min(readyWithinMs, OPEN_WAIT_MS));
  const channels = new ReleaseChannels(client);
  const acquire = defineScript(client, 'fencepostStoreAcquire', 2, ACQUIRE_LUA, display);
  const renew = defineScript(client, 'fencepostStoreRenew', 1, RENEW_LUA, display);
  const release = defineScript(client, 'fencepostStoreRelease', 1, RELEASE_LUA, display);
  return {
    kind: 'redis',
    display,
    lock(namespace, name): LockBackend {
      const keys = lockKeys(namespace, name);
      return {
        async tryAcquire(owner, ttlMs, floor) {
          // Before the request: the key's TTL starts no earlier than this (stores/redis/timing.ts).
          const sentAt = clock.monotonicMs();
          const reply = await acquire([keys.holder, keys.counter], [owner, String(ttlMs), floor.toString()]);
          if (!Array.isArray(reply)) throw new Error(`unexpected reply to the acquire script: ${String(reply)}`);
          const [granted, tokenOrPttl, , , existed] = reply as unknown[];
          if (granted !== 1) {
            const pttl = typeof tokenOrPttl === 'number' ? tokenOrPttl : undefined;
            return {
              granted: false,
              held: true,
              ...(pttl !== undefined && pttl >= 0 ? { heldForMs: pttl } : {}),
              reason: `held by another owner in ${display}`,
            };
          }
          const token = parseToken(tokenOrPttl, `token from Redis key ${keys.counter}`);
          if (token <= floor)
            throw new Error(`Redis issued token ${token} not above floor ${floor} for ${keys.counter}`);
          return { granted: true, token, validUntilMs: validUntil(sentAt, ttlMs), counterMissing: existed !== 1 };
        },
        async renew(owner, ttlMs) {
          return (await renew([keys.holder], [owner, String(ttlMs)])) === 1 ? 'renewed' : 'notOwner';
        },
        async release(owner) {
          await release([keys.holder], [owner, keys.channel]);
        },
        subscribe: (onRelease) => channels.listen(keys.channel, onRelease),
      };
    },
    async close() {
      channels.close();
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
  readonly #listeners = new Map<string, Set<() => void>>();

  constructor(client: RedisClient) {
    this.#client = client;
  }

  /** listen calls `fn` on every message on `channel`; resolves once subscribed; returns the unsubscribe. */
  async listen(channel: string, fn: () => void): Promise<() => void> {
    const sub = this.#subscriber();
    let set = this.#listeners.get(channel);
    if (set === undefined) {
      set = new Set();
      this.#listeners.set(channel, set);
      try {
        await sub.subscribe(channel);
      } catch (err) {
        this.#listeners.delete(channel);
        throw err;
      }
    }
    set.add(fn);
    const own = set;
    return () => {
      own.delete(fn);
      if (own.size === 0 && this.#listeners.get(channel) === own) {
        this.#listeners.delete(channel);
        sub.unsubscribe(channel).catch(() => undefined);
      }
    };
  }

  close(): void {
    this.#listeners.clear();
    this.#sub?.disconnect();
  }

  #subscriber(): RedisClient {
    if (this.#sub !== undefined) return this.#sub;
    // A subscriber needs the offline queue: SUBSCRIBE sent while it still connects must wait, not fail.
    const sub =
      this.#client instanceof Cluster ? this.#client.duplicate() : this.#client.duplicate({ enableOfflineQueue: true });
    sub.on('error', () => undefined);
    sub.on('message', (channel: string) => {
      for (const fn of [...(this.#listeners.get(channel) ?? [])]) fn();
    });
    this.#sub = sub;
    return sub;
  }
}
