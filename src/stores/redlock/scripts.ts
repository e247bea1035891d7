/**
 * The Lua scripts a Redlock master runs beyond the single-Redis ones (renew and release are
 * stores/redis/scripts.ts's: the same compare-and-act on the owner id).
 */
import { FENCE_NEXT_FUNCTION_LUA } from '../../fencing/redis-fence.ts';

/**
 * REDLOCK_ACQUIRE_LUA: KEYS[1] = holder key, KEYS[2] = counter key; ARGV[1] = owner id, ARGV[2] =
 * TTL (ms), ARGV[3] = floor (decimal). Held by another: {0, PTTL}. Taken: {1, v, existed} where v is
 * the counter after fence_next advanced it (INCR, re-floored above ARGV[3]) — the counter moves
 * before the key is written, as in the single-Redis acquire, since Redis never rolls a script
 * back. The token is still decided by the client over the whole majority (redlock/quorum.ts).
 */
export const REDLOCK_ACQUIRE_LUA = `${FENCE_NEXT_FUNCTION_LUA}
if redis.call('EXISTS', KEYS[1]) == 1 then
  return {0, redis.call('PTTL', KEYS[1])}
end
local f = fence_next(KEYS[2], ARGV[3])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1, f[1], f[4]}
`;

/**
 * REDLOCK_RAISE_LUA: KEYS[1] = holder key, KEYS[2] = counter key; ARGV[1] = owner id, ARGV[2] =
 * token (decimal string). Sets the counter to the token if the token is greater (raise-only: a
 * late or failed grant's write can never lower it; SET also drops any TTL someone put on it),
 * whoever holds the key; returns 1 if ARGV[1] still holds the key here, else 0 — only then does
 * the acknowledgement count toward the grant. The comparison is fence_greater's, on decimal
 * strings (fencing/redis-fence.ts).
 */
export const REDLOCK_RAISE_LUA = `${FENCE_NEXT_FUNCTION_LUA}
local v = redis.call('GET', KEYS[2])
if (not v) or fence_greater(ARGV[2], v) then
  redis.call('SET', KEYS[2], ARGV[2])
end
if redis.call('GET', KEYS[1]) == ARGV[1] then return 1 end
return 0
`;
