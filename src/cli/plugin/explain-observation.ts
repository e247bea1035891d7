/**
 * The controller's Observation rebuilt from a `kubectl fencepost` snapshot, for explain.ts: the
 * plugin runs the controller's own decide() on it (see explain.ts for what differs and why).
 */
import type { V1Lease } from '@kubernetes/client-node';
import { ConditionType, Reason, findCondition } from '../../api/v1alpha1/conditions.ts';
import { resolveTimings, type DistributedLock } from '../../api/v1alpha1/distributedlock.ts';
import type { FencingState, Observation } from '../../controllers/distributedlock/decide.ts';
import { summarizePod } from '../../controllers/distributedlock/pods.ts';
import type { LockRecord } from '../../lease/record.ts';
import { timeMs } from './format.ts';
import type { LockSnapshot } from './snapshot.ts';

/**
 * observation is the controller's Observation rebuilt from a snapshot. observedAtMs, which the
 * controller takes from its own clock, is the wall-clock time the Lease last changed: its
 * renewTime while held, else its last write (managedFields), else now (a wait just begun — the
 * conservative reading).
 */
export function observation(s: LockSnapshot, record: LockRecord | undefined, nowMs: number): Observation {
  const lock = s.lock;
  return {
    lock,
    timings: resolveTimings(lock.spec),
    lease: record !== undefined ? { record, observedAtMs: observedAt(s.lease, record, nowMs) } : undefined,
    pods: s.pods.map(summarizePod),
    podsSynced: true,
    fencing: fencingOf(lock),
    requests: lock.status?.queue ?? [],
  };
}

function observedAt(lease: V1Lease | undefined, record: LockRecord, nowMs: number): number {
  if (record.holder !== undefined && record.renewTime !== undefined) return record.renewTime.getTime();
  const written = lastWrite(lease);
  return written !== undefined && written <= nowMs ? written : nowMs;
}

/** lastWrite: when the API server last recorded a write of the Lease (its managedFields times), in ms. */
export function lastWrite(lease: V1Lease | undefined): number | undefined {
  const times = (lease?.metadata?.managedFields ?? []).map((f) => timeMs(f.time)).filter((t) => t !== undefined);
  return times.length > 0 ? Math.max(...times) : undefined;
}

/**
 * fencingOf reads the fencing backend's state from the lock's conditions, as the controller last
 * reported it: Degraded=True means it could not issue tokens; Ready=False with reason InvalidSpec
 * means the lock asks for a backend the controller was started without.
 */
export function fencingOf(lock: DistributedLock): FencingState {
  const conditions = lock.status?.conditions;
  const degraded = findCondition(conditions, ConditionType.Degraded);
  const ready = findCondition(conditions, ConditionType.Ready);
  const named = /Fencing backend (Redis|Lease)\b/.exec(degraded?.message ?? '')?.[1];
  const backend = lock.spec.fencing?.backend ?? (named === 'Redis' || named === 'Lease' ? named : 'Lease');
  const notConfigured = ready?.status === 'False' && ready.reason === Reason.InvalidSpec;
  const down = degraded?.status === 'True' || notConfigured;
  return {
    backend,
    ready: !down,
    ...(down ? { detail: (notConfigured ? ready.message : degraded?.message) ?? 'not ready' } : {}),
    ...(notConfigured ? { notConfigured: true } : {}),
  };
}
