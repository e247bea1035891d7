/**
 * decideStore — what the controller makes of a lock held in a Redis or Redlock store
 * (spec.store), which it observes and never grants (pure; test/unit/controllers/decide-store.test.ts).
 *
 * One observation is the store's answer (owner id, TTL left, token) or its failure; the memory is
 * what the controller saw last time (`StoreMemory`, kept per lock by the reconciler) and the
 * owners whose release it heard on the release channels. From them: the status (as for a Lease
 * lock, so that `kubectl get dlock` shows every lock the same way), the holder pod to label and
 * the former one to unlabel, and the transitions to report once each (Events, metrics).
 *
 * Who the holder is: the owner id may name a pod (`<random>/<pod>/<uid>`, stores/owner.ts).
 * Anyone who can write the store can write any owner id, so the name is trusted no further than
 * this: the pod must exist with that uid and be selected by spec.candidates.selector, as a Lease
 * lock's candidates are. Otherwise the lock shows as held (token, time) by no pod.
 *
 * Release or expiry: a key that went away was released if its owner was heard on the release
 * channel, else it expired (the holder stopped renewing, or the store lost it). The message can
 * arrive after the read that finds the key gone (another connection), so an unheard end is
 * decided only after END_GRACE_MS.
 */
import { ConditionType, EventReason, Reason, setCondition } from '../../api/v1alpha1/conditions.ts';
import type { Condition, DistributedLock, DistributedLockStatus } from '../../api/v1alpha1/distributedlock.ts';
import type { HolderRef } from '../../protocol/holder.ts';
import { matchesSelector } from './pods.ts';

/** END_GRACE_MS: how long a vanished key waits for its release message before it counts as expired. */
export const END_GRACE_MS = 500;
/** POLL_MS: how often a store lock is read again (a live status; an expiry is seen within it). */
export const POLL_MS = 1000;

/** StoreRead is one read of the store: the lock, or why it could not be read. */
export type StoreRead =
  | {
      readonly ok: true;
      readonly owner: string | undefined;
      readonly ttlMs: number;
      readonly token: bigint | undefined;
      /** pod: the pod the owner id names (stores/owner.ts podOfOwner), not yet checked. */
      readonly pod: HolderRef | undefined;
    }
  | { readonly ok: false; readonly error: string };

/** CandidatePod is what the decision needs of a pod in the lock's namespace. */
export interface CandidatePod {
  readonly name: string;
  readonly uid: string;
  readonly labels: Readonly<Record<string, string>>;
}

/** StoreMemory is what the controller saw of a lock at its last read. */
export interface StoreMemory {
  readonly owner?: string;
  readonly token?: bigint;
  /** pod: the holder pod it labelled (verified), to unlabel when the holder changes. */
  readonly pod?: HolderRef;
  /** since: when it first saw this owner (status.acquireTime). */
  readonly since?: Date;
  /** ending: an owner whose key went away without a heard release, and when that was seen. */
  readonly ending?: {
    readonly owner: string;
    readonly token?: bigint;
    readonly since: Date;
    readonly heldSince?: Date;
  };
  readonly transitions?: number;
  /** lastEnd: how the last hold it saw end ended, for the Held condition's reason. */
  readonly lastEnd?: 'released' | 'expired';
}

/** StoreTransition is one change to report (an Event on the lock, and metrics). */
export type StoreTransition =
  | { readonly type: 'granted'; readonly token: bigint | undefined; readonly pod: HolderRef | undefined }
  | { readonly type: 'released' | 'expired'; readonly token: bigint | undefined; readonly heldMs: number | undefined };

/** StoreDecision: the new memory, the status, the pods to mark, what to report, and when to look again. */
export interface StoreDecision {
  readonly memory: StoreMemory;
  readonly status: DistributedLockStatus;
  readonly mark?: { readonly pod: HolderRef; readonly token: bigint; readonly acquired: Date; readonly expires: Date };
  readonly unmark?: HolderRef;
  readonly transitions: readonly StoreTransition[];
  readonly requeueAfterMs: number;
}

/** StoreInput is one decision's input. */
export interface StoreInput {
  readonly lock: DistributedLock;
  readonly read: StoreRead;
  readonly memory: StoreMemory;
  /** released: owner ids heard on this lock's release channel since the last decision. */
  readonly released: ReadonlySet<string>;
  readonly pods: readonly CandidatePod[];
  readonly now: Date;
  /** store: 'Redis' or 'Redlock', for messages. */
  readonly store: string;
}

