/**
 * An in-memory API server for one namespace — Leases, Pods and DistributedLocks — and a token
 * counter, with the lock reconciler's ports (src/controllers/distributedlock/ports.ts) over them.
 * The model-based race test (test/property/race) and the reconciler's unit tests run the real
 * `DistributedLockReconciler` on it.
 *
 * What it keeps of the API server's semantics: every Lease write is a compare-and-swap on
 * metadata.resourceVersion (409 on a mismatch) and bumps it; a pod merge patch carries a uid
 * precondition (404 when the pod is gone, 409 when it is another incarnation); a JSON Patch's
 * `test` that fails is a 422 and nothing changes; a status merge patch removes keys sent as null.
 * Every change of a Lease is delivered, in order and synchronously, to the Lease watchers.
 *
 * A {@link Gate} runs before each operation of the controller's ports takes effect: the race test
 * waits there on fast-check's scheduler (so other processes interleave) and throws there to crash
 * the controller; the unit tests record the order of operations there.
 */
import type { V1Lease, V1Pod } from '@kubernetes/client-node';
import type { DistributedLock } from '../../src/api/v1alpha1/distributedlock.ts';
import type { Cache, ReconcilerDeps } from '../../src/controllers/distributedlock/ports.ts';
import type { FencingBackends } from '../../src/fencing/backends.ts';
import type { FenceResult } from '../../src/fencing/redis-fence.ts';
import type { EventRecorder } from '../../src/kube/events.ts';
import type { PodMetadataPatch } from '../../src/kube/pods.ts';
import type { Logger } from '../../src/observability/logger.ts';
import type { HolderRef } from '../../src/protocol/holder.ts';
import { LOCK_LABEL, leaseName } from '../../src/protocol/names.ts';
import type { Clock } from '../../src/runtime/clock.ts';
import { jsonPatchFinalizerIO, type JsonPatchOperation } from '../../src/runtime/finalizer.ts';

/** Operation names one call of the reconciler's ports (or of the token counter). */
export type Operation =
  | 'lease.get'
  | 'lease.create'
  | 'lease.replace'
  | 'lease.delete'
  | 'fencing.next'
  | 'pod.patch'
  | 'status.patch'
  | 'finalizer.patch';

/** Step is one operation on one object, as a Gate sees it. */
export interface Step {
  readonly op: Operation;
  readonly name: string;
}

/** Gate runs before a step takes effect: it may wait (a scheduler) or throw (a crash, a failure). */
export type Gate = (step: Step) => Promise<void>;

/** apiError is an error shaped like client-node's ApiException, for the runtime's classifiers. */
export const apiError = (statusCode: number, message: string): Error =>
  Object.assign(new Error(message), { statusCode });

/** TokenCounter models the Redis dispenser's FENCE_NEXT (src/fencing/redis-fence.ts): INCR, raised above the floor. */
export class TokenCounter {
  #value: bigint | undefined;
  /** noFloor removes the floor (a bare INCR), for calibration runs that must find S1 broken. */
  readonly noFloor: boolean;
  constructor(noFloor = false) {
    this.noFloor = noFloor;
  }
  next(floor: bigint): FenceResult {
    const existed = this.#value !== undefined;
    let token = (this.#value ?? 0n) + 1n;
    const refloored = !this.noFloor && token <= floor;
    if (refloored) token = floor + 1n;
    this.#value = token;
    return { token, refloored, existed, hadTtl: false };
  }
  /** reset is a Redis restart without persistence: the counter key is gone. */
  reset(): void {
    this.#value = undefined;
  }
}

/** PodSpec is what a test says about one pod. */
export interface PodSpec {
  readonly ref: HolderRef;
  readonly labels: Readonly<Record<string, string>>;
  readonly createdAt: Date;
  readonly ready: boolean;
}

/** ControllerPorts configures {@link MemoryCluster.reconcilerDeps}. */
export interface ControllerPorts {
  readonly gate: Gate;
  readonly clock: Clock;
  readonly log: Logger;
  readonly events?: EventRecorder;
  /** leaseView changes what the controller reads of a Lease (calibration: a view that misses renewals). */
  readonly leaseView?: (lease: V1Lease) => V1Lease;
}

const noEvents: EventRecorder = { emit: () => undefined };

/** MemoryCluster holds the objects of one namespace. */
export class MemoryCluster {
  readonly namespace: string;
  readonly counter: TokenCounter;
  readonly #leases = new Map<string, V1Lease>();
  readonly #pods = new Map<string, V1Pod>();
  readonly #locks = new Map<string, DistributedLock>();
  readonly #leaseWatchers: ((lease: V1Lease, kind: 'update' | 'delete') => void)[] = [];
  #rv: number;

