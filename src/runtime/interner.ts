/**
 * One copy of each string that many cached objects repeat. JSON.parse gives every object its own
 * copy of every value, so 10,000 cached locks hold 10,000 copies of their namespace, apiVersion,
 * kind, finalizer, condition reasons and messages, and of creation times that a bulk create shares
 * to the second. An informer cache passes those values through an Interner before it keeps the
 * object; the object's content is unchanged, only which string instance it points at.
 *
 * The table is bounded: once full it is emptied and refilled with what comes next. Values that
 * repeat are re-entered at once; values that never repeat (timestamps over a long life) cost at
 * most the bound.
 */

/** INTERNED_MAX: distinct values an Interner keeps before it starts over. */
export const INTERNED_MAX = 16_384;

/** Interner hands out the first copy it saw of each string value. */
export class Interner {
  readonly #table = new Map<string, string>();

  /** of returns the kept copy of `s`, keeping `s` itself when the value is new. */
  of(s: string): string {
    const kept = this.#table.get(s);
    if (kept !== undefined) return kept;
    if (this.#table.size >= INTERNED_MAX) this.#table.clear();
    this.#table.set(s, s);
    return s;
  }

  /** size: how many values are kept (tests read it). */
  get size(): number {
    return this.#table.size;
  }
}

/** InternableObject is the part of a Kubernetes object `internShared` rewrites. */
interface InternableObject {
  apiVersion?: string;
  kind?: string;
  metadata?: {
    namespace?: string;
    creationTimestamp?: unknown;
    labels?: Record<string, string>;
    finalizers?: string[];
    ownerReferences?: { apiVersion: string; kind: string }[];
  };
  status?: unknown;
}

/** CONDITION_FIELDS: a status condition's fields that take few values (the Kubernetes convention's type, status, reason, message, lastTransitionTime). */
const CONDITION_FIELDS = ['type', 'status', 'reason', 'message', 'lastTransitionTime'] as const;

/**
 * internShared points the object's commonly shared strings at the interner's copies, in place: the
 * apiVersion and kind; the namespace, creation time, label values, finalizers and owners' kinds of
 * its metadata; and the fields of each `status.conditions` entry. Names, uids and
 * resourceVersions are left alone: they are unique, and interning them would only churn the table.
 * The object must be the caller's own (freshly parsed, or already copied by a transform).
 */
export function internShared<T extends object>(obj: T, interner: Interner): T {
  const o = obj as InternableObject;
  if (typeof o.apiVersion === 'string') o.apiVersion = interner.of(o.apiVersion);
  if (typeof o.kind === 'string') o.kind = interner.of(o.kind);
  const md = o.metadata;
  if (md !== undefined) {
    if (typeof md.namespace === 'string') md.namespace = interner.of(md.namespace);
    if (typeof md.creationTimestamp === 'string') md.creationTimestamp = interner.of(md.creationTimestamp);
    const labels = md.labels;
    if (labels !== undefined) for (const k of Object.keys(labels)) labels[k] = interner.of(labels[k] ?? '');
    const finalizers = md.finalizers;
    if (finalizers !== undefined) for (const [i, f] of finalizers.entries()) finalizers[i] = interner.of(f);
    for (const ref of md.ownerReferences ?? []) {
      ref.apiVersion = interner.of(ref.apiVersion);
      ref.kind = interner.of(ref.kind);
    }
  }
  const conditions = (o.status as { conditions?: unknown } | undefined)?.conditions;
  if (Array.isArray(conditions))
    for (const c of conditions as Record<string, unknown>[])
      for (const f of CONDITION_FIELDS) {
        const v = c[f];
        if (typeof v === 'string') c[f] = interner.of(v);
      }
  return obj;
}
