/**
 * Over 450 lines: one decision table for the one-Lease kinds, whose branches read only together.
 *
 * decide — the pure heart of the lock controller: from what was observed, and the controller's
 * own monotonic `nowMs`, which actions bring the world to the spec. No I/O, no clock reads.
 *
 * Each action is derived from the observation alone, never from "was the previous step done", so
 * a crash between actions leaves a state that the next reconcile finishes: a Lease granted but its pod not yet labelled
 * is labelled next time; a token taken from Redis but never written to the Lease is a gap.
 *
 * Safety rule (DESIGN "The protocol"): a held Lease is taken from its holder only when
 * - the controller has watched it for a full lease duration without seeing it renewed (observed
 *   time, not the Lease's renewTime against our wall clock; a restarted controller waits a full
 *   duration again, since its observedAt starts at its first sighting), or
 * - the kubelet reported every container of the holder pod terminated (and handoff.onPodTerminated;
 *   see allContainersTerminated in pods.ts: a native sidecar agent still running counts as running).
 * A pod's phase is no such report: the pod GC marks the pods of a deleted or out-of-service node
 * Failed while their processes may still run there. Such a holder, and one whose pod merely
 * vanished (force deletion, node loss), waits for expiry.
 *
 * Lock-delay (spec.lockDelaySeconds) follows every involuntary end of a term — expiry and a
 * terminated holder alike — before the next grant; only a voluntary release skips it.
 */
import { ConditionType, Reason } from '../../api/v1alpha1/conditions.ts';
import {
  DEFAULT_HANDOFF_ON_POD_TERMINATED,
  type DistributedLock,
  type QueuedRequest,
  type Timings,
} from '../../api/v1alpha1/distributedlock.ts';
import { leaseDurationSecondsFor, parseLease, tokenFloor, type LockRecord, type LostTerm } from '../../lease/record.ts';
import { sameHolder, type HolderRef } from '../../protocol/holder.ts';
import { podKeys, type PodKeys } from '../../protocol/names.ts';
import { termTimingsOf } from '../../protocol/timings.ts';
import { MAX_TOKEN, tokenOrUndefined } from '../../protocol/token.ts';
import { forceReleaseStep, handoverStep, handoverTarget, type HandoverAction } from './decide-handover.ts';
import { modeOf } from './decide-mode.ts';
import { isCandidate, type PodSummary } from './pods.ts';

/** LeaseView is the lock's Lease as observed, with when this controller saw its renew record change. */
export interface LeaseView {
  readonly record: LockRecord;
  /** observedAtMs: our monotonic time when the Lease's renew fingerprint last changed (or was first seen). */
  readonly observedAtMs: number;
}

/** FencingState says whether new tokens can be issued right now. */
export interface FencingState {
  readonly backend: 'Redis' | 'Lease';
  readonly ready: boolean;
  /** detail: why it is not ready (for conditions and Events). */
  readonly detail?: string;
  /**
   * notConfigured: the spec asks for a backend the controller was started without (Redis with no
   * --redis-url). The API server cannot reject such a spec and no retry fixes it; only a spec
   * change or a controller restarted with the backend does.
   */
  readonly notConfigured?: boolean;
}

/** Observation is everything decide needs, gathered by observe (I/O) for one lock. */
export interface Observation {
  readonly lock: DistributedLock;
  readonly timings: Timings;
  readonly lease: LeaseView | undefined;
  /** pods: pods of the lock's namespace that it selects or that carry its holder label/annotations. */
  readonly pods: readonly PodSummary[];
  /** podsSynced: the pod cache has synced; until it has, nothing is done on the absence of a pod. */
  readonly podsSynced: boolean;
  readonly fencing: FencingState;
  /**
   * requests: Mutex mode, the controller's record of the queue — the requests in the order it
   * first saw them (status.queue, or this process's own newer copy; see nextQueue in pods.ts).
   * It, not the time a pod wrote in its request annotation, orders the grants. Absent: none.
   */
  readonly requests?: readonly QueuedRequest[];
  /** wallNowMs: the controller's wall clock at observation (epoch ms), for how long pods have been Ready (preemption). */
  readonly wallNowMs?: number;
  /** handoverMarkSeenAtMs: our monotonic time when we first saw the Lease's current handover mark (undefined: none). */
  readonly handoverMarkSeenAtMs?: number;
  /**
   * grantFailure: why this process's last attempt to grant the lock failed (undefined: it did not
   * fail, or a grant succeeded since), for the Ready condition only; decide does not read it.
   */
  readonly grantFailure?: string;
  /** malformedToken: the Lease's token annotation as found when it is no token (parseLeaseTolerant); undefined otherwise. */
  readonly malformedToken?: string;
  /**
   * finalized: when the controller's finalizer came onto the lock, which is the durable record that
   * a Lease of this lock may exist (it goes on before any Lease is created, and stays until the
   * Lease is gone). `now`: this reconcile added it, under a precondition that it was absent, so no
   * Lease was ever created for this lock and a missing one can be created already granted, in one
   * write. `before`: it was there, so a missing Lease may have existed and had a holder (lostTerm).
   * Undefined: not known (then status.leaseName is the record, as it was before the finalizer was).
   */
  readonly finalized?: 'now' | 'before';
}

