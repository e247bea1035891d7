/**
 * decideSemaphore — the pure decision for a Semaphore lock (spec.mode Semaphore, spec.permits N):
 * from the lock's anchor Lease, its permit Leases and its pods, and the controller's own monotonic
 * `nowMs`, which actions bring the world to the spec. No I/O, no clock reads. The design and its
 * reasons are in docs/design.md ("Semaphore") and /work/notes/semaphore.md (D1–D5).
 *
 * - Each permit `i` is its own Lease (permitLeaseName), judged exactly as decide.ts judges the one
 *   Lease of an Election or Mutex lock: a holder keeps its permit while it renews; it is gone when
 *   this controller has watched the Lease for a full lease duration without seeing a renewal, or
 *   the kubelet reported every container of its pod terminated (handoff.onPodTerminated); a
 *   permit whose term ended involuntarily waits out the lock-delay before it is granted again; a
 *   permit Lease created again after it was lost while held waits a full lease duration.
 * - The anchor (the lock's own Lease, leaseName) names no holder; its token annotation is the
 *   lock-wide high-water mark. Every grant's floor is the largest of the anchor's floor, every
 *   permit Lease's token and status.fencingToken, and the I/O raises the anchor to the new token
 *   (a compare-and-swap) before it writes the permit Lease, so that tokens are strictly increasing
 *   across all permits even with two controllers that both believe they lead.
 *
 * Invariants (test/unit/controllers/decide-semaphore.test.ts checks them on random observations):
 * - at most N pods hold or are granted a permit, counting every permit Lease whose holder may
 *   still believe (live holders, permits in lock-delay or in a lost-term wait, and permits lost
 *   with their Lease) — after a shrink that can be more than N, and then nothing is granted;
 * - no grant to a pod that holds a permit, nor two grants to one pod;
 * - no grant of a permit at or above N; no revocation of a holder that still renews;
 * - waiters are granted first come, first served (mutexOrder on the controller's record);
 * - every grant's floor is at least every token the observation knows of.
 *
 * The I/O performs the first Lease action of a decision and then decides again from what it wrote
 * (as for decide.ts), so the floors of the later grants in one decision are only indicative.
 */
import type { DistributedLock, QueuedRequest, Timings } from '../../api/v1alpha1/distributedlock.ts';
import { DEFAULT_HANDOFF_ON_POD_TERMINATED } from '../../api/v1alpha1/distributedlock.ts';
import { tokenFloor, type LostTerm } from '../../lease/record.ts';
import { sameHolder, type HolderRef } from '../../protocol/holder.ts';
import { podKeys } from '../../protocol/names.ts';
import { termTimingsOf } from '../../protocol/timings.ts';
import { MAX_TOKEN, tokenOrUndefined } from '../../protocol/token.ts';
import {
  EXPIRY_MARGIN_MS,
  FENCING_RETRY_MS,
  NOT_SYNCED_RETRY_MS,
  RESYNC_MS,
  type FencingState,
  type GrantCause,
  type LeaseView,
  type Waiting,
} from './decide.ts';
import { isCandidate, mutexOrder, requestedAt, type PodSummary } from './pods.ts';

/** PermitView is one observed permit Lease and its permit number. */
export interface PermitView {
  readonly permit: number;
  readonly lease: LeaseView;
}

/** LostPermit: a permit whose Lease is missing while the lock's status records a holder on it. */
export interface LostPermit extends LostTerm {
  readonly permit: number;
}

/** SemaphoreObservation is everything decideSemaphore needs, gathered by the I/O for one lock. */
export interface SemaphoreObservation {
  readonly lock: DistributedLock;
  readonly timings: Timings;
  /** anchor: the lock's own Lease (leaseName); undefined while it does not exist. */
  readonly anchor: LeaseView | undefined;
  /** permits: every permit Lease of the lock, in any order, indices at or above spec.permits included. */
  readonly permits: readonly PermitView[];
  /** pods: pods of the lock's namespace that it selects or that carry its marks. */
  readonly pods: readonly PodSummary[];
  /** podsSynced: the pod cache has synced; until it has, nothing is done on the absence of a pod. */
  readonly podsSynced: boolean;
  readonly fencing: FencingState;
  /** requests: the controller's record of the queue (status.queue or its newer copy), as for Mutex. */
  readonly requests?: readonly QueuedRequest[];
  /** lost: permits whose Lease is gone while a holder may still believe (from status; see LostPermit). */
  readonly lost?: readonly LostPermit[];
}

