/**
 * The Lease as fencepost uses it, in pure functions: parse a coordination.k8s.io/v1 Lease into a
 * LockRecord, and build the Lease bodies for grant, renew and release. Every write built here is
 * sent with the resourceVersion it was built from, so each is a compare-and-swap. The names, keys,
 * holder identity and term timings these bodies carry are the protocol's (src/protocol/).
 *
 * Layout of a lock's Lease:
 * - spec.holderIdentity: `<pod name>/<pod uid>` of the holder, absent when nobody holds it. The
 *   UID makes a re-created pod of the same name a different holder (a new term, a new token).
 * - spec.acquireTime / renewTime / leaseDurationSeconds / leaseTransitions: as client-go uses them.
 * - annotation fencepost.io/fencing-token: the token of the current (or last) grant. It only
 *   grows; it is the etcd high-water mark from which the Redis counter is re-floored. Before the
 *   first grant it is absent, and the floor is the Lease's resourceVersion: an etcd revision,
 *   which is larger than every revision of an earlier Lease of the same name, so a lock deleted
 *   and created again does not reissue old tokens even when Redis lost its counter.
 * - annotations fencepost.io/renew-deadline-ms and fencepost.io/renew-period-ms: the timings of
 *   the current term, fixed at grant, so that the holder's agent needs nothing but the Lease.
 * - annotation fencepost.io/release: `Released` when the holder gave the lock up, `Expired` or
 *   `Terminated` when the controller revoked it, so that lock-delay applies after a revocation and not after a release;
 *   `Lost` on a Lease created again after the old one was deleted while held (or revoked because
 *   its lock is being deleted): nobody may be granted before a full lease duration has passed,
 *   since the old holder may not have seen the end of its term.
 * - annotation fencepost.io/completed-runs: the run ids completed by holders of this Lease (Mutex
 *   run-once), a JSON list of `{ runId, token, holder, completedAt }`, newest last, at most
 *   {@link MAX_COMPLETED_RUNS}. A holder appends its run ({@link completedLease}) in a
 *   compare-and-swap made while the Lease names it with the run's token; grants, renewals and
 *   releases copy the annotation along, so a holder granted after that write always reads it.
 */
import type { V1Lease, V1MicroTime } from '@kubernetes/client-node';
import { MicroTime } from '../runtime/micro-time.ts';
import { formatHandoverMark, parseHandoverMark, type HandoverMark } from '../protocol/handover.ts';
import { holderIdentity, parseHolderIdentity, type HolderRef } from '../protocol/holder.ts';
import { HANDOVER_MARK_ANNOTATION } from '../protocol/handover.ts';
import {
  COMPLETED_RUNS_ANNOTATION,
  GRANTED_REQUEST_ANNOTATION,
  LAST_HOLDER_ANNOTATION,
  LOCK_LABEL,
  leaseName,
  PERMIT_LABEL,
  permitLeaseName,
  RELEASE_ANNOTATION,
  RENEW_DEADLINE_ANNOTATION,
  RENEW_PERIOD_ANNOTATION,
  TOKEN_ANNOTATION,
  type ReleaseKind,
} from '../protocol/names.ts';
import type { TermTimings } from '../protocol/timings.ts';
import { TokenError, parseToken } from '../protocol/token.ts';

