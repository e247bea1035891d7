/**
 * Prometheus metrics, prefix `fencepost_`, in controller-runtime's vocabulary (STYLE G23). Label
 * values are bounded sets (results, error kinds, causes) — never lock or pod names.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** ControllerMetrics holds every metric the controller exports. */
export interface ControllerMetrics {
  readonly registry: Registry;
  readonly reconcileTotal: Counter<'controller' | 'result'>;
  readonly reconcileErrors: Counter<'controller' | 'error_kind'>;
  readonly reconcileTime: Histogram<'controller'>;
  readonly queueDepth: Gauge<'name'>;
  readonly queueAdds: Counter<'name'>;
  readonly queueRetries: Counter<'name'>;
  readonly queueLatency: Histogram<'name'>;
  readonly activeWorkers: Gauge<'controller'>;
  readonly leader: Gauge;
  readonly informerWatching: Gauge<'informer'>;
  readonly grants: Counter<'cause' | 'backend'>;
  readonly expirations: Counter<'cause'>;
  readonly releasesObserved: Counter;
  readonly fencingErrors: Counter<'backend' | 'error_kind'>;
  readonly fencingRefloored: Counter<'reason'>;
  readonly fencingReady: Gauge<'backend'>;
  readonly locks: Gauge<'state'>;
  readonly handoffDuration: Histogram<'cause'>;
  readonly holdDuration: Histogram<'cause'>;
  /**
   * addLockStateSource adds a function that counts held and vacant locks from a controller's
   * caches; `fencepost_locks` sums every source at scrape time. Returns the function that removes it.
   */
  addLockStateSource(source: () => LockStateCounts): () => void;
}

/** LockStateCounts counts a controller's locks: held, vacant (Election, no holder), idle (Mutex, no holder). */
export interface LockStateCounts { readonly held: number; readonly vacant: number; readonly idle: number }

/** createControllerMetrics registers the controller's metrics (and Node's defaults) on a new registry. */
export function createControllerMetrics(): ControllerMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'fencepost_' });
  const registers = [registry];
  const lockSources = new Set<() => LockStateCounts>();
  return {
    addLockStateSource(source) { lockSources.add(source); return () => { lockSources.delete(source); }; },
    registry,
    reconcileTotal: new Counter({ name: 'fencepost_reconcile_total', help: 'Reconciles by result (success, error, requeue_after).', labelNames: ['controller', 'result'], registers }),
    reconcileErrors: new Counter({ name: 'fencepost_reconcile_errors_total', help: 'Failed reconciles by error kind.', labelNames: ['controller', 'error_kind'], registers }),
    reconcileTime: new Histogram({ name: 'fencepost_reconcile_time_seconds', help: 'Time per reconcile.', labelNames: ['controller'], buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10], registers }),
    queueDepth: new Gauge({ name: 'fencepost_workqueue_depth', help: 'Keys waiting in the work queue.', labelNames: ['name'], registers }),
    queueAdds: new Counter({ name: 'fencepost_workqueue_adds_total', help: 'Keys added to the work queue.', labelNames: ['name'], registers }),
    queueRetries: new Counter({ name: 'fencepost_workqueue_retries_total', help: 'Delayed re-adds (backoff and time-driven requeues).', labelNames: ['name'], registers }),
    queueLatency: new Histogram({ name: 'fencepost_workqueue_queue_duration_seconds', help: 'Time a key waits in the queue before a worker takes it.', labelNames: ['name'], buckets: [0.0001, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10], registers }),
    activeWorkers: new Gauge({ name: 'fencepost_active_workers', help: 'Workers currently reconciling.', labelNames: ['controller'], registers }),
    leader: new Gauge({ name: 'fencepost_leader', help: '1 while this replica leads and runs the workers.', registers }),
    informerWatching: new Gauge({ name: 'fencepost_informer_watching', help: '1 while an informer has a live watch.', labelNames: ['informer'], registers }),
    grants: new Counter({ name: 'fencepost_grants_total', help: 'Locks granted, by cause (Vacant, Released, Expired, HolderTerminated) and fencing backend.', labelNames: ['cause', 'backend'], registers }),
    expirations: new Counter({ name: 'fencepost_expirations_total', help: 'Holders removed involuntarily, by cause (Expired, HolderTerminated).', labelNames: ['cause'], registers }),
    releasesObserved: new Counter({ name: 'fencepost_releases_observed_total', help: 'Voluntary releases seen on Leases.', registers }),
    fencingErrors: new Counter({ name: 'fencepost_fencing_errors_total', help: 'Failed attempts to issue a fencing token.', labelNames: ['backend', 'error_kind'], registers }),
    fencingRefloored: new Counter({ name: 'fencepost_fencing_refloored_total', help: 'Tokens the Redis counter could not issue alone: it was at or below the etcd high-water mark (data loss) or had a TTL.', labelNames: ['reason'], registers }),
    fencingReady: new Gauge({ name: 'fencepost_fencing_ready', help: '1 while the fencing backend can issue tokens.', labelNames: ['backend'], registers }),
    handoffDuration: new Histogram({
      name: 'fencepost_handoff_duration_seconds',
      help: 'From when this controller saw what made a lock grantable (a release, a terminated holder; for Expired, the last renewal it saw) to the committed grant, by cause.',
      labelNames: ['cause'], buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 20, 30, 60, 120], registers,
    }),
    holdDuration: new Histogram({
      name: 'fencepost_hold_duration_seconds',
      help: 'How long a holder held a lock whose term the controller ended (Expired, HolderTerminated), from acquireTime.',
      labelNames: ['cause'], buckets: [1, 5, 15, 30, 60, 300, 900, 3600, 14400, 86400], registers,
    }),
    locks: new Gauge({
      name: 'fencepost_locks', help: 'Locks by state: held, vacant (Election mode, no holder), idle (Mutex mode, no holder); counted from the leading replica\'s caches at scrape time.', labelNames: ['state'], registers,
      collect() {
        if (lockSources.size === 0) return; // a standby replica: no series, so max() across replicas sees the leader
        const sum = { held: 0, vacant: 0, idle: 0 };
        for (const count of lockSources) { const c = count(); sum.held += c.held; sum.vacant += c.vacant; sum.idle += c.idle; }
        for (const [state, n] of Object.entries(sum)) this.set({ state }, n);
      },
    }),
  };
}