/** SemaphoreAction is one idempotent step toward the spec. */
export type SemaphoreAction =
  /** CreateAnchor: create the lock's own Lease (its resourceVersion seeds the first floor). */
  | { readonly type: 'CreateAnchor' }
  /** CreatePermit: create permit `permit`'s Lease, vacant; released `Lost` when `lost` says it was lost while held. */
  | { readonly type: 'CreatePermit'; readonly permit: number; readonly lost: LostTerm | undefined }
  /** GrantPermit: take a token above `floor`, raise the anchor to it, then CAS permit `permit`'s Lease to `to`. */
  | {
      readonly type: 'GrantPermit';
      readonly permit: number;
      readonly to: HolderRef;
      readonly previous: HolderRef | undefined;
      readonly cause: GrantCause;
      readonly floor: bigint;
    }
  /** RevokePermit: CAS the holder away (expired or terminated) when nobody takes the permit over now. */
  | {
      readonly type: 'RevokePermit';
      readonly permit: number;
      readonly holder: HolderRef;
      readonly cause: 'Expired' | 'HolderTerminated';
    }
  /** DeletePermit: delete a vacant permit Lease at or above spec.permits (its token is below the anchor's). */
  | { readonly type: 'DeletePermit'; readonly permit: number }
  /** MarkPermitHolderPod: label the holder pod and annotate it with its token and its permit's Lease. */
  | { readonly type: 'MarkPermitHolderPod'; readonly pod: HolderRef; readonly permit: number; readonly token: bigint }
  | { readonly type: 'UnmarkPod'; readonly pod: HolderRef };

/** SemaphoreWaiting says why a waiter is not granted this time. */
export type SemaphoreWaiting = Waiting | 'AllPermitsHeld';

/** PermitHolder is a holder that keeps its permit. */
export interface PermitHolder {
  readonly permit: number;
  readonly holder: HolderRef;
  readonly token: bigint | undefined;
  /** expiresInMs: how long until this controller would expire it. */
  readonly expiresInMs: number;
}

/** SemaphoreDecision is what to do now, and when to look again. */
export interface SemaphoreDecision {
  readonly actions: readonly SemaphoreAction[];
  readonly requeueAfterMs: number;
  /** holders: the holders that keep their permits, by permit. */
  readonly holders: readonly PermitHolder[];
  /** occupied: permits a holder may still believe in (holders, lock-delays, lost terms); may exceed N after a shrink. */
  readonly occupied: number;
  /** waiting: why the first waiter that is not granted now waits; undefined when nobody waits. */
  readonly waiting: SemaphoreWaiting | undefined;
  /** candidates: the eligible pods that asked and hold no permit, first come first served. */
  readonly candidates: readonly PodSummary[];
  /** queue: candidates left waiting after this decision's grants. */
  readonly queue: number;
}

/** Slot is one permit as judged now. */
type Slot =
  | { readonly kind: 'held'; readonly permit: number; readonly view: LeaseView; readonly expiresInMs: number }
  | {
      readonly kind: 'gone';
      readonly permit: number;
      readonly holder: HolderRef;
      readonly cause: 'Expired' | 'HolderTerminated';
    }
  /** waiting: vacant, but a former holder may still believe (lock-delay, lost-term wait) until `inMs`. */
  | { readonly kind: 'waiting'; readonly permit: number; readonly inMs: number; readonly why: Waiting }
  | { readonly kind: 'free'; readonly permit: number; readonly cause: GrantCause };