/** decideStore is the whole decision (the module's doc says what and why). */
export function decideStore(i: StoreInput): StoreDecision {
  const { lock, read, memory: m, now } = i;
  const gen = lock.metadata.generation;
  const og = gen !== undefined ? { observedGeneration: gen } : {};
  let conditions: Condition[] = [...(lock.status?.conditions ?? [])];
  if (!read.ok) {
    // The store does not answer: nothing is known, nothing changes but Ready (holders may be fine).
    conditions = setCondition(
      conditions,
      {
        type: ConditionType.Ready,
        status: 'False',
        reason: Reason.StoreUnavailable,
        message: `The ${i.store} store does not answer: ${read.error}`,
        ...og,
      },
      now,
    );
    return {
      memory: m,
      status: { ...(lock.status ?? {}), conditions, ...og },
      transitions: [],
      requeueAfterMs: POLL_MS,
    };
  }
  const transitions: StoreTransition[] = [];

  const heldMs = (since: Date | undefined) => (since !== undefined ? now.getTime() - since.getTime() : undefined);

  // 1. The end of the previous owner's hold: heard released, or (after the grace) expired.
  let ending = m.ending;
  if (m.owner !== undefined && m.owner !== read.owner) {
    if (i.released.has(m.owner)) transitions.push({ type: 'released', token: m.token, heldMs: heldMs(m.since) });
    else
      ending = {
        owner: m.owner,
        since: now,
        ...(m.token !== undefined ? { token: m.token } : {}),
        ...(m.since !== undefined ? { heldSince: m.since } : {}),
      };
  }
  if (ending !== undefined && ending.owner !== m.owner) {
    // An end seen at an earlier read: decided now if heard, or once the grace has passed.
    if (i.released.has(ending.owner)) {
      transitions.push({ type: 'released', token: ending.token, heldMs: heldMs(ending.heldSince) });
      ending = undefined;
    } else if (now.getTime() - ending.since.getTime() >= END_GRACE_MS) {
      transitions.push({ type: 'expired', token: ending.token, heldMs: heldMs(ending.heldSince) });
      ending = undefined;
    }
  }

  // 2. The current owner, and its pod if the name checks out.
  const pod =
    read.owner !== undefined && read.pod !== undefined
      ? i.pods.find(
          (p) =>
            p.name === read.pod?.name &&
            p.uid === read.pod.uid &&
            matchesSelector(lock.spec.candidates.selector, p.labels),
        )
      : undefined;
  const podRef = pod !== undefined ? { name: pod.name, uid: pod.uid } : undefined;
  const newOwner = read.owner !== undefined && read.owner !== m.owner;
  const since = newOwner ? now : read.owner !== undefined ? (m.since ?? now) : undefined;
  if (newOwner) transitions.push({ type: 'granted', token: read.token, pod: podRef });
  const transitionsCount =
    (m.transitions ?? lock.status?.leaseTransitions ?? 0) + (newOwner && m.owner !== undefined ? 1 : 0);
  const ended = transitions.findLast((t) => t.type !== 'granted');
  const lastEnd = ended?.type ?? m.lastEnd;
  const memory: StoreMemory = {
    ...(read.owner !== undefined ? { owner: read.owner } : {}),
    ...(read.token !== undefined ? { token: read.token } : {}),
    ...(podRef !== undefined ? { pod: podRef } : {}),
    ...(since !== undefined ? { since } : {}),
    ...(ending !== undefined ? { ending } : {}),
    transitions: transitionsCount,
    ...(lastEnd !== undefined ? { lastEnd } : {}),
  };

  // 3. Status, as a Lease lock's: holder, token (never going down in status), time, conditions.
  const ttlSeconds = Math.max(1, Math.round(Math.max(0, read.ttlMs) / 1000));
  const prevToken = lock.status?.fencingToken !== undefined ? BigInt(lock.status.fencingToken) : undefined;
  // The status cache may lag our last write: the last token we saw counts too.
  const token = [read.token, m.token, prevToken].reduce<bigint | undefined>(
    (a, b) => (b !== undefined && (a === undefined || b > a) ? b : a),
    undefined,
  );
  conditions = setCondition(
    conditions,
    {
      type: ConditionType.Ready,
      status: 'True',
      reason: Reason.AsExpected,
      message: `Observed in the ${i.store} store`,
      ...og,
    },
    now,
  );
  conditions = setCondition(
    conditions,
    read.owner !== undefined
      ? {
          type: ConditionType.Held,
          status: 'True',
          reason: Reason.Granted,
          message: `Held in ${i.store} by ${podRef !== undefined ? `pod ${podRef.name}` : 'an owner that names no candidate pod'} with fencing token ${read.token?.toString() ?? '?'}`,
          ...og,
        }
      : {
          type: ConditionType.Held,
          status: 'False',
          reason:
            ending !== undefined || lastEnd === undefined
              ? Reason.Waiting
              : lastEnd === 'expired'
                ? Reason.HolderExpired
                : Reason.Released,
          message: `Nobody holds the lock in ${i.store}`,
          ...og,
        },
    now,
  );
  const status: DistributedLockStatus = {
    ...(podRef !== undefined ? { holder: podRef } : {}),
    ...(token !== undefined ? { fencingToken: token.toString() } : {}),
    ...(since !== undefined ? { acquireTime: toTime(since) } : {}),
    ...(read.owner !== undefined ? { leaseDurationSeconds: lock.spec.leaseDurationSeconds ?? ttlSeconds } : {}),
    leaseTransitions: transitionsCount,
    candidates: i.pods.filter((p) => matchesSelector(lock.spec.candidates.selector, p.labels)).length,
    conditions,
    ...og,
  };
  const unmark = m.pod !== undefined && (podRef === undefined || podRef.uid !== m.pod.uid) ? m.pod : undefined;
  const mark =
    podRef !== undefined && read.token !== undefined && (newOwner || m.pod?.uid !== podRef.uid)
      ? {
          pod: podRef,
          token: read.token,
          acquired: since ?? now,
          // As for a Lease lock: the end of the first term, set once at the grant (renewals move no annotation).
          expires: new Date((since ?? now).getTime() + (lock.spec.leaseDurationSeconds ?? ttlSeconds) * 1000),
        }
      : undefined;
  const requeueAfterMs =
    ending !== undefined
      ? END_GRACE_MS
      : read.owner !== undefined && read.ttlMs >= 0
        ? Math.min(POLL_MS, read.ttlMs + 50)
        : POLL_MS;
  return {
    memory,
    status,
    ...(mark !== undefined ? { mark } : {}),
    ...(unmark !== undefined ? { unmark } : {}),
    transitions,
    requeueAfterMs,
  };
}

function toTime(d: Date): string {
  return `${d.toISOString().slice(0, 19)}Z`;
}

/** STORE_EVENT: the Event reason of each transition. */
export const STORE_EVENT = {
  granted: EventReason.StoreGranted,
  released: EventReason.StoreReleased,
  expired: EventReason.HolderExpired,
} as const;
