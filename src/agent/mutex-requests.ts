/**
 * MutexRequests — the pod-annotation side of a lock, separate from the Lease side (LockSession):
 * a Mutex lock's request (first come, first served in the order the controller first sees it:
 * the timestamp is informational, never the queue order) with its run id, and its withdrawal.
 * Completed runs are recorded on the Lease, not here (run-completions.ts).
 *
 * Every write is a JSON merge patch of this pod's own annotations only, with the pod's UID in the
 * body as a precondition: a new pod of the same name is never changed by an old incarnation.
 * The annotation values are decided by the pure functions below; the class only sends them.
 */
import type { HolderRef } from '../protocol/holder.ts';
import { podKeys } from '../protocol/names.ts';
import type { Clock } from '../runtime/clock.ts';
import type { ApiClient } from '../transport/client.ts';
import { patchPodMetadata } from '../transport/resources.ts';

/** AnnotationPatch is a merge patch of annotations: a string sets a key, null removes it. */
export type AnnotationPatch = Readonly<Record<string, string | null>>;

/** requestAnnotations asks for `lock` at `now` (to the ms), with the run id or none (a stale one is removed). */
export function requestAnnotations(lock: string, now: Date, runId?: string): AnnotationPatch {
  const keys = podKeys(lock);
  return { [keys.request]: now.toISOString(), [keys.runId]: runId ?? null };
}

/** withdrawAnnotations removes the request and its run id. */
export function withdrawAnnotations(lock: string): AnnotationPatch {
  const keys = podKeys(lock);
  return { [keys.request]: null, [keys.runId]: null };
}

/**
 * RequestBound bounds one request: `signal` aborts it on the wire, and the call then rejects
 * promptly. Without it, a request waits as long as the HTTP client does.
 */
export interface RequestBound {
  readonly signal?: AbortSignal | undefined;
}

/** MutexRequestsOptions are what the annotation writes need; a LockSessionOptions is one. */
export interface MutexRequestsOptions {
  readonly api: ApiClient;
  readonly namespace: string;
  readonly lock: string;
  /** self is this pod incarnation (downward API POD_NAME and POD_UID); its UID guards every patch. */
  readonly self: HolderRef;
  /** clock stamps the request times (wall clock). */
  readonly clock: Clock;
}

/** MutexRequests writes one pod's requests for one lock. */
export class MutexRequests {
  readonly #o: MutexRequestsOptions;

  constructor(o: MutexRequestsOptions) {
    this.#o = o;
  }

  /**
   * request asks for the lock in Mutex mode: the pod's request annotation (now, to the ms) and
   * the run id, if any. The controller grants requesters first come, first served. Harmless in
   * Election mode, where every Ready candidate may be granted anyway.
   */
  async request(runId?: string): Promise<void> {
    await this.#patchOwnPod(requestAnnotations(this.#o.lock, this.#o.clock.now(), runId));
  }

  /** withdraw removes the request (Mutex mode), so that the pod is not granted again; `bound` aborts it. */
  async withdraw(bound?: RequestBound): Promise<void> {
    await this.#patchOwnPod(withdrawAnnotations(this.#o.lock), bound?.signal);
  }

  async #patchOwnPod(annotations: AnnotationPatch, signal?: AbortSignal): Promise<void> {
    // The uid makes it a precondition: a new pod of the same name is never changed by an old incarnation.
    await patchPodMetadata(this.#o.api, this.#o.namespace, this.#o.self, { annotations }, { signal });
  }
}
