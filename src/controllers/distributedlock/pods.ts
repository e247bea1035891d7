/**
 * Pure views of Pods for the lock controller: label-selector matching and candidate eligibility.
 * The per-lock label and annotation keys are the protocol's (src/protocol/names.ts).
 */
import type { V1Pod } from '@kubernetes/client-node';
import type { LabelSelector } from '../../api/v1alpha1/distributedlock.ts';
import type { HolderRef } from '../../protocol/holder.ts';
import type { PodKeys } from '../../protocol/names.ts';

/** PodSummary is what the lock controller needs to know of a pod. */
export interface PodSummary {
  readonly ref: HolderRef;
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
  readonly createdAt: number;
  readonly ready: boolean;
  readonly terminating: boolean;
  /**
   * terminated: the kubelet reported that the pod's containers have all stopped (phase Succeeded
   * or Failed, or every container status terminated). This is the confirmation that allows a
   * handoff before the lease expires; a pod that merely vanished is not confirmation.
   */
  readonly terminated: boolean;
}

/** summarizePod reduces a Pod to a PodSummary. */
export function summarizePod(pod: V1Pod): PodSummary {
  const md = pod.metadata ?? {};
  const phase = pod.status?.phase;
  const statuses = pod.status?.containerStatuses ?? [];
  const terminated =
    phase === 'Succeeded' ||
    phase === 'Failed' ||
    (statuses.length > 0 && statuses.every((s) => s.state?.terminated !== undefined));
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
  };
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
 * requestedAt: in Mutex mode, when the pod asked for the lock (its agent's request annotation),
 * or undefined when it has not asked (or the value is not a time).
 */
export function requestedAt(p: PodSummary, keys: PodKeys): number | undefined {
  const v = p.annotations[keys.request];
  if (v === undefined) return undefined;
  const t = Date.parse(v);
  return Number.isFinite(t) ? t : undefined;
}

/** byRequest orders Mutex requesters first come, first served (then by name for equal times). */
export function byRequest(keys: PodKeys): (a: PodSummary, b: PodSummary) => number {
  return (a, b) =>
    (requestedAt(a, keys) ?? 0) - (requestedAt(b, keys) ?? 0) ||
    (a.ref.name < b.ref.name ? -1 : a.ref.name > b.ref.name ? 1 : 0);
}
