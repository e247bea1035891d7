/**
 * computeStatus — the lock's status, recomputed from the observation and the decision (pure).
 * The previous status is read only to keep fencingToken from going down, to keep the completed runs a re-created Lease no longer has, and to keep condition
 * transition times; it never feeds a decision. (status.queue is the exception that proves it: the
 * Mutex queue order is state only the controller observes, so status is where it is kept; the
 * reconciler reads it back into Observation.requests.)
 */
import { ConditionType, Reason, setCondition } from '../../api/v1alpha1/conditions.ts';
import {
  MAX_QUEUED_REQUESTS,
  type CompletedRun,
  type Condition,
  type DistributedLockStatus,
  type PermitHolderStatus,
  type QueuedRequest,
} from '../../api/v1alpha1/distributedlock.ts';
import {
  completionVerdict,
  leaseDurationSecondsFor,
  MAX_COMPLETED_RUNS,
  type CompletionEntry,
  type CompletionVerdict,
} from '../../lease/record.ts';
import { TOKEN_ANNOTATION, leaseName, podKeys } from '../../protocol/names.ts';
import { termTimingsOf } from '../../protocol/timings.ts';
import { tokenOrUndefined } from '../../protocol/token.ts';
import type { SemaphoreDecision, SemaphoreObservation } from './decide-semaphore.ts';
import { describeTamper, type Decision, type FencingState, type Observation, type Waiting } from './decide.ts';
import { isCandidate, nextQueue } from './pods.ts';

const WAITING_REASON: Record<Waiting, string> = {
  NoCandidates: Reason.Waiting,
  LockDelay: Reason.LockDelay,
  LeaseLost: Reason.LeaseLost,
  TamperedTerm: Reason.LeaseTampered,
  LeaseNotRecorded: Reason.Initializing,
  TokenRegressed: Reason.LeaseTampered,
  FencingUnavailable: Reason.RedisUnavailable,
  CacheNotSynced: Reason.CacheNotSynced,
};

/** maxToken: the larger of a Lease token and a status token (a decimal string), as a decimal string. */
function maxToken(lease: bigint | undefined, status: string | undefined): string | undefined {
  const s = tokenOrUndefined(status);
  if (lease === undefined) return s?.toString();
  return (s !== undefined && s > lease ? s : lease).toString();
}

const WAITING_MESSAGE: Record<Waiting, string> = {
  NoCandidates: 'No candidate pod is Ready and selected by spec.candidates.selector',
  LockDelay:
    'The last holder expired or its containers terminated; waiting spec.lockDelaySeconds before the next grant',
  LeaseNotRecorded: 'Recording the new Lease in status before the first grant',
  TokenRegressed:
    "The Lease's fencing-token annotation or status.fencingToken is at the largest token, 2^63-1 (someone raised it): no token is left to issue. No grant until it is set back",
  LeaseLost:
    "The lock's Lease was deleted while held; waiting a full lease duration (and spec.lockDelaySeconds) for the old holder to step down",
  TamperedTerm:
    "Someone other than the controller lowered the Lease's token and cleared its holder; the last holder status recorded may still believe it holds the lock, so the next grant waits a full lease duration of its term",
  FencingUnavailable: 'No new grant until the fencing backend can issue tokens',
  CacheNotSynced: 'The controller is still filling its pod cache',
};

/**
 * queueStatus: status.queue, the controller's record of the Mutex queue (nextQueue in pods.ts):
 * the requests in the order it first saw them, the holder excluded, `since` stamped with `now`
 * for requests new to the record. Kept as observed while the pod cache is still filling (an
 * absent pod is not yet a withdrawn request); none in Election mode.
 */
export function queueStatus(obs: Observation, now: Date): { queue?: QueuedRequest[] } {
  if (obs.lock.spec.mode !== 'Mutex') return {};
  const queue = obs.podsSynced
    ? nextQueue(obs.requests ?? [], obs.pods, {
        keys: podKeys(obs.lock.metadata.name ?? ''),
        selector: obs.lock.spec.candidates.selector,
        holder: obs.lease?.record.holder,
        now,
        max: MAX_QUEUED_REQUESTS,
      })
    : [...(obs.requests ?? [])];
  return queue.length > 0 ? { queue } : {};
}

/**
 * computeStatus returns the status to write. Status records transitions, not renewals: nothing in
 * it changes while a holder renews normally (the Lease's renewTime, and the expiry it implies,
 * are for tools that read the Lease), so a held lock costs no status write at steady state.
 */
