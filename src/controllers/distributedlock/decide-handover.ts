/**
 * decide-handover — the pure part of a planned handover (protocol/handover.ts): from the lock's
 * request annotation, its Lease and its candidates, what the controller does about the request.
 * No I/O, no clock reads; `nowMs` is the controller's monotonic time.
 *
 * Safety: nothing here ends a term. The controller only *marks* the holder's Lease; the holder's
 * own agent stops believing and releases (the existing step-down path), and the grant to the
 * target happens in decide's vacant branch, after the controller has observed that release, with
 * a token from the usual dispenser (strictly larger). A handover that the holder does not carry
 * out lapses: the mark is removed and the request answered TimedOut; only expiry ends a grant.
 *
 * Each request names the token it was made against: a request whose token is not the Lease's
 * (the lock changed hands since) is refused, so a stale request never moves a later grant.
 */
import { LockMode, type DistributedLock } from '../../api/v1alpha1/distributedlock.ts';
import type { LockRecord } from '../../lease/record.ts';
import {
  DEFAULT_DRAIN_SECONDS,
  FORCE_RELEASE_REQUEST_ANNOTATION,
  HANDOVER_REQUEST_ANNOTATION,
  parseForceReleaseRequest,
  parseHandoverRequest,
  type HandoverMark,
  type HandoverOutcome,
  type HandoverRequest,
} from '../../protocol/handover.ts';
import { parseHolderIdentity, sameHolder, type HolderRef } from '../../protocol/holder.ts';
import { podKeys } from '../../protocol/names.ts';
import { isCandidate, requestedAt, type PodSummary } from './pods.ts';

/** HandoverAnswer is the controller's answer to one request (the request's exact text, so only it is cleared). */
export interface HandoverAnswer {
  /** kind: which request this answers (its annotation, its result annotation, its Events). */
  readonly kind?: 'handover' | 'forceRelease';
  readonly raw: string;
  readonly to: string;
  readonly token: string;
  readonly outcome: HandoverOutcome;
  readonly message: string;
  readonly newToken?: bigint;
}

/** HandoverAction is one step of a planned handover. */
export type HandoverAction =
  /**
   * MarkHandover: CAS the held Lease's handover mark to `mark` (undefined: remove it). `why`: what
   * asked for it (a request on the lock, Lease.spec.preferredHolder, or preemption), for the Event.
   */
  | {
      readonly type: 'MarkHandover';
      readonly mark: HandoverMark | undefined;
      readonly to?: string;
      readonly why?: string;
    }
  /** AnswerHandover: remove the request from the lock (only while it is still `raw`), record the answer, Event. */
  | { readonly type: 'AnswerHandover'; readonly answer: HandoverAnswer }
  /** ForceRelease: CAS the held Lease to released `Revoked` (a user forced it; `by` names who asked). */
  | { readonly type: 'ForceRelease'; readonly holder: HolderRef; readonly by: string | undefined };

/** HandoverStep is what to do about handovers now, and when time alone changes that. */
export interface HandoverStep {
  readonly actions: readonly HandoverAction[];
  /** requeueAfterMs: until the in-flight handover times out (undefined when none is in flight). */
  readonly requeueAfterMs: number | undefined;
}

/** HandoverInput is what decide passes in. */
export interface HandoverInput {
  readonly lock: DistributedLock;
  readonly record: LockRecord;
  readonly pods: readonly PodSummary[];
  /** candidates: decide's eligible candidates (Mutex: those that asked). */
  readonly candidates: readonly PodSummary[];
  /** markSeenAtMs: when the controller first saw the Lease's current mark (undefined: no mark). */
  readonly markSeenAtMs: number | undefined;
  /** leaseMs: the term's lease duration, the grace after the drain period before a handover lapses. */
  readonly leaseMs: number;
  /** wallNowMs: the controller's wall clock (epoch ms), for how long a pod has been Ready (preemption). */
  readonly wallNowMs?: number;
}

/**
 * PREEMPT_READY_MS: how long a higher-priority candidate must have been Ready (its Ready
 * condition's lastTransitionTime, by the controller's wall clock) before it preempts the holder:
 * a pod that flaps between Ready and not Ready does not move the lock each time.
 */
export const PREEMPT_READY_MS = 10_000;