  constructor(o: { namespace?: string; firstResourceVersion?: number; noFloor?: boolean } = {}) {
    this.namespace = o.namespace ?? 'default';
    this.#rv = o.firstResourceVersion ?? 100;
    this.counter = new TokenCounter(o.noFloor ?? false);
  }

  // ----- Leases -----

  /** lease returns the stored Lease (shared: never mutate it). */
  lease(name: string): V1Lease | undefined {
    return this.#leases.get(name);
  }

  /** createLease stores a new Lease; 409 AlreadyExists when one of that name exists. */
  createLease(body: V1Lease): V1Lease {
    const name = body.metadata?.name ?? '';
    if (this.#leases.has(name)) throw apiError(409, `leases "${name}" already exists`);
    return this.#store(name, body);
  }

  /** replaceLease is the compare-and-swap: `body` must carry the stored resourceVersion. */
  replaceLease(name: string, body: V1Lease): V1Lease {
    const current = this.#leases.get(name);
    if (current === undefined) throw apiError(404, `leases "${name}" not found`);
    if (body.metadata?.resourceVersion !== current.metadata?.resourceVersion)
      throw apiError(409, 'Operation cannot be fulfilled on leases: the object has been modified');
    return this.#store(name, body);
  }

  deleteLease(name: string): void {
    const gone = this.#leases.get(name);
    this.#leases.delete(name);
    if (gone !== undefined) for (const w of this.#leaseWatchers) w(gone, 'delete');
  }

  /** onLeaseChange: `w` sees every stored Lease (`update`) and every deleted one (`delete`), in order, synchronously. */
  onLeaseChange(w: (lease: V1Lease, kind: 'update' | 'delete') => void): void {
    this.#leaseWatchers.push(w);
  }

  #store(name: string, body: V1Lease): V1Lease {
    this.#rv += 1;
    const stored: V1Lease = {
      ...body,
      metadata: { ...body.metadata, name, namespace: this.namespace, resourceVersion: String(this.#rv) },
    };
    this.#leases.set(name, stored);
    for (const w of this.#leaseWatchers) w(stored, 'update');
    return stored;
  }

  /** emptyLockLease is the Lease the controller creates for `lock`, never granted. */
  emptyLockLease(lock: string): V1Lease {
    return this.createLease({
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: leaseName(lock), labels: { [LOCK_LABEL]: lock } },
      spec: {},
    });
  }

  // ----- Pods -----

  /** putPod creates or replaces a pod (a kubelet's status update keeps labels and annotations set by patches). */
  putPod(p: PodSpec): void {
    const old = this.#pods.get(p.ref.name);
    const kept = old?.metadata?.uid === p.ref.uid ? old.metadata : undefined;
    this.#pods.set(p.ref.name, {
      metadata: {
        name: p.ref.name,
        namespace: this.namespace,
        uid: p.ref.uid,
        creationTimestamp: p.createdAt,
        labels: { ...kept?.labels, ...p.labels },
        annotations: { ...kept?.annotations },
      },
      status: { phase: 'Running', conditions: [{ type: 'Ready', status: p.ready ? 'True' : 'False' }] },
    });
  }

  pod(name: string): V1Pod | undefined {
    return this.#pods.get(name);
  }

  pods(): V1Pod[] {
    return [...this.#pods.values()];
  }

  /** patchPodMetadata merges labels and annotations (null deletes) into the pod with that uid. */
  patchPodMetadata(pod: HolderRef, patch: PodMetadataPatch): void {
    const current = this.#pods.get(pod.name);
    if (current === undefined) throw apiError(404, `pods "${pod.name}" not found`);
    if (current.metadata?.uid !== pod.uid) throw apiError(409, `Precondition failed: UID in precondition: ${pod.uid}`);
    this.#pods.set(pod.name, {
      ...current,
      metadata: {
        ...current.metadata,
        labels: mergeKeys(current.metadata.labels, patch.labels),
        annotations: mergeKeys(current.metadata.annotations, patch.annotations),
      },
    });
  }

  // ----- DistributedLocks -----

  putLock(lock: DistributedLock): void {
    this.#locks.set(lock.metadata.name ?? '', structuredClone(lock));
  }

  /** deleteLock removes the lock at once, as the API server does once its finalizers are gone. */
  deleteLock(name: string): void {
    this.#locks.delete(name);
  }

  lock(name: string): DistributedLock | undefined {
    return this.#locks.get(name);
  }

  /** patchLockStatus is a JSON merge patch of the status subresource (null removes a key). */
  patchLockStatus(name: string, status: Record<string, unknown>): void {
    const lock = this.#locks.get(name);
    if (lock === undefined) throw apiError(404, `distributedlocks "${name}" not found`);
    const next: Record<string, unknown> = { ...lock.status };
    for (const [k, v] of Object.entries(status)) {
      if (v === null) delete next[k];
      else next[k] = structuredClone(v);
    }
    this.#locks.set(name, { ...lock, status: next });
  }

