/**
 * Reading store locks from outside: what the controller does for a DistributedLock with
 * spec.store Redis or Redlock, which it observes but never grants (docs/stores.md, "In a
 * cluster"). One read is one atomic script per Redis (holder, its remaining TTL, the counter);
 * releases are heard on the locks' release channels (PSUBSCRIBE), whose message is the owner id
 * that released (store-release.lua), so that an observer tells a release from an expiry.
 *
 * Nothing here writes: an observer that renewed, released or raised a counter would be a second
 * holder the protocol does not know.
 */
import { Cluster } from 'ioredis';
import { parseToken } from '../protocol/token.ts';
import { withTimeout } from '../runtime/timeout.ts';
import {
  connectTarget,
  defineScript,
  failure,
  SUBSCRIBER_OPTIONS,
  whenReady,
  type RedisClient,
  type Script,
} from './redis/connect.ts';
import { lockKeys } from './redis/keys.ts';
import { quorum } from './redlock/quorum.ts';
import { homeOf, shardIdentity } from './shards.ts';
import { parseStoreUrl, storeTargets, type RedisTarget } from './url.ts';

/**
 * READ_LUA: KEYS[1] = holder key, KEYS[2] = counter key. {owner or false, PTTL of the holder key,
 * counter or false}, in one atomic step, so that the token read belongs to the owner read.
 */
const READ_LUA = `return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2])}`;

/** HolderRead is one Redis's view of a lock: its owner id and what its key has left, and the counter. */
export interface HolderRead {
  readonly owner: string | undefined;
  /** ttlMs: the holder key's PTTL (−2 none, −1 no TTL). */
  readonly ttlMs: number;
  readonly counter: bigint | undefined;
}

/** ObservedLock is the store's answer for one lock: who holds it (if anyone), for how long, and the token. */
export interface ObservedLock {
  readonly owner: string | undefined;
  /** ttlMs: how long the holder's key has left (the least of the majority's, on Redlock). */
  readonly ttlMs: number;
  /** token: the holder's token (the counter, which only its grant advanced); undefined when nobody holds it. */
  readonly token: bigint | undefined;
  /** masters: on Redlock, how many masters answered and how many of them name the owner. */
  readonly masters?: { readonly answered: number; readonly agree: number; readonly of: number };
}

/**
 * combineRedlock is a Redlock lock as a majority sees it (pure). A lock is held only when a
 * majority of all masters name one owner — what a grant needs — with the least of their TTLs and
 * the largest of their counters (a grant leaves its token on every master of its majority, and
 * nothing advances the counter of a master where the key is held). Fewer answers than a majority
 * are no answer: throws.
 */
export function combineRedlock(reads: readonly (HolderRead | undefined)[]): ObservedLock {
  const answered = reads.filter((r): r is HolderRead => r !== undefined);
  const need = quorum(reads.length);
  if (answered.length < need) throw new Error(`only ${answered.length} of ${reads.length} Redlock masters answered`);
  const counts = new Map<string, HolderRead[]>();
  for (const r of answered) if (r.owner !== undefined) counts.set(r.owner, [...(counts.get(r.owner) ?? []), r]);
  const masters = { answered: answered.length, of: reads.length };
  for (const [owner, mine] of counts)
    if (mine.length >= need) {
      const token = mine.reduce<bigint | undefined>(
        (m, r) => (r.counter !== undefined && (m === undefined || r.counter > m) ? r.counter : m),
        undefined,
      );
      return {
        owner,
        ttlMs: Math.min(...mine.map((r) => r.ttlMs)),
        token,
        masters: { ...masters, agree: mine.length },
      };
    }
  const most = Math.max(0, ...[...counts.values()].map((m) => m.length));
  return { owner: undefined, ttlMs: -2, token: undefined, masters: { ...masters, agree: most } };
}

/** StoreReader reads store locks and hears their releases. */
export interface StoreReader {
  readonly kind: 'redis' | 'redlock';
  /** display: the URL with the password redacted. */
  readonly display: string;
  /** read one lock; throws when the store does not answer (Redlock: fewer than a majority). */
  read(namespace: string, name: string): Promise<ObservedLock>;
  /**
   * onRelease calls `listener(namespace, name, owner)` for every release published on any lock's
   * channel, from the moment the returned promise resolves (the subscription is made).
   */
  onRelease(listener: (namespace: string, name: string, owner: string) => void): Promise<void>;
  /** ready: every connection (Redlock: a majority) is up. */
  ready(): boolean;
  close(): Promise<void>;
}

const CHANNEL_PATTERN = 'fencepost:released:*';
const CHANNEL = /^fencepost:released:([a-z0-9-]{1,63})\/([a-z0-9-]{1,63})$/;

interface Connection {
  readonly name: string;
  readonly client: RedisClient;
  readonly read: Script;
  subscriber?: RedisClient;
}

function connection(t: RedisTarget, name: string): Connection {
  const client = connectTarget(t);
  return { name, client, read: defineScript(client, 'fencepostStoreRead', 2, READ_LUA, name) };
}

/** BARRIER_MS bounds the wait for a subscriber's PING answer (a subscriber that is down is no barrier). */
const BARRIER_MS = 1000;

