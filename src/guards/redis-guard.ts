/**
 * The Redis fencing guard: a write to a protected key that Redis itself refuses when the writer's
 * fencing token is below the highest token accepted for the lock (the high-water mark).
 *
 * One Lua script does the check and the write atomically, so no other command can slip between
 * them. It is clients/conformance/redis-fenced-write.lua, shared with the Go, Python and Java
 * guards; ./redis-fenced-write-lua.ts carries it as a constant (generated, checked by a test).
 * Tokens travel as canonical decimal strings and are compared in Lua as strings (length first,
 * then lexicographically): Lua numbers are doubles and would confuse 9007199254740993 with
 * 9007199254740992.
 *
 * Scope: a mark per key let a stale holder write what its successor had not, so by default a guard keeps **one mark per lock** for every key it
 * writes or deletes: once the holder of token N+1 has written (or deleted, or `advance`d) anything,
 * the holder of token N can write nothing, not even a key N+1 never touched, and cannot bring back
 * a key N+1 deleted. `scope: 'key'` keeps one mark per data key instead, which is weaker: a stale
 * holder can still write every key the newer holder has not written yet, and re-create one that
 * was deleted with a plain DEL. Use it only for keys whose writes are independent of each other.
 *
 * Keys. Everything the guard owns lives under `fencepost:guard:` (RESERVED_KEY_PREFIX), and the
 * guard refuses a data key that starts with `fencepost:`, so no data key can be a mark:
 * - `fencepost:guard:lock:<lock>` (scope 'lock') or `fencepost:guard:key:<key>` (scope 'key'),
 *   the high-water mark: a canonical decimal string. fencepost never deletes it and never gives it
 *   a TTL; the script removes a TTL it finds (a mark that expires would let every stale holder in).
 * - `fencepost:guard:writes:lock:<lock>` / `fencepost:guard:writes:key:<key>`, only with write
 *   ids: a sorted set of the write ids applied in the idempotency window (score: Redis server time
 *   in ms). It is pruned on every write with an id and expires as a whole when no write with an id
 *   arrives for a window. Losing it only means that a retry older than the window is evaluated as a
 *   new write (and is still fenced by the token).
 *
 * The data, mark and write id keys must live on the same Redis server and, in Redis Cluster, in
 * the same hash slot (else the script fails with CROSSSLOT, and nothing is written): name the lock
 * with a hash tag and use it in every data key (`lock: '{orders}'`, keys `{orders}:42`).
 *
 * Earlier versions defaulted to one mark per key, named `<key>:fence` (so a data key `orders:fence`
 * was the mark of `orders`). `fenceKeySuffix`, `fenceKey` and `writesKey` still select that
 * naming explicitly; see docs/agent.md "Fencing guards" for upgrading.
 */
import type { Redis } from 'ioredis';
import { parseToken } from '../protocol/token.ts';
import { FENCED_WRITE_LUA } from './redis-fenced-write-lua.ts';

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
    op: 'set' | 'del' | 'fence',
  ): Promise<[string, string]>;
}

/**
 * RESERVED_KEY_PREFIX: every key a guard names itself starts with `fencepost:guard:`, and no data
 * key written through a guard may start with `fencepost:` (which also keeps guards off the
 * controller's `fencepost:fence:` token counters on a shared Redis).
 */
export const RESERVED_KEY_PREFIX = 'fencepost:guard:';

/** DEFAULT_LOCK is the lock name of a guard created without one. */
export const DEFAULT_LOCK = 'default';

/**
 * RedisGuardOptions chooses what one mark covers, the keys a guard uses and its idempotency
 * window. With none, a guard keeps one mark for every key it writes (scope 'lock', lock
 * 'default').
 */
