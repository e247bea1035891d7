/**
 * startLockController declares the DistributedLock controller with the builder (runtime/builder.ts):
 * the locks as its primary kind, their Leases and the candidate pods mapped to lock keys, and fills
 * the reconciler's ports (ports.ts) with the API adapters of src/kube/. The builder derives the
 * informers, the work queue and the workers, which start only after every cache has synced, so
 * that nothing is decided on the absence of an object not yet listed.
 */
import type { V1Lease, V1Pod } from '@kubernetes/client-node';
import { GROUP, KIND, PLURAL, VERSION, storeOf, type DistributedLock } from '../../api/v1alpha1/distributedlock.ts';
import { fencingBackends, type FencingBackends } from '../../fencing/backends.ts';
import { customResourceWriterOver } from '../../kube/custom-resources.ts';
import { eventRecorder } from '../../kube/events.ts';
import { leaseRequests } from '../../transport/resources.ts';
import { podPatcherOver } from '../../kube/pods.ts';
import { apiClientFor, listPages, type KubeconfigSource } from '../../kube/api-client.ts';
import type { Logger } from '../../observability/logger.ts';
import type { ControllerMetrics, LockStateCounts } from '../../observability/metrics.ts';
import { parseHolderIdentity } from '../../protocol/holder.ts';
import { LOCK_LABEL, leaseName } from '../../protocol/names.ts';
import { ControllerBuilder, keyOf } from '../../runtime/builder.ts';
import type { Timer, TimerClock } from '../../runtime/clock.ts';
import type { ObjectKey, Reconciler } from '../../runtime/controller.ts';
import { jsonPatchFinalizerIO } from '../../runtime/finalizer.ts';
import { superviseInformer } from '../../runtime/informer.ts';
import { controllerHooks, registerControllerSeries } from './controller-metrics.ts';
import { leaseToLock, podToLocks } from './mappers.ts';
import {
  LOCK_SELECTOR_INDEX,
  POD_LABEL_INDEX,
  POD_MARK_INDEX,
  lockSelectorValues,
  podLabelValues,
  podLookup,
  podMarkValues,
  type Indexed,
} from './pod-index.ts';
import { slimPod, withoutManagedFields } from './pods.ts';
import type { Cache } from './ports.ts';
import { DistributedLockReconciler } from './reconciler.ts';
import type { StoreObserver } from './store-locks.ts';
import type { ShardGate } from '../sharding/shard-manager.ts';

/** LockControllerOptions configures startLockController. */
export interface LockControllerOptions {
  /** kc: the API client, or a kubeconfig one is made for (every request and watch goes through it). */
  readonly kc: KubeconfigSource;
  readonly redisUrl: string | undefined;
  /** namespace: watch only this one; default all namespaces. */
  readonly namespace?: string | undefined;
  readonly workers?: number;
  readonly identity: string;
  readonly clock: TimerClock;
  readonly log: Logger;
  readonly metrics?: ControllerMetrics;
  readonly cacheSyncTimeoutMs?: number;
  /**
   * podLabelSelector: list and watch only the pods it matches (a label selector string), so that
   * the pod cache holds the candidates, not every pod of the namespace; a pod it does not match is
   * invisible to the controller (never a candidate). Undefined: every pod.
   */
  readonly podLabelSelector?: string;
  /**
   * fencing replaces the token backends made from redisUrl. For the safety suite's calibration
   * only (a dispenser with a protection removed must make the suite fail); production passes none.
   */
  readonly fencing?: FencingBackends;
  /** stores: reads the locks with spec.store Redis or Redlock (store-observer.ts); shared by every namespace's controller, closed by the caller. */
  readonly stores?: StoreObserver;
  /**
   * podView rewrites each cached pod before the reconciler reads it. For the safety suite's
   * calibration only (test/safety/phase-proof-controller.ts makes a pod marked Failed look as if
   * its containers had stopped: the old reading, which took pod phase as proof that a lost node's
   * processes had ended); production passes none.
   */
  readonly podView?: (pod: V1Pod) => V1Pod;
  /**
   * lockView rewrites each cached DistributedLock before the reconciler reads it. For the safety
   * suite's calibration only (test/safety/over-granting-controller.ts: a Semaphore shown with one
   * permit more than it has); never set in production.
   */
  readonly lockView?: (lock: DistributedLock) => DistributedLock;
  /**
   * shards: act only for the locks of the shards this replica holds (controllers/sharding/); keys
   * of other shards are neither queued nor reconciled, and a shard's locks are queued when it is
   * gained. Undefined: every lock (one active replica, elected on the controller's Lease).
   */
  readonly shards?: ShardGate;
}

