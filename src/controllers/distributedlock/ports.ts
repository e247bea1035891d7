/**
 * The lock reconciler's ports: everything it reads and writes, as narrow interfaces. The
 * composition root (setup.ts) fills them with the adapters of src/kube/ and src/transport/; the
 * model test (test/property/race) and the reconciler's unit tests fill them with in-memory stores,
 * so the very reconciler that runs in production runs there too.
 *
 * Every call that reaches the API server carries the reconcile's abort signal.
 */
import type { V1Lease, V1Pod } from '@kubernetes/client-node';
import type { DistributedLock } from '../../api/v1alpha1/distributedlock.ts';
import type { FencingBackends } from '../../fencing/backends.ts';
import type { EventRecorder } from '../../kube/events.ts';
import type { LeaseRequests } from '../../transport/resources.ts';
import type { PodPatcher } from '../../kube/pods.ts';
import type { Logger } from '../../observability/logger.ts';
import type { ControllerMetrics } from '../../observability/metrics.ts';
import type { Clock } from '../../runtime/clock.ts';
import type { FinalizerIO, JsonPatchOperation } from '../../runtime/finalizer.ts';
import type { PodLookup } from './pod-index.ts';
import type { StoreObserver } from './store-locks.ts';

/** Cache is the read side of an informer. Objects are shared: never mutate them. */
export interface Cache<T> {
  list(namespace?: string): T[];
  get(namespace: string | undefined, name: string): T | undefined;
  hasSynced(): boolean;
}

/**
 * LeaseStore reads and writes lock Leases: `get` (undefined when absent), `create`, `replace` (a
 * compare-and-swap on metadata.resourceVersion: the API server answers 409 to a stale body) and
 * `delete` (absent is not an error).
 */
export type LeaseStore = LeaseRequests<V1Lease>;

/** StatusWriter writes a lock's status as a JSON merge patch (a key set to null is removed). */
export interface StatusWriter {
  patchStatus(lock: DistributedLock, status: Record<string, unknown>, signal: AbortSignal): Promise<void>;
}

/**
 * LockMetadataWriter sends a JSON Patch to a lock's object (its metadata: the answer to a handover
 * request). A failed `test` is a 422 from the server.
 */
export interface LockMetadataWriter {
  jsonPatch(lock: DistributedLock, ops: readonly JsonPatchOperation[], signal: AbortSignal): Promise<void>;
}

/** ReconcilerDeps are the reconciler's collaborators, injected by the composition root. */
export interface ReconcilerDeps {
  /** locks, leases, pods: the informers' caches (reads go to the API server only after a 409, or a 409-like AlreadyExists, and at deletion). */
  readonly locks: Cache<DistributedLock>;
  readonly leases: Cache<V1Lease>;
  readonly pods: Cache<V1Pod>;
  /**
   * podLookup finds a lock's pods through the pod cache's indexes (pod-index.ts). Without it the
   * reconciler scans `pods.list(namespace)`: fine for tests, quadratic for a controller.
   */
  readonly podLookup?: PodLookup;
  /** leaseStore: direct Lease reads (before a grant) and every Lease write. */
  readonly leaseStore: LeaseStore;
  /** podPatcher: marks the holder pod and unmarks former holders. */
  readonly podPatcher: PodPatcher;
  /** statusWriter: the lock's status subresource. */
  readonly statusWriter: StatusWriter;
  /**
   * lockMetadata answers planned-handover requests on the lock's annotations. Without it (tests
   * that do not exercise handovers) requests are left unanswered.
   */
  readonly lockMetadata?: LockMetadataWriter;
  /** finalizers: the guarded add and remove of the lock's cleanup finalizer. */
  readonly finalizers: FinalizerIO<DistributedLock>;
  /** fencing: which token dispenser each lock uses. */
  readonly fencing: FencingBackends;
  /** stores: reads the locks with spec.store Redis or Redlock (never writes them); without it such a lock fails terminally. */
  readonly stores?: StoreObserver;
  /** events: the event sink (fire and forget: the recorder retries and rate-limits on its own). */
  readonly events: EventRecorder;
  readonly metrics: ControllerMetrics | undefined;
  readonly clock: Clock;
  readonly log: Logger;
}