export interface RedisGuardOptions {
  /**
   * scope: 'lock' (the default) keeps one mark per lock, `fencepost:guard:lock:<lock>`, for every
   * key written through the guard; 'key' keeps one mark per data key, `fencepost:guard:key:<key>`
   * — weaker: a stale holder can still write keys the newer holder has not written, and re-create
   * keys deleted without the guard.
   */
  readonly scope?: 'lock' | 'key';
  /**
   * lock names the lock whose tokens the guard checks (scope 'lock'; default 'default'). Give each
   * lock its own name: guards sharing a name share one mark, which stays safe (every accepted
   * token of either lock is at or below it) but lets one lock's larger tokens refuse the other's
   * current holder. In Redis Cluster, a hash tag (`'{orders}'`) that your data keys carry too.
   */
  readonly lock?: string;
  /**
   * fenceKeySuffix selects the old per-key naming: the mark of `K` is `K<suffix>` and its write id
   * set `K:writes` (scope 'key'). The guard then refuses data keys that end with the suffix or
   * with `:writes`, so that no data key is another key's mark. Not combinable with scope or lock.
   */
  readonly fenceKeySuffix?: string;
  /**
   * fenceKey maps a data key to its mark key yourself (wins over fenceKeySuffix): a constant gives
   * one mark per lock under a name of your choice. The guard only checks that the data, mark and
   * write id keys of one call differ: keeping data keys out of your mark names is up to you.
   */
  readonly fenceKey?: (key: string) => string;
  /** writesKey maps a data key to its write id set (with fenceKey or fenceKeySuffix; default `<key>:writes`). */
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
   * write sets `key` to `value` if `token` is at least the mark, and raises the mark to `token`;
   * otherwise it changes nothing and reports the mark. An equal token is accepted: it is the same
   * holder writing again within its term (tokens are issued once per grant). With a `writeId`, a
   * write id already applied within the window is not applied again and is reported as
   * `duplicate` (whatever its token). Throws TokenError for a malformed token, and RangeError for
   * a key in the reserved `fencepost:` namespace, before anything is sent; rejects on Redis errors
   * (the write may or may not have been applied then: retry with the same write id to find out).
   */
  write(key: string, token: bigint | string, value: string, writeId?: string): Promise<RedisWriteResult>;
  /**
   * delete removes `key` under the same rule as write (and raises the mark). With the default
   * lock scope the mark outlives the key, so a stale holder cannot re-create it. Deleting a key
   * that does not exist is accepted (and raises the mark).
   */
  delete(key: string, token: bigint | string, writeId?: string): Promise<RedisWriteResult>;
  /**
   * advance raises the mark to `token` without writing anything, under the same rule: a new holder
   * that calls it at the start of its term fences out every older token at once, before its first
   * write. Scope 'lock' only (the mark of which key, otherwise?): RangeError in scope 'key'.
   */
  advance(token: bigint | string): Promise<RedisWriteResult>;
  /**
   * highWater reads the mark: undefined when nothing has been accepted yet. In scope 'lock' the key
   * is ignored (the lock's mark covers every key); in scope 'key' it names the key.
   */
  highWater(key?: string): Promise<bigint | undefined>;
  /** markKey is the Redis key of the mark covering `key` (for inspection and upgrades). */
  markKey(key?: string): string;
}

/** DEFAULT_WRITE_ID_TTL_MS is how long applied write ids are remembered by default: one day. */
export const DEFAULT_WRITE_ID_TTL_MS = 24 * 60 * 60 * 1000;

interface KeyPlan {
  /** mark and write id set of a data key (the key is undefined for advance/highWater in lock scope). */
  readonly keysOf: (key: string | undefined) => { readonly fence: string; readonly writes: string };
  /** refuse throws RangeError for a data key the plan cannot take. */
  readonly refuse: (key: string) => void;
  readonly perLock: boolean;
}

function planKeys(opts: RedisGuardOptions): KeyPlan {
  const reserved = (key: string): void => {
    if (key.startsWith('fencepost:'))
      throw new RangeError(
        `data key ${JSON.stringify(key)} is in the reserved fencepost: namespace (guard marks, controller counters)`,
      );
  };
  const need = (key: string | undefined): string => {
    if (key === undefined) throw new RangeError('this guard keeps one mark per key: name the key');
    return key;
  };
  if (opts.fenceKey !== undefined || opts.fenceKeySuffix !== undefined) {
    if (opts.scope !== undefined || opts.lock !== undefined)
      throw new RangeError('fenceKey/fenceKeySuffix name the marks themselves: do not combine them with scope or lock');
    const suffix = opts.fenceKeySuffix ?? ':fence';
    if (suffix === '') throw new RangeError('fenceKeySuffix must not be empty: the fence key would be the data key');
    const custom = opts.fenceKey;
    const fenceOf = custom ?? ((key: string) => `${key}${suffix}`);
    const writesOf = opts.writesKey ?? ((key: string) => `${key}:writes`);
    return {
      perLock: false,
      keysOf: (key) => {
        const k = need(key);
        return { fence: fenceOf(k), writes: writesOf(k) };
      },
      refuse: (key) => {
        reserved(key);
        if (custom === undefined && (key.endsWith(suffix) || (opts.writesKey === undefined && key.endsWith(':writes'))))
          throw new RangeError(
            `data key ${JSON.stringify(key)} ends like a mark (${JSON.stringify(suffix)}) or write id set (":writes") of another key`,
          );
      },
    };
  }
  if (opts.writesKey !== undefined) throw new RangeError('writesKey goes with fenceKey or fenceKeySuffix');
  const scope = opts.scope ?? 'lock';
  if (scope === 'key') {
    if (opts.lock !== undefined) throw new RangeError("lock goes with scope 'lock'");
    return {
      perLock: false,
      keysOf: (key) => {
        const k = need(key);
        return { fence: `${RESERVED_KEY_PREFIX}key:${k}`, writes: `${RESERVED_KEY_PREFIX}writes:key:${k}` };
      },
      refuse: reserved,
    };
  }
  if (scope !== 'lock') throw new RangeError(`scope must be 'lock' or 'key', got ${JSON.stringify(scope)}`);
  const lock = opts.lock ?? DEFAULT_LOCK;
  if (lock === '') throw new RangeError('lock must not be empty');
  const keys = { fence: `${RESERVED_KEY_PREFIX}lock:${lock}`, writes: `${RESERVED_KEY_PREFIX}writes:lock:${lock}` };
  return { perLock: true, keysOf: () => keys, refuse: reserved };
}

