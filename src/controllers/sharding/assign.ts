/**
 * Which controller replica acts for which lock, as pure functions: a lock belongs to one of a fixed
 * number of shards (a stable hash of its namespace/name), and the shards are dealt to the live
 * replicas by a deterministic assignment that every replica computes alike from the same member
 * list. Nothing here is safety: a replica acts for a shard only while it holds that shard's Lease
 * (shard-manager.ts), and every grant is a compare-and-swap on the lock's own Lease. A brief
 * disagreement between replicas' member lists costs time (a shard nobody campaigns for, or two
 * that campaign for one), never a second holder.
 */
import { shardFor } from '../../protocol/placement.ts';

/** shardIds are the placement identities of shards 0..shards-1 (the strings the hash weighs). */
function shardIds(shards: number): readonly string[] {
  const cached = idCache.get(shards);
  if (cached !== undefined) return cached;
  const ids = Array.from({ length: shards }, (_, i) => `shard-${i}`);
  idCache.set(shards, ids);
  return ids;
}
const idCache = new Map<number, readonly string[]>();

/**
 * lockShard is the shard (0-based, below `shards`) of the lock `namespace/name`: rendezvous hashing
 * over the shard numbers, the same placement the Redis shards use. It depends on nothing but the
 * key and the shard count, so every replica, and every restart, agrees; changing the count moves
 * about 1/N of the locks per shard added or removed.
 */
export function lockShard(key: string, shards: number): number {
  if (shards <= 1) return 0;
  return shardFor(shardIds(shards), key);
}

/**
 * assignShards deals shards 0..shards-1 to `members` (stable replica names; order and duplicates
 * do not matter) and returns, per shard, the member it is assigned to (undefined when there are no
 * members).
 *
 * Bounded-load rendezvous: shards are taken in order, and each goes to the member that ranks it
 * highest among those still below their share — floor(shards / members), and one more for the
 * first (shards mod members) members to reach it. So every member gets floor or ceil of an even
 * share, the result depends on the member set alone, and a member that joins or leaves moves few
 * shards besides its own share (the members keep most of theirs).
 */
export function assignShards(shards: number, members: readonly string[]): (string | undefined)[] {
  const set = [...new Set(members)].sort();
  const out: (string | undefined)[] = Array.from({ length: shards }, () => undefined);
  if (set.length === 0) return out;
  const floor = Math.floor(shards / set.length);
  let bigLeft = shards % set.length; // how many members may still take floor + 1
  const load = new Map(set.map((m) => [m, 0]));
  for (let s = 0; s < shards; s++) {
    const open = set.filter((m) => {
      const n = load.get(m) ?? 0;
      return n < floor || (n === floor && bigLeft > 0);
    });
    const chosen = open[shardFor(open, `shard-${s}`)];
    if (chosen === undefined) continue; // unreachable: the shares add up to shards
    const n = (load.get(chosen) ?? 0) + 1;
    if (n > floor) bigLeft--;
    load.set(chosen, n);
    out[s] = chosen;
  }
  return out;
}

/** shardsOf is the shards `member` is assigned in `assignment` (from assignShards), ascending. */
export function shardsOf(assignment: readonly (string | undefined)[], member: string): number[] {
  const mine: number[] = [];
  for (const [s, m] of assignment.entries()) if (m === member) mine.push(s);
  return mine;
}