/** decideSemaphore returns the actions for one Semaphore lock at monotonic time nowMs. Pure and synchronous. */
export function decideSemaphore(obs: SemaphoreObservation, nowMs: number): SemaphoreDecision {
  const permits = obs.lock.spec.permits ?? 1;
  const keys = podKeys(obs.lock.metadata.name ?? '');
  const leaseHolders = obs.permits
    .map((p) => p.lease.record.holder)
    .concat(obs.anchor?.record.holder !== undefined ? [obs.anchor.record.holder] : [])
    .filter((h): h is HolderRef => h !== undefined);
  // Waiters: eligible pods that asked, in the order the controller first saw them ask, that are
  // named by no Lease of the lock (a pod holds at most one permit; a gone holder asks again after
  // its permit is revoked).
  const candidates = obs.pods
    .filter((p) => isCandidate(p, obs.lock.spec.candidates.selector) && requestedAt(p, keys) !== undefined)
    .filter((p) => !leaseHolders.some((h) => sameHolder(h, p.ref)))
    .sort(mutexOrder(obs.requests ?? [], keys));
  const quiet = (waiting: SemaphoreWaiting, requeueAfterMs: number, actions: SemaphoreAction[] = []) => ({
    actions,
    requeueAfterMs,
    holders: [],
    occupied: 0,
    waiting,
    candidates,
    queue: candidates.length,
  });
  if (!obs.podsSynced) return quiet('CacheNotSynced', NOT_SYNCED_RETRY_MS);
  if (obs.anchor === undefined) return quiet('LeaseNotRecorded', 0, [{ type: 'CreateAnchor' }]);

  // 1: Judge every permit Lease on its own, as decide.ts judges a lock's one Lease.
  const slots = obs.permits
    .slice()
    .sort((x, y) => x.permit - y.permit)
    .map((p) => judge(obs, p, nowMs));
  // An anchor that names a holder (written by hand, or left from an earlier lock of this name)
  // counts as a permit while that holder may renew it: never more than N believers.
  const anchorHolder = obs.anchor.record.holder;
  const anchorHeld =
    anchorHolder !== undefined &&
    nowMs - obs.anchor.observedAtMs <=
      Math.max(
        termTimingsOf(obs.anchor.record, obs.lock.spec).leaseDurationMs,
        termTimingsOf(undefined, obs.lock.spec).leaseDurationMs,
      );
  const lost = (obs.lost ?? []).filter((l) => !obs.permits.some((p) => p.permit === l.permit));

  const held = slots.filter((s) => s.kind === 'held');
  const waitingSlots = slots.filter((s) => s.kind === 'waiting');
  // A gone holder's permit is handed over at once only without a lock-delay; with one, it is
  // revoked and then waits the delay out, and counts as taken until then.
  const noDelay = obs.timings.lockDelayMs <= 0;
  const goneDelayed = noDelay ? 0 : slots.filter((s) => s.kind === 'gone').length;
  const occupied = held.length + waitingSlots.length + goneDelayed + lost.length + (anchorHeld ? 1 : 0);
  const holders: PermitHolder[] = held.map((s) => ({
    permit: s.permit,
    holder: s.view.record.holder ?? { name: '', uid: '' },
    token: s.view.record.token,
    expiresInMs: s.expiresInMs,
  }));

  // 2: Tokens. The floor is every token the observation knows of. An anchor below a permit's token
  // or status's was lowered by someone: the floor is then also the anchor's resourceVersion with
  // the Lease backend (every grant raised the anchor in a write of its own, so every token it
  // issued is at most that write's etcd revision), and the grant goes on above it, as in decide.ts.
  // Only a floor at the largest token stops grants: no token is left to issue.
  const permitMax = obs.permits.reduce<bigint | undefined>((m, p) => max(m, p.lease.record.token), undefined);
  const issued = tokenOrUndefined(obs.lock.status?.fencingToken);
  const anchorToken = obs.anchor.record.token;
  const lowered =
    anchorToken !== undefined &&
    ((permitMax !== undefined && anchorToken < permitMax) || (issued !== undefined && anchorToken < issued));
  const revision =
    lowered && obs.fencing.backend === 'Lease' && /^[0-9]{1,19}$/.test(obs.anchor.record.resourceVersion)
      ? BigInt(obs.anchor.record.resourceVersion)
      : undefined;
  const floor = max(max(max(tokenFloor(obs.anchor.record), permitMax), issued), revision) ?? 0n;
  const regressed = floor >= MAX_TOKEN;

  // 3: Hand the free capacity to the waiters, first come first served: first the permits whose
  // holder is gone (handed over directly, unless a lock-delay must pass), then vacant permits,
  // then permits with no Lease yet (created first; granted on the next pass). Never at or above N.
  const capacity = Math.max(0, permits - occupied);
  const canGrant = obs.fencing.ready && !regressed && obs.lock.status?.leaseName !== undefined && candidates.length > 0;
  const actions: SemaphoreAction[] = [];
  const granted: { readonly permit: number; readonly pod: PodSummary }[] = [];
  let next = 0;
  const take = (): PodSummary | undefined =>
    canGrant && next < capacity && next < candidates.length ? candidates[next++] : undefined;
  for (const s of slots) {
    if (s.kind !== 'gone') continue;
    const to = s.permit < permits && noDelay ? take() : undefined;
    if (to !== undefined) {
      granted.push({ permit: s.permit, pod: to });
      actions.push({ type: 'GrantPermit', permit: s.permit, to: to.ref, previous: s.holder, cause: s.cause, floor });
    } else {
      actions.push({ type: 'RevokePermit', permit: s.permit, holder: s.holder, cause: s.cause });
    }
  }
  for (const s of slots) {
    if (s.kind !== 'free') continue;
    if (s.permit >= permits) {
      actions.push({ type: 'DeletePermit', permit: s.permit });
      continue;
    }
    const to = take();
    if (to === undefined) continue;
    granted.push({ permit: s.permit, pod: to });
    actions.push({ type: 'GrantPermit', permit: s.permit, to: to.ref, previous: undefined, cause: s.cause, floor });
  }
  const known = new Set([...obs.permits.map((p) => p.permit), ...lost.map((l) => l.permit)]);
  for (const l of lost) actions.push({ type: 'CreatePermit', permit: l.permit, lost: l });
  for (let i = 0; i < permits; i++) {
    if (known.has(i)) continue;
    // Reserve the waiter for the permit being created, so that one creation serves one waiter.
    if (take() === undefined) break;
    actions.push({ type: 'CreatePermit', permit: i, lost: undefined });
  }

  // 4: Pod marks: every holder that keeps its permit carries its token; every other marked pod loses the marks.
  for (const p of obs.pods) {
    const h = holders.find((x) => sameHolder(x.holder, p.ref));
    const marked = p.labels[keys.holder] !== undefined || p.annotations[keys.token] !== undefined;
    if (h !== undefined && h.token !== undefined) {
      if (p.labels[keys.holder] !== 'true' || p.annotations[keys.token] !== h.token.toString())
        actions.push({ type: 'MarkPermitHolderPod', pod: p.ref, permit: h.permit, token: h.token });
    } else if (marked) {
      actions.push({ type: 'UnmarkPod', pod: p.ref });
    }
  }

  const queue = candidates.length - next;
  const recorded = obs.lock.status?.leaseName !== undefined;
  let waiting: SemaphoreWaiting | undefined;
  if (queue === 0) waiting = candidates.length === 0 && holders.length === 0 ? 'NoCandidates' : undefined;
  else if (regressed) waiting = 'TokenRegressed';
  else if (!obs.fencing.ready) waiting = 'FencingUnavailable';
  else if (!recorded) waiting = 'LeaseNotRecorded';
  else waiting = waitingSlots[0]?.why ?? (goneDelayed > 0 ? 'LockDelay' : 'AllPermitsHeld');
  // Look again at once after Lease work (the I/O does one Lease action per pass) and, as decide.ts,
  // after the status write that records the anchor; otherwise at the next expiry or end of a wait.
  const leaseWork = actions.some((a) => a.type !== 'MarkPermitHolderPod' && a.type !== 'UnmarkPod');
  const timers = [
    ...held.map((s) => s.expiresInMs + EXPIRY_MARGIN_MS),
    ...waitingSlots.map((s) => s.inMs + EXPIRY_MARGIN_MS),
  ];
  const requeueAfterMs =
    leaseWork || waiting === 'LeaseNotRecorded'
      ? 0
      : Math.min(waiting === 'FencingUnavailable' ? FENCING_RETRY_MS : RESYNC_MS, ...timers);
  return { actions, requeueAfterMs, holders, occupied, waiting, candidates, queue };
}

