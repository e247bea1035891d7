/**
 * The Redis fencing guard: a write to a protected key that Redis itself refuses when the writer's
 * fencing token is below the highest token it has accepted for that key (the high-water mark).
 *
 * One Lua script does the check and the write atomically, so no other command can slip between
 * them. Tokens travel as canonical decimal strings and are compared in Lua as strings (length
 * first, then lexicographically): Lua numbers are doubles and would confuse 9007199254740993 with
 * 9007199254740992.
 *
 * Keys, for a protected data key `K` (defaults; both are options):
 * - `K:fence`, the high-water mark: a canonical decimal string. fencepost never deletes it and
 *   never gives it a TTL; the script removes a TTL it finds (a mark that expires would let every
 *   stale holder in again).
 * - `K:writes`, only with write ids: a sorted set of the write ids applied in the idempotency
 *   window (score: Redis server time in ms). It is pruned on every write with an id and expires as
 *   a whole when no write with an id arrives for a window. Losing it only means that a retry
 *   older than the window is evaluated as a new write (and is still fenced by the token).
 *
 * The data, fence and writes keys must live on the same Redis server and, in Redis Cluster, in
 * the same hash slot: put a hash tag in the data key (`{orders}:42` gives `{orders}:42:fence`) or
 * map the keys yourself with the options.
 */
import type { Redis } from 'ioredis';
import { parseToken } from '../protocol/token.ts';

/**
 * FENCED_WRITE_LUA: KEYS[1] = data key, KEYS[2] = fence key (high-water mark), KEYS[3] = write
 * id set; ARGV[1] = token (canonical decimal), ARGV[2] = value, ARGV[3] = write id or '' for
 * none, ARGV[4] = idempotency window in ms. Returns {outcome, mark} with outcome 'applied',
 * 'duplicate' or 'stale' and mark the high-water mark after the call ('' when there is none).
 *
 * A rejected or duplicate write never changes the data or the mark. The token is validated here
 * too (defence in depth; the TypeScript side has already refused malformed ones), and a mark that
 * is not a canonical token fails the call instead of being compared.
 */
const FENCED_WRITE_LUA = `
local dataKey, fenceKey, writesKey = KEYS[1], KEYS[2], KEYS[3]
local token, value, writeId = ARGV[1], ARGV[2], ARGV[3]
local window = tonumber(ARGV[4])
local function canonical(s)
  if s == '0' then return true end
  if #s > 19 or string.match(s, '^[1-9][0-9]*$') == nil then return false end
  return #s < 19 or s <= '9223372036854775807'
end
local function less(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end
if not canonical(token) then
  return redis.error_reply('ERR fencepost: malformed fencing token')
end
local mark = redis.call('GET', fenceKey)
if mark then
  if not canonical(mark) then
    return redis.error_reply('ERR fencepost: fence key ' .. fenceKey .. ' does not hold a fencing token')
  end
  if redis.call('PTTL', fenceKey) >= 0 then redis.call('PERSIST', fenceKey) end
end
local now = 0
if writeId ~= '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZREMRANGEBYSCORE', writesKey, '-inf', '(' .. (now - window))
  if redis.call('ZSCORE', writesKey, writeId) then
    return {'duplicate', mark or ''}
  end
end
if mark and less(token, mark) then
  return {'stale', mark}
end
redis.call('SET', dataKey, value)
redis.call('SET', fenceKey, token)
if writeId ~= '' then
  redis.call('ZADD', writesKey, now, writeId)
  redis.call('PEXPIRE', writesKey, window)
end
return {'applied', token}
`;

const COMMAND = 'fencepostFencedWrite';

interface RedisWithFencedWrite extends Redis {
  fencepostFencedWrite(
    dataKey: string,
    fenceKey: string,
    writesKey: string,
    token: string,
    value: string,
    writeId: string,
    windowMs: string,
  ): Promise<[string, string]>;
}

/**
 * RedisGuardOptions chooses the keys a guard uses and its idempotency window.
 *
 * The guard is per protected key by default: each data key has its own mark. Pass `fenceKey` to
 * share one mark among several keys (a lock namespace): then a token accepted for any of them
 * fences all of them, which is what you want when one lock protects them all, and wrong when
 * different locks (with unrelated token sequences) protect them.
 */
export interface RedisGuardOptions {
  /** fenceKeySuffix is appended to the data key to name its fence key (default `:fence`). */
  readonly fenceKeySuffix?: string;
  /** fenceKey maps a data key to its fence key; it wins over fenceKeySuffix. */
  readonly fenceKey?: (key: string) => string;
  /** writesKey maps a data key to its write id set (default `<key>:writes`). */
  readonly writesKey?: (key: string) => string;
  /** writeIdTtlMs is how long an applied write id is remembered (default one day). */
  readonly writeIdTtlMs?: number;
}