export function computeStatus(
  obs: Observation,
  dec: Decision,
  prev: DistributedLockStatus | undefined,
  now: Date,
): DistributedLockStatus {
  const gen = obs.lock.metadata.generation;
  const record = obs.lease?.record;
  const held = dec.holder !== undefined && record !== undefined;
  const leaseMs = termTimingsOf(record, obs.lock.spec).leaseDurationMs;

  const og = gen !== undefined ? { observedGeneration: gen } : {};
  let conditions: Condition[] = [...(prev?.conditions ?? [])];
  conditions = degradedCondition(conditions, obs.fencing, og, now);
  conditions = setCondition(
    conditions,
    held
      ? {
          type: ConditionType.Held,
          status: 'True',
          reason: Reason.Granted,
          message: `Held by pod ${dec.holder.name} with fencing token ${record.token ?? '?'}`,
          ...og,
        }
      : {
          type: ConditionType.Held,
          status: 'False',
          reason:
            dec.waiting !== undefined
              ? WAITING_REASON[dec.waiting]
              : record?.released === 'Released' || record?.released === 'HandedOver'
                ? Reason.Released
                : Reason.Waiting,
          message: dec.waiting !== undefined ? WAITING_MESSAGE[dec.waiting] : 'Nobody holds the lock',
          ...og,
        },
    now,
  );
  conditions = readyCondition(conditions, obs.fencing, og, now, notReady(obs, dec));

  // status.fencingToken never goes down: it is the record of the last token issued that decide
  // holds a Lease's token against (a Lease token lowered by someone must not lower it too).
  const fencingToken = maxToken(record?.token, prev?.fencingToken);
  const runs = completedRuns(obs, prev, now);
  const status: DistributedLockStatus = {
    ...(held ? { holder: { name: dec.holder.name, uid: dec.holder.uid } } : {}),
    ...(fencingToken !== undefined ? { fencingToken } : {}),
    ...(held && record.acquireTime !== undefined ? { acquireTime: record.acquireTime.toISOString() } : {}),
    ...(held ? { leaseDurationSeconds: leaseDurationSecondsFor(leaseMs) } : {}),
    leaseTransitions: record?.transitions ?? 0,
    ...(obs.lease !== undefined ? { leaseName: leaseName(obs.lock.metadata.name ?? '') } : {}),
    ...queueStatus(obs, now),
    candidates: dec.candidates.length,
    queueLength: dec.queue,
    ...(runs.length > 0 ? { completedRuns: runs } : {}),
    ...(gen !== undefined ? { observedGeneration: gen } : {}),
    conditions,
  };
  return status;
}

/** degradedCondition sets Degraded from the fencing backend's state (every mode). */
function degradedCondition(
  list: readonly Condition[],
  fencing: FencingState,
  og: { readonly observedGeneration?: number },
  now: Date,
): Condition[] {
  return setCondition(
    list,
    !fencing.ready
      ? {
          type: ConditionType.Degraded,
          status: 'True',
          reason: Reason.RedisUnavailable,
          message: `Fencing backend ${fencing.backend} unavailable: ${fencing.detail ?? 'not ready'}; holders keep renewing, new grants wait`,
          ...og,
        }
      : {
          type: ConditionType.Degraded,
          status: 'False',
          reason: Reason.AsExpected,
          message: `Fencing backend ${fencing.backend} is issuing tokens`,
          ...og,
        },
    now,
  );
}

/** NotReady is why a lock cannot be granted as it stands, for the Ready condition. */
interface NotReady {
  readonly reason: string;
  readonly message: string;
}

/**
 * notReady: why the lock cannot grant (apart from its fencing backend, which readyCondition
 * reads itself) — no token left to issue, the Lease's token lowered under a term that must run
 * out first, or the last grant attempt failed — naming the field and the value found. Pure.
 */
export function notReady(obs: Observation, dec: Decision): NotReady | undefined {
  const lease = leaseName(obs.lock.metadata.name ?? '');
  if (dec.waiting === 'TokenRegressed')
    return {
      reason: Reason.LeaseTampered,
      message: `No fencing token is left to issue: status.fencingToken is ${obs.lock.status?.fencingToken ?? 'unset'} and Lease ${lease} annotation ${TOKEN_ANNOTATION} is ${obs.lease?.record.token?.toString() ?? 'unset'}; one of them is at the largest token, 2^63-1. No grant until it is set back`,
    };
  if (dec.tampered !== undefined)
    return {
      reason: Reason.LeaseTampered,
      message: `Lease ${lease} annotation ${TOKEN_ANNOTATION} is ${describeTamper(dec.tampered)} (someone other than the controller wrote it); the next grant takes a token above ${dec.tampered.floor}${dec.holder !== undefined ? ` once the term of pod ${dec.holder.name} ends` : ''}`,
    };
  if (obs.grantFailure !== undefined && dec.holder === undefined)
    return { reason: Reason.GrantFailed, message: `The last grant failed: ${obs.grantFailure}` };
  return undefined;
}

