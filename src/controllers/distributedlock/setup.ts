/**
 * startLockController wires the DistributedLock controller: three supervised informers (locks,
 * their Leases, pods) whose handlers only enqueue lock keys, a rate-limited work queue, and N
 * workers running the reconciler. Workers start only after every cache has synced, so that nothing
 * is decided on the absence of an object not yet listed.
 */
import type { V1Lease, V1Pod } from '@kubernetes/client-node';
import { GROUP, KIND, PLURAL, VERSION, storeOf, type DistributedLock } from '../../api/v1alpha1/distributedlock.ts';
import { fencingBackends, type FencingBackends } from '../../fencing/backends.ts';
import { customResourceWriterOver } from '../../kube/custom-resources.ts';
import { eventRecorder } from '../../kube/events.ts';
import { jsonClient } from '../../kube/json-client.ts';
import { leaseStoreOver } from '../../kube/leases.ts';
import { podPatcherOver } from '../../kube/pods.ts';
import { apiClientFor, listPages, type KubeconfigSource } from '../../kube/typed-api.ts';
import type { Logger } from '../../observability/logger.ts';
import type { ControllerMetrics } from '../../observability/metrics.ts';
import { parseHolderIdentity } from '../../protocol/holder.ts';
import { LOCK_LABEL, leaseName } from '../../protocol/names.ts';
import type { Timer, TimerClock } from '../../runtime/clock.ts';
import { Controller, RECONCILE_RESULTS, type ObjectKey } from '../../runtime/controller.ts';
import { jsonPatchFinalizerIO } from '../../runtime/finalizer.ts';
import { superviseInformer, type SupervisedInformer } from '../../runtime/informer.ts';
import { defaultControllerRateLimiter } from '../../runtime/ratelimiter.ts';
import { WorkQueue } from '../../runtime/workqueue.ts';
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
  const api = apiClientFor(o.kc);
  const ns = o.namespace;
  const ilog = log.child({ component: 'informer' });
  const common = {
    watcher: api,
    clock,
    log: ilog,
    ...(o.cacheSyncTimeoutMs !== undefined ? { syncTimeoutMs: o.cacheSyncTimeoutMs } : {}),
  };
  const gauge =
    (name: string) =>
    (w: boolean): void => {
      metrics?.informerWatching.set({ informer: name }, w ? 1 : 0);
    };

  // Lists are plain-JSON pages through the one API client, transformed page by page before the cache keeps them.
  const locksPath =
    ns !== undefined ? `/apis/${GROUP}/${VERSION}/namespaces/${ns}/${PLURAL}` : `/apis/${GROUP}/${VERSION}/${PLURAL}`;
  const locks = superviseInformer<DistributedLock>({
    ...common,
    name: 'distributedlocks',
    onStateChange: gauge('distributedlocks'),
    path: locksPath,
    listPage: listPages<DistributedLock>(api, locksPath),
    transform: withoutManagedFields,
    indexers: { [LOCK_SELECTOR_INDEX]: lockSelectorValues },
  });
  const leasesPath =
    ns !== undefined ? `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases` : '/apis/coordination.k8s.io/v1/leases';
  const leases = superviseInformer<V1Lease>({
    ...common,
    name: 'leases',
    labelSelector: LOCK_LABEL,
    onStateChange: gauge('leases'),
    path: leasesPath,
    listPage: listPages<V1Lease>(api, leasesPath, LOCK_LABEL),
    transform: withoutManagedFields,
  });
  const podSelector = o.podLabelSelector !== undefined ? { labelSelector: o.podLabelSelector } : {};
  const podsPath = ns !== undefined ? `/api/v1/namespaces/${ns}/pods` : '/api/v1/pods';
  const pods = superviseInformer<V1Pod>({
    ...common,
    name: 'pods',
    ...podSelector,
    onStateChange: gauge('pods'),
    path: podsPath,
    listPage: listPages<V1Pod>(api, podsPath, o.podLabelSelector),
    transform: slimPod,
    indexers: { [POD_LABEL_INDEX]: podLabelValues, [POD_MARK_INDEX]: podMarkValues },
  });

  // Every lock's Degraded condition follows the Redis connection: re-check them all when it changes.
  let enqueueAll = (): void => undefined;
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
      enqueueAll();
    });
  const awaitFencing = o.fencing === undefined && o.redisUrl !== undefined && o.redisUrl !== '';
  // Writes go through the lean JSON client (kube/json-client.ts); lists and watches stay with client-node.
  const json = jsonClient(api);
  const lockWriter = customResourceWriterOver(json, { group: GROUP, version: VERSION, plural: PLURAL });
  const reconciler = new DistributedLockReconciler({
    locks: o.lockView === undefined ? locks : viewedCache(locks, o.lockView),
    leases,
    pods: o.podView === undefined ? pods : viewedCache(pods, o.podView),
    podLookup: podLookup(o.podView === undefined ? pods : viewedCache(pods, o.podView)),
    leaseStore: leaseStoreOver(json),
    podPatcher: podPatcherOver(json),
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
  // The controller and its queue share one name, as in controller-runtime; one controller per
  // watched namespace shares it too, so gauges add up (inc/dec) rather than overwrite each other.
  const qname = 'distributedlock';
  const workers = o.workers ?? 4;
  const q = { name: qname, controller: qname };
  const queue = new WorkQueue<ObjectKey>({
    clock,
    rateLimiter: defaultControllerRateLimiter<ObjectKey>(clock),
    hooks:
      metrics !== undefined
        ? {
            onAdd: () => metrics.queueAdds.inc(q),
            onRetry: () => metrics.queueRetries.inc(q),
            onLatency: (ms) => metrics.queueLatency.observe(q, ms / 1000),
            onWorkDuration: (ms) => metrics.queueWorkDuration.observe(q, ms / 1000),
          }
        : {},
  });
  let active = 0;
  const controller = new Controller({
    name: qname,
    group: GROUP,
    kind: KIND,
    reconciler,
    queue,
    workers,
    log,
    hooks:
      metrics !== undefined
        ? {
            onReconcile: (result, s) => {
              metrics.reconcileTotal.inc({ controller: qname, result });
              metrics.reconcileTime.observe({ controller: qname }, s);
            },
            onError: (kind, terminal) => {
              metrics.reconcileErrors.inc({ controller: qname });
              if (terminal) metrics.terminalReconcileErrors.inc({ controller: qname });
              metrics.reconcileErrorKinds.inc({ controller: qname, error_kind: kind });
            },
            onActiveWorkers: (n) => {
              metrics.activeWorkers.inc({ controller: qname }, n - active);
              active = n;
            },
          }
        : {},
  });

  enqueueAll = () => {
    for (const l of locks.list()) controller.enqueue(`${l.metadata.namespace ?? ''}/${l.metadata.name ?? ''}`);
  };
  // Informer handlers only enqueue: no await, no logic (client-node calls them synchronously).
  locks.onChange((l) => {
    controller.enqueue(`${l.metadata.namespace ?? ''}/${l.metadata.name ?? ''}`);
  });
  leases.onChange((l, kind) => {
    for (const k of leaseToLock(l)) {
      reconciler.leaseDelivered(k, l, kind === 'delete');
      controller.enqueue(k);
    }
  });
  pods.onChange((p) => {
    for (const k of podToLocks(locks, p)) controller.enqueue(k);
  });
  // A store lock's release, heard on its channel: told to the reconciler (release, not expiry) and
  // looked at now rather than at the next poll. Locks this controller does not watch are skipped.
  o.stores?.onRelease((namespace, name, owner) => {
    if (locks.get(namespace, name) === undefined) return;
    const key: ObjectKey = `${namespace}/${name}`;
    reconciler.releaseHeard(key, owner);
    controller.enqueue(key);
  });

  const informers: SupervisedInformer<DistributedLock | V1Lease | V1Pod>[] = [locks, leases, pods];
  try {
    await Promise.all(informers.map((i) => i.start()));
  } catch (err) {
    await Promise.allSettled(informers.map((i) => i.stop()));
    await fencing.close();
    throw new Error('Caches did not sync', { cause: err });
  }
  log.info({ workers, namespace: ns ?? '(all)' }, 'Started workers');
  // Every series exists from the start at 0, as controller-runtime does, so rate() and alerts see them.
  const removeQueueSource = metrics?.addWorkQueueSource(qname, () => {
    const w = queue.unfinishedWork();
    return { depthKeys: queue.depth(), unfinishedMs: w.totalMs, longestMs: w.longestMs };
  });
  if (metrics !== undefined) {
    for (const result of RECONCILE_RESULTS) metrics.reconcileTotal.inc({ controller: qname, result }, 0);
    metrics.reconcileErrors.inc({ controller: qname }, 0);
    metrics.terminalReconcileErrors.inc({ controller: qname }, 0);
    metrics.activeWorkers.inc({ controller: qname }, 0);
    metrics.maxConcurrentReconciles.inc({ controller: qname }, workers);
    metrics.queueAdds.inc(q, 0);
    metrics.queueRetries.inc(q, 0);
  }
  if (awaitFencing) {
    let timer: Timer | undefined;
    await Promise.race([
      connected,
      new Promise<void>((resolve) => {
        timer = clock.setTimeout(resolve, FENCING_CONNECT_WAIT_MS).unref();
      }),
    ]);
    timer?.cancel();
  }
  controller.start();
  // fencepost_locks (the "no holder" alert): counted from the caches when Prometheus scrapes.
  // A Mutex lock without a holder is idle between runs, not a problem: it is counted apart.
  const removeLockSource = metrics?.addLockStateSource(() => {
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
  });
  return {
    synced: () => informers.every((i) => i.hasSynced()),
    watching: () => informers.every((i) => i.watching()),
    async stop() {
      removeLockSource?.();
      removeQueueSource?.();
      metrics?.maxConcurrentReconciles.dec({ controller: qname }, workers);
      await Promise.allSettled(informers.map((i) => i.stop()));
      await controller.stop();
      await fencing.close();
    },
  };
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
