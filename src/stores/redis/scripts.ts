/**
 * The Lua scripts of the single-Redis store, composed from the shared files of clients/conformance
 * as its store.json "scripts" says (a script is its files' bytes in order), so that the Go, Python
 * and Java stores run the very same scripts. Each runs atomically in Redis, which is what makes a
 * grant and its token one event, and a renew or release a compare-and-act on the owner id. Keys,
 * arguments and answers: each .lua file's header.
 */
import { FENCE_NEXT_FUNCTION_LUA } from '../../protocol/fence-next-lua.ts';
import { STORE_ACQUIRE_BODY_LUA, STORE_RELEASE_LUA, STORE_RENEW_LUA } from '../store-lua.ts';

/**
 * ACQUIRE_LUA: KEYS[1] = holder key, KEYS[2] = counter key, KEYS[3] = epoch key; ARGV[1] = owner
 * id, ARGV[2] = TTL (ms), ARGV[3] = token floor (decimal string). Granted: {1, token, refloored,
 * hadTtl, existed, epochChanged} (fence_next's result, fencing/redis-fence.ts, and whether
 * fence_epoch floored the token at the server's clock); held: {0, PTTL of the holder key}. The token is
 * issued before the SET: Redis does not roll a script back (store-acquire.lua says why).
 */
export const ACQUIRE_LUA = FENCE_NEXT_FUNCTION_LUA + STORE_ACQUIRE_BODY_LUA;

/** ACQUIRE_KEYS: how many of ACQUIRE_LUA's arguments are keys (holder, counter, epoch). */
export const ACQUIRE_KEYS = 3;

/** RENEW_LUA: KEYS[1] = holder key; ARGV[1] = owner id, ARGV[2] = TTL (ms). 1 if renewed, 0 if not the owner. */
export const RENEW_LUA = STORE_RENEW_LUA;

/**
 * RELEASE_LUA: KEYS[1] = holder key; ARGV[1] = owner id, ARGV[2] = release channel. Deletes the
 * key only if it still holds this owner, then publishes so that waiters retry at once. 1 if
 * released, 0 if not the owner (expired, taken over: nothing to do).
 */
export const RELEASE_LUA = STORE_RELEASE_LUA;