/**
 * readyCondition sets Ready: False for a backend the controller lacks or one that is unavailable,
 * or for `blocked` (notReady), every mode; True otherwise.
 */
function readyCondition(
  list: readonly Condition[],
  fencing: FencingState,
  og: { readonly observedGeneration?: number },
  now: Date,
  blocked?: NotReady,
): Condition[] {
  return setCondition(
    list,
    fencing.notConfigured === true
      ? {
          type: ConditionType.Ready,
          status: 'False',
          reason: Reason.InvalidSpec,
          message: `spec.fencing.backend is ${fencing.backend}, which the controller was not started with (${fencing.detail ?? 'not configured'}); change the spec or configure the controller`,
          ...og,
        }
      : !fencing.ready
        ? {
            type: ConditionType.Ready,
            status: 'False',
            reason: Reason.RedisUnavailable,
            message: 'The lock cannot be granted while its fencing backend is unavailable',
            ...og,
          }
        : blocked !== undefined
          ? { type: ConditionType.Ready, status: 'False', reason: blocked.reason, message: blocked.message, ...og }
          : {
              type: ConditionType.Ready,
              status: 'True',
              reason: Reason.AsExpected,
              message: 'The lock is managed and can be granted',
              ...og,
            },
    now,
  );
}

/**
 * completedRuns is status.completedRuns: the runs already in status, then the runs on the Lease
 * not yet there, in the Lease's order (the order they were recorded), one entry per run id,
 * newest last, at most 32. Status keeps them when the Lease is re-created without them. Entries
 * that do not count (refusedCompletions) are left out.
 */
export function completedRuns(obs: Observation, prev: DistributedLockStatus | undefined, now: Date): CompletedRun[] {
  const out: CompletedRun[] = [...(prev?.completedRuns ?? [])];
  const record = obs.lease?.record;
  if (record === undefined) return out.slice(-MAX_COMPLETED_RUNS);
  const have = new Set(out.map((r) => r.runId));
  for (const e of record.completedRuns) {
    if (have.has(e.runId) || completionVerdict(e, record.token, now) !== 'ok') continue;
    have.add(e.runId);
    out.push({
      runId: e.runId,
      completedAt: e.completedAt.toISOString(),
      ...(e.holder !== '' ? { holder: e.holder } : {}),
      token: e.token.toString(),
    });
  }
  return out.slice(-MAX_COMPLETED_RUNS);
}

/** RefusedCompletion is an entry of the Lease's completed runs that does not count, and why. */
export interface RefusedCompletion {
  readonly entry: CompletionEntry;
  readonly verdict: Exclude<CompletionVerdict, 'ok'>;
}

/**
 * refusedCompletions: the Lease's entries that are not recorded in status — completedAt more
 * than the tolerance ahead of `now`, or a token above the Lease's (lease/record.ts completionVerdict).
 */
export function refusedCompletions(obs: Observation, now: Date): RefusedCompletion[] {
  const record = obs.lease?.record;
  if (record === undefined) return [];
  const out: RefusedCompletion[] = [];
  for (const entry of record.completedRuns) {
    const verdict = completionVerdict(entry, record.token, now);
    if (verdict !== 'ok') out.push({ entry, verdict });
  }
  return out;
}

/**
 * computeSemaphoreStatus: the status of a Semaphore lock (decide-semaphore.ts), minimal until the
 * Semaphore status fields land (notes step 5): the anchor's name (the first grant waits for it,
 * as for decide.ts), the lock-wide high-water mark (never lowered), the candidates and the queue
 * record (the controller's FIFO order, kept across restarts and leader changes), and
 * observedGeneration. Conditions are kept as they were. Pure.
 */
