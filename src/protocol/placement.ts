/**
 * Placement of a key on one of several shards by rendezvous (highest-random-weight) hashing of
 * the shard's identity and the key: stable while the shard set is, and a change of the set moves
 * only the keys of the shards added or removed (about 1/N of them), never the others. Shared by
 * the controller's fencing counters (fencing/shards.ts) and the sharded Redis store
 * (stores/shards.ts), which must agree with every other client of the store on where a lock is.
 * Pure.
 */

/** fnv1a32: the 32-bit FNV-1a hash of a string's UTF-16 code units (placement only, not security). */
function fnv1a32(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  // A final avalanche (murmur3's fmix32): FNV alone weighs the last characters too little for HRW.
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b) >>> 0;
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35) >>> 0;
  h ^= h >>> 16;
  return h >>> 0;
}

/** shardFor: the index in `shards` (identities) that key is placed on; ties go to the lower identity. */
export function shardFor(shards: readonly string[], key: string): number {
  let best = -1;
  let bestWeight = -1;
  for (const [i, id] of shards.entries()) {
    const w = fnv1a32(`${id}\u0000${key}`);
    const prev = shards[best];
    if (w > bestWeight || (w === bestWeight && prev !== undefined && id < prev)) {
      best = i;
      bestWeight = w;
    }
  }
  return best;
}