const NOTHING: HandoverStep = { actions: [], requeueAfterMs: undefined };

/** drainSecondsOf: the request's drain period, else the lock's spec.handover.drainSeconds, else the default. */
export function drainSecondsOf(lock: DistributedLock, req: HandoverRequest): number {
  return req.drainSeconds ?? lock.spec.handover?.drainSeconds ?? DEFAULT_DRAIN_SECONDS;
}

/**
 * handoverStep decides about the lock's handover request and the Lease's mark. Pure.
 *
 * - no request: a mark on the held Lease is removed (the request was withdrawn or answered: a
 *   mark never outlives its request, so it can never move a later grant);
 * - an unreadable request, a Semaphore, a token that is not the Lease's, a vacant lock, a target
 *   that holds already, is not a candidate, or (Mutex) never asked: refused, naming why;
 * - the target holds with a larger token: completed;
 * - otherwise the Lease is marked (once), and the request waits for the holder's release; past
 *   the drain period plus one lease duration of grace from the controller's first sight of the
 *   mark, it lapses: answered TimedOut, and then (no request) the mark is removed.
 */
export function handoverStep(i: HandoverInput, nowMs: number): HandoverStep {
  const { lock, record } = i;
  const parsed = parseHandoverRequest(lock.metadata.annotations?.[HANDOVER_REQUEST_ANNOTATION]);
  const mark = record.handover;
  if (parsed === undefined) {
    // Lease.spec.preferredHolder (KEP-4355), when it names a candidate other than the holder, is
    // a standing request against the current grant: marked once, kept while it stands (no lapse:
    // the writer withdraws it by clearing the field, and nothing is ever revoked).
    const pre = preemptionTarget(i);
    const byLease = preferredTarget(i);
    const preferred = byLease ?? pre.target;
    if (preferred !== undefined && record.holder !== undefined && record.token !== undefined) {
      if (mark !== undefined && mark.token === record.token && sameHolder(mark.to, preferred.ref)) return NOTHING;
      const drainMs = (lock.spec.handover?.drainSeconds ?? DEFAULT_DRAIN_SECONDS) * 1000;
      const why =
        byLease !== undefined
          ? `the Lease's spec.preferredHolder names pod ${preferred.ref.name}`
          : `pod ${preferred.ref.name} has priority ${preferred.priority}, above the holder's ${holderPriority(i)} (spec.preemption: HigherPriority)`;
      return {
        actions: [
          {
            type: 'MarkHandover',
            mark: { to: preferred.ref, token: record.token, drainMs },
            to: preferred.ref.name,
            why,
          },
        ],
        requeueAfterMs: undefined,
      };
    }
    // A mark on a held term without a request: withdrawn (or answered); take it back.
    return record.holder !== undefined && mark !== undefined
      ? { actions: [{ type: 'MarkHandover', mark: undefined }], requeueAfterMs: pre.requeueAfterMs }
      : { actions: [], requeueAfterMs: pre.requeueAfterMs };
  }
  const raw = lock.metadata.annotations?.[HANDOVER_REQUEST_ANNOTATION] ?? '';
  if (typeof parsed === 'string') return answer(raw, '', '', 'Refused', parsed);
  const req = parsed;
  const refuse = (message: string): HandoverStep => answer(raw, req.to, req.token.toString(), 'Refused', message);
  if (lock.spec.mode === LockMode.Semaphore)
    return refuse('Semaphore locks do not support planned handover yet (each permit is granted on its own)');
  // Done: the target holds with a token above the one the request was made against.
  if (record.holder?.name === req.to && record.token !== undefined && record.token > req.token)
    return answer(
      raw,
      req.to,
      req.token.toString(),
      'Completed',
      `pod ${req.to} holds the lock with token ${record.token}`,
      record.token,
    );
  const inFlight = mark !== undefined && mark.token === req.token && mark.to.name === req.to;
  if (record.token !== req.token) {
    const now =
      record.holder !== undefined
        ? `pod ${record.holder.name} holds it with token ${String(record.token)}`
        : `its token is ${String(record.token)}`;
    return refuse(`the token moved on: the request was made against token ${req.token}, and ${now}`);
  }
  if (record.holder === undefined) {
    // Released at the end of this handover: decide's vacant branch grants the target next.
    if (voluntary(record) && inFlight) return NOTHING;
    return refuse('nobody holds the lock: there is nothing to hand over (the next grant follows the usual order)');
  }
  if (record.holder.name === req.to) return refuse(`pod ${req.to} already holds the lock`);
  const holderMs = i.markSeenAtMs;
  if (inFlight && sameHolder(mark.to, i.pods.find((p) => p.ref.name === req.to)?.ref)) {
    if (holderMs === undefined) return NOTHING;
    const leftMs = mark.drainMs + i.leaseMs - (nowMs - holderMs);
    if (leftMs > 0) return { actions: [], requeueAfterMs: leftMs };
    // Answer first; the mark goes on the next pass, once the request is gone ("no request" above).
    // Removing the mark while the request stands would only mark the Lease again.
    return {
      actions: [
        {
          type: 'AnswerHandover',
          answer: {
            raw,
            to: req.to,
            token: req.token.toString(),
            outcome: 'TimedOut',
            message: `pod ${record.holder.name} did not release within the drain period (${mark.drainMs / 1000}s) and a grace of ${i.leaseMs / 1000}s; it keeps the lock (nothing was revoked)`,
          },
        },
      ],
      requeueAfterMs: undefined,
    };
  }
  const target = i.pods.find((p) => p.ref.name === req.to);
  if (target === undefined) return refuse(`pod ${req.to} is not a candidate: no such pod selected by the lock`);
  if (!i.candidates.some((c) => sameHolder(c.ref, target.ref))) {
    if (!isCandidate(target, lock.spec.candidates.selector))
      return refuse(
        `pod ${req.to} is not a candidate: ${target.terminating ? 'it is terminating' : !target.ready ? 'it is not Ready' : 'the lock does not select it'}`,
      );
    if (lock.spec.mode === LockMode.Mutex && requestedAt(target, podKeys(lock.metadata.name ?? '')) === undefined)
      return refuse(`pod ${req.to} has not asked for the lock (Mutex: the target must have a pending request)`);
    return refuse(`pod ${req.to} is not a candidate`);
  }
  const drainMs = drainSecondsOf(lock, req) * 1000;
  return {
    actions: [
      {
        type: 'MarkHandover',
        mark: { to: target.ref, token: req.token, drainMs },
        to: req.to,
        why: `${req.by ?? 'a user'} asked for it (${HANDOVER_REQUEST_ANNOTATION})`,
      },
    ],
    requeueAfterMs: undefined,
  };
}

