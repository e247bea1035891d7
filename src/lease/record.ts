/**
 * The Lease as fencepost uses it, in pure functions: parse a coordination.k8s.io/v1 Lease into a
 * LockRecord, and build the Lease bodies for grant, renew and release. Every write built here is
 * sent with the resourceVersion it was built from, so each is a compare-and-swap.
 *
 * Layout of a lock's Lease:
 * - spec.holderIdentity: `<pod name>/<pod uid>` of the holder, absent when nobody holds it. The
 *   UID makes a re-created pod of the same name a different holder (a new term, a new token).
 * - spec.acquireTime / renewTime / leaseDurationSeconds / leaseTransitions: as client-go uses them.
 * - annotation fencepost.io/fencing-token: the token of the current (or last) grant. It only
 *   grows; it is the etcd high-water mark from which the Redis counter is re-floored.
 * - annotation fencepost.io/release: `Released` when the holder gave the lock up, so that the
 *   controller can tell a voluntary release (no lock-delay) from an expiry.
 */
import type { V1Lease } from '@kubernetes/client-node';
import { parseToken } from '../fencing/token.ts';

/** TOKEN_ANNOTATION holds the token of the Lease's current or last grant (decimal string). */
export const TOKEN_ANNOTATION = 'fencepost.io/fencing-token';
/** RELEASE_ANNOTATION records how the last holder left: `Released` (voluntary) or `Revoked`. */
export const RELEASE_ANNOTATION = 'fencepost.io/release';
/** LOCK_LABEL names the DistributedLock a Lease belongs to. */
export const LOCK_LABEL = 'fencepost.io/lock';

/** HolderRef identifies one incarnation of a holder pod. */
export interface HolderRef {
  readonly name: string;
  readonly uid: string;
}

/** LockRecord is what a lock's Lease says, parsed. */
export interface LockRecord {
  readonly holder: HolderRef | undefined;
  /** token is the highest token recorded on the Lease: the current holder's, or the last one's. */
  readonly token: bigint;
  readonly acquireTime: Date | undefined;
  readonly renewTime: Date | undefined;
  readonly leaseDurationSeconds: number | undefined;
  readonly transitions: number;
  /** released says how the last holder left, when nobody holds the Lease. */
  readonly released: 'Released' | 'Revoked' | undefined;
  readonly resourceVersion: string;
}

/** holderIdentity is the Lease's holderIdentity for a pod incarnation. */
export function holderIdentity(h: HolderRef): string {
  return `${h.name}/${h.uid}`;
}

/** parseHolderIdentity reverses holderIdentity; other spellings (not ours) yield undefined. */
export function parseHolderIdentity(id: string | undefined): HolderRef | undefined {
  if (id === undefined || id === '') return undefined;
  const slash = id.indexOf('/');
  if (slash <= 0 || slash === id.length - 1) return undefined;
  return { name: id.slice(0, slash), uid: id.slice(slash + 1) };
}

/** sameHolder compares two pod incarnations. */
export function sameHolder(a: HolderRef | undefined, b: HolderRef | undefined): boolean {
  return a !== undefined && b !== undefined && a.name === b.name && a.uid === b.uid;
}

/**
 * parseLease reads a Lease into a LockRecord. A missing or malformed token annotation reads as
 * the Lease's creation revision being unknown: it throws, because granting from an unknown floor
 * could reissue an old token.
 */
export function parseLease(lease: V1Lease): LockRecord {
  const ann = lease.metadata?.annotations ?? {};
  const tokenText = ann[TOKEN_ANNOTATION];
  if (tokenText === undefined) throw new Error(`Lease ${lease.metadata?.name ?? '?'} has no ${TOKEN_ANNOTATION} annotation`);
  const released = ann[RELEASE_ANNOTATION];
  const spec = lease.spec ?? {};
  return {
    holder: parseHolderIdentity(spec.holderIdentity),
    token: parseToken(tokenText, `Lease annotation ${TOKEN_ANNOTATION}`),
    acquireTime: spec.acquireTime !== undefined ? new Date(spec.acquireTime) : undefined,
    renewTime: spec.renewTime !== undefined ? new Date(spec.renewTime) : undefined,
    leaseDurationSeconds: spec.leaseDurationSeconds,
    transitions: spec.leaseTransitions ?? 0,
    released: released === 'Released' || released === 'Revoked' ? released : undefined,
    resourceVersion: lease.metadata?.resourceVersion ?? '',
  };
}

/**
 * renewFingerprint changes whenever the holder renews or the holder changes. The controller
 * restarts its expiry clock when it sees it change (client-go's observedRecord).
 */
export function renewFingerprint(r: LockRecord): string {
  return [r.holder !== undefined ? holderIdentity(r.holder) : '', r.renewTime?.toISOString() ?? '', r.transitions, r.token].join('|');
}

function withAnnotations(lease: V1Lease, set: Record<string, string | undefined>): V1Lease {
  const annotations: Record<string, string> = { ...(lease.metadata?.annotations ?? {}) };
  for (const [k, v] of Object.entries(set)) {
    if (v === undefined) delete annotations[k]; else annotations[k] = v;
  }
  return { ...lease, metadata: { ...lease.metadata, annotations } };
}

/** grantedLease is the body that hands the Lease to holder with token (one CAS write). */
export function grantedLease(lease: V1Lease, holder: HolderRef, token: bigint, leaseDurationSeconds: number, now: Date): V1Lease {
  const l = withAnnotations(lease, { [TOKEN_ANNOTATION]: token.toString(), [RELEASE_ANNOTATION]: undefined });
  return {
    ...l,
    spec: {
      ...l.spec,
      holderIdentity: holderIdentity(holder),
      leaseDurationSeconds,
      acquireTime: now,
      renewTime: now,
      leaseTransitions: (lease.spec?.leaseTransitions ?? 0) + 1,
    },
  };
}

/** renewedLease is the body a holder writes to renew (only valid while it is the holder). */
export function renewedLease(lease: V1Lease, now: Date): V1Lease {
  return { ...lease, spec: { ...lease.spec, renewTime: now } };
}

/**
 * releasedLease is the body that clears the holder and keeps the token annotation (the
 * high-water mark). `how` says whether the holder left on its own or was revoked.
 */
export function releasedLease(lease: V1Lease, how: 'Released' | 'Revoked'): V1Lease {
  const l = withAnnotations(lease, { [RELEASE_ANNOTATION]: how });
  const { holderIdentity: _h, acquireTime: _a, renewTime: _r, ...rest } = l.spec ?? {};
  return { ...l, spec: rest };
}