/** LockRecord is what a lock's Lease says, parsed. */
export interface LockRecord {
  readonly holder: HolderRef | undefined;
  /** token is the highest token recorded on the Lease (the current holder's, or the last one's); undefined before the first grant. */
  readonly token: bigint | undefined;
  /** renewDeadlineMs and renewPeriodMs are the current term's timings (undefined when never granted). */
  readonly renewDeadlineMs: number | undefined;
  readonly renewPeriodMs: number | undefined;
  readonly acquireTime: Date | undefined;
  readonly renewTime: Date | undefined;
  readonly leaseDurationSeconds: number | undefined;
  readonly transitions: number;
  /** released says how the last holder left, when nobody holds the Lease. */
  readonly released: ReleaseKind | undefined;
  /** lastHolder is the holder that released or lost the Lease (undefined while held). */
  readonly lastHolder: HolderRef | undefined;
  /**
   * handover: the controller's planned-handover mark (protocol/handover.ts), when the Lease has a
   * readable one: on a held Lease, the holder of that token is asked to drain and release; on a
   * Lease released `HandedOver`, the successor the next grant goes to.
   */
  readonly handover: HandoverMark | undefined;
  /**
   * preferredHolder: the Lease's spec.preferredHolder (KEP-4355 Coordinated Leader Election), set
   * by a trusted writer (a coordinator listed in the chart's leaseProtection.extraWriters): the
   * controller treats it as a planned handover to that pod (decide-handover.ts).
   */
  readonly preferredHolder: string | undefined;
  /** grantedRequest (Mutex): the request the current or last term answered ({@link GRANTED_REQUEST_ANNOTATION}). */
  readonly grantedRequest: string | undefined;
  /** completedRuns: the runs recorded on the Lease, newest last (see {@link parseCompletedRuns}). */
  readonly completedRuns: readonly CompletionEntry[];
  readonly resourceVersion: string;
}

/** CompletionEntry is one run recorded completed on a lock's Lease. */
export interface CompletionEntry {
  readonly runId: string;
  /** token: the fencing token of the term that did the run (and wrote the entry). */
  readonly token: bigint;
  /** holder: the name of the pod that completed the run. */
  readonly holder: string;
  /** completedAt: the completing agent's wall clock when it wrote the entry. */
  readonly completedAt: Date;
}

/** MAX_COMPLETED_RUNS bounds the Lease's completed-runs list and status.completedRuns (the CRD's maxItems). */
export const MAX_COMPLETED_RUNS = 32;

/**
 * COMPLETED_AT_TOLERANCE_MS: how far in the future (on the reader's wall clock) an entry's
 * completedAt may be and still count. Clocks of the cluster's nodes are assumed to agree within
 * it; an entry further ahead is refused (see {@link completionVerdict}).
 */
export const COMPLETED_AT_TOLERANCE_MS = 30_000;

/**
 * parseCompletedRuns reads the completed-runs annotation. An unreadable annotation reads as no
 * runs, and an unreadable entry (no run id, a malformed token, an unparsable time) is skipped:
 * only holders write it, through their agent, so garbage there is not a completion.
 */
export function parseCompletedRuns(text: string | undefined): CompletionEntry[] {
  if (text === undefined) return [];
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return [];
  }
  if (!Array.isArray(raw)) return [];
  const out: CompletionEntry[] = [];
  for (const e of raw as unknown[]) {
    if (e === null || typeof e !== 'object') continue;
    const { runId, token, holder, completedAt } = e as Record<string, unknown>;
    if (typeof runId !== 'string' || runId === '' || typeof token !== 'string' || typeof completedAt !== 'string')
      continue;
    let t: bigint;
    try {
      t = parseToken(token, 'completed-runs token');
    } catch {
      continue;
    }
    const at = Date.parse(completedAt);
    if (!Number.isFinite(at)) continue;
    out.push({ runId, token: t, holder: typeof holder === 'string' ? holder : '', completedAt: new Date(at) });
  }
  return out;
}

/** formatCompletedRuns is the annotation value of a list of entries (tokens as decimal strings). */
export function formatCompletedRuns(entries: readonly CompletionEntry[]): string {
  return JSON.stringify(
    entries.map((e) => ({
      runId: e.runId,
      token: e.token.toString(),
      holder: e.holder,
      completedAt: e.completedAt.toISOString(),
    })),
  );
}

/**
 * CompletionVerdict: whether an entry counts as a completed run — `ok`; `future`: its completedAt
 * is more than the tolerance ahead of the reader's clock; `token`: its token is above every token
 * the Lease has recorded (no term of this Lease can have written it).
 */
export type CompletionVerdict = 'ok' | 'future' | 'token';

/**
 * completionVerdict judges one entry of a Lease whose high-water token is `leaseToken`, at `now`
 * (the reader's wall clock). The agent's run-once gate and the controller's copy into
 * status.completedRuns use the same verdict, so a refused entry is refused everywhere.
 */