/**
 * RedisWriteResult is the outcome of a fenced write: accepted (newly applied, or `duplicate`: a
 * write id already applied, nothing changed), or rejected as stale with the mark that refused it.
 */
export type RedisWriteResult =
  | { readonly accepted: true; readonly duplicate: boolean }
  | { readonly accepted: false; readonly reason: 'stale'; readonly highWater: bigint };

/** RedisGuard performs fenced writes on one Redis connection. */
export interface RedisGuard {
  /**
   * write sets `key` to `value` if `token` is at least the key's high-water mark, and raises the
   * mark to `token`; otherwise it changes nothing and reports the mark. An equal token is
   * accepted: it is the same holder writing again within its term (tokens are issued once per
   * grant). With a `writeId`, a write id already applied within the window is not applied again
   * and is reported as `duplicate` (whatever its token). Throws TokenError for a malformed token
   * before anything is sent, and rejects on Redis errors (the write may or may not have been
   * applied then: retry with the same write id to find out safely).
   */
  write(key: string, token: bigint | string, value: string, writeId?: string): Promise<RedisWriteResult>;
  /** highWater reads the key's mark: undefined when no write has been accepted yet. */
  highWater(key: string): Promise<bigint | undefined>;
}

/** DEFAULT_WRITE_ID_TTL_MS is how long applied write ids are remembered by default: one day. */
export const DEFAULT_WRITE_ID_TTL_MS = 24 * 60 * 60 * 1000;

/**
 * redisGuard returns a guard on an ioredis client (the script is registered on the client and
 * sent with EVALSHA, re-sent after NOSCRIPT). Hazards: the guard only protects writes that go
 * through it (a plain SET on the data key bypasses the fence); the mark must not be lost while
 * the data survives (keep them on the same server and slot, never expire or delete the fence
 * key); a token from a different lock's sequence is compared like any other token.
 */
export function redisGuard(client: Redis, opts: RedisGuardOptions = {}): RedisGuard {
  const suffix = opts.fenceKeySuffix ?? ':fence';
  const fenceKeyOf = opts.fenceKey ?? ((key: string) => `${key}${suffix}`);
  const writesKeyOf = opts.writesKey ?? ((key: string) => `${key}:writes`);
  const window = opts.writeIdTtlMs ?? DEFAULT_WRITE_ID_TTL_MS;
  if (!Number.isSafeInteger(window) || window <= 0)
    throw new RangeError(`writeIdTtlMs must be a positive integer, got ${window}`);
  if (suffix === '') throw new RangeError('fenceKeySuffix must not be empty: the fence key would be the data key');
  if (!(COMMAND in client)) client.defineCommand(COMMAND, { numberOfKeys: 3, lua: FENCED_WRITE_LUA });
  const c = client as RedisWithFencedWrite;

  const keysOf = (key: string): { fence: string; writes: string } => {
    const fence = fenceKeyOf(key);
    const writes = writesKeyOf(key);
    if (fence === key || writes === key || fence === writes) {
      throw new RangeError(
        `data key ${JSON.stringify(key)}, fence key ${JSON.stringify(fence)} and write id key ${JSON.stringify(writes)} must differ`,
      );
    }
    return { fence, writes };
  };

  return {
    async write(key, token, value, writeId) {
      const text = parseToken(
        typeof token === 'bigint' ? token.toString() : token,
        `fencing token for ${key}`,
      ).toString();
      if (writeId === '') throw new RangeError('writeId must not be empty (omit it for a write without idempotency)');
      const { fence, writes } = keysOf(key);
      const [outcome, mark] = await c.fencepostFencedWrite(
        key,
        fence,
        writes,
        text,
        value,
        writeId ?? '',
        String(window),
      );
      switch (outcome) {
        case 'applied':
          return { accepted: true, duplicate: false };
        case 'duplicate':
          return { accepted: true, duplicate: true };
        case 'stale':
          return { accepted: false, reason: 'stale', highWater: parseToken(mark, `high-water mark in ${fence}`) };
        default:
          throw new Error(`fenced write on ${key}: unexpected script result ${JSON.stringify(outcome)}`);
      }
    },
    async highWater(key) {
      const { fence } = keysOf(key);
      const v = await client.get(fence);
      return v === null ? undefined : parseToken(v, `high-water mark in ${fence}`);
    },
  };
}
