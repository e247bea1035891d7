/**
 * The Redis keys of one store lock. The fencing counter is the controller's own key
 * (fencing/redis-fence.ts fenceCounterKey: `fencepost:fence:<namespace>/<name>`), so a lock's
 * tokens continue when it moves between the controller's grants and a Redis store. The holder
 * key carries that counter key as a Redis Cluster hash tag — `fencepost:lock:{fencepost:fence:<ns>/<name>}`
 * — and so does the epoch key, so that the three keys hash to one slot and one script may touch both on a Cluster too (a key
 * with no braces hashes whole; a key with a tag hashes its tag; the tag is the counter key). Lock
 * and namespace names are DNS labels (checked before this is called), so no `{`, `}` or `/` of
 * theirs can change what is hashed or climb out of the namespace's prefix. None of these keys
 * starts with the guards' reserved prefix `fencepost:guard:`.
 */
import { fenceCounterKey } from '../../protocol/names.ts';

/** LockKeys are the keys and the release channel of one lock. */
export interface LockKeys {
  /** holder: the key whose value is the current owner id (SET NX PX). */
  readonly holder: string;
  /** counter: the fencing counter (never deleted, never given a TTL). */
  readonly counter: string;
  /**
   * epoch: the replication ID (INFO replication master_replid) of the Redis master that last
   * issued a token for this lock, new whenever a node becomes a master (fence-next.lua
   * fence_epoch): when another one issues the next token (a failover, a failback, a restart), the
   * counter jumps by 1,000 and the token is floored at the clock.
   */
  readonly epoch: string;
  /** channel: where a release is published, for waiters. */
  readonly channel: string;
}

/** lockKeys names the keys of lock `name` in `namespace`. */
export function lockKeys(namespace: string, name: string): LockKeys {
  const counter = fenceCounterKey(namespace, name);
  return {
    holder: `fencepost:lock:{${counter}}`,
    counter,
    epoch: `fencepost:epoch:{${counter}}`,
    channel: `fencepost:released:${namespace}/${name}`,
  };
}
