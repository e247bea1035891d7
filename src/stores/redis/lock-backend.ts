/**
 * One single-Redis lock over the store's scripts (stores/redis/scripts.ts), whichever client runs
 * them: ioredis (stores/redis/backend.ts, the library and the Node CLI) or Bun's built-in client
 * (stores/bun/, the compiled agent). The reply parsing and the trust rule live here once.
 */
import { parseToken } from '../../protocol/token.ts';
import type { LockBackend, Script } from '../store.ts';
import type { LockKeys } from './keys.ts';

/** StoreScripts: the three scripts bound to a client, and its release channels. */
export interface StoreScripts {
  readonly acquire: Script;
  readonly renew: Script;
  readonly release: Script;
  /** listen calls `fn` on every message on `channel`; resolves once subscribed; returns the unsubscribe. */
  listen(channel: string, fn: (message: string) => void): Promise<() => void>;
  /**
   * failovers, for a Sentinel-managed master only: its config-epoch now, which the acquire script
   * mixes into the lock's epoch (stores/redis/sentinel-failovers.ts says why).
   */
  readonly failovers?: () => Promise<string>;
}

/** redisLockBackend is the lock `keys` in the Redis behind `s` (`display` names it in errors). */
export function redisLockBackend(s: StoreScripts, keys: LockKeys, display: string): LockBackend {
  return {
    async tryAcquire(owner, ttlMs, floor) {
      const args = [owner, String(ttlMs), floor.toString()];
      if (s.failovers !== undefined) args.push(await s.failovers());
      const reply = await s.acquire([keys.holder, keys.counter, keys.epoch], args);
      if (!Array.isArray(reply)) throw new Error(`unexpected reply to the acquire script: ${String(reply)}`);
      const [granted, tokenOrPttl, , , existed, epochChanged] = reply as unknown[];
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
      if (token <= floor) throw new Error(`Redis issued token ${token} not above floor ${floor} for ${keys.counter}`);
      return {
        granted: true,
        token,
        counterMissing: existed !== 1,
        clockFloored: epochChanged === 1,
      };
    },
    async renew(owner, ttlMs) {
      return (await s.renew([keys.holder], [owner, String(ttlMs)])) === 1 ? 'renewed' : 'notOwner';
    },
    async release(owner) {
      await s.release([keys.holder], [owner, keys.channel]);
    },
    subscribe: (onRelease) => s.listen(keys.channel, onRelease),
  };
}