export function completionVerdict(e: CompletionEntry, leaseToken: bigint | undefined, now: Date): CompletionVerdict {
  if (leaseToken === undefined || e.token > leaseToken) return 'token';
  if (e.completedAt.getTime() > now.getTime() + COMPLETED_AT_TOLERANCE_MS) return 'future';
  return 'ok';
}

/** acceptedCompletions: the entries of a record that count (see {@link completionVerdict}), newest last. */
export function acceptedCompletions(r: LockRecord, now: Date): CompletionEntry[] {
  return r.completedRuns.filter((e) => completionVerdict(e, r.token, now) === 'ok');
}

/**
 * completedLease is the body that records `entry` on the Lease (one CAS write, sent by the holder
 * of `entry.token`'s term while the Lease names it). An earlier entry of the same run id is
 * replaced (it can only be one that does not count, or the run would not have been granted);
 * the list keeps the newest {@link MAX_COMPLETED_RUNS}.
 */
export function completedLease(lease: V1Lease, entry: CompletionEntry): V1Lease {
  const kept = parseCompletedRuns(lease.metadata?.annotations?.[COMPLETED_RUNS_ANNOTATION]).filter(
    (e) => e.runId !== entry.runId,
  );
  return withAnnotations(lease, {
    [COMPLETED_RUNS_ANNOTATION]: formatCompletedRuns([...kept, entry].slice(-MAX_COMPLETED_RUNS)),
  });
}

function positiveInt(text: string | undefined): number | undefined {
  if (text === undefined || !/^[1-9][0-9]{0,8}$/.test(text)) return undefined;
  return Number(text);
}

/**
 * parseLease reads a Lease into a LockRecord. A malformed token annotation throws (TokenError):
 * granting from a floor we cannot read could reissue an old token, so the lock stops instead.
 */
export function parseLease(lease: V1Lease): LockRecord {
  const ann = lease.metadata?.annotations ?? {};
  const tokenText = ann[TOKEN_ANNOTATION];
  const released = ann[RELEASE_ANNOTATION];
  const spec = lease.spec ?? {};
  return {
    holder: parseHolderIdentity(spec.holderIdentity),
    token: tokenText === undefined ? undefined : parseToken(tokenText, `Lease annotation ${TOKEN_ANNOTATION}`),
    renewDeadlineMs: positiveInt(ann[RENEW_DEADLINE_ANNOTATION]),
    renewPeriodMs: positiveInt(ann[RENEW_PERIOD_ANNOTATION]),
    acquireTime: spec.acquireTime !== undefined ? new Date(spec.acquireTime) : undefined,
    renewTime: spec.renewTime !== undefined ? new Date(spec.renewTime) : undefined,
    leaseDurationSeconds: spec.leaseDurationSeconds,
    transitions: spec.leaseTransitions ?? 0,
    released:
      released === 'Released' ||
      released === 'HandedOver' ||
      released === 'Expired' ||
      released === 'Terminated' ||
      released === 'Revoked' ||
      released === 'Lost'
        ? released
        : undefined,
    handover: parseHandoverMark(ann[HANDOVER_MARK_ANNOTATION]),
    preferredHolder:
      spec.preferredHolder !== undefined && spec.preferredHolder !== '' ? spec.preferredHolder : undefined,
    lastHolder: spec.holderIdentity === undefined ? parseHolderIdentity(ann[LAST_HOLDER_ANNOTATION]) : undefined,
    grantedRequest: ann[GRANTED_REQUEST_ANNOTATION],
    completedRuns: parseCompletedRuns(ann[COMPLETED_RUNS_ANNOTATION]),
    resourceVersion: lease.metadata?.resourceVersion ?? '',
  };
}

/**
 * parseLeaseTolerant reads a Lease as the controller must even when someone wrote a token
 * annotation that is no token (any principal with `leases update` can): the record as if the
 * annotation were absent — its floor is then the Lease's resourceVersion, an etcd revision above
 * every token the Lease backend issued on it, and the controller adds status.fencingToken and the
 * Redis counter — and the text found, for the controller to report. parseLease, which throws, is
 * what the agent uses: an agent never takes up a term whose token it cannot read.
 */
