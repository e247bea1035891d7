/**
 * Builders for unit tests of the lock controller's pure core (decide, computeStatus, pods, record),
 * with functional options: `aLock('db', withLeaseSeconds(2))`, `aPod('web-0', unready())`,
 * `aLeaseView(heldBy(pod), token(7n), observedAt(1_000))`, `anObservation(withPods(a, b))`.
 *
 * Every builder returns a deep-frozen value: code under test that mutates what it was
 * given throws a TypeError (test modules are ES modules, hence strict mode) instead of passing by
 * accident. Options are applied in order to a private draft; a later option overrides an earlier one.
 *
 * Defaults are chosen so that the smallest call builds a sane world: a lock `db` in namespace
 * `default` with a 10 s lease selecting `app: web`; a Ready pod labelled `app: web`; a vacant Lease
 * never granted (no token, resourceVersion `100`); an observation with synced pods and a ready
 * Redis fencing backend.
 */
import {
  API_VERSION,
  KIND,
  resolveTimings,
  type DistributedLock,
  type LabelSelector,
  type Timings,
} from '../../src/api/v1alpha1/distributedlock.ts';
import type { FencingState, LeaseView, Observation } from '../../src/controllers/distributedlock/decide.ts';
import type { V1PodSpec, V1PodStatus } from '@kubernetes/client-node';
import { summarizePod, type PodSummary } from '../../src/controllers/distributedlock/pods.ts';
import type { LockRecord } from '../../src/lease/record.ts';
import type { HolderRef } from '../../src/protocol/holder.ts';
import { leaseName, podKeys } from '../../src/protocol/names.ts';
import { termTimingsOf } from '../../src/protocol/timings.ts';

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** deepFreeze freezes value and everything reachable from it, and returns it. */
export function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

// ----- DistributedLock -----

/** LockOption changes the lock draft built by {@link aLock}. */
export type LockOption = (d: Mutable<DistributedLock>) => void;

/** DEFAULT_LEASE_SECONDS is the lease duration of {@link aLock} and of a Lease made by {@link heldBy}. */
export const DEFAULT_LEASE_SECONDS = 10;
/** DEFAULT_SELECTOR is the candidate selector of {@link aLock}; {@link aPod} pods match it. */
export const DEFAULT_SELECTOR: LabelSelector = { matchLabels: { app: 'web' } };

/** aLock builds a DistributedLock named `name` in namespace `default`, generation 1. */
export function aLock(name: string, ...opts: LockOption[]): DistributedLock {
  const d: Mutable<DistributedLock> = {
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: { name, namespace: 'default', uid: `lock-${name}-uid`, generation: 1 },
    spec: { leaseDurationSeconds: DEFAULT_LEASE_SECONDS, candidates: { selector: DEFAULT_SELECTOR } },
    // As the controller leaves it once it has created the lock's Lease (decide grants only then).
    status: { leaseName: leaseName(name) },
  };
  for (const o of opts) o(d);
  return deepFreeze(d);
}

/** neverRecorded: a lock whose status does not record a Lease yet (its first reconciles). */
export const neverRecorded = (): LockOption => (d) => {
  delete d.status;
};
/** lockVersion sets the lock's metadata.resourceVersion. */
export const lockVersion =
  (resourceVersion: string): LockOption =>
  (d) => {
    d.metadata = { ...d.metadata, resourceVersion };
  };
/** withLeaseSeconds sets spec.leaseDurationSeconds. */
export const withLeaseSeconds =
  (seconds: number): LockOption =>
  (d) => {
    d.spec = { ...d.spec, leaseDurationSeconds: seconds };
  };
/** withLockDelay sets spec.lockDelaySeconds. */
export const withLockDelay =
  (seconds: number): LockOption =>
  (d) => {
    d.spec = { ...d.spec, lockDelaySeconds: seconds };
  };
/** withHandoff sets spec.handoff.onPodTerminated. */
export const withHandoff =
  (onPodTerminated: boolean): LockOption =>
  (d) => {
    d.spec = { ...d.spec, handoff: { onPodTerminated } };
  };
/** withSelector sets spec.candidates.selector. */
export const withSelector =
  (selector: LabelSelector): LockOption =>
  (d) => {
    d.spec = { ...d.spec, candidates: { selector } };
  };
/** withGeneration sets metadata.generation; undefined removes it. */
export const withGeneration =
  (generation: number | undefined): LockOption =>
  (d) => {
    const { generation: _g, ...rest } = d.metadata;
    d.metadata = generation === undefined ? rest : { ...rest, generation };
  };

// ----- Pods -----

/** PodOption changes the pod draft built by {@link aPod}. */
export type PodOption = (d: Mutable<PodSummary>) => void;