/** GrantCause says why the lock is being (re)granted. */
export type GrantCause = 'Vacant' | 'Released' | 'HandedOver' | 'ForceReleased' | 'Expired' | 'HolderTerminated';

/** Action is one idempotent step toward the spec. */
export type Action =
  /** CreateLease: create the lock's Lease; `lost` when an earlier one was deleted while held. */
  | { readonly type: 'CreateLease'; readonly lost: LostTerm | undefined }
  /**
   * Grant: take a token above `floor` from the fencing backend, then CAS the Lease to `to`; with
   * `create`, there is no Lease yet and the grant creates it (a create is a compare-and-swap on
   * absence: it fails if someone made the Lease meanwhile).
   */
  | {
      readonly type: 'Grant';
      readonly create?: true;
      readonly to: HolderRef;
      readonly previous: HolderRef | undefined;
      readonly cause: GrantCause;
      readonly floor: bigint;
      /** request (Mutex): the `to` pod's request annotation value, recorded on the Lease (GRANTED_REQUEST_ANNOTATION). */
      readonly request?: string;
    }
  /** Revoke: CAS the holder away (expired or terminated) when nobody can take over yet. */
  | { readonly type: 'Revoke'; readonly holder: HolderRef; readonly cause: 'Expired' | 'HolderTerminated' }
  | { readonly type: 'MarkHolderPod'; readonly pod: HolderRef; readonly token: bigint }
  | { readonly type: 'UnmarkPod'; readonly pod: HolderRef }
  /** MarkHandover (a Lease write) and AnswerHandover (a lock metadata write): see decide-handover.ts. */
  | HandoverAction;

/** Waiting says why there is no holder and no grant this time. */
export type Waiting =
  | 'NoCandidates'
  | 'LockDelay'
  | 'LeaseLost'
  | 'TamperedTerm'
  | 'LeaseNotRecorded'
  | 'TokenRegressed'
  | 'FencingUnavailable'
  | 'CacheNotSynced';

/** Decision is what to do now, and when to look again. */
export interface Decision {
  readonly actions: readonly Action[];
  /** requeueAfterMs: when time alone will change the decision (expiry, end of lock-delay). */
  readonly requeueAfterMs: number;
  /** holder: the holder that stays (undefined when there is none or it is being replaced). */
  readonly holder: HolderRef | undefined;
  /** expiresInMs: for a holder that stays, how long until this controller would expire it. */
  readonly expiresInMs: number | undefined;
  readonly waiting: Waiting | undefined;
  /**
   * candidates: the pods that may be granted next — Election: every eligible pod, highest
   *   priority (fencepost.io/priority) first, then oldest first;
   * Mutex: the eligible pods that asked for the lock, first come first served (mutexOrder).
   */
  readonly candidates: readonly PodSummary[];
  /** queue: Mutex mode, requesters waiting behind the holder; 0 in Election mode. */
  readonly queue: number;
  /** tampered: the Lease's token is below a token issued before, or no token (see tokenTamper); undefined otherwise. */
  readonly tampered?: TokenTamper;
}

/**
 * TokenTamper is what decide found when the Lease's fencing-token annotation is below the last
 * token issued (status.fencingToken), or is no token at all: someone other than the controller
 * wrote it.
 */
