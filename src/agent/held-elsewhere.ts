/**
 * Whether a lock is held by other pods now (the agent's `ifHeld=fail`, acquire()'s and
 * `fencepost exec --if-held`'s decision), as the session's Lease watch sees it. The single-holder
 * rule is protocol/holder.ts's heldByAnother (AgentSession.otherHolder).
 *
 * "Held" is what the lock's Lease says: it names a holder. That is who the server granted the
 * lock to — in Election mode the elected pod, in Mutex mode the pod whose turn it is — whether or
 * not it is still renewing: a holder that died stays named until the controller expires it, and
 * the lock is held until then (nobody else can be granted it either).
 *
 * A Semaphore (spec.mode Semaphore, spec.permits N) is held when all N permits are: each of its
 * permit Leases 0…N−1 names another pod. While a permit is free (no Lease yet, or one naming no
 * holder) this pod would be granted one, so it is not held, whoever holds the others. Its anchor
 * Lease never names a holder, and the permit Lease a session follows is only the one it held or
 * saw last, so neither says it. N is read from the DistributedLock (the agent's Role may get it)
 * when asked with ifHeld `fail`.
 */
import type { DistributedLock } from '../api/v1alpha1/distributedlock.ts';
import { GROUP, PLURAL, VERSION } from '../api/v1alpha1/distributedlock.ts';
import type { HolderRef } from '../protocol/holder.ts';
import type { ApiClient } from '../transport/client.ts';
import { getCustomObject } from '../transport/resources.ts';
import type { AgentSession } from './agent-session.ts';

/**
 * HeldElsewhere is who holds a lock for ifHeld `fail`: one holder (Election, Mutex), or, for a
 * Semaphore, every permit's holder (`holder` is then the first of them).
 */
export interface HeldElsewhere {
  readonly holder: HolderRef;
  readonly permits?: { readonly of: number; readonly holders: readonly HolderRef[] };
}

/**
 * semaphorePermits is spec.permits of `lock` when it is a Semaphore, else undefined (an Election
 * or Mutex lock, or no lock of that name).
 */
export async function semaphorePermits(api: ApiClient, namespace: string, lock: string): Promise<number | undefined> {
  const obj = await getCustomObject<DistributedLock>(
    api,
    { group: GROUP, version: VERSION, plural: PLURAL },
    namespace,
    lock,
  );
  return obj?.spec.mode === 'Semaphore' ? obj.spec.permits : undefined;
}

/**
 * heldElsewhere: whether the lock is held by other pods now, as the session's watch sees it (see
 * the module comment); `permits` is {@link semaphorePermits} of the lock.
 */
export function heldElsewhere(
  session: Pick<AgentSession, 'otherHolder' | 'otherPermitHolders'>,
  permits: number | undefined,
): HeldElsewhere | undefined {
  if (permits === undefined) {
    const holder = session.otherHolder();
    return holder !== undefined ? { holder } : undefined;
  }
  const holders = session.otherPermitHolders(permits);
  const first = holders[0];
  return first !== undefined && holders.length >= permits
    ? { holder: first, permits: { of: permits, holders } }
    : undefined;
}

/** heldText says who holds it, for a message: "pod a" or "every one of its 2 permits (pods a, b)". */
export function heldText(h: HeldElsewhere): string {
  return h.permits === undefined
    ? `pod ${h.holder.name}`
    : `every one of its ${h.permits.of} permits (pods ${h.permits.holders.map((x) => x.name).join(', ')})`;
}