export function computeSemaphoreStatus(
  obs: SemaphoreObservation,
  dec: SemaphoreDecision,
  prev: DistributedLockStatus | undefined,
  now: Date,
): DistributedLockStatus {
  const gen = obs.lock.metadata.generation;
  const anchorToken = obs.anchor?.record.token;
  const prevToken = tokenOrUndefined(prev?.fencingToken);
  const token =
    anchorToken !== undefined && (prevToken === undefined || anchorToken > prevToken) ? anchorToken : prevToken;
  const holders = obs.permits.flatMap((p) => (p.lease.record.holder !== undefined ? [p.lease.record.holder] : []));
  const queue = obs.podsSynced
    ? nextQueue(obs.requests ?? [], obs.pods, {
        keys: podKeys(obs.lock.metadata.name ?? ''),
        selector: obs.lock.spec.candidates.selector,
        holder: undefined,
        now,
        max: MAX_QUEUED_REQUESTS,
      }).filter((q) => !holders.some((h) => h.name === q.pod && h.uid === q.uid))
    : [...(obs.requests ?? [])];
  // Holders from the permit Leases; a permit whose Lease is missing keeps its entry while decide
  // still counts it as lost (its holder may believe), so that the entry survives until then.
  const fromLeases: PermitHolderStatus[] = obs.permits.flatMap((p) => {
    const r = p.lease.record;
    if (r.holder === undefined || r.token === undefined) return [];
    return [
      {
        permit: p.permit,
        name: r.holder.name,
        uid: r.holder.uid,
        token: r.token.toString(),
        ...(r.acquireTime !== undefined ? { acquireTime: r.acquireTime.toISOString() } : {}),
        ...(r.leaseDurationSeconds !== undefined ? { leaseDurationSeconds: r.leaseDurationSeconds } : {}),
      },
    ];
  });
  const stillLost = (prev?.holders ?? []).filter(
    (h) => !obs.permits.some((p) => p.permit === h.permit) && (obs.lost ?? []).some((l) => l.permit === h.permit),
  );
  const statusHolders = [...fromLeases, ...stillLost].sort((x, y) => x.permit - y.permit);
  return {
    ...(obs.anchor !== undefined || prev?.leaseName !== undefined
      ? { leaseName: leaseName(obs.lock.metadata.name ?? '') }
      : {}),
    heldPermits: dec.holders.length,
    ...(statusHolders.length > 0 ? { holders: statusHolders } : {}),
    ...(token !== undefined ? { fencingToken: token.toString() } : {}),
    candidates: obs.pods.filter((p) => isCandidate(p, obs.lock.spec.candidates.selector)).length,
    queueLength: dec.queue,
    ...(queue.length > 0 ? { queue } : {}),
    ...(gen !== undefined ? { observedGeneration: gen } : {}),
    conditions: semaphoreConditions(obs, dec, prev, now),
  };
}

/** semaphoreConditions: Degraded and Ready as for every lock; Held True while at least one pod holds a permit. */
function semaphoreConditions(
  obs: SemaphoreObservation,
  dec: SemaphoreDecision,
  prev: DistributedLockStatus | undefined,
  now: Date,
): Condition[] {
  const gen = obs.lock.metadata.generation;
  const og = gen !== undefined ? { observedGeneration: gen } : {};
  const permits = obs.lock.spec.permits ?? 1;
  let conditions = degradedCondition(prev?.conditions ?? [], obs.fencing, og, now);
  const names = dec.holders.map((h) => h.holder.name).join(', ');
  conditions = setCondition(
    conditions,
    dec.holders.length > 0
      ? {
          type: ConditionType.Held,
          status: 'True',
          reason: Reason.Granted,
          message: `${dec.holders.length} of ${permits} permits held, by pods ${names}`,
          ...og,
        }
      : {
          type: ConditionType.Held,
          status: 'False',
          reason:
            dec.waiting === undefined || dec.waiting === 'AllPermitsHeld'
              ? Reason.Waiting
              : WAITING_REASON[dec.waiting],
          message:
            dec.waiting === undefined
              ? 'Nobody holds a permit'
              : dec.waiting === 'AllPermitsHeld'
                ? 'Every permit is taken by a term that may still be believed in'
                : WAITING_MESSAGE[dec.waiting],
          ...og,
        },
    now,
  );
  const exhausted =
    dec.waiting === 'TokenRegressed'
      ? {
          reason: Reason.LeaseTampered,
          message: `No fencing token is left to issue: status.fencingToken is ${obs.lock.status?.fencingToken ?? 'unset'} and Lease ${leaseName(obs.lock.metadata.name ?? '')} annotation ${TOKEN_ANNOTATION} is ${obs.anchor?.record.token?.toString() ?? 'unset'}; a token is at the largest token, 2^63-1. No grant until it is set back`,
        }
      : undefined;
  return readyCondition(conditions, obs.fencing, og, now, exhausted);
}