export interface TokenTamper {
  /** leaseToken: the value found on the Lease (annotation fencepost.io/fencing-token); undefined when it is no token. */
  readonly leaseToken: bigint | undefined;
  /** malformed: the annotation's text when it is no token (someone wrote it); undefined otherwise. */
  readonly malformed?: string;
  /** statusToken: status.fencingToken, the last token the controller recorded issuing (undefined: none yet). */
  readonly statusToken: bigint | undefined;
  /**
   * revision: with the Lease backend (or a malformed annotation), the Lease's resourceVersion, an
   * etcd revision: every token that backend issued on this Lease is at most the revision of the
   * write that recorded it, so a token issued after status was last written (a crash between the
   * grant and the status write) is below it too. Undefined with the Redis backend, whose counter
   * is above every token it issued.
   */
  readonly revision: bigint | undefined;
  /** floor: the largest of them, which the next grant's token is above. */
  readonly floor: bigint;
}

/** describeTamper: what was found on the Lease, for messages: `5, below status.fencingToken 9` or `"x", which is not a token`. */
export function describeTamper(t: TokenTamper): string {
  return t.malformed !== undefined
    ? `${JSON.stringify(t.malformed)}, which is not a token`
    : `${String(t.leaseToken)}, below status.fencingToken ${String(t.statusToken)}`;
}

/** RESYNC_MS is the safety resync when nothing time-driven is pending (events do the real work). */
export const RESYNC_MS = 5 * 60_000;
/** EXPIRY_MARGIN_MS: look again just after expiry, not just before it. */
export const EXPIRY_MARGIN_MS = 10;
/** FENCING_RETRY_MS: how soon to look again while a grant waits for the fencing backend. */
export const FENCING_RETRY_MS = 1000;
/** NOT_SYNCED_RETRY_MS: how soon to look again while the pod cache is still filling. */
export const NOT_SYNCED_RETRY_MS = 500;

/**
 * decide returns the actions for one lock at monotonic time nowMs. Pure and synchronous. When the
 * Lease's token was lowered or made unreadable (tokenTamper), the decision says so in `tampered`,
 * whatever it does.
 */
export function decide(obs: Observation, nowMs: number): Decision {
  const dec = decideLock(obs, nowMs);
  const tampered = obs.lease !== undefined && obs.podsSynced ? tokenTamper(obs, obs.lease.record) : undefined;
  return tampered !== undefined ? { ...dec, tampered } : dec;
}

