/**
 * Mappers: Lease and Pod changes to the keys of the locks they concern, since the lock is the only
 * kind this controller reconciles. Synchronous and cheap; they read only the lock cache.
 */
import type { V1Lease, V1Pod } from '@kubernetes/client-node';
import type { DistributedLock } from '../../api/v1alpha1/distributedlock.ts';
import { LOCK_LABEL, lockOfHolderLabel } from '../../protocol/names.ts';
import type { ObjectKey } from '../../runtime/controller.ts';
import type { Cache } from './ports.ts';
import { locksSelecting, type Indexed } from './pod-index.ts';
import { matchesSelector } from './pods.ts';

/** leaseToLock: a lock's Lease carries the lock's name in its fencepost.io/lock label. */
export function leaseToLock(lease: V1Lease): ObjectKey[] {
  const lock = lease.metadata?.labels?.[LOCK_LABEL];
  const ns = lease.metadata?.namespace;
  return lock !== undefined && ns !== undefined ? [`${ns}/${lock}`] : [];
}

/**
 * podToLocks: every lock in the pod's namespace that selects it, and every lock it is marked as
 * holder of. With an indexed lock cache (pod-index.ts) only the locks indexed under one of the
 * pod's labels are tested, not every lock of the namespace.
 */
export function podToLocks(
  locks: Cache<DistributedLock> | (Cache<DistributedLock> & Indexed<DistributedLock>),
  pod: V1Pod,
): ObjectKey[] {
  const ns = pod.metadata?.namespace;
  if (ns === undefined) return [];
  const labels = pod.metadata?.labels ?? {};
  const keys = new Set<ObjectKey>();
  for (const k of Object.keys(labels)) {
    const lock = lockOfHolderLabel(k);
    if (lock !== undefined) keys.add(`${ns}/${lock}`);
  }
  if ('byIndex' in locks) {
    for (const lock of locksSelecting(locks, pod)) keys.add(`${ns}/${lock.metadata.name ?? ''}`);
    return [...keys];
  }
  for (const lock of locks.list(ns)) {
    if (matchesSelector(lock.spec.candidates.selector, labels)) keys.add(`${ns}/${lock.metadata.name ?? ''}`);
  }
  return [...keys];
}
