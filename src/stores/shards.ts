/**
 * The sharded Redis store (`redis+shards://h1,h2,h3`): several independent Redis, each lock on one
 * of them, chosen by rendezvous hashing of `namespace/name` over the shards' identities
 * (protocol/placement.ts) — so that one Redis is not every lock's bottleneck. On its shard a lock
 * is an ordinary single-Redis lock (redis/lock-backend.ts): same keys, scripts and tokens.
 *
 * A change of the shard set moves some locks to another shard, and a lock must never be held on
 * two shards at once, nor its tokens restart on the new shard below the old one's. So a change
 * rolls out in two steps, with the set before it named as `?previous=`:
 * 1. every client moves to `redis+shards://NEW?previous=OLD`: a lock whose home differs between
 *    the two sets is then taken on BOTH homes, as a Redlock of two masters that needs both
 *    (redlock/quorum.ts: the token is the larger counter, raised on both). A client still on OLD
 *    alone takes it on the old home, which every step-1 client also needs: one holder. Tokens
 *    continue from the old home's counter, and step-1 grants raise the new home's to match.
 * 2. once no client runs with OLD alone, every client moves to `redis+shards://NEW`: a lock is then
 *    taken on its new home, which every step-1 client also needs: one holder; its counter stands at
 *    or above every token issued for the lock since step 1.
 * A lock therefore moves while held safely, at the price of a second round trip for moved locks
 * during the rollout. A waiter for a moved lock hears a release by an OLD-only client on one home
 * only, fewer than the two the Redlock wake needs: it finds the release by its backoff (≤ 2 s).
 */
import { shardFor } from '../protocol/placement.ts';
import type { TimerClock } from '../runtime/clock.ts';
import { lockKeys } from './redis/keys.ts';
import { redisLockBackend, type StoreScripts } from './redis/lock-backend.ts';
import { masterPort, type MasterScripts } from './redlock/master-port.ts';
import { redlockBackend } from './redlock/quorum.ts';
import type { LockBackend } from './store.ts';
import type { RedisTarget } from './url.ts';

/** shardIdentity: what a shard is for placement — host, port and database, not the credentials. */
export function shardIdentity(t: RedisTarget): string {
  if (t.mode !== 'standalone') throw new TypeError('a shard is one Redis');
  return `${t.endpoint.host.toLowerCase()}:${t.endpoint.port}/${t.db}`;
}

/** homeOf: the shard (index into `ids`) lock `namespace/name` is placed on. */
export function homeOf(ids: readonly string[], namespace: string, name: string): number {
  return shardFor(ids, `${namespace}/${name}`);
}

/** Shard is one shard's scripts, as a single Redis and as a Redlock master. */
export interface Shard {
  readonly id: string;
  readonly scripts: StoreScripts;
  readonly master: MasterScripts;
}

/**
 * shardedLock: the backend of lock `namespace/name` — its home shard's single-Redis lock, or,
 * while a change rolls out and its home moved, a lock on both homes (the module's doc says why).
 */
export function shardedLock(
  shards: readonly Shard[],
  previous: readonly Shard[] | undefined,
  namespace: string,
  name: string,
  clock: TimerClock,
  display: string,
): LockBackend {
  const keys = lockKeys(namespace, name);
  const home =
    shards[
      homeOf(
        shards.map((s) => s.id),
        namespace,
        name,
      )
    ];
  if (home === undefined) throw new Error(`${display}: no shards`);
  const old =
    previous !== undefined
      ? previous[
          homeOf(
            previous.map((s) => s.id),
            namespace,
            name,
          )
        ]
      : undefined;
  if (old === undefined || old.id === home.id)
    return redisLockBackend(home.scripts, keys, `${display}, shard ${home.id}`);
  return redlockBackend([masterPort(old.master, keys), masterPort(home.master, keys)], { clock });
}