function decideLock(obs: Observation, nowMs: number): Decision {
  const eligible = obs.pods.filter((p) => isCandidate(p, obs.lock.spec.candidates.selector));
  const mode = modeOf(obs); // Election or Mutex: who is granted next, and who queues (decide-mode.ts)
  const candidates = mode.candidates(obs, eligible);
  const queue = mode.queueLength(candidates, obs.lease?.record.holder);
  const base = { candidates, queue };
  if (obs.lease === undefined) {
    if (!obs.podsSynced) {
      // Whether the lost Lease had a holder is read from pod marks too: not before they are listed.
      return {
        ...base,
        actions: [],
        requeueAfterMs: NOT_SYNCED_RETRY_MS,
        holder: undefined,
        expiresInMs: undefined,
        waiting: 'CacheNotSynced',
      };
    }
    const lost = lostTerm(obs);
    const grant = lost === undefined ? firstGrant(obs, nowMs) : undefined;
    if (grant !== undefined) return grant;
    return {
      ...base,
      actions: [{ type: 'CreateLease', lost }],
      requeueAfterMs: 0,
      holder: undefined,
      expiresInMs: undefined,
      waiting: undefined,
    };
  }
  const { record, observedAtMs } = obs.lease;
  const elapsed = nowMs - observedAtMs;
  const marks = (holder: HolderRef | undefined, token: bigint | undefined): Action[] => podMarks(obs, holder, token);

  if (!obs.podsSynced) {
    return {
      ...base,
      actions: [],
      requeueAfterMs: NOT_SYNCED_RETRY_MS,
      holder: record.holder,
      expiresInMs: undefined,
      waiting: 'CacheNotSynced',
    };
  }

  // Every record of the tokens issued: the Lease's annotation and the token status last reported.
  // A Lease token below status's was lowered by someone (the chart's lease-protection policy stops
  // that; without it, any principal with `leases update` can). The next grant is then taken from
  // above every token known, never refused: see tokenTamper.
  const tampered = tokenTamper(obs, record);
  const floor = tampered?.floor ?? maxOf(tokenFloor(record), lastIssued(obs));
  // A floor at the largest token (status or annotation raised to 2^63−1 by someone) leaves no
  // token to issue: no grant until it is repaired — never a token above it.
  const exhausted = floor >= MAX_TOKEN;
  // vacant: the lock stays without a holder for now (its pod marks cleared), for the reason
  // `waiting`, looked at again after requeueAfterMs; `also` are actions that go with it.
  const vacant = (waiting: Waiting | undefined, requeueAfterMs: number, also: readonly Action[] = []): Decision => ({
    ...base,
    actions: [...marks(undefined, undefined), ...also],
    requeueAfterMs,
    holder: undefined,
    expiresInMs: undefined,
    waiting,
  });
  const refuse = (revoke: readonly Action[]): Decision => vacant('TokenRegressed', RESYNC_MS, revoke);

  // 1: A holder that keeps renewing keeps the lock. The term's length is the longest of the
  // Lease's and the spec's: a Lease whose leaseDurationSeconds someone shortened must not make the
  // controller expire a holder before its own renew deadline.
  if (record.holder !== undefined) {
    const leaseMs = Math.max(
      termTimingsOf(record, obs.lock.spec).leaseDurationMs,
      termTimingsOf(undefined, obs.lock.spec).leaseDurationMs,
    );
    const holderPod = obs.pods.find((p) => sameHolder(p.ref, record.holder));
    const handoff = obs.lock.spec.handoff?.onPodTerminated ?? DEFAULT_HANDOFF_ON_POD_TERMINATED;
    const terminated = handoff && holderPod?.terminated === true;
    const expired = elapsed > leaseMs;
    if (!expired && !terminated) {
      const expiresInMs = leaseMs - elapsed;
      // A forced release (a user's request naming this grant's token) ends the term now; it wins
      // over a planned handover of the same term.
      const force = forceReleaseStep(obs.lock, record);
      if (force.some((a) => a.type === 'ForceRelease') && !exhausted) return vacant(undefined, 0, force);
      const handover = handoverStep(
        {
          lock: obs.lock,
          record,
          pods: obs.pods,
          candidates,
          markSeenAtMs: obs.handoverMarkSeenAtMs,
          leaseMs,
          ...(obs.wallNowMs !== undefined ? { wallNowMs: obs.wallNowMs } : {}),
        },
        nowMs,
      );
      // A held Lease whose token was lowered: the term stays to its end (its agent steps down on
      // seeing a token that is not its own, or renews with it no more), but its pod no longer
      // carries the lowered value as if it were the holder's token.
      return {
        ...base,
        actions: [
          ...marks(record.holder, tampered === undefined ? record.token : undefined),
          ...handover.actions,
          ...force,
        ],
        requeueAfterMs: Math.min(expiresInMs + EXPIRY_MARGIN_MS, handover.requeueAfterMs ?? Number.POSITIVE_INFINITY),
        holder: record.holder,
        expiresInMs,
        waiting: undefined,
      };
    }
    // 2: The holder is gone (expired, or confirmed terminated). Hand over directly when we can:
    // with a lock-delay, revoke first and let step 3 wait it out.
    const cause = terminated ? 'HolderTerminated' : 'Expired';
    const next = pickNext(obs, candidates, record.holder);
    if (exhausted) return refuse([{ type: 'Revoke', holder: record.holder, cause }]);
    const canGrantNow = next !== undefined && obs.fencing.ready && obs.timings.lockDelayMs <= 0;
    if (canGrantNow) {
      return {
        ...base,
        actions: [
          ...marks(undefined, undefined),
          { type: 'Grant', to: next.ref, previous: record.holder, cause, floor, ...mode.requestOf(obs, next) },
        ],
        requeueAfterMs: 0,
        holder: undefined,
        expiresInMs: undefined,
        waiting: undefined,
      };
    }
    const waiting: Waiting =
      next === undefined ? 'NoCandidates' : !obs.fencing.ready ? 'FencingUnavailable' : 'LockDelay';
    return {
      ...base,
      actions: [...marks(undefined, undefined), { type: 'Revoke', holder: record.holder, cause }],
      requeueAfterMs: 0,
      holder: undefined,
      expiresInMs: undefined,
      waiting,
    };
  }

  // 3: Nobody holds it. A Lease created again after the old one was deleted while held: its holder
  // may still believe (it cannot see a deletion while cut off), so wait a full lease duration of
  // that term from our first sight of the new Lease, then the lock-delay.
  if (record.released === 'Lost') {
    const waitMs = termTimingsOf(record, obs.lock.spec).leaseDurationMs + obs.timings.lockDelayMs;
    if (elapsed < waitMs) {
      return vacant('LeaseLost', waitMs - elapsed + EXPIRY_MARGIN_MS);
    }
  }
  // After an involuntary end (expiry, or the holder's containers terminated), honour the lock-delay
  // first, counted from our first sight of the revoked Lease.
  // A forced release is involuntary too: the released holder may still be running.
  const involuntary =
    record.released === 'Expired' || record.released === 'Terminated' || record.released === 'Revoked';
  // A forced release is answered before the next grant moves the token on.
  const forceAnswers = forceReleaseStep(obs.lock, record);
  if (forceAnswers.some((a) => a.type === 'AnswerHandover' && a.answer.outcome === 'Completed'))
    return vacant(undefined, 0, forceAnswers);
  if (involuntary && obs.timings.lockDelayMs > 0 && elapsed < obs.timings.lockDelayMs) {
    return vacant('LockDelay', obs.timings.lockDelayMs - elapsed + EXPIRY_MARGIN_MS);
  }
  // A planned handover's release (HandedOver) goes to the successor its mark names, if that pod is
  // still a candidate; else the usual order. Requests about a vacant lock are answered here too.
  const answers: HandoverAction[] = [
    ...handoverStep(
      { lock: obs.lock, record, pods: obs.pods, candidates, markSeenAtMs: undefined, leaseMs: 0 },
      nowMs,
    ).actions.filter((a) => a.type === 'AnswerHandover'),
    ...forceAnswers,
  ];
  const target = handoverTarget(record, candidates);
  // Mutex: a holder that released is granted again only on a new request, not on the one its term
  // answered (still in the pod cache when the release is seen before the withdrawal).
  const wanting = candidates.filter((c) => !mode.answered(obs, record, c));
  const next = target ?? (record.lastHolder !== undefined ? pickNext(obs, wanting, record.lastHolder) : wanting[0]);
  if (next === undefined) {
    return vacant('NoCandidates', RESYNC_MS, answers);
  }
  if (!obs.fencing.ready) {
    return vacant('FencingUnavailable', FENCING_RETRY_MS);
  }
  // A lock's first grant waits until status records its Lease (status.leaseName): from then on, a
  // missing Lease is known to have existed, and may have had a holder (see lostTerm).
  // The lock's finalizer, which goes on before the Lease is created, is that record too.
  if (obs.lock.status?.leaseName === undefined && obs.finalized === undefined) {
    return vacant('LeaseNotRecorded', 0);
  }
  if (exhausted) return refuse([]);
  // A Lease found lowered and vacant while status last recorded a holder: the write that vacated
  // it may be the tamperer's, not that holder's release, and the holder may still believe (cut
  // off, it cannot see the write). As for a Lease deleted while held: wait a full lease duration
  // of its term from our first sight of this version before the grant.
  // The wait goes on once status no longer names that holder (the status written for this very
  // wait drops it): the Held condition says LeaseTampered meanwhile, as LeaseLost carries its wait.
  const stillWaiting = (obs.lock.status?.conditions ?? []).some(
    (c) => c.type === ConditionType.Held && c.status === 'False' && c.reason === Reason.LeaseTampered,
  );
  if (tampered !== undefined && (obs.lock.status?.holder !== undefined || stillWaiting) && target === undefined) {
    const termMs = Math.max(
      (obs.lock.status?.leaseDurationSeconds ?? 0) * 1000,
      (record.leaseDurationSeconds ?? 0) * 1000,
      termTimingsOf(undefined, obs.lock.spec).leaseDurationMs,
    );
    if (elapsed < termMs) return vacant('TamperedTerm', termMs - elapsed + EXPIRY_MARGIN_MS);
  }
  const cause: GrantCause =
    target !== undefined
      ? 'HandedOver'
      : record.released === 'Released' || record.released === 'HandedOver'
        ? 'Released'
        : record.released === 'Expired' || record.released === 'Lost'
          ? 'Expired'
          : record.released === 'Terminated'
            ? 'HolderTerminated'
            : record.released === 'Revoked'
              ? 'ForceReleased'
              : 'Vacant';
  return {
    ...base,
    actions: [
      ...marks(undefined, undefined),
      {
        type: 'Grant',
        to: next.ref,
        previous: target !== undefined ? record.lastHolder : undefined,
        cause,
        floor,
        ...mode.requestOf(obs, next),
      },
      ...answers,
    ],
    requeueAfterMs: 0,
    holder: undefined,
    expiresInMs: undefined,
    waiting: undefined,
  };
}

