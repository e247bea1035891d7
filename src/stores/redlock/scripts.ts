/**
 * The Lua scripts a Redlock master runs beyond the single-Redis ones (renew and release are
 * stores/redis/scripts.ts's: the same compare-and-act on the owner id), composed from the shared
 * files of clients/conformance (store.json "scripts").
 */
import { FENCE_NEXT_FUNCTION_LUA } from '../../protocol/fence-next-lua.ts';
import { REDLOCK_ACQUIRE_BODY_LUA, REDLOCK_RAISE_BODY_LUA } from '../store-lua.ts';

/**
 * REDLOCK_ACQUIRE_LUA: KEYS[1] = holder key, KEYS[2] = counter key, KEYS[3] = epoch key; ARGV[1] =
 * owner id, ARGV[2] = TTL (ms), ARGV[3] = floor (decimal). Held by another: {0, PTTL}. Taken: {1,
 * v, existed, epochChanged} where v is the counter after fence_next advanced it, from this
 * master's clock when its epoch changed (fence_epoch). The token is decided by the client over the whole
 * majority (redlock/quorum.ts).
 */
export const REDLOCK_ACQUIRE_LUA = FENCE_NEXT_FUNCTION_LUA + REDLOCK_ACQUIRE_BODY_LUA;

/** REDLOCK_ACQUIRE_KEYS: how many of REDLOCK_ACQUIRE_LUA's arguments are keys (holder, counter, epoch). */
export const REDLOCK_ACQUIRE_KEYS = 3;

/**
 * REDLOCK_RAISE_LUA: KEYS[1] = holder key, KEYS[2] = counter key; ARGV[1] = owner id, ARGV[2] =
 * token (decimal string). Raise-only SET of the counter to the token, whoever holds the key;
 * 1 if ARGV[1] still holds the key here, else 0 (only then does the acknowledgement count).
 */
export const REDLOCK_RAISE_LUA = FENCE_NEXT_FUNCTION_LUA + REDLOCK_RAISE_BODY_LUA;
