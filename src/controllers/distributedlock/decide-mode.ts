/**
 * How an Election and a Mutex differ, as two small pure policies that the one-Lease decision
 * (decide.ts) consults; everything else — expiry, fencing, handovers, lock-delay, pod marks — is
 * the one path both share.
 *
 * - Election: every eligible pod is a candidate, highest priority first; nobody queues; a freed
 *   lock may go back to the pod that gave it up when no other pod is a candidate.
 * - Mutex: only pods that asked (their agent's request annotation) are candidates, first come first
 *   served in the order the controller first saw them ask (its record), never by the time a pod
 *   wrote; the others wait in a queue; a grant records the request it answers, and a freed lock is
 *   never handed straight back to the pod that gave it up while another request waits.
 */
import { sameHolder, type HolderRef } from '../../protocol/holder.ts';
import { podKeys } from '../../protocol/names.ts';
import type { LockRecord } from '../../lease/record.ts';
import type { Observation } from './decide.ts';
import { byPriority, matchesSelector, mutexOrder, requestedAt, type PodSummary } from './pods.ts';

/** ModePolicy is what decide.ts asks of the lock's mode. */
export interface ModePolicy {
  /** candidates: of the eligible pods, those that may be granted next, best first. */
  candidates(obs: Observation, eligible: PodSummary[]): PodSummary[];
  /** queueLength: how many candidates wait behind `holder`. */
  queueLength(candidates: readonly PodSummary[], holder: HolderRef | undefined): number;
  /**
   * answered: `c` is the holder that released the Lease and its pod still shows the request its
   * term answered: it withdrew it before releasing, and the pod cache has not seen that yet.
   */
  answered(obs: Observation, record: LockRecord, c: PodSummary): boolean;
  /** requestOf: what a Grant to `p` records of its request. */
  requestOf(obs: Observation, p: PodSummary): { request?: string };
  /** mayHandBack: a freed lock may go back to `departing` when no other candidate is left. */
  mayHandBack(obs: Observation, departing: HolderRef): boolean;
}

export const ELECTION: ModePolicy = {
  candidates: (_obs, eligible) => eligible.sort(byPriority),
  queueLength: () => 0,
  answered: () => false,
  requestOf: () => ({}),
  mayHandBack: () => true,
};

export const MUTEX: ModePolicy = {
  candidates: (obs, eligible) => {
    const keys = podKeys(obs.lock.metadata.name ?? '');
    return eligible.filter((p) => requestedAt(p, keys) !== undefined).sort(mutexOrder(obs.requests ?? [], keys));
  },
  queueLength: (candidates, holder) => candidates.filter((c) => !sameHolder(c.ref, holder)).length,
  answered: (obs, record, c) => {
    if (record.released !== 'Released' || record.grantedRequest === undefined) return false;
    if (record.lastHolder === undefined || !sameHolder(c.ref, record.lastHolder)) return false;
    return c.annotations[podKeys(obs.lock.metadata.name ?? '').request] === record.grantedRequest;
  },
  requestOf: (obs, p) => {
    const v = p.annotations[podKeys(obs.lock.metadata.name ?? '').request];
    return v !== undefined ? { request: v } : {};
  },
  // Not while another pod's request waits — even one that cannot be granted right now (its pod not
  // Ready through a stall keeps its place in the queue): the pods nextQueue (pods.ts) keeps,
  // selected, not terminating, a request annotation that is a time, Ready or not.
  mayHandBack: (obs, departing) => {
    const keys = podKeys(obs.lock.metadata.name ?? '');
    return !obs.pods.some(
      (p) =>
        !sameHolder(p.ref, departing) &&
        !p.terminating &&
        matchesSelector(obs.lock.spec.candidates.selector, p.labels) &&
        requestedAt(p, keys) !== undefined,
    );
  },
};

/** modeOf: the policy of the lock's spec.mode (a Semaphore is decided by decide-semaphore.ts). */
export function modeOf(obs: Observation): ModePolicy {
  return obs.lock.spec.mode === 'Mutex' ? MUTEX : ELECTION;
}