/** LockController is a running controller. */
export interface LockController {
  /** synced: every informer has delivered its first list. */
  synced(): boolean;
  /** watching: every informer currently has a live watch. */
  watching(): boolean;
  stop(): Promise<void>;
}

/** startLockController starts informers, waits for them to sync, then starts the workers. */
export async function startLockController(o: LockControllerOptions): Promise<LockController> {
  const { clock, log, metrics } = o;
  // Every request goes through the one API client (transport/): watches directly, lists and writes
  // as plain JSON (kube/json-client.ts is its port).
  const api = apiClientFor(o.kc);
  const name = 'distributedlock';
  const workers = o.workers ?? 4;
  const b = new ControllerBuilder({
    name,
    group: GROUP,
    kind: KIND,
    watcher: api,
    clock,
    log,
    namespace: o.namespace,
    informer: superviseInformer,
    pages: (path, labelSelector) => listPages(api, path, labelSelector),
    workers,
    syncTimeoutMs: o.cacheSyncTimeoutMs,
    ...(metrics !== undefined ? { hooks: controllerHooks(metrics, name) } : {}),
  });
  const locks = b.for<DistributedLock>({
    resource: { group: GROUP, version: VERSION, plural: PLURAL },
    transform: withoutManagedFields,
    indexers: { [LOCK_SELECTOR_INDEX]: lockSelectorValues },
  });
  // The reconciler is told of every Lease the informer delivers (in order, before its lock is
  // queued), so that it stops preferring its own last write once the cache has caught up with it.
  const leases = b.watches<V1Lease>(
    {
      resource: { group: 'coordination.k8s.io', version: 'v1', plural: 'leases' },
      labelSelector: LOCK_LABEL,
      transform: withoutManagedFields,
    },
    leaseToLock,
    (k, l, kind) => {
      reconciler.leaseDelivered(k, l, kind === 'delete');
    },
  );
  const pods = b.watches<V1Pod>(
    {
      resource: { group: '', version: 'v1', plural: 'pods' },
      ...(o.podLabelSelector !== undefined ? { labelSelector: o.podLabelSelector } : {}),
      transform: slimPod,
      indexers: { [POD_LABEL_INDEX]: podLabelValues, [POD_MARK_INDEX]: podMarkValues },
    },
    (p) => podToLocks(locks, p),
  );

  // Every lock's Degraded condition follows the Redis connection: re-check them all when it changes.
  // The workers start once Redis has answered (or FENCING_CONNECT_WAIT_MS passed): a lock
  // reconciled before would be found FencingUnavailable, written so, and done again at once.
  let fencingConnected = (): void => undefined;
  const connected = new Promise<void>((resolve) => {
    fencingConnected = resolve;
  });
  const fencing =
    o.fencing ??
    fencingBackends(o.redisUrl, (ready) => {
      if (ready) fencingConnected();
      b.enqueueAll();
    });
  const awaitFencing = o.fencing === undefined && o.redisUrl !== undefined && o.redisUrl !== '';
  const lockWriter = customResourceWriterOver(api, { group: GROUP, version: VERSION, plural: PLURAL });
  const lockCache = o.lockView === undefined ? locks : viewedCache(locks, o.lockView);
  const podCache = o.podView === undefined ? pods : viewedCache(pods, o.podView);
  const reconciler = new DistributedLockReconciler({
    locks: lockCache,
    leases,
    pods: podCache,
    podLookup: podLookup(podCache),
    leaseStore: leaseRequests<V1Lease>(api),
    podPatcher: podPatcherOver(api),
    statusWriter: {
      patchStatus: (lock, status, signal) =>
        lockWriter.mergePatchStatus(lock.metadata.namespace ?? '', lock.metadata.name ?? '', status, { signal }),
    },
    lockMetadata: {
      jsonPatch: async (lock, ops, signal) => {
        await lockWriter.jsonPatch(lock.metadata.namespace ?? '', lock.metadata.name ?? '', ops, { signal });
      },
    },
    finalizers: jsonPatchFinalizerIO<DistributedLock>((lock, ops, signal) =>
      lockWriter.jsonPatch(lock.metadata.namespace ?? '', lock.metadata.name ?? '', ops, signal ? { signal } : {}),
    ),
    fencing,
    ...(o.stores !== undefined ? { stores: o.stores } : {}),
    events: eventRecorder(api, 'fencepost-controller', o.identity, log),
    metrics,
    clock,
    log,
  });
  // A store lock's release, heard on its channel: told to the reconciler (release, not expiry) and
  // looked at now rather than at the next poll. Locks this controller does not watch are skipped.
  o.stores?.onRelease((namespace, lockName, owner) => {
    if (locks.get(namespace, lockName) === undefined) return;
    const key: ObjectKey = `${namespace}/${lockName}`;
    reconciler.releaseHeard(key, owner);
    b.enqueue(key);
  });

  // Sharded: keys of shards this replica does not hold are neither queued nor reconciled, a
  // reconcile runs inside its shard's hold, and a gained shard's locks are looked at afresh (what
  // this process remembered of them from an earlier term may be stale: it starts as a new leader
  // does, waiting a full duration to expire).
  const gate = o.shards;
  if (gate !== undefined) b.withEventFilter((key) => gate.owns(key));
  const ungate = gate?.onGained((inShard) => {
    for (const l of locks.list()) {
      const key = keyOf(l);
      if (!inShard(key)) continue;
      reconciler.forget(key);
      b.enqueue(key);
    }
  });

  const unregister = metrics !== undefined ? registerControllerSeries(metrics, name, workers, b.queue) : undefined;
  // fencepost_locks (the "no holder" alert): counted from the caches when Prometheus scrapes.
  const removeLockSource = metrics?.addLockStateSource(() => countLockStates(locks, leases));
  const stopSources = (): void => {
    ungate?.();
    removeLockSource?.();
    unregister?.();
  };
  let running;
  try {
    const gated: Reconciler =
      gate === undefined
        ? reconciler
        : { reconcile: async (key, ctx) => (await gate.run(key, () => reconciler.reconcile(key, ctx))) ?? {} };
    running = await b.start(gated, {
      beforeWorkers: () => (awaitFencing ? waitAtMost(clock, connected, FENCING_CONNECT_WAIT_MS) : Promise.resolve()),
      cleanup: () => fencing.close(),
    });
  } catch (err) {
    stopSources();
    throw err;
  }
  log.info({ workers, namespace: o.namespace ?? '(all)' }, 'Started workers');
  return {
    synced: () => running.synced(),
    watching: () => running.watching(),
    async stop() {
      stopSources();
      await running.stop();
    },
  };
}

