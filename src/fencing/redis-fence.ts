/**
 * The Redis fencing-token dispenser: one counter key per lock, advanced by INCR and re-floored
 * from the etcd high-water mark in the same atomic script, so that tokens stay monotonic when
 * Redis loses its data (restart without persistence, FLUSHALL, failover to a lagging replica, the
 * key deleted or given a TTL by mistake).
 *
 * The key is never deleted and never given a TTL by fencepost; the script removes a TTL it finds.
 */
import type { Redis } from 'ioredis';
import { parseToken } from '../protocol/token.ts';
import { FENCE_NEXT_FUNCTION_LUA } from '../protocol/fence-next-lua.ts';
import { FENCE_KEY_PREFIX, fenceCounterKey } from '../protocol/names.ts';

/**
 * FENCE_NEXT_FUNCTION_LUA (clients/conformance/fence-next.lua, generated into fence-next-lua.ts)
 * defines `fence_next(key, floor)`: the dispenser's whole step on one counter key. `floor` is a
 * decimal string (the highest token etcd has recorded for this lock, or 0 where there is none).
 * Returns {token, refloored, hadTtl, existed} with token a decimal string: Lua numbers are doubles
 * and lose precision above 2^53, so values travel and compare as decimal strings.
 *
 * Re-exported so that a script that grants a lock issues its token with this same step in the same
 * atomic script (src/stores/redis/scripts.ts): one copy of the re-floor logic, not two, shared
 * with the Go, Python and Java lock stores.
 */
export { FENCE_NEXT_FUNCTION_LUA };

/** FENCE_NEXT_LUA: KEYS[1] = counter key, ARGV[1] = floor; returns fence_next's result. */
const FENCE_NEXT_LUA = `${FENCE_NEXT_FUNCTION_LUA}return fence_next(KEYS[1], ARGV[1])
`;

export { FENCE_KEY_PREFIX, fenceCounterKey };

/** FenceResult is one issued token and what the dispenser had to repair to issue it. */
export interface FenceResult {
  readonly token: bigint;
  /**
   * refloored is true when the counter was at or below the floor and was raised to it. With
   * `existed` false that is either a new lock's first token (the caller knows: the Lease had no
   * token yet) or a lost key; with `existed` true the counter went backwards (restore, failover).
   */
  readonly refloored: boolean;
  /** existed is false when the counter key was missing before this call. */
  readonly existed: boolean;
  /** hadTtl is true when someone had put a TTL on the counter key (removed now). */
  readonly hadTtl: boolean;
}

/** FenceDispenser issues fencing tokens; implementations must never issue a token <= floor. */
export interface FenceDispenser {
  next(key: string, floor: bigint): Promise<FenceResult>;
}

interface RedisWithFence extends Redis {
  fenceNext(key: string, floor: string): Promise<[string, number, number, number]>;
}

/** redisFence returns a dispenser on an ioredis client (EVALSHA, re-sent after NOSCRIPT). */
export function redisFence(client: Redis): FenceDispenser {
  if (!('fenceNext' in client)) client.defineCommand('fenceNext', { numberOfKeys: 1, lua: FENCE_NEXT_LUA });
  const c = client as RedisWithFence;
  return {
    async next(key, floor) {
      const [v, refloored, hadTtl, existed] = await c.fenceNext(key, floor.toString());
      const token = parseToken(v, `token from Redis key ${key}`);
      if (token <= floor) throw new Error(`Redis issued token ${token} not above floor ${floor} for ${key}`);
      return { token, refloored: refloored === 1, hadTtl: hadTtl === 1, existed: existed === 1 };
    },
  };
}

/**
 * leaseFence is the embedded backend: the token is the floor plus one, and the Lease
 * compare-and-swap that records it is what makes it unique. No Redis needed.
 */
export const leaseFence: FenceDispenser = {
  next(_key, floor) {
    return Promise.resolve({ token: floor + 1n, refloored: false, hadTtl: false, existed: true });
  },
};