/** judge classifies one permit Lease at nowMs (the rules of decide.ts steps 1–3, for one permit). */
function judge(obs: SemaphoreObservation, p: PermitView, nowMs: number): Slot {
  const { record, observedAtMs } = p.lease;
  const elapsed = nowMs - observedAtMs;
  if (record.holder !== undefined) {
    // The term's length is the longest of the Lease's and the spec's (a shortened Lease must not
    // make the controller expire a holder before its own renew deadline).
    const leaseMs = Math.max(
      termTimingsOf(record, obs.lock.spec).leaseDurationMs,
      termTimingsOf(undefined, obs.lock.spec).leaseDurationMs,
    );
    const pod = obs.pods.find((x) => sameHolder(x.ref, record.holder));
    const handoff = obs.lock.spec.handoff?.onPodTerminated ?? DEFAULT_HANDOFF_ON_POD_TERMINATED;
    const terminated = handoff && pod?.terminated === true;
    if (elapsed <= leaseMs && !terminated)
      return { kind: 'held', permit: p.permit, view: p.lease, expiresInMs: leaseMs - elapsed };
    return {
      kind: 'gone',
      permit: p.permit,
      holder: record.holder,
      cause: terminated ? 'HolderTerminated' : 'Expired',
    };
  }
  if (record.released === 'Lost') {
    const waitMs = termTimingsOf(record, obs.lock.spec).leaseDurationMs + obs.timings.lockDelayMs;
    if (elapsed < waitMs) return { kind: 'waiting', permit: p.permit, inMs: waitMs - elapsed, why: 'LeaseLost' };
  }
  const involuntary = record.released === 'Expired' || record.released === 'Terminated';
  if (involuntary && obs.timings.lockDelayMs > 0 && elapsed < obs.timings.lockDelayMs)
    return { kind: 'waiting', permit: p.permit, inMs: obs.timings.lockDelayMs - elapsed, why: 'LockDelay' };
  const cause: GrantCause =
    record.released === 'Released'
      ? 'Released'
      : record.released === 'Expired' || record.released === 'Lost'
        ? 'Expired'
        : record.released === 'Terminated'
          ? 'HolderTerminated'
          : 'Vacant';
  return { kind: 'free', permit: p.permit, cause };
}

/** max of two optional tokens. */
function max(a: bigint | undefined, b: bigint | undefined): bigint | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return a > b ? a : b;
}
