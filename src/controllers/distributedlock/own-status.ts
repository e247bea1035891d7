/**
 * The lock's status as this process last wrote it. A status write reaches the lock cache a moment
 * later; a reconcile that runs in between (the pod mark's or the Lease's event of the same grant)
 * reads the lock with the status it sent (withOwnStatus), so that it computes status from what
 * the server holds — conditions keep the transition times already written — rather than from the
 * cache's older copy, where a condition new to it would be stamped with a later second and the
 * status sent again. Once the cache shows any other status (ours, or another writer's), or after
 * `ttlMs`, the cache is the truth again.
 */
import type { DistributedLock, DistributedLockStatus } from '../../api/v1alpha1/distributedlock.ts';
import type { LockMemory } from './memory.ts';

/** withOwnStatus is `lock` with the status our last write sent, while the cache still shows what that write replaced. */
export function withOwnStatus(m: LockMemory, lock: DistributedLock, nowMs: number): DistributedLock {
  const w = m.statusWritten;
  if (w === undefined) return lock;
  if (stableJson(lock.status ?? {}) === w.base && nowMs < w.untilMs)
    return { ...lock, status: structuredClone(w.status) };
  m.statusWritten = undefined;
  return lock;
}

/**
 * statusPatch is the merge patch from `lock.status` (the cache's, or our own last write's) to
 * `next`, undefined when nothing changes; `done` records the write once it succeeded.
 */
export function statusPatch(
  m: LockMemory,
  lock: DistributedLock,
  next: DistributedLockStatus,
): { readonly patch: Record<string, unknown>; done(nowMs: number, ttlMs: number): void } | undefined {
  const prev = lock.status ?? {};
  const was = stableJson(prev);
  if (was === stableJson(next)) return undefined;
  // What the cache shows under this write: if `prev` is our own last write, still what that one replaced.
  const last = m.statusWritten;
  const base = last !== undefined && stableJson(last.status) === was ? last.base : was;
  // A merge patch only adds and changes keys; keys that disappeared are sent as null.
  const patch: Record<string, unknown> = { ...next };
  for (const k of Object.keys(prev)) if (!(k in next)) patch[k] = null;
  m.statusWritten = undefined; // a failed write is sent again
  return {
    patch,
    done: (nowMs, ttlMs) => {
      m.statusWritten = { base, status: structuredClone(next), untilMs: nowMs + ttlMs };
    },
  };
}

/** stableJson serialises with sorted keys, for change detection. */
function stableJson(v: unknown): string {
  return JSON.stringify(v, (_k, val: unknown) =>
    val !== null && typeof val === 'object' && !Array.isArray(val)
      ? Object.fromEntries(
          Object.entries(val as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
        )
      : val,
  );
}
