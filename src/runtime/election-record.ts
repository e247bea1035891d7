/**
 * The leader Lease's record as the elector compares it (leaderelection.ts): the fields whose
 * change proves the holder alive, and the renewTime a renewal writes.
 */
import { MicroTime } from './micro-time.ts';
import type { V1Lease } from '@kubernetes/client-node';

/** ElectionRecord is client-go's LeaderElectionRecord: the fields whose change proves the holder is alive. */
export interface ElectionRecord {
  readonly holderIdentity: string;
  readonly leaseDurationSeconds: number | undefined;
  readonly acquireTime: string | undefined;
  readonly renewTime: string | undefined;
  readonly leaseTransitions: number | undefined;
}

export function recordOf(lease: V1Lease): ElectionRecord {
  const spec = lease.spec;
  return {
    holderIdentity: spec?.holderIdentity ?? '',
    leaseDurationSeconds: spec?.leaseDurationSeconds,
    acquireTime: timeKey(spec?.acquireTime),
    renewTime: timeKey(spec?.renewTime),
    leaseTransitions: spec?.leaseTransitions,
  };
}

export function sameRecord(a: ElectionRecord, b: ElectionRecord): boolean {
  return (
    a.holderIdentity === b.holderIdentity &&
    a.leaseDurationSeconds === b.leaseDurationSeconds &&
    a.acquireTime === b.acquireTime &&
    a.renewTime === b.renewTime &&
    a.leaseTransitions === b.leaseTransitions
  );
}

/**
 * timeKey is a comparable form of a MicroTime field. client-node types them as `V1MicroTime` but
 * deserialises them as the server's RFC 3339 string, so both forms occur; Dates are rendered the way
 * client-node sends them (six fractional digits).
 */
export function timeKey(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (value instanceof Date)
    return Number.isNaN(value.getTime()) ? 'Invalid Date' : new MicroTime(value.getTime()).toISOString();
  return undefined;
}

/**
 * renewTimeAfter is `now`, nudged 1 ms forward when it equals the previous renewTime (a stalled or
 * stepped-back wall clock), so that every renewal changes the record others watch.
 */
export function renewTimeAfter(now: Date, previous: unknown): MicroTime {
  const renew = new MicroTime(now.getTime());
  return timeKey(previous) === timeKey(renew) ? new MicroTime(now.getTime() + 1) : renew;
}