/** aPod builds the summary of a Running, Ready pod labelled `app: web`, uid `<name>-uid`, created at 1000 ms. */
export function aPod(name: string, ...opts: PodOption[]): PodSummary {
  const d: Mutable<PodSummary> = {
    ref: { name, uid: `${name}-uid` },
    labels: { app: 'web' },
    annotations: {},
    createdAt: 1_000,
    ready: true,
    terminating: false,
    terminated: false,
    priority: 0,
  };
  for (const o of opts) o(d);
  return deepFreeze(d);
}

/** ready makes the pod Ready (and not terminated). */
export const ready = (): PodOption => (d) => {
  d.ready = true;
  d.terminated = false;
};
/** unready makes the pod Running but not Ready. */
export const unready = (): PodOption => (d) => {
  d.ready = false;
};
/** terminating gives the pod a deletionTimestamp (it may still be Ready). */
export const terminating = (): PodOption => (d) => {
  d.terminating = true;
};
/** terminated reports all of the pod's containers terminated (which also makes it not Ready). */
export const terminated = (): PodOption => (d) => {
  d.terminated = true;
  d.ready = false;
};
/**
 * fromKubelet sets `ready` and `terminated` as summarizePod reads them from a pod's spec and
 * status, for rows that start from what the API server shows (a pod GC mark, a native sidecar).
 */
export const fromKubelet =
  (spec: V1PodSpec, status: V1PodStatus): PodOption =>
  (d) => {
    const s = summarizePod({ metadata: { name: d.ref.name, uid: d.ref.uid }, spec, status });
    d.ready = s.ready;
    d.terminated = s.terminated;
  };
/** createdAt sets the creation time, in epoch milliseconds. */
export const createdAt =
  (ms: number): PodOption =>
  (d) => {
    d.createdAt = ms;
  };
/** withLabels adds labels (an `undefined` value removes that label). */
export const withLabels =
  (labels: Readonly<Record<string, string | undefined>>): PodOption =>
  (d) => {
    d.labels = merged(d.labels, labels);
  };
/** withAnnotations adds annotations (an `undefined` value removes that annotation). */
export const withAnnotations =
  (annotations: Readonly<Record<string, string | undefined>>): PodOption =>
  (d) => {
    d.annotations = merged(d.annotations, annotations);
  };
/** withPriority sets the pod's fencepost.io/priority annotation and the priority summarizePod reads from it. */
export const withPriority =
  (value: string): PodOption =>
  (d) => {
    const s = summarizePod({
      metadata: { name: d.ref.name, uid: d.ref.uid, annotations: { 'fencepost.io/priority': value } },
    });
    d.annotations = merged(d.annotations, { 'fencepost.io/priority': value });
    d.priority = s.priority;
    if (s.invalidPriority !== undefined) d.invalidPriority = s.invalidPriority;
  };
/** withUid sets the pod's uid (a new incarnation of the same name). */
export const withUid =
  (uid: string): PodOption =>
  (d) => {
    d.ref = { ...d.ref, uid };
  };
/**
 * markedHolderOf puts the holder label and the token annotation of `lock` on the pod, as the
 * controller's MarkHolderPod does.
 */
export const markedHolderOf =
  (lock: DistributedLock | string, tokenValue: bigint): PodOption =>
  (d) => {
    const keys = podKeys(typeof lock === 'string' ? lock : (lock.metadata.name ?? ''));
    d.labels = merged(d.labels, { [keys.holder]: 'true' });
    d.annotations = merged(d.annotations, { [keys.token]: tokenValue.toString() });
  };

function merged(
  base: Readonly<Record<string, string>>,
  set: Readonly<Record<string, string | undefined>>,
): Record<string, string> {
  const out: Record<string, string> = { ...base };
  for (const [k, v] of Object.entries(set)) {
    if (v === undefined) delete out[k];
    else out[k] = v;
  }
  return out;
}

// ----- Lease record and view -----

interface LeaseDraft {
  record: Mutable<LockRecord>;
  observedAtMs: number;
}

/** LeaseOption changes the Lease draft built by {@link aLeaseView} or {@link aRecord}. */
export type LeaseOption = (d: LeaseDraft) => void;

/** DEFAULT_RESOURCE_VERSION is the resourceVersion of a built Lease: the token floor before the first grant. */
export const DEFAULT_RESOURCE_VERSION = '100';
/** GRANTED_AT is the wall time of a Lease's acquire and renew times made by {@link heldBy}. */
export const GRANTED_AT = new Date('2025-01-01T00:00:00Z');