export function parseLeaseTolerant(lease: V1Lease): { readonly record: LockRecord; readonly malformedToken?: string } {
  const text = lease.metadata?.annotations?.[TOKEN_ANNOTATION];
  try {
    return { record: parseLease(lease) };
  } catch (err) {
    if (text === undefined || !(err instanceof TokenError)) throw err;
    return { record: parseLease(withAnnotations(lease, { [TOKEN_ANNOTATION]: undefined })), malformedToken: text };
  }
}

/**
 * renewFingerprint changes whenever the holder renews or the holder changes. The controller
 * restarts its expiry clock when it sees it change (client-go's observedRecord).
 */
export function renewFingerprint(r: LockRecord): string {
  return [
    r.holder !== undefined ? holderIdentity(r.holder) : '',
    r.renewTime?.toISOString() ?? '',
    r.transitions,
    r.token ?? '',
  ].join('|');
}

/**
 * tokenFloor is the value every new token must exceed: the recorded high-water mark, or before
 * the first grant the Lease's resourceVersion (an etcd revision; comparable integers since
 * Kubernetes 1.35, KEP-5504). Throws when neither is readable.
 */
export function tokenFloor(r: LockRecord): bigint {
  if (r.token !== undefined) return r.token;
  if (!/^[0-9]{1,19}$/.test(r.resourceVersion))
    throw new Error(
      `Lease resourceVersion ${JSON.stringify(r.resourceVersion)} is not an integer; cannot seed the token floor`,
    );
  return BigInt(r.resourceVersion);
}

/** leaseDurationSecondsFor rounds a lease duration up to the Lease API's whole seconds. */
export function leaseDurationSecondsFor(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}

function withAnnotations(lease: V1Lease, set: Record<string, string | undefined>): V1Lease {
  const annotations: Record<string, string> = { ...(lease.metadata?.annotations ?? {}) };
  for (const [k, v] of Object.entries(set)) {
    if (v === undefined) delete annotations[k];
    else annotations[k] = v;
  }
  return { ...lease, metadata: { ...lease.metadata, annotations } };
}

/** microTime: Lease times are metav1.MicroTime, which the API server parses only with six fractional digits. */
export function microTime(d: Date): V1MicroTime {
  return new MicroTime(d.getTime());
}

/** grantedLease is the body that hands the Lease to holder with token (one CAS write); `request`: the Mutex request it answers. */
export function grantedLease(
  lease: V1Lease,
  holder: HolderRef,
  token: bigint,
  timings: TermTimings,
  now: Date,
  request?: string,
): V1Lease {
  const l = withAnnotations(lease, {
    [TOKEN_ANNOTATION]: token.toString(),
    [GRANTED_REQUEST_ANNOTATION]: request, // Mutex: the request this term answers (undefined: none)
    [RENEW_DEADLINE_ANNOTATION]: String(timings.renewDeadlineMs),
    [RENEW_PERIOD_ANNOTATION]: String(timings.renewPeriodMs),
    [RELEASE_ANNOTATION]: undefined,
    [LAST_HOLDER_ANNOTATION]: undefined,
    [HANDOVER_MARK_ANNOTATION]: undefined, // a new term: any handover of the last one is over
  });
  return {
    ...l,
    spec: {
      ...l.spec,
      holderIdentity: holderIdentity(holder),
      leaseDurationSeconds: leaseDurationSecondsFor(timings.leaseDurationMs),
      acquireTime: microTime(now),
      renewTime: microTime(now),
      leaseTransitions: (lease.spec?.leaseTransitions ?? 0) + 1,
    },
  };
}

/**
 * LostTerm is what the controller still knows of a held term whose Lease is gone (from the lock's
 * status or the holder pod's marks): the holder that may still believe it holds the lock, and the
 * term's lease length.
 */
export interface LostTerm {
  /** holder: the pod that may still believe, when known. */
  readonly holder: HolderRef | undefined;
  readonly leaseDurationSeconds: number;
}