  /** patchLockJson applies the finalizer JSON Patches (test, add, remove on metadata); a failed test is a 422. */
  patchLockJson(name: string, ops: readonly JsonPatchOperation[]): void {
    const lock = this.#locks.get(name);
    if (lock === undefined) throw apiError(404, `distributedlocks "${name}" not found`);
    const md = structuredClone(lock.metadata);
    let finalizers = [...(md.finalizers ?? [])];
    for (const op of ops) {
      const [, , field, index] = op.path.split('/');
      if (op.op === 'test') {
        const actual =
          field === 'finalizers' ? (index !== undefined ? finalizers[Number(index)] : finalizers) : md.resourceVersion;
        if (JSON.stringify(actual) !== JSON.stringify(op.value)) throw apiError(422, `test failed at ${op.path}`);
      } else if (op.op === 'add') {
        if (index === '-') finalizers.push(String(op.value));
        else finalizers = [...(op.value as readonly string[])];
      } else {
        finalizers.splice(Number(index), 1);
      }
    }
    this.#locks.set(name, { ...lock, metadata: { ...md, finalizers } });
  }

  // ----- the reconciler's ports -----

  /** reconcilerDeps are the lock reconciler's ports over this cluster, each call through `gate`. */
  reconcilerDeps(o: ControllerPorts): ReconcilerDeps {
    const { gate } = o;
    const view = o.leaseView ?? ((l: V1Lease) => l);
    const ns = this.namespace;
    const cache = <T>(all: () => T[], one: (name: string) => T | undefined): Cache<T> => ({
      list: (namespace) => (namespace === undefined || namespace === ns ? all() : []),
      get: (namespace, name) => (namespace === ns ? one(name) : undefined),
      hasSynced: () => true,
    });
    const leaseOf = (name: string): V1Lease | undefined => {
      const l = this.#leases.get(name);
      return l === undefined ? undefined : view(l);
    };
    const fencing: FencingBackends = {
      forLock: (lock) => ({
        backend: 'Redis',
        key: `fencepost:fence:${ns}/${lock.metadata.name ?? ''}`,
        ready: true,
        dispenser: {
          next: async (key, floor) => {
            await gate({ op: 'fencing.next', name: key });
            return this.counter.next(floor);
          },
        },
      }),
      close: () => Promise.resolve(),
    };
    return {
      locks: cache(
        () => [...this.#locks.values()],
        (name) => this.#locks.get(name),
      ),
      leases: cache(() => [...this.#leases.keys()].flatMap((name) => leaseOf(name) ?? []), leaseOf),
      pods: cache(
        () => this.pods(),
        (name) => this.#pods.get(name),
      ),
      leaseStore: {
        get: async (_ns, name) => {
          await gate({ op: 'lease.get', name });
          return leaseOf(name);
        },
        create: async (_ns, lease) => {
          await gate({ op: 'lease.create', name: lease.metadata?.name ?? '' });
          return this.createLease(lease);
        },
        replace: async (_ns, name, lease) => {
          await gate({ op: 'lease.replace', name });
          return this.replaceLease(name, lease);
        },
        delete: async (_ns, name, options) => {
          await gate({ op: 'lease.delete', name });
          const rv = options?.resourceVersion;
          if (rv !== undefined && this.#leases.has(name) && this.#leases.get(name)?.metadata?.resourceVersion !== rv)
            throw apiError(409, 'Precondition failed: the object has been modified');
          this.deleteLease(name);
        },
      },
      podPatcher: {
        patchMetadata: async (_ns, pod, patch) => {
          await gate({ op: 'pod.patch', name: pod.name });
          this.patchPodMetadata(pod, patch);
        },
      },
      statusWriter: {
        patchStatus: async (lock, status) => {
          await gate({ op: 'status.patch', name: lock.metadata.name ?? '' });
          this.patchLockStatus(lock.metadata.name ?? '', status);
        },
      },
      finalizers: jsonPatchFinalizerIO<DistributedLock>(async (lock, ops) => {
        await gate({ op: 'finalizer.patch', name: lock.metadata.name ?? '' });
        this.patchLockJson(lock.metadata.name ?? '', ops);
      }),
      fencing,
      events: o.events ?? noEvents,
      metrics: undefined,
      clock: o.clock,
      log: o.log,
    };
  }
}

function mergeKeys(
  current: Readonly<Record<string, string>> | undefined,
  patch: Readonly<Record<string, string | null>> | undefined,
): Record<string, string> {
  const out: Record<string, string> = { ...current };
  for (const [k, v] of Object.entries(patch ?? {})) {
    if (v === null) delete out[k];
    else out[k] = v;
  }
  return out;
}