function leaseDraft(opts: readonly LeaseOption[]): LeaseDraft {
  const d: LeaseDraft = {
    record: {
      holder: undefined,
      token: undefined,
      renewDeadlineMs: undefined,
      renewPeriodMs: undefined,
      acquireTime: undefined,
      renewTime: undefined,
      leaseDurationSeconds: undefined,
      transitions: 0,
      released: undefined,
      lastHolder: undefined,
      handover: undefined,
      preferredHolder: undefined,
      grantedRequest: undefined,
      completedRuns: [],
      resourceVersion: DEFAULT_RESOURCE_VERSION,
    },
    observedAtMs: 0,
  };
  for (const o of opts) o(d);
  return d;
}

/** aRecord builds a parsed Lease (a LockRecord); with no options, a vacant Lease never granted. */
export function aRecord(...opts: LeaseOption[]): LockRecord {
  return deepFreeze(leaseDraft(opts).record);
}

/** aLeaseView builds a LeaseView: a record and when the controller last saw its fingerprint change (default 0). */
export function aLeaseView(...opts: LeaseOption[]): LeaseView {
  const d = leaseDraft(opts);
  return deepFreeze({ record: d.record, observedAtMs: d.observedAtMs });
}

const refOf = (p: PodSummary | HolderRef): HolderRef => ('ref' in p ? p.ref : p);

/**
 * heldBy makes `pod` the holder: acquire and renew times GRANTED_AT (unless set), the default lease
 * duration (unless set), at least one transition; it clears released and lastHolder, as a grant does.
 */
export const heldBy =
  (pod: PodSummary | HolderRef): LeaseOption =>
  (d) => {
    const r = d.record;
    const ref = refOf(pod);
    r.holder = { name: ref.name, uid: ref.uid };
    r.acquireTime ??= GRANTED_AT;
    r.renewTime ??= GRANTED_AT;
    r.leaseDurationSeconds ??= DEFAULT_LEASE_SECONDS;
    const timings = termTimingsOf(undefined, { leaseDurationSeconds: r.leaseDurationSeconds }); // what a grant at that duration writes
    r.renewDeadlineMs ??= timings.renewDeadlineMs;
    r.renewPeriodMs ??= timings.renewPeriodMs;
    r.transitions = Math.max(r.transitions, 1);
    r.released = undefined;
    r.lastHolder = undefined;
  };
/** handoverTo puts the controller's handover mark on the Lease: to `pod`, for token `forToken`, drain `drainMs`. */
export const handoverTo =
  (pod: PodSummary | HolderRef, forToken: bigint, drainMs = 30_000): LeaseOption =>
  (d) => {
    const ref = refOf(pod);
    d.record.handover = { to: { name: ref.name, uid: ref.uid }, token: forToken, drainMs };
  };
/** preferredHolder sets the Lease's spec.preferredHolder (KEP-4355). */
export const preferredHolder =
  (value: string): LeaseOption =>
  (d) => {
    d.record.preferredHolder = value;
  };
/** token sets the Lease's token annotation (the high-water mark). */
export const token =
  (n: bigint): LeaseOption =>
  (d) => {
    d.record.token = n;
  };
/** released clears the holder as a release or revocation does, remembering it as lastHolder. */
export const released =
  (how: 'Released' | 'HandedOver' | 'Expired' | 'Terminated' | 'Revoked' | 'Lost'): LeaseOption =>
  (d) => {
    const r = d.record;
    if (r.holder !== undefined) r.lastHolder = r.holder;
    r.holder = undefined;
    r.acquireTime = undefined;
    r.renewTime = undefined;
    r.released = how;
  };
/** grantedRequest sets the request the term answered (Mutex; the Lease's fencepost.io/granted-request). */
export const grantedRequest =
  (value: string): LeaseOption =>
  (d) => {
    d.record.grantedRequest = value;
  };
/** lastHolder sets who released or lost the Lease (meaningful only while vacant). */
export const lastHolder =
  (pod: PodSummary | HolderRef): LeaseOption =>
  (d) => {
    const ref = refOf(pod);
    d.record.lastHolder = { name: ref.name, uid: ref.uid };
  };
/** observedAt sets the controller's monotonic time when it saw the Lease's fingerprint change. */
export const observedAt =
  (ms: number): LeaseOption =>
  (d) => {
    d.observedAtMs = ms;
  };
/** leaseSeconds sets spec.leaseDurationSeconds of the Lease (the current term's duration). */
export const leaseSeconds =
  (s: number): LeaseOption =>
  (d) => {
    d.record.leaseDurationSeconds = s;
  };
/** rv sets the Lease's resourceVersion. */
export const rv =
  (resourceVersion: string): LeaseOption =>
  (d) => {
    d.record.resourceVersion = resourceVersion;
  };
