/**
 * Finalizers as a 2×2 state machine with guarded patches, after kube-rs `finalizer()`.
 *
 * The two inputs are "does the object carry our finalizer?" and "is it being deleted?"; each of the
 * four cells has exactly one action, and every action is safe to repeat, so the reconciler stays
 * level-triggered: it never needs to know which event brought it here.
 *
 * | has finalizer | deleting | action                                                  |
 * |---------------|----------|---------------------------------------------------------|
 * | no            | no       | add the finalizer, then `apply` (on the object with it)  |
 * | no            | yes      | nothing: not ours (any more)                             |
 * | yes           | no       | `apply`                                                  |
 * | yes           | yes      | `cleanup`; remove the finalizer once it finished          |
 *
 * Finalizer edits are JSON Patches (RFC 6902) that start with a `test` operation, so an edit made
 * from a stale object fails instead of overwriting someone else's finalizer list.
 */
import type { Result } from './controller.ts';
import type { KubernetesObject } from '@kubernetes/client-node';

/** ReconcileResult is the controller loop's Result (one type for both). */
export type ReconcileResult = Result;

/**
 * FinalizerIO performs the two finalizer writes for {@link withFinalizer}.
 *
 * Contract: `addFinalizer` persists `name` in `obj`'s `metadata.finalizers`, and `removeFinalizer`
 * removes every occurrence of it, both on the server, each *guarded* against `obj` being stale: the
 * write must fail (throw) rather than apply to a version of the object whose finalizers differ from
 * the ones in `obj`. Both resolve without writing when there is nothing to do. They never mutate
 * `obj` (it may be a cached object, which must never be mutated).
 */
export interface FinalizerIO<T extends KubernetesObject = KubernetesObject> {
  /** addFinalizer resolves with the object's new resourceVersion when the write returned one. */
  addFinalizer(obj: T, name: string, signal?: AbortSignal): Promise<string | undefined | void>;
  removeFinalizer(obj: T, name: string, signal?: AbortSignal): Promise<void>;
}

/**
 * CleanupResult is what `cleanup` returns: a reconcile result, and `pending` when cleanup has
 * started but must wait for time to pass before it is finished (the finalizer stays; the object is
 * looked at again after `requeueAfterMs`).
 */
export interface CleanupResult extends ReconcileResult {
  readonly pending?: boolean;
}

/** FinalizerHandlers are the two halves of a reconciler under {@link withFinalizer}. */
export interface FinalizerHandlers<T extends KubernetesObject> {
  /**
   * apply drives the world toward `obj`'s spec. It runs only while the finalizer is in place and the
   * object is not being deleted, so everything it creates will be cleaned up. `added`: this very
   * call put the finalizer on, with a write conditional on its absence (jsonPatchFinalizerIO's
   * `test`), so nothing an earlier apply created can exist for this object; false when it was
   * already there.
   */
  apply(obj: T, o: { readonly added: boolean }): Promise<ReconcileResult>;
  /**
   * cleanup releases everything apply may have created. It must be idempotent and must tolerate
   * apply never having run (or having run half-way); it throws if anything is left to release.
   */
  cleanup(obj: T): Promise<CleanupResult>;
}

/**
 * withFinalizer runs one reconcile of `obj` through the finalizer state machine named `name` (see the
 * module table): it adds the finalizer before anything else happens, runs `handlers.apply` while the
 * object lives, and runs `handlers.cleanup` once it is being deleted, removing the finalizer only
 * after cleanup succeeded.
 *
 * After adding the finalizer it goes straight on to `apply`, with `obj` as the write left it (its
 * finalizers and the server's resourceVersion), rather than waiting for the update event to bring
 * the object back through the queue: at 10,000 new locks that wait was a whole pass of the queue
 * per lock. Returns `{}` for an object that is being deleted without our finalizer; otherwise what
 * `apply` or `cleanup` returned.
 *
 * Guarantees:
 * - `apply` never runs unless `obj` shows the finalizer, so nothing is created that deletion could
 *   skip cleaning up; it never runs once `obj` has a `deletionTimestamp`.
 * - The finalizer is removed only after `cleanup` resolved without `pending`; if `cleanup` throws,
 *   the error propagates and the finalizer stays, so the object cannot disappear with our
 *   resources still held; if it is pending, the finalizer stays and its requeue is returned.
 * - At most one write (add or remove) per call, issued through `io`, which guards it against `obj`
 *   being stale, and carrying `signal` (the reconcile's: aborted at shutdown).
 *
 * Assumptions:
 * - `obj` is a recent read of the object (the informer cache is fine: staleness is caught by the
 *   guarded writes, not assumed away). It is not mutated.
 * - The caller retries with backoff when this throws (the work queue's `addRateLimited`), and
 *   reconciles again on the update event after a finalizer is added.
 * - `name` is a domain-prefixed finalizer name (`fencepost.io/lease-cleanup`) that only this
 *   controller adds or removes.
 *
 * Caveats:
 * - `cleanup` can run more than once for one deletion: after a crash between cleanup and removal,
 *   or when the removal patch loses a race. Hence the idempotence requirement.
 * - A guarded write that loses a race does not fail with 409: the API server answers a failed JSON
 *   Patch `test` with HTTP 422 (reason `Invalid`), so `isConflict` is false for it. Treat it as a
 *   stale read and requeue; the next reconcile sees the fresh object.
 * - An object created with our finalizer already in `metadata.finalizers` goes straight to `apply`.
 * - A finalizer does not stop deletion from being *requested*; clients see the object with a
 *   `deletionTimestamp` until cleanup finishes. A cleanup that can never succeed blocks deletion
 *   forever; report that in a condition and let an operator remove the finalizer by hand.
 */