/**
 * forceReleaseStep decides about a forced release request (`kubectl fencepost release --force`).
 * Pure. Refused when unreadable, for a Semaphore, when nobody holds the lock, or when the token
 * moved on (a stale request never ends a later grant); otherwise the held Lease is released as
 * `Revoked`. Once the Lease shows that release of the request's token, it is answered Completed
 * — before the next grant, which would move the token on.
 */
export function forceReleaseStep(lock: DistributedLock, record: LockRecord): readonly HandoverAction[] {
  const raw = lock.metadata.annotations?.[FORCE_RELEASE_REQUEST_ANNOTATION];
  const parsed = parseForceReleaseRequest(raw);
  if (parsed === undefined || raw === undefined) return [];
  const answerWith = (outcome: HandoverOutcome, message: string, token = ''): HandoverAction => ({
    type: 'AnswerHandover',
    answer: { kind: 'forceRelease', raw, to: '', token, outcome, message },
  });
  if (typeof parsed === 'string') return [answerWith('Refused', parsed)];
  const token = parsed.token.toString();
  if (lock.spec.mode === LockMode.Semaphore)
    return [answerWith('Refused', 'Semaphore locks do not support a forced release yet', token)];
  if (record.token !== parsed.token)
    return [
      answerWith(
        'Refused',
        `the token moved on: the request was made against token ${token}, and the lock's token is ${String(record.token)}`,
        token,
      ),
    ];
  if (record.holder === undefined) {
    if (record.released === 'Revoked')
      return [
        answerWith(
          'Completed',
          `released pod ${record.lastHolder?.name ?? '?'} (token ${token}); it may still run: only fencing guards stop its writes`,
          token,
        ),
      ];
    return [answerWith('Refused', 'nobody holds the lock', token)];
  }
  return [{ type: 'ForceRelease', holder: record.holder, by: parsed.by }];
}