/**
 * unactionable returns why the lock cannot be acted on until its spec changes, or undefined when a
 * retry or time may still help. The reconciler reports this in status and then fails the reconcile
 * with a TerminalError, so the lock is not polled but waits for an event (a spec, Lease or pod
 * change, or a controller restart).
 *
 * Pure. Today the one such case is a Redis fencing backend the controller was not configured with,
 * and only while nobody holds the lock: a holder's term is still watched to its expiry (requeued
 * by time), and nothing is decided while the pod cache is still filling.
 */
export function unactionable(obs: Observation, dec: Decision): string | undefined {
  if (obs.fencing.notConfigured !== true || dec.holder !== undefined || dec.waiting === 'CacheNotSynced')
    return undefined;
  return `spec.fencing.backend is ${obs.fencing.backend} but the controller was started without it (${obs.fencing.detail ?? 'not configured'})`;
}

/**
 * tokenTamper: the Lease's token annotation is no token (obs.malformedToken), or it is below the
 * last token status records (the controller writes status and never lowers its fencingToken; the
 * leader-election Role a co-tenant app has does not reach it): someone wrote the annotation. The next grant is then taken from above every token
 * known — status's, the Lease's, and with the Lease backend the Lease's resourceVersion (see
 * TokenTamper.revision); the Redis backend's counter is above every token it issued by itself.
 * Undefined when the Lease's token is a token not below status's.
 */