export async function withFinalizer<T extends KubernetesObject>(
  obj: T,
  name: string,
  io: FinalizerIO<T>,
  handlers: FinalizerHandlers<T>,
  signal?: AbortSignal,
): Promise<ReconcileResult> {
  const has = obj.metadata?.finalizers?.includes(name) ?? false;
  const deleting = obj.metadata?.deletionTimestamp !== undefined && obj.metadata.deletionTimestamp !== null;
  if (!has && !deleting) {
    const resourceVersion = await io.addFinalizer(obj, name, signal);
    const md = obj.metadata ?? {};
    return handlers.apply(
      {
        ...obj,
        metadata: {
          ...md,
          finalizers: [...(md.finalizers ?? []), name],
          ...(resourceVersion !== undefined ? { resourceVersion } : {}),
        },
      },
      { added: true },
    );
  }
  if (!has && deleting) return {};
  if (has && !deleting) return handlers.apply(obj, { added: false });
  // Throws → the finalizer stays and the caller retries with backoff; pending → it stays until later.
  const { pending, ...result } = await handlers.cleanup(obj);
  if (pending === true) return result;
  await io.removeFinalizer(obj, name, signal);
  return result;
}

/**
 * JsonPatchOperation is the subset of RFC 6902 operations the finalizer patches use. `path` is a
 * JSON Pointer (RFC 6901) into the object.
 */
export type JsonPatchOperation =
  | { readonly op: 'test'; readonly path: string; readonly value: string | readonly string[] }
  | { readonly op: 'add'; readonly path: string; readonly value: string | readonly string[] }
  | { readonly op: 'remove'; readonly path: string };

/**
 * JsonPatchFn sends `ops` as a JSON Patch (`Content-Type: application/json-patch+json`) to the object
 * `obj` names, and rejects if the server refuses it. Its result is ignored.
 */
export type JsonPatchFn<T extends KubernetesObject> = (
  obj: T,
  ops: readonly JsonPatchOperation[],
  signal?: AbortSignal,
) => Promise<unknown>;

/**
 * jsonPatchFinalizerIO builds a {@link FinalizerIO} from a JSON Patch sender, so this module stays
 * free of any one API client or kind.
 *
 * The patches it sends:
 * - add, when `obj` has finalizers: `test /metadata/finalizers == <obj's list>`, then
 *   `add /metadata/finalizers/- <name>` (fails if anyone changed the list since `obj` was read);
 * - add, when it has none: `test /metadata/resourceVersion == <obj's rv>`, then
 *   `add /metadata/finalizers [<name>]` (there is no list to test, so the whole object is the guard);
 * - remove: for each index `i` holding `name`, highest first, `test /metadata/finalizers/i == name`
 *   then `remove /metadata/finalizers/i` (fails if the list shifted under us).
 *
 * Both are no-ops (no request) when there is nothing to do: adding a finalizer `obj` already has, or
 * removing one it lacks. A failed `test` makes the API server reject the whole patch with HTTP 422.
 *
 * @throws Error from `addFinalizer` when `obj` has no finalizers and no `metadata.resourceVersion`
 *   (an object that was never read from the server), because the add could not be guarded.
 */
export function jsonPatchFinalizerIO<T extends KubernetesObject>(patchFn: JsonPatchFn<T>): FinalizerIO<T> {
  return {
    async addFinalizer(obj, name, signal) {
      const patch = addFinalizerPatch(obj, name);
      if (patch.length === 0) return undefined;
      const written = await patchFn(obj, patch, signal);
      const rv = (written as { metadata?: { resourceVersion?: unknown } } | undefined)?.metadata?.resourceVersion;
      return typeof rv === 'string' ? rv : undefined;
    },
    async removeFinalizer(obj, name, signal) {
      const patch = removeFinalizerPatch(obj, name);
      if (patch.length > 0) await patchFn(obj, patch, signal);
    },
  };
}

/**
 * addFinalizerPatch is the guarded JSON Patch {@link jsonPatchFinalizerIO} sends to add `name`, or
 * `[]` when `obj` already has it. Exported for callers that send patches themselves.
 *
 * @throws Error when the add cannot be guarded (no finalizers and no resourceVersion).
 */
export function addFinalizerPatch(obj: KubernetesObject, name: string): JsonPatchOperation[] {
  const current = obj.metadata?.finalizers ?? [];
  if (current.includes(name)) return [];
  if (current.length > 0) {
    return [
      { op: 'test', path: '/metadata/finalizers', value: [...current] },
      { op: 'add', path: '/metadata/finalizers/-', value: name },
    ];
  }
  // An empty list is omitted from the server's JSON, so `test` it via the resourceVersion instead.
  const rv = obj.metadata?.resourceVersion;
  if (rv === undefined || rv === '') {
    throw new Error('Cannot guard finalizer patch: object has no finalizers and no resourceVersion');
  }
  return [
    { op: 'test', path: '/metadata/resourceVersion', value: rv },
    { op: 'add', path: '/metadata/finalizers', value: [name] },
  ];
}

/**
 * removeFinalizerPatch is the guarded JSON Patch {@link jsonPatchFinalizerIO} sends to remove every
 * occurrence of `name`, or `[]` when `obj` lacks it. Indices are removed highest first, so each
 * `test` still addresses the index it was computed for. Exported for callers that send patches
 * themselves.
 */
export function removeFinalizerPatch(obj: KubernetesObject, name: string): JsonPatchOperation[] {
  const current = obj.metadata?.finalizers ?? [];
  const ops: JsonPatchOperation[] = [];
  for (let i = current.length - 1; i >= 0; i--) {
    if (current[i] !== name) continue;
    ops.push(
      { op: 'test', path: `/metadata/finalizers/${i}`, value: name },
      { op: 'remove', path: `/metadata/finalizers/${i}` },
    );
  }
  return ops;
}