/**
 * preemptionTarget (spec.preemption HigherPriority, Election): the candidate to hand over to — of
 * the candidates with a priority strictly above the holder pod's, the first in candidate order
 * (highest priority, then oldest) that has been Ready for PREEMPT_READY_MS — and, when a higher
 * one is Ready but not yet for that long, when to look again. Strictly higher: equal priorities
 * never preempt, so the new holder is never preempted back by the old one.
 */
function preemptionTarget(i: HandoverInput): { target?: PodSummary; requeueAfterMs?: number } {
  const { lock, record } = i;
  if ((lock.spec.mode ?? LockMode.Election) !== LockMode.Election || lock.spec.preemption !== 'HigherPriority')
    return {};
  if (record.holder === undefined || i.wallNowMs === undefined) return {};
  const floor = holderPriority(i);
  let waitMs: number | undefined;
  for (const c of i.candidates) {
    if (c.priority <= floor || sameHolder(c.ref, record.holder)) continue;
    const readyFor = c.readySinceMs !== undefined ? i.wallNowMs - c.readySinceMs : 0;
    if (readyFor >= PREEMPT_READY_MS) return { target: c };
    const left = PREEMPT_READY_MS - readyFor;
    waitMs = waitMs === undefined ? left : Math.min(waitMs, left);
  }
  return waitMs !== undefined ? { requeueAfterMs: waitMs } : {};
}

/** holderPriority: the holder pod's priority (0 when the pod is not seen). */
function holderPriority(i: HandoverInput): number {
  return i.pods.find((p) => sameHolder(p.ref, i.record.holder))?.priority ?? 0;
}

/**
 * preferredTarget: the candidate the Lease's spec.preferredHolder names, if it is one and is not
 * the holder. Identities: `<pod name>/<pod uid>` (fencepost's holderIdentity, what a coordinator
 * that reads the Lease sees) names that incarnation; a bare `<pod name>` names whichever pod of
 * that name is a candidate. Anything else (another spelling, a pod that is not a Ready candidate,
 * Mutex: one that has not asked) names nobody, and is ignored. Semaphore locks ignore it.
 */
function preferredTarget(i: HandoverInput): PodSummary | undefined {
  const value = i.record.preferredHolder;
  if (value === undefined || i.lock.spec.mode === LockMode.Semaphore) return undefined;
  const ref = parseHolderIdentity(value);
  const target = i.candidates.find((c) => (ref?.uid !== '' ? sameHolder(c.ref, ref) : c.ref.name === value));
  return target !== undefined && !sameHolder(target.ref, i.record.holder) ? target : undefined;
}

/**
 * handoverTarget: after the holder's own release of a term the controller had marked for a
 * handover (same token), the successor the mark names, if it is still a candidate; undefined
 * otherwise (the usual order then applies). A holder that releases for another reason during the
 * drain (SIGTERM) hands over all the same: the user asked for that successor.
 */
export function handoverTarget(record: LockRecord, candidates: readonly PodSummary[]): PodSummary | undefined {
  if (record.holder !== undefined || !voluntary(record) || record.handover === undefined) return undefined;
  const to = record.handover.to;
  if (record.token !== record.handover.token) return undefined;
  return candidates.find((c) => sameHolder(c.ref, to));
}

/**
 * voluntary: the last holder released the Lease itself. The agent writes `Released` at the end of
 * a handover (the agent admission policy allows an agent no other kind today); `HandedOver` is
 * accepted too, for when the policy allows it. Either way the handover is told by the controller's
 * own mark for that token, which only the controller writes.
 */
function voluntary(record: LockRecord): boolean {
  return record.released === 'Released' || record.released === 'HandedOver';
}

function answer(
  raw: string,
  to: string,
  token: string,
  outcome: HandoverOutcome,
  message: string,
  newToken?: bigint,
): HandoverStep {
  return {
    actions: [
      {
        type: 'AnswerHandover',
        answer: { raw, to, token, outcome, message, ...(newToken !== undefined ? { newToken } : {}) },
      },
    ],
    requeueAfterMs: undefined,
  };
}
