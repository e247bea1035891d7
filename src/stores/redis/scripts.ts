/**
 * The Lua scripts of the single-Redis store. Each runs atomically in Redis, which is what makes a
 * grant and its token one event, and a renew or release a compare-and-act on the owner id.
 */
import { FENCE_NEXT_FUNCTION_LUA } from '../../fencing/redis-fence.ts';

/**
 * ACQUIRE_LUA: KEYS[1] = holder key, KEYS[2] = counter key; ARGV[1] = owner id, ARGV[2] = TTL
 * (ms), ARGV[3] = token floor (decimal string). Granted: {1, token, refloored, hadTtl, existed}
 * (fence_next's result, fencing/redis-fence.ts); held: {0, PTTL of the holder key}.
 *
 * The token is issued BEFORE the SET, after checking the key is free: Redis does not roll a
 * script back, so a failing INCR (a counter at 2^63−1, a counter key of another type) must stop
 * the script before it has written a holder that has no token. Nothing can take the key between
 * the check and the SET: the script is atomic.
 */
export const ACQUIRE_LUA = `${FENCE_NEXT_FUNCTION_LUA}
if redis.call('EXISTS', KEYS[1]) == 1 then
  return {0, redis.call('PTTL', KEYS[1])}
end
local f = fence_next(KEYS[2], ARGV[3])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1, f[1], f[2], f[3], f[4]}
`;

/** RENEW_LUA: KEYS[1] = holder key; ARGV[1] = owner id, ARGV[2] = TTL (ms). 1 if renewed, 0 if not the owner. */
export const RENEW_LUA = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`;

/**
 * RELEASE_LUA: KEYS[1] = holder key; ARGV[1] = owner id, ARGV[2] = release channel. Deletes the
 * key only if it still holds this owner, and then publishes on the channel so that waiters retry
 * at once. 1 if released, 0 if not the owner (expired, taken over: nothing to do).
 */
export const RELEASE_LUA = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], 'released')
  return 1
end
return 0
`;
