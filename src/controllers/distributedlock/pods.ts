/**
 * Pure views of Pods for the lock controller: label-selector matching, candidate eligibility, and
 * the Mutex queue order (the controller's record of when it first saw each request, never the
 * time a pod wrote). The per-lock label and annotation keys are the protocol's (src/protocol/names.ts).
 */
import type { V1ContainerStatus, V1Pod } from '@kubernetes/client-node';
import type { LabelSelector, QueuedRequest } from '../../api/v1alpha1/distributedlock.ts';
import { sameHolder, type HolderRef } from '../../protocol/holder.ts';
import { PRIORITY_ANNOTATION, type PodKeys } from '../../protocol/names.ts';

/** PodSummary is what the lock controller needs to know of a pod. */
export interface PodSummary {
  readonly ref: HolderRef;
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
  readonly createdAt: number;
  readonly ready: boolean;
  readonly terminating: boolean;
  /**
   * terminated: the kubelet reported every container of the pod terminated (see
   * allContainersTerminated). This is the confirmation that allows a handoff before the lease
   * expires. The pod's phase is not: a pod marked Failed by the pod garbage collector after its
   * node was deleted, or by anyone with `pods/status` patch, may still be running; and a pod that
   * merely vanished is no confirmation either.
   */
  readonly terminated: boolean;
  /** priority: the pod's {@link PRIORITY_ANNOTATION} as an int32, 0 when absent or invalid (see parsePriority). */
  readonly priority: number;
  /** readySinceMs: the Ready condition's lastTransitionTime (epoch ms) while Ready, for preemption's hysteresis. */
  readonly readySinceMs?: number;
  /** invalidPriority: the annotation's value when it is set but not an int32 (reported in an Event), else undefined. */
  readonly invalidPriority?: string;
}

/** MIN_PRIORITY and MAX_PRIORITY bound {@link PRIORITY_ANNOTATION}: the int32 range, as PriorityClass values. */
export const MIN_PRIORITY = -2_147_483_648;
export const MAX_PRIORITY = 2_147_483_647;

/**
 * parsePriority reads a {@link PRIORITY_ANNOTATION} value: a canonical decimal int32 (optional `-`,
 * no leading zeros, no `+`, no spaces). Returns undefined for anything else, which the caller
 * treats as the default 0 — an invalid value must never move a pod ahead.
 */
export function parsePriority(value: string): number | undefined {
  if (!/^(0|-?[1-9][0-9]{0,9})$/.test(value)) return undefined;
  const n = Number(value);
  return n >= MIN_PRIORITY && n <= MAX_PRIORITY ? n : undefined;
}

