// Condition types and reasons of a DistributedLock, the reasons of the Events fencepost records,
// and pure helpers that maintain a metav1.Condition list with the semantics of
// k8s.io/apimachinery meta.SetStatusCondition.
import type { Condition } from './distributedlock.ts';

/**
 * ConditionType lists the condition types of a DistributedLock. `Ready` is the summary: True when
 * the lock can be granted (valid, its fencing backend working, a token left to issue, its Lease's
 * token not lowered, its last grant attempt not failed). `Held`: True while someone holds the lock.
 * `Degraded`: True when the lock cannot make progress as configured (e.g. Redis is unavailable, so
 * no new grants); holders keep renewing regardless.
 */
export const ConditionType = { Ready: 'Ready', Held: 'Held', Degraded: 'Degraded' } as const;
/** ConditionType is one of the values of the ConditionType constant. */
export type ConditionType = (typeof ConditionType)[keyof typeof ConditionType];

/**
 * Reason lists the CamelCase reasons the controller puts on conditions. Messages carry the details
 * as human sentences; reasons stay few and stable, for alerts and tests to match on.
 */
export const Reason = {
  /** Initializing: set on every condition at the first visit, before anything was observed (status Unknown). */
  Initializing: 'Initializing',
  /** Granted: a candidate holds the lock. */
  Granted: 'Granted',
  /** Waiting: nobody holds the lock, because no eligible candidate exists (or, in Mutex mode, none asked). */
  Waiting: 'WaitingForCandidate',
  /** Released: the last holder released the lock. */
  Released: 'Released',
  /** HolderExpired: the last holder stopped renewing for a full lease duration. */
  HolderExpired: 'HolderExpired',
  /** LockDelay: the last holder expired or its containers terminated, and spec.lockDelaySeconds has not passed yet. */
  LockDelay: 'LockDelay',
  /**
   * LeaseLost: the lock's Lease was deleted while held (or the lock is being deleted); no grant
   * until a full lease duration has passed, since the old holder may not have seen it.
   */
  LeaseLost: 'LeaseLost',
  /**
   * LeaseTampered (Ready=False): the Lease's fencing token is below status.fencingToken (the last
   * token issued): someone lowered it; the next grant takes a token above every token known, and
   * Ready is False until then. Also (Ready=False, Held=False) when a token is at the largest
   * token, 2^63−1, so that none is left to issue: no grant until it is set back.
   */
  LeaseTampered: 'LeaseTampered',
  /** GrantFailed (Ready=False): the controller's last attempt to grant the lock failed; the message carries the error. */
  GrantFailed: 'GrantFailed',
  /** CacheNotSynced: the controller's pod cache has not synced yet; it decides nothing on absence. */
  CacheNotSynced: 'CacheNotSynced',
  /** StoreUnavailable: the lock's Redis or Redlock store (spec.store) does not answer the controller, or the controller has no URL for it. */
  StoreUnavailable: 'StoreUnavailable',
  /** RedisUnavailable: the Redis fencing backend could not issue a token. */
  RedisUnavailable: 'RedisUnavailable',
  /**
   * InvalidSpec (Ready=False): the spec passed admission but this controller cannot act on it —
   * spec.fencing.backend is Redis and the controller has no --redis-url. While nobody holds the
   * lock, the reconcile fails with a TerminalError (not retried) until the lock, its Lease or a pod changes.
   */
  InvalidSpec: 'InvalidSpec',
  /** AsExpected: the neutral reason of a condition in its healthy state (e.g. Degraded=False). */
  AsExpected: 'AsExpected',
} as const;
/** Reason is one of the values of the Reason constant. */
export type Reason = (typeof Reason)[keyof typeof Reason];

/**
 * EventReason lists the reasons of every Event fencepost records. Events mark the transitions
 * people care about, once per transition (never once per reconcile); conditions carry the current
 * state. Like condition reasons they are CamelCase and stable, for alerts and `kubectl get events
 * --field-selector reason=…` to match on; the message carries the details.
 */