/**
 * newLease is the body of a lock's Lease, owned by the lock (so it goes with it). When `lost` says
 * an earlier Lease of the lock was deleted while held, the new one is released as `Lost` with that
 * term's lease length, so that the first grant waits a full lease duration for the old holder to
 * step down (`lost.holder`, when known, is recorded as the last holder). Tokens need nothing carried over: before the first grant the floor is the new
 * Lease's resourceVersion, an etcd revision above every token issued on the old one.
 *
 * With `permit`, the body of a Semaphore's permit Lease instead: `dlock.<lock>.<permit>`, labelled
 * with the lock and the permit (permitLeaseName, PERMIT_LABEL). Its token floor comes from the
 * lock's anchor Lease, never from its own resourceVersion (decide-semaphore.ts).
 */
export function newLease(
  lock: { readonly name: string; readonly uid: string; readonly apiVersion: string; readonly kind: string },
  lost: LostTerm | undefined,
  permit?: number,
): V1Lease {
  return {
    metadata: {
      name: permit === undefined ? leaseName(lock.name) : permitLeaseName(lock.name, permit),
      labels: { [LOCK_LABEL]: lock.name, ...(permit === undefined ? {} : { [PERMIT_LABEL]: String(permit) }) },
      ...(lost !== undefined
        ? {
            annotations: {
              [RELEASE_ANNOTATION]: 'Lost',
              ...(lost.holder !== undefined ? { [LAST_HOLDER_ANNOTATION]: holderIdentity(lost.holder) } : {}),
            },
          }
        : {}),
      ownerReferences: [
        { apiVersion: lock.apiVersion, kind: lock.kind, name: lock.name, uid: lock.uid, controller: true },
      ],
    },
    spec: lost !== undefined ? { leaseDurationSeconds: lost.leaseDurationSeconds } : {},
  };
}

/**
 * raisedAnchor is the body that raises a Semaphore's anchor Lease (the lock's own Lease) to `token`,
 * the token about to be written to a permit Lease: the anchor's token annotation is the lock-wide
 * high-water mark, and raising it in a compare-and-swap before the permit is written is what
 * makes tokens strictly increasing across permits (notes D2). Throws when `token` is not above
 * the anchor's token: the caller took it from a floor below it, and must decide again.
 */
export function raisedAnchor(anchor: V1Lease, token: bigint): V1Lease {
  const current = anchor.metadata?.annotations?.[TOKEN_ANNOTATION];
  if (current !== undefined && parseToken(current) >= token)
    throw new Error(`Token ${token} is not above the anchor's high-water mark ${current}; not raised`);
  return withAnnotations(anchor, { [TOKEN_ANNOTATION]: token.toString() });
}

/**
 * handoverMarkedLease is the body that puts the controller's handover mark on a held Lease (or,
 * with `mark` undefined, removes it). Nothing else changes: the holder keeps renewing.
 */
export function handoverMarkedLease(lease: V1Lease, mark: HandoverMark | undefined): V1Lease {
  return withAnnotations(lease, {
    [HANDOVER_MARK_ANNOTATION]: mark !== undefined ? formatHandoverMark(mark) : undefined,
  });
}

/** renewedLease is the body a holder writes to renew (only valid while it is the holder). */
export function renewedLease(lease: V1Lease, now: Date): V1Lease {
  return { ...lease, spec: { ...lease.spec, renewTime: microTime(now) } };
}

/**
 * releasedLease is the body that clears the holder and keeps the token annotation (the
 * high-water mark). `how` says whether the holder left on its own or was revoked.
 */
export function releasedLease(lease: V1Lease, how: ReleaseKind): V1Lease {
  const l = withAnnotations(lease, {
    [RELEASE_ANNOTATION]: how,
    [LAST_HOLDER_ANNOTATION]: lease.spec?.holderIdentity,
    // The handover mark stays (only the controller writes it; the agent admission policy refuses
    // an agent's change of it): it names the successor only after a `HandedOver` release, and the
    // next grant removes it.
  });
  const { holderIdentity: _h, acquireTime: _a, renewTime: _r, ...rest } = l.spec ?? {};
  return { ...l, spec: rest };
}