/** summarizePod reduces a Pod to a PodSummary. */
export function summarizePod(pod: V1Pod): PodSummary {
  const md = pod.metadata ?? {};
  const phase = pod.status?.phase;
  const terminated = allContainersTerminated(pod);
  const ready =
    phase === 'Running' && (pod.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');
  return {
    ref: { name: md.name ?? '', uid: md.uid ?? '' },
    labels: md.labels ?? {},
    annotations: md.annotations ?? {},
    createdAt: md.creationTimestamp !== undefined ? new Date(md.creationTimestamp).getTime() : 0,
    ready: ready && !terminated,
    terminating: md.deletionTimestamp !== undefined,
    terminated,
    ...priorityOf(md.annotations?.[PRIORITY_ANNOTATION]),
    ...readySince(pod, ready && !terminated),
  };
}

function readySince(pod: V1Pod, ready: boolean): { readySinceMs?: number } {
  const at = pod.status?.conditions?.find((c) => c.type === 'Ready')?.lastTransitionTime;
  if (!ready || at === undefined) return {};
  const ms = new Date(at).getTime();
  return Number.isFinite(ms) ? { readySinceMs: ms } : {};
}

function priorityOf(value: string | undefined): { priority: number; invalidPriority?: string } {
  if (value === undefined) return { priority: 0 };
  const p = parsePriority(value);
  return p !== undefined ? { priority: p } : { priority: 0, invalidPriority: value };
}

/**
 * allContainersTerminated: the kubelet's own report that every container of the pod has stopped.
 * Every container the pod's spec names — each of `containers`, each of `initContainers` (native
 * sidecars, `restartPolicy: Always`, included: the fencepost agent is usually one, and while it
 * runs the holder may still act on its lock) and each of `ephemeralContainers` — must have a
 * status of its own name in the matching list (`containerStatuses`, `initContainerStatuses`,
 * `ephemeralContainerStatuses`) whose `state` is `terminated`. A container without a status, or
 * whose status is running or waiting (a crashed container backing off before a restart), counts
 * as possibly running.
 *
 * Pure. The phase is deliberately not read: `Failed` or `Succeeded` alone is no proof (the pod
 * GC sets `Failed`, with a DisruptionTarget condition of reason DeletionByPodGC, on the pods of a
 * deleted or out-of-service node without anyone having seen their containers stop).
 *
 * Caveat: container statuses are written through `pods/status` like the phase. A principal that
 * may patch `pods/status` in the lock's namespace can still forge them; only the kubelet (and the
 * control plane) should have that permission.
 */
export function allContainersTerminated(pod: V1Pod): boolean {
  const spec = pod.spec;
  const status = pod.status;
  const stopped = (names: readonly { name: string }[], statuses: readonly V1ContainerStatus[] | undefined): boolean =>
    names.every((c) => statuses?.find((s) => s.name === c.name)?.state?.terminated !== undefined);
  return (
    (spec?.containers.length ?? 0) > 0 &&
    stopped(spec?.containers ?? [], status?.containerStatuses) &&
    stopped(spec?.initContainers ?? [], status?.initContainerStatuses) &&
    stopped(spec?.ephemeralContainers ?? [], status?.ephemeralContainerStatuses)
  );
}

/**
 * matchesSelector evaluates a metav1.LabelSelector against labels (matchLabels and
 * matchExpressions ANDed). An empty selector matches nothing here: the CRD forbids it on locks,
 * and matching every pod would be the dangerous reading.
 */
export function matchesSelector(selector: LabelSelector, labels: Readonly<Record<string, string>>): boolean {
  const ml = Object.entries(selector.matchLabels ?? {});
  const me = selector.matchExpressions ?? [];
  if (ml.length === 0 && me.length === 0) return false;
  for (const [k, v] of ml) if (labels[k] !== v) return false;
  for (const req of me) {
    const has = Object.hasOwn(labels, req.key);
    const value = labels[req.key];
    const values = req.values ?? [];
    switch (req.operator) {
      case 'In':
        if (!has || value === undefined || !values.includes(value)) return false;
        break;
      case 'NotIn':
        if (has && value !== undefined && values.includes(value)) return false;
        break;
      case 'Exists':
        if (!has) return false;
        break;
      case 'DoesNotExist':
        if (has) return false;
        break;
    }
  }
  return true;
}

/** isCandidate: selected by the lock, Ready, and not terminating — eligible for a new grant. */
export function isCandidate(p: PodSummary, selector: LabelSelector): boolean {
  return p.ready && !p.terminating && matchesSelector(selector, p.labels);
}

/** byAge orders candidates: oldest first, then by name, so that grants are deterministic. */
export function byAge(a: PodSummary, b: PodSummary): number {
  return a.createdAt - b.createdAt || (a.ref.name < b.ref.name ? -1 : a.ref.name > b.ref.name ? 1 : 0);
}

/**
 * byPriority orders Election candidates: higher {@link PodSummary.priority} first, then
 * {@link byAge} (the order before priorities existed, so locks without the annotation behave as
 * before).
 */
export function byPriority(a: PodSummary, b: PodSummary): number {
  return b.priority - a.priority || byAge(a, b);
}

/**
 * requestedAt: in Mutex mode, the time the pod's agent wrote in its request annotation, or
 * undefined when it has not asked (or the value is not a time). The pod wrote it — its agent, the
 * app beside it with the same token, anyone with patch on it — so it says only *that* the pod
 * asked; when it asked is the controller's own record (see mutexOrder).
 */
export function requestedAt(p: PodSummary, keys: PodKeys): number | undefined {
  const v = p.annotations[keys.request];
  if (v === undefined) return undefined;
  const t = Date.parse(v);
  return Number.isFinite(t) ? t : undefined;
}

/** requestTimeOf: the pod's request annotation normalised to RFC 3339 (QueuedRequest.requestTime, informational), or undefined. */
export function requestTimeOf(p: PodSummary, keys: PodKeys): string | undefined {
  const t = requestedAt(p, keys);
  return t !== undefined ? new Date(t).toISOString() : undefined;
}

/**
 * recordIndex: where the pod's request stands in the controller's record, or -1 when the record
 * does not hold it. An entry is the request of one pod incarnation (name and uid) for as long as
 * the controller sees the request: the time in the annotation may change meanwhile — an agent
 * asking again while it waits (`POST …/acquire` again after a 423) keeps its place, and a forged
 * time gains nothing.
 */
function recordIndex(record: readonly QueuedRequest[], p: PodSummary): number {
  return record.findIndex((e) => e.pod === p.ref.name && e.uid === p.ref.uid);
}

/**
 * mutexOrder orders Mutex requesters first come, first served, by the controller's record
 * (status.queue: the order in which it first saw each request), never by the pod's own time:
 * - recorded requests first, in the record's order;
 * - then requests with no record (first seen in this pass; or beyond the record's bound; or after
 *   a cold start with no record), oldest pod first (metadata.creationTimestamp, which the API
 *   server sets), then by the pod's own request time (a tie-breaker only: it cannot move a
 *   request ahead of any recorded one, nor of an older pod), then by name.
 */
export function mutexOrder(record: readonly QueuedRequest[], keys: PodKeys): (a: PodSummary, b: PodSummary) => number {
  const rank = (p: PodSummary): number => {
    const i = recordIndex(record, p);
    return i < 0 ? Number.POSITIVE_INFINITY : i;
  };
  return (a, b) => {
    const ra = rank(a);
    const rb = rank(b);
    if (ra !== rb) return ra < rb ? -1 : 1;
    return (
      a.createdAt - b.createdAt ||
      (requestedAt(a, keys) ?? 0) - (requestedAt(b, keys) ?? 0) ||
      (a.ref.name < b.ref.name ? -1 : a.ref.name > b.ref.name ? 1 : 0)
    );
  };
}

/**
 * nextQueue: the controller's record of the Mutex queue after this observation — every pod that
 * asked (a request annotation that is a time), is selected and not terminating, except the holder,
 * in mutexOrder; a request already recorded keeps its entry (and its `since`), a new one gets
 * `since: now`. A pod not Ready keeps its place, and so does one whose request time changed.
 * Requests that leave (withdrawn, granted, the pod gone, terminating or deselected) drop out, so a
 * pod that asks again after that goes to the back. At
 * most `max` entries: the first ones in order (recorded ones always fit, the record being bounded
 * too).
 *
 * Pure; `now` is the controller's wall clock, shown in `since` only (the order is the list's).
 */
export function nextQueue(
  record: readonly QueuedRequest[],
  pods: readonly PodSummary[],
  o: {
    readonly keys: PodKeys;
    readonly selector: LabelSelector;
    readonly holder: HolderRef | undefined;
    readonly now: Date;
    readonly max: number;
  },
): QueuedRequest[] {
  return pods
    .filter(
      (p) =>
        !p.terminating &&
        matchesSelector(o.selector, p.labels) &&
        requestedAt(p, o.keys) !== undefined &&
        !sameHolder(p.ref, o.holder),
    )
    .sort(mutexOrder(record, o.keys))
    .slice(0, o.max)
    .map(
      (p) =>
        record[recordIndex(record, p)] ?? {
          pod: p.ref.name,
          uid: p.ref.uid,
          since: o.now.toISOString(),
          requestTime: requestTimeOf(p, o.keys) ?? '',
        },
    );
}

/**
 * slimPod keeps only what the lock controller reads of a pod (summarizePod, the indexes, the
 * patches' uid precondition), for the pod informer's cache: name, namespace, uid,
 * resourceVersion, labels, annotations, creation and deletion times; each container's name; the
 * phase, the conditions' type and status; each container status's name and state. Dropped:
 * managedFields, the rest of the spec (images, env, volumes…) and of the status. At 10,000 pods
 * that is most of the controller's heap.
 */
export function slimPod(pod: V1Pod): V1Pod {
  const md = pod.metadata ?? {};
  const names = (cs: readonly { name: string }[] | undefined): { name: string }[] | undefined =>
    cs?.map((c) => ({ name: c.name }));
  const statuses = (ss: readonly V1ContainerStatus[] | undefined): V1ContainerStatus[] | undefined =>
    ss?.map((s) => ({
      name: s.name,
      image: '',
      imageID: '',
      ready: s.ready,
      restartCount: s.restartCount,
      ...(s.state !== undefined ? { state: s.state } : {}),
    }));
  const initContainers = names(pod.spec?.initContainers);
  const ephemeralContainers = names(pod.spec?.ephemeralContainers);
  const status = pod.status;
  return {
    metadata: {
      ...(md.name !== undefined ? { name: md.name } : {}),
      ...(md.namespace !== undefined ? { namespace: md.namespace } : {}),
      ...(md.uid !== undefined ? { uid: md.uid } : {}),
      ...(md.resourceVersion !== undefined ? { resourceVersion: md.resourceVersion } : {}),
      ...(md.labels !== undefined ? { labels: md.labels } : {}),
      ...(md.annotations !== undefined ? { annotations: md.annotations } : {}),
      ...(md.creationTimestamp !== undefined ? { creationTimestamp: md.creationTimestamp } : {}),
      ...(md.deletionTimestamp !== undefined ? { deletionTimestamp: md.deletionTimestamp } : {}),
    },
    spec: {
      containers: names(pod.spec?.containers) ?? [],
      ...(initContainers !== undefined ? { initContainers } : {}),
      ...(ephemeralContainers !== undefined ? { ephemeralContainers } : {}),
    },
    ...(status !== undefined
      ? {
          status: {
            ...(status.phase !== undefined ? { phase: status.phase } : {}),
            ...(status.conditions !== undefined
              ? {
                  conditions: status.conditions.map((c) => ({
                    type: c.type,
                    status: c.status,
                    // kept for preemption's hysteresis (how long a candidate has been Ready)
                    ...(c.type === 'Ready' && c.lastTransitionTime !== undefined
                      ? { lastTransitionTime: c.lastTransitionTime }
                      : {}),
                  })),
                }
              : {}),
            ...optional('containerStatuses', statuses(status.containerStatuses)),
            ...optional('initContainerStatuses', statuses(status.initContainerStatuses)),
            ...optional('ephemeralContainerStatuses', statuses(status.ephemeralContainerStatuses)),
          },
        }
      : {}),
  };
}

function optional<K extends string, V>(key: K, value: V | undefined): Partial<Record<K, V>> {
  return value !== undefined ? ({ [key]: value } as Record<K, V>) : {};
}

/** withoutManagedFields drops metadata.managedFields (the server-side apply bookkeeping nobody here reads). */
export function withoutManagedFields<T extends { metadata?: { managedFields?: unknown } }>(obj: T): T {
  if (obj.metadata?.managedFields === undefined) return obj;
  const { managedFields: _drop, ...metadata } = obj.metadata;
  return { ...obj, metadata };
}