export const EventReason = {
  /** LeaseGranted (Normal, on the lock): a pod was granted the lock; the message names it, its token and why. */
  LeaseGranted: 'LeaseGranted',
  /** HolderExpired (Warning, on the lock): the holder stopped renewing for a full lease duration; its term was ended. */
  HolderExpired: 'HolderExpired',
  /** HolderTerminated (Warning, on the lock): the kubelet reported every container of the holder's pod terminated (spec.handoff.onPodTerminated); its term was ended. */
  HolderTerminated: 'HolderTerminated',
  /** LeaseLost (Warning, on the lock): the lock's Lease was deleted while held; it was created again and the first grant waits a full lease duration. */
  LeaseLost: 'LeaseLost',
  /**
   * LeaseTampered (Warning, on the lock): the Lease's fencing token went below status.fencingToken
   * (someone lowered it; the message names both values and the floor the next grant is taken
   * above), or a token reached 2^63−1 so that no grant is possible until it is set back.
   */
  LeaseTampered: 'LeaseTampered',
  /** CompletionRefused (Warning, on the lock): a completed run on the Lease was not recorded: its completedAt is in the future, or its token is above every token of the Lease. */
  CompletionRefused: 'CompletionRefused',
  /** FencingUnavailable (Warning, on the lock): the fencing backend cannot issue tokens; no new grants, holders keep renewing. */
  FencingUnavailable: 'FencingUnavailable',
  /** FencingAvailable (Normal, on the lock): the fencing backend issues tokens again. */
  FencingAvailable: 'FencingAvailable',
  /** FencingRefloored (Warning, on the lock): the Redis counter had a TTL, was missing, or was behind; it was repaired and the token raised above the Lease's. */
  FencingRefloored: 'FencingRefloored',
  /** InvalidPriority (Warning, on the lock): a candidate pod's fencepost.io/priority is not an int32; it counts as 0. Once per pod and value. */
  InvalidPriority: 'InvalidPriority',
  /** HandoverStarted (Normal, on the lock): a planned handover was accepted; the holder's Lease is marked and its agent drains. */
  HandoverStarted: 'HandoverStarted',
  /** HandoverCompleted (Normal, on the lock): the holder released at the end of a planned handover and the chosen pod was granted. */
  HandoverCompleted: 'HandoverCompleted',
  /** HandoverRefused (Warning, on the lock): a planned handover request was refused; the message says why (target not a candidate, token moved on…). */
  HandoverRefused: 'HandoverRefused',
  /** HandoverTimedOut (Warning, on the lock): the holder did not release by the drain deadline plus grace; nothing was revoked, it keeps the lock. */
  HandoverTimedOut: 'HandoverTimedOut',
  /** ForceReleased (Warning, on the lock): a user asked for a forced release and the controller ended the holder's grant; only fencing guards stop the released holder's writes. */
  ForceReleased: 'ForceReleased',
  /** StoreGranted (Normal, on the lock): a Redis or Redlock store lock was taken; the message names the holder pod (if any) and the token. */
  StoreGranted: 'StoreGranted',
  /** StoreReleased (Normal, on the lock): the holder of a store lock released it (heard on its release channel). */
  StoreReleased: 'StoreReleased',
  /** LockLost (Warning, on the agent's own pod): the agent stepped down from its term (see docs/agent.md). */
  LockLost: 'LockLost',
} as const;
/** EventReason is one of the values of the EventReason constant. */
export type EventReason = (typeof EventReason)[keyof typeof EventReason];

/**
 * findCondition returns the condition of the given type, or undefined when the list has none.
 * Condition lists are list-maps keyed by type, so there is at most one.
 */
export function findCondition(list: readonly Condition[] | undefined, type: string): Condition | undefined {
  return list?.find((c) => c.type === type);
}

/**
 * setCondition returns a new list in which the condition of `c.type` is `c`, with metav1
 * semantics (meta.SetStatusCondition):
 * - a condition of a new type is appended, with lastTransitionTime = now;
 * - an existing one keeps its position; its status, reason, message and observedGeneration are
 *   replaced, and its lastTransitionTime changes to now only when its status changed.
 *
 * Pure: the input list and its conditions are not modified. `now` is rendered at the second
 * precision of metav1.Time (RFC 3339, e.g. `2024-05-01T12:00:00Z`), so that an unchanged list
 * round-trips through the API server unchanged.
 */
export function setCondition(
  list: readonly Condition[],
  c: Omit<Condition, 'lastTransitionTime'>,
  now: Date,
): Condition[] {
  const existing = findCondition(list, c.type);
  if (existing === undefined) return [...list, { ...c, lastTransitionTime: toMetaTime(now) }];
  const lastTransitionTime = existing.status === c.status ? existing.lastTransitionTime : toMetaTime(now);
  const updated: Condition = { ...c, lastTransitionTime };
  return list.map((old) => (old.type === c.type ? updated : old));
}

/** toMetaTime renders a Date like metav1.Time: RFC 3339 in UTC, whole seconds. */
function toMetaTime(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}