/**
 * heardUpTo resolves once every release published on `c` before now has reached the listener:
 * a PING on the subscriber connection is answered after the messages already queued for it, in
 * order. A release deletes the key and publishes in one script, so a read that found the key gone
 * and then this barrier leave no release unheard — without it, a loaded controller's timer could
 * decide "expired" before it read the message waiting on the socket (docs/stores.md). A Cluster's
 * messages travel between nodes on the bus, after the script: there the observer's grace remains.
 */
async function heardUpTo(c: Connection): Promise<void> {
  const sub = c.subscriber;
  if (sub === undefined || sub instanceof Cluster || sub.status !== 'ready') return;
  await withTimeout(sub.ping(), BARRIER_MS, `${c.name}: release barrier`).catch(() => undefined);
}

async function readOne(c: Connection, namespace: string, lock: string): Promise<HolderRead> {
  const keys = lockKeys(namespace, lock);
  const reply = await c.read([keys.holder, keys.counter], []);
  if (!Array.isArray(reply)) throw failure(c.client, c.name, new Error(`unexpected reply ${String(reply)}`));
  await heardUpTo(c);
  const [owner, ttl, counter] = reply as unknown[];
  return {
    owner: typeof owner === 'string' ? owner : undefined,
    ttlMs: typeof ttl === 'number' ? ttl : -2,
    counter: typeof counter === 'string' ? parseToken(counter, `counter ${keys.counter} on ${c.name}`) : undefined,
  };
}

/**
 * openStoreReader connects to the store of `url` (what the errors name: `what`), waiting up to
 * `readyWithinMs` for the connections; a store down then is retried by the reads.
 */
export async function openStoreReader(url: string, what: string, readyWithinMs = 2000): Promise<StoreReader> {
  const spec = parseStoreUrl(url, what);
  const targets = storeTargets(spec);
  const byId = new Map<string, Connection>();
  for (const t of targets) {
    const id = t.mode === 'standalone' ? shardIdentity(t) : t.mode;
    if (!byId.has(id)) byId.set(id, connection(t, id));
  }
  const conns = [...byId.values()];
  await Promise.all(conns.map((c) => whenReady(c.client, readyWithinMs)));
  const readyCount = (): number => conns.filter((c) => c.client.status === 'ready').length;
  const of = (t: RedisTarget): Connection => {
    const c = byId.get(t.mode === 'standalone' ? shardIdentity(t) : t.mode);
    if (c === undefined) throw new Error(`${spec.display}: a Redis was not opened`);
    return c;
  };
  const single = async (c: Connection, namespace: string, name: string): Promise<ObservedLock> => {
    const r = await readOne(c, namespace, name);
    return { owner: r.owner, ttlMs: r.ttlMs, token: r.owner !== undefined ? r.counter : undefined };
  };
  return {
    kind: spec.kind === 'redlock' ? 'redlock' : 'redis',
    display: spec.display,
    async read(namespace, name) {
      switch (spec.kind) {
        case 'redis':
          return single(of(spec.target), namespace, name);
        case 'redlock':
          return combineRedlock(
            await Promise.all(conns.map((c) => readOne(c, namespace, name).catch(() => undefined))),
          );
        case 'shards': {
          // Its home; while a change rolls out and the lock moved, the old home first: a client on
          // the old set alone holds it there, one on both sets holds it on both (stores/shards.ts).
          const home = of(spec.shards[homeOf(spec.shards.map(shardIdentity), namespace, name)] ?? spec.shards[0]!);
          const previous = spec.previous;
          if (previous === undefined) return single(home, namespace, name);
          const old = of(previous[homeOf(previous.map(shardIdentity), namespace, name)] ?? previous[0]!);
          if (old === home) return single(home, namespace, name);
          const [o, h] = await Promise.all([single(old, namespace, name), single(home, namespace, name)]);
          const held = o.owner !== undefined ? o : h;
          const tokens = [o.token, h.token].filter((t): t is bigint => t !== undefined);
          const token =
            held.owner !== undefined && tokens.length > 0 ? tokens.reduce((a, b) => (a > b ? a : b)) : undefined;
          return { ...held, token };
        }
      }
    },
    async onRelease(listener) {
      await Promise.all(
        conns.map(async (c) => {
          // A connection in subscriber mode can send nothing else: a second one per Redis.
          // It needs the offline queue: PSUBSCRIBE sent while it still connects must wait, not fail.
          const sub = c.client instanceof Cluster ? c.client.duplicate() : c.client.duplicate(SUBSCRIBER_OPTIONS);
          c.subscriber = sub;
          sub.on('error', () => undefined); // reconnects on its own; reads report the outage
          sub.on('pmessage', (_pattern: string, channel: string, owner: string) => {
            const m = CHANNEL.exec(channel);
            if (m?.[1] !== undefined && m[2] !== undefined) listener(m[1], m[2], owner);
          });
          await sub.psubscribe(CHANNEL_PATTERN).catch(() => undefined);
        }),
      );
    },
    ready: () => (spec.kind === 'redlock' ? readyCount() >= quorum(conns.length) : readyCount() === conns.length),
    async close() {
      for (const c of conns) {
        c.subscriber?.disconnect();
        c.client.disconnect();
      }
      return Promise.resolve();
    },
  };
}