/**
 * redisGuard returns a guard on an ioredis client (the script is registered on the client and
 * sent with EVALSHA, re-sent after NOSCRIPT). By default it keeps one mark per lock (see
 * RedisGuardOptions). Throws RangeError for contradictory options. Hazards: the guard only
 * protects writes that go through it (a plain SET or DEL on a data key bypasses the fence); the
 * mark must not be lost while the data survives (keep them on the same server and slot, never
 * expire or delete a mark); a token from a different lock's sequence is compared like any other
 * token (one lock name per lock).
 */
export function redisGuard(client: Redis, opts: RedisGuardOptions = {}): RedisGuard {
  const plan = planKeys(opts);
  const window = opts.writeIdTtlMs ?? DEFAULT_WRITE_ID_TTL_MS;
  if (!Number.isSafeInteger(window) || window <= 0)
    throw new RangeError(`writeIdTtlMs must be a positive integer, got ${window}`);
  if (!(COMMAND in client)) client.defineCommand(COMMAND, { numberOfKeys: 3, lua: FENCED_WRITE_LUA });
  const c = client as RedisWithFencedWrite;

  const keysOf = (key: string | undefined): { fence: string; writes: string } => {
    const { fence, writes } = plan.keysOf(key);
    if (fence === key || writes === key || fence === writes) {
      throw new RangeError(
        `data key ${JSON.stringify(key)}, fence key ${JSON.stringify(fence)} and write id key ${JSON.stringify(writes)} must differ`,
      );
    }
    return { fence, writes };
  };

  const call = async (
    op: 'set' | 'del' | 'fence',
    key: string | undefined,
    token: bigint | string,
    value: string,
    writeId: string | undefined,
  ): Promise<RedisWriteResult> => {
    const what = key === undefined ? 'fencing token' : `fencing token for ${key}`;
    const text = parseToken(typeof token === 'bigint' ? token.toString() : token, what).toString();
    if (writeId === '') throw new RangeError('writeId must not be empty (omit it for a write without idempotency)');
    if (key !== undefined) plan.refuse(key);
    const { fence, writes } = keysOf(key);
    const [outcome, mark] = await c.fencepostFencedWrite(
      key ?? fence,
      fence,
      writes,
      text,
      value,
      writeId ?? '',
      String(window),
      op,
    );
    switch (outcome) {
      case 'applied':
        return { accepted: true, duplicate: false };
      case 'duplicate':
        return { accepted: true, duplicate: true };
      case 'stale':
        return { accepted: false, reason: 'stale', highWater: parseToken(mark, `high-water mark in ${fence}`) };
      default:
        throw new Error(`fenced write on ${key ?? fence}: unexpected script result ${JSON.stringify(outcome)}`);
    }
  };

  return {
    write: (key, token, value, writeId) => call('set', key, token, value, writeId),
    delete: (key, token, writeId) => call('del', key, token, '', writeId),
    advance: async (token) => {
      if (!plan.perLock) throw new RangeError('advance needs one mark per lock (scope "lock")');
      return call('fence', undefined, token, '', undefined);
    },
    async highWater(key) {
      const { fence } = keysOf(key);
      const v = await client.get(fence);
      return v === null ? undefined : parseToken(v, `high-water mark in ${fence}`);
    },
    markKey: (key) => keysOf(key).fence,
  };
}