/** completedRun appends a completed run to the Lease's completed-runs annotation. */
export const completedRun =
  (runId: string, tokenOf: bigint, completedAt: Date, holder = 'web-a'): LeaseOption =>
  (d) => {
    d.record.completedRuns = [...d.record.completedRuns, { runId, token: tokenOf, holder, completedAt }];
  };
/** transitions sets spec.leaseTransitions. */
export const transitions =
  (n: number): LeaseOption =>
  (d) => {
    d.record.transitions = n;
  };
/** acquiredAt sets spec.acquireTime. */
export const acquiredAt =
  (t: Date): LeaseOption =>
  (d) => {
    d.record.acquireTime = t;
  };
/** renewedAt sets spec.renewTime. */
export const renewedAt =
  (t: Date): LeaseOption =>
  (d) => {
    d.record.renewTime = t;
  };

// ----- Observation -----

interface ObservationDraft {
  lock: DistributedLock;
  timings: Timings | undefined;
  lease: LeaseView | undefined;
  pods: PodSummary[];
  podsSynced: boolean;
  fencing: FencingState;
  handoverMarkSeenAtMs?: number;
  finalized?: 'now' | 'before';
}

/** ObservationOption changes the observation draft built by {@link anObservation}. */
export type ObservationOption = (d: ObservationDraft) => void;

/**
 * anObservation builds what observe() would gather: by default lock `db` ({@link aLock}), a vacant
 * Lease never granted, no pods, pods synced, Redis fencing ready. Timings are resolved from the
 * final lock unless {@link withTimings} set them.
 */
export function anObservation(...opts: ObservationOption[]): Observation {
  const d: ObservationDraft = {
    lock: aLock('db'),
    timings: undefined,
    lease: aLeaseView(),
    pods: [],
    podsSynced: true,
    fencing: { backend: 'Redis', ready: true },
  };
  for (const o of opts) o(d);
  return deepFreeze({
    lock: d.lock,
    timings: d.timings ?? resolveTimings(d.lock.spec),
    lease: d.lease,
    pods: d.pods,
    podsSynced: d.podsSynced,
    fencing: d.fencing,
    ...(d.handoverMarkSeenAtMs !== undefined ? { handoverMarkSeenAtMs: d.handoverMarkSeenAtMs } : {}),
    ...(d.finalized !== undefined ? { finalized: d.finalized } : {}),
  });
}

/** finalized: when the controller's finalizer came onto the lock (`now`: this reconcile added it). */
export const finalized =
  (when: 'now' | 'before'): ObservationOption =>
  (d) => {
    d.finalized = when;
  };

/** withHandoverMarkSeen: the controller first saw the Lease's handover mark at monotonic `ms`. */
export const withHandoverMarkSeen =
  (ms: number): ObservationOption =>
  (d) => {
    d.handoverMarkSeenAtMs = ms;
  };

/** withLock sets the lock (and, unless withTimings is used, the timings resolved from it). */
export const withLock =
  (lock: DistributedLock): ObservationOption =>
  (d) => {
    d.lock = lock;
  };
/** withTimings overrides the resolved timings. */
export const withTimings =
  (timings: Timings): ObservationOption =>
  (d) => {
    d.timings = timings;
  };
/** withLease sets the observed Lease. */
export const withLease =
  (lease: LeaseView): ObservationOption =>
  (d) => {
    d.lease = lease;
  };
/** noLease: the lock's Lease does not exist (yet). */
export const noLease = (): ObservationOption => (d) => {
  d.lease = undefined;
};
/** withPods sets the pods observed (replacing earlier ones). */
export const withPods =
  (...pods: PodSummary[]): ObservationOption =>
  (d) => {
    d.pods = pods;
  };
/** podsNotSynced: the pod cache has not synced yet. */
export const podsNotSynced = (): ObservationOption => (d) => {
  d.podsSynced = false;
};
/** fencingDown: the fencing backend cannot issue tokens, for `detail`. */
export const fencingDown =
  (detail = 'connect ECONNREFUSED 127.0.0.1:6379'): ObservationOption =>
  (d) => {
    d.fencing = { backend: d.fencing.backend, ready: false, detail };
  };
/** fencingNotConfigured: the lock asks for Redis and the controller was started without --redis-url. */
export const fencingNotConfigured = (): ObservationOption => (d) => {
  d.fencing = { backend: 'Redis', ready: false, detail: 'the controller has no --redis-url', notConfigured: true };
};
/** fencingBackend sets which backend issues tokens. */
export const fencingBackend =
  (backend: FencingState['backend']): ObservationOption =>
  (d) => {
    d.fencing = { ...d.fencing, backend };
  };
