/**
 * Indexes that spare the lock controller a scan of every pod (and every lock) of a namespace on
 * each reconcile and each pod event: with N locks each selecting its own pods, those scans made a
 * cold start quadratic in N. The informers keep the indexes (runtime/informer.ts `indexers`); the
 * functions here say what to index and how to look a selector up. Every lookup is followed by
 * the exact test (matchesSelector, the pod's marks), so an index only narrows, never decides.
 */
import type { V1Pod } from '@kubernetes/client-node';
import type { DistributedLock, LabelSelector } from '../../api/v1alpha1/distributedlock.ts';
import { lockOfHolderLabel, podKeys } from '../../protocol/names.ts';
import { matchesSelector } from './pods.ts';

/** POD_LABEL_INDEX: a pod under `ns\0key\0value` for each of its labels, and `ns\0key` (for Exists). */
export const POD_LABEL_INDEX = 'labels';
/** POD_MARK_INDEX: a pod under `ns\0lock` for each lock whose holder label or token annotation it carries. */
export const POD_MARK_INDEX = 'marks';
/** LOCK_SELECTOR_INDEX: a lock under one indexable term of its selector (see lockSelectorValues). */
export const LOCK_SELECTOR_INDEX = 'selector';

const SEP = '\0';
const labelValue = (ns: string, key: string, value: string): string => `${ns}${SEP}${key}${SEP}${value}`;
const labelKey = (ns: string, key: string): string => `${ns}${SEP}${key}`;
const unindexed = (ns: string): string => `${ns}${SEP}*`;

/** TOKEN_SUFFIX ends every lock's token annotation key on a pod (podKeys(lock).token). */
const TOKEN_SUFFIX = podKeys('').token;

/** podLabelValues indexes a pod by each label (key and value) and each label key. */
export function podLabelValues(pod: V1Pod): string[] {
  const ns = pod.metadata?.namespace ?? '';
  const out: string[] = [];
  for (const [k, v] of Object.entries(pod.metadata?.labels ?? {})) out.push(labelValue(ns, k, v), labelKey(ns, k));
  return out;
}

/** podMarkValues indexes a pod by each lock it is marked for (holder label, token annotation). */
export function podMarkValues(pod: V1Pod): string[] {
  const ns = pod.metadata?.namespace ?? '';
  const locks = new Set<string>();
  for (const k of Object.keys(pod.metadata?.labels ?? {})) {
    const lock = lockOfHolderLabel(k);
    if (lock !== undefined) locks.add(lock);
  }
  for (const k of Object.keys(pod.metadata?.annotations ?? {}))
    if (k.endsWith(TOKEN_SUFFIX)) locks.add(k.slice(0, -TOKEN_SUFFIX.length));
  return [...locks].map((l) => labelKey(ns, l));
}

/**
 * selectorTerms: for each requirement of the selector that an index can answer, the index values
 * whose union holds every pod meeting it (matchLabels and `In`: key and value; `Exists`: the key).
 * `NotIn` and `DoesNotExist` cannot narrow; a selector of only those has no terms.
 */
function selectorTerms(ns: string, selector: LabelSelector): string[][] {
  const terms: string[][] = [];
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) terms.push([labelValue(ns, k, v)]);
  for (const req of selector.matchExpressions ?? []) {
    if (req.operator === 'In') terms.push((req.values ?? []).map((v) => labelValue(ns, req.key, v)));
    else if (req.operator === 'Exists') terms.push([labelKey(ns, req.key)]);
  }
  return terms;
}

/** lockSelectorValues indexes a lock by the first indexable term of its selector, or as unindexed. */
export function lockSelectorValues(lock: DistributedLock): string[] {
  const ns = lock.metadata.namespace ?? '';
  return selectorTerms(ns, lock.spec.candidates.selector)[0] ?? [unindexed(ns)];
}

/** Indexed is the part of an informer cache these lookups use. */
export interface Indexed<T> {
  list(namespace?: string): T[];
  byIndex(index: string, value: string): T[];
}

/**
 * PodLookup finds the pods a lock reconcile needs without scanning the namespace: those its
 * selector selects and those marked as its holder.
 */
export interface PodLookup {
  /** selected: the pods of `namespace` that `selector` matches (an empty selector matches none). */
  selected(namespace: string, selector: LabelSelector): V1Pod[];
  /** marked: the pods of `namespace` that carry the holder label or token annotation of `lockName`. */
  marked(namespace: string, lockName: string): V1Pod[];
}

/**
 * podLookup answers {@link PodLookup} from a pod cache with {@link POD_LABEL_INDEX} and
 * {@link POD_MARK_INDEX}: a selector is looked up by its most selective indexable requirement
 * (the fewest pods), then every requirement is tested; a selector with none (only NotIn or
 * DoesNotExist) falls back to the namespace's list.
 */
export function podLookup(pods: Indexed<V1Pod>): PodLookup {
  return {
    selected(namespace, selector) {
      let best: V1Pod[] | undefined;
      for (const term of selectorTerms(namespace, selector)) {
        const found = term.length === 1 ? pods.byIndex(POD_LABEL_INDEX, term[0] ?? '') : union(pods, term);
        if (best === undefined || found.length < best.length) best = found;
        if (best.length === 0) break;
      }
      return (best ?? pods.list(namespace)).filter((p) => matchesSelector(selector, p.metadata?.labels ?? {}));
    },
    marked(namespace, lockName) {
      const keys = podKeys(lockName);
      return pods
        .byIndex(POD_MARK_INDEX, labelKey(namespace, lockName))
        .filter(
          (p) => p.metadata?.labels?.[keys.holder] !== undefined || p.metadata?.annotations?.[keys.token] !== undefined,
        );
    },
  };
}

function union(pods: Indexed<V1Pod>, values: readonly string[]): V1Pod[] {
  const seen = new Map<string, V1Pod>();
  for (const v of values) for (const p of pods.byIndex(POD_LABEL_INDEX, v)) seen.set(`${p.metadata?.name ?? ''}`, p);
  return [...seen.values()];
}

/**
 * locksSelecting: the locks of the pod's namespace whose selector matches the pod's labels, found
 * through {@link LOCK_SELECTOR_INDEX} (each lock under one of its terms: a pod lacking that label
 * cannot be selected) plus the unindexed locks, then tested.
 */
export function locksSelecting(locks: Indexed<DistributedLock>, pod: V1Pod): DistributedLock[] {
  const ns = pod.metadata?.namespace ?? '';
  const labels = pod.metadata?.labels ?? {};
  const found = new Map<string, DistributedLock>();
  const add = (value: string): void => {
    for (const l of locks.byIndex(LOCK_SELECTOR_INDEX, value)) found.set(l.metadata.name ?? '', l);
  };
  for (const [k, v] of Object.entries(labels)) {
    add(labelValue(ns, k, v));
    add(labelKey(ns, k));
  }
  add(unindexed(ns));
  return [...found.values()].filter((l) => matchesSelector(l.spec.candidates.selector, labels));
}