export function tokenTamper(obs: Observation, record: LockRecord): TokenTamper | undefined {
  const statusToken = lastIssued(obs);
  const malformed = obs.malformedToken;
  const lowered = record.token !== undefined && statusToken !== undefined && record.token < statusToken;
  if (malformed === undefined && !lowered) return undefined;
  const revision =
    (obs.fencing.backend === 'Lease' || malformed !== undefined) && /^[0-9]{1,19}$/.test(record.resourceVersion)
      ? BigInt(record.resourceVersion)
      : undefined;
  return {
    leaseToken: record.token,
    ...(malformed !== undefined ? { malformed } : {}),
    statusToken,
    revision,
    floor: maxOf(maxOf(statusToken ?? 0n, revision), record.token),
  };
}

/** maxOf: the larger of a and b (b may be unknown). */
function maxOf(a: bigint, b: bigint | undefined): bigint {
  return b !== undefined && b > a ? b : a;
}

/**
 * lastIssued: the last token status reports (the controller writes status, never lowering its
 * fencingToken), or undefined when status has none or it is not a token.
 */
function lastIssued(obs: Observation): bigint | undefined {
  return tokenOrUndefined(obs.lock.status?.fencingToken);
}

/**
 * lostTerm: what is known of a held term when the lock's Lease is missing — from the lock's status
 * (its holder, and the term's length, status.leaseDurationSeconds), from a pod still marked as
 * the lock's holder when status lags, or from the Held condition saying an earlier lost term is
 * still being waited out (the Lease deleted again during the wait: the holder is no longer named
 * anywhere, but may still believe). And whenever status records a Lease (status.leaseName): the
 * first grant waits for that record, so a Lease granted before and deleted with status lagging
 * (a crash between the grant and the status write) is still known. Undefined only for a lock whose
 * Lease was never recorded, and so never granted.
 */