/** waitAtMost resolves when `p` does or after `ms`, whichever is first. */
async function waitAtMost(clock: TimerClock, p: Promise<void>, ms: number): Promise<void> {
  let timer: Timer | undefined;
  await Promise.race([
    p,
    new Promise<void>((resolve) => {
      timer = clock.setTimeout(resolve, ms).unref();
    }),
  ]);
  timer?.cancel();
}

/**
 * countLockStates counts held, vacant and idle locks from the caches. A Mutex lock without a
 * holder is idle between runs, not a problem: it is counted apart.
 */
function countLockStates(locks: Cache<DistributedLock>, leases: Cache<V1Lease>): LockStateCounts {
  const counts = { held: 0, vacant: 0, idle: 0 };
  for (const l of locks.list()) {
    const lease = leases.get(l.metadata.namespace, leaseName(l.metadata.name ?? ''));
    const heldInStore =
      storeOf(l.spec) !== 'Lease' &&
      l.status?.conditions?.some((c) => c.type === 'Held' && c.status === 'True') === true;
    if (heldInStore || parseHolderIdentity(lease?.spec?.holderIdentity) !== undefined)
      counts.held++; // the record's own notion of held (a store lock's: what the controller last observed)
    else if (l.spec.mode === 'Mutex') counts.idle++;
    else counts.vacant++;
  }
  return counts;
}

/** FENCING_CONNECT_WAIT_MS bounds the wait for Redis before the workers start (its connect timeout is 2 s). */
const FENCING_CONNECT_WAIT_MS = 3000;

/** viewedCache is a cache whose reads pass through view (podView, lockView). */
function viewedCache<T>(c: Cache<T> & Indexed<T>, view: (o: T) => T): Cache<T> & Indexed<T> {
  return {
    list: (namespace) => c.list(namespace).map(view),
    get: (namespace, name) => {
      const p = c.get(namespace, name);
      return p !== undefined ? view(p) : undefined;
    },
    byIndex: (index, value) => c.byIndex(index, value).map(view),
    hasSynced: () => c.hasSynced(),
  };
}