function lostTerm(obs: Observation): LostTerm | undefined {
  const status = obs.lock.status;
  const keys = podKeys(obs.lock.metadata.name ?? '');
  const holder = status?.holder ?? newestMarked(obs.pods, keys)?.ref;
  const stillWaiting = (status?.conditions ?? []).some(
    (c) => c.type === ConditionType.Held && c.reason === Reason.LeaseLost,
  );
  if (holder === undefined && !stillWaiting && status?.leaseName === undefined && obs.finalized !== 'before')
    return undefined;
  const termMs = (status?.leaseDurationSeconds ?? 0) * 1000;
  const specMs = termTimingsOf(undefined, obs.lock.spec).leaseDurationMs;
  return { holder, leaseDurationSeconds: leaseDurationSecondsFor(Math.max(termMs, specMs)) };
}

/**
 * firstGrant: the grant of a lock that never had a Lease (its finalizer went on in this very
 * reconcile, and nothing records a holder or a token), as one create of the Lease already granted,
 * instead of a create, a status write recording it, and a grant. Decided as the grant of a vacant
 * Lease whose resourceVersion is the lock's: an etcd revision from after the lock was created, so
 * above every token of an earlier lock of the same name (what a new Lease's own creation revision
 * gives otherwise), and below the revision of the create that records the token. Undefined when
 * that decision is no grant (no candidate yet, fencing down, …): the Lease is then created empty.
 */
function firstGrant(obs: Observation, nowMs: number): Decision | undefined {
  const rv = obs.lock.metadata.resourceVersion ?? '';
  if (obs.finalized !== 'now' || obs.lock.status?.fencingToken !== undefined || !/^[0-9]{1,19}$/.test(rv))
    return undefined;
  const record = parseLease({ metadata: { resourceVersion: rv } });

  const dec = decideLock({ ...obs, lease: { record, observedAtMs: nowMs } }, nowMs);
  const grant = dec.actions.find((a) => a.type === 'Grant');
  if (grant === undefined || dec.actions.length !== 1) return undefined;
  return { ...dec, actions: [{ ...grant, create: true }] };
}

/** newestMarked: of the pods marked as the lock's holder, the one with the largest token (then the first by name). */
function newestMarked(pods: readonly PodSummary[], keys: PodKeys): PodSummary | undefined {
  const tokenOf = (p: PodSummary): bigint => tokenOrUndefined(p.annotations[keys.token]) ?? -1n;
  return pods
    .filter((p) => p.labels[keys.holder] !== undefined)
    .sort((x, y) => {
      const byToken = tokenOf(y) - tokenOf(x);
      return byToken > 0n ? 1 : byToken < 0n ? -1 : x.ref.name < y.ref.name ? -1 : x.ref.name > y.ref.name ? 1 : 0;
    })[0];
}

/**
 * pickNext prefers a candidate other than the departing holder; the holder itself only as a last
 * resort, when its mode allows it (decide-mode.ts: a freed Mutex is never handed straight back to
 * the pod that just gave it up while another request waits).
 */
function pickNext(obs: Observation, candidates: readonly PodSummary[], departing: HolderRef): PodSummary | undefined {
  const other = candidates.find((c) => !sameHolder(c.ref, departing));
  if (other !== undefined) return other;
  if (!modeOf(obs).mayHandBack(obs, departing)) return undefined;
  return candidates[0];
}

/**
 * podMarks: the holder pod (if it is in the cache) carries the lock's holder label and its token;
 * every other pod that carries either loses them.
 */
function podMarks(obs: Observation, holder: HolderRef | undefined, token: bigint | undefined): Action[] {
  const keys = podKeys(obs.lock.metadata.name ?? '');
  const out: Action[] = [];
  for (const p of obs.pods) {
    const isHolder = holder !== undefined && sameHolder(p.ref, holder);
    const marked = p.labels[keys.holder] !== undefined || p.annotations[keys.token] !== undefined;
    if (isHolder && token !== undefined) {
      if (p.labels[keys.holder] !== 'true' || p.annotations[keys.token] !== token.toString())
        out.push({ type: 'MarkHolderPod', pod: p.ref, token });
    } else if (marked) {
      out.push({ type: 'UnmarkPod', pod: p.ref });
    }
  }
  return out;
}
