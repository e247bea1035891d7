/**
 * Prometheus metrics in the names the ecosystem's dashboards and alerts already use:
 * controller-runtime's `controller_runtime_*`, client-go's `workqueue_*`, `leader_election_master_status`
 * and `rest_client_requests_total`, and prom-client's default `process_*` / `nodejs_*` (no prefix).
 * fencepost's own domain metrics (grants, expirations, fencing, locks, hand-offs, terms) keep the
 * `fencepost_` prefix. Label values are bounded sets (results, error kinds, causes, HTTP codes and
 * methods, the API server's host) — never lock or pod names.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { REST_REQUESTS_METRIC } from './rest-requests-metric.ts';

/**
 * RECONCILE_RESULTS are controller-runtime's values of `controller_runtime_reconcile_total{result}`:
 * `success` (done, nothing scheduled), `error` (threw), `requeue` (run again now, rate-limited: a 409
 * Conflict, or `requeueAfterMs: 0`) and `requeue_after` (run again after `requeueAfterMs` > 0).
 */
export const RECONCILE_RESULTS = ['success', 'error', 'requeue', 'requeue_after'] as const;

/** ReconcileResult is one of {@link RECONCILE_RESULTS}. */
export type ReconcileResult = (typeof RECONCILE_RESULTS)[number];

/**
 * WorkQueueGauges is what a work queue reports at scrape time for client-go's gauges: `depthKeys`
 * (`workqueue_depth`), and the in-flight work for `workqueue_unfinished_work_seconds` (the sum over
 * keys being processed of how long each has been) and `workqueue_longest_running_processor_seconds`
 * (the longest of them). client-go refreshes the last two every 500 ms; here they are exact at scrape.
 */
export interface WorkQueueGauges {
  readonly depthKeys: number;
  readonly unfinishedMs: number;
  readonly longestMs: number;
}

/** RestRequest is one HTTP request to the API server, as `rest_client_requests_total` labels it. */
export interface RestRequest {
  /** code is the response's status code, or `<error>` when no response came (client-go's value). */
  readonly code: string;
  readonly method: string;
  /** host is the API server's `host:port`. */
  readonly host: string;
}

/**
 * restRequestCounter registers client-go's `rest_client_requests_total{code,method,host}` on registry
 * and returns the function that counts one request (pass it to `loadKubeConfig` as `onRequest`).
 * The controller and the agent both export it, under the same name and help. Never throws.
 */
export function restRequestCounter(registry: Registry): (r: RestRequest) => void {
  const counter = new Counter({
    ...REST_REQUESTS_METRIC,
    labelNames: [...REST_REQUESTS_METRIC.labelNames],
    registers: [registry],
  });
  return (r) => {
    counter.inc({ code: r.code, method: r.method, host: r.host });
  };
}

/** ControllerMetrics holds every metric the controller exports. */
export interface ControllerMetrics {
  readonly registry: Registry;
  /** reconcileTotal: `controller_runtime_reconcile_total{controller,result}`, result one of {@link RECONCILE_RESULTS}. */
  readonly reconcileTotal: Counter<'controller' | 'result'>;
  /** reconcileErrors: `controller_runtime_reconcile_errors_total{controller}`, every reconcile with result `error`. */
  readonly reconcileErrors: Counter<'controller'>;
  /** terminalReconcileErrors: `controller_runtime_terminal_reconcile_errors_total{controller}`, errors not retried (TerminalError). */
  readonly terminalReconcileErrors: Counter<'controller'>;
  /** reconcileErrorKinds: `fencepost_reconcile_errors_total{controller,error_kind}`, the same errors by kind. */
  readonly reconcileErrorKinds: Counter<'controller' | 'error_kind'>;
  readonly reconcileTime: Histogram<'controller'>;
  readonly activeWorkers: Gauge<'controller'>;
  readonly maxConcurrentReconciles: Gauge<'controller'>;
  readonly queueAdds: Counter<'name' | 'controller'>;
  readonly queueRetries: Counter<'name' | 'controller'>;
  readonly queueLatency: Histogram<'name' | 'controller'>;
  readonly queueWorkDuration: Histogram<'name' | 'controller'>;
  /** leader: `leader_election_master_status{name}`, 1 while this replica leads the election named `name`. */
  readonly leader: Gauge<'name'>;
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
  /**
   * addWorkQueueSource adds a work queue's gauges under the queue name `name`; at scrape time
   * `workqueue_depth` and `workqueue_unfinished_work_seconds` sum the sources of one name and
   * `workqueue_longest_running_processor_seconds` takes their maximum. Returns the function that
   * removes it (its series then drop to 0 when no source of that name is left).
   */
  addWorkQueueSource(name: string, source: () => WorkQueueGauges): () => void;
  /** countRestRequest counts one request to the API server; pass it to `loadKubeConfig`. Never throws. */
  countRestRequest(r: RestRequest): void;
}

/** LockStateCounts counts a controller's locks: held, vacant (Election, no holder), idle (Mutex, no holder). */
export interface LockStateCounts {
  readonly held: number;
  readonly vacant: number;
  readonly idle: number;
}

/** RECONCILE_BUCKETS are controller-runtime's buckets for `controller_runtime_reconcile_time_seconds`. */
const RECONCILE_BUCKETS = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1, 1.25, 1.5, 1.75, 2,
  2.5, 3, 3.5, 4, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
];

/** WORKQUEUE_BUCKETS are client-go's workqueue buckets: 10 ns to 1000 s, ×10 each (ExponentialBuckets(10e-9, 10, 12)). */
const WORKQUEUE_BUCKETS = Array.from({ length: 12 }, (_, i) => Number((1e-8 * 10 ** i).toPrecision(1)));

/** createControllerMetrics registers the controller's metrics (and Node's defaults) on a new registry. */
export function createControllerMetrics(): ControllerMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const registers = [registry];
  const lockSources = new Set<() => LockStateCounts>();
  const queueSources = new Set<{ readonly name: string; readonly gauges: () => WorkQueueGauges }>();
  /** queueGauge is a workqueue gauge computed from the sources at scrape time. */
  const queueGauge = (
    name: string,
    help: string,
    of: (sum: { depth: number; unfinished: number; longest: number }) => number,
  ): Gauge<'name' | 'controller'> =>
    new Gauge({
      name,
      help,
      labelNames: ['name', 'controller'],
      registers,
      collect() {
        const byName = new Map<string, { depth: number; unfinished: number; longest: number }>();
        for (const s of queueSources) {
          const g = s.gauges();
          const sum = byName.get(s.name) ?? { depth: 0, unfinished: 0, longest: 0 };
          byName.set(s.name, {
            depth: sum.depth + g.depthKeys,
            unfinished: sum.unfinished + g.unfinishedMs / 1000,
            longest: Math.max(sum.longest, g.longestMs / 1000),
          });
        }
        this.reset(); // a queue that stopped drops out rather than freezing at its last value
        for (const [q, sum] of byName) this.set({ name: q, controller: q }, of(sum));
      },
    });
  queueGauge(
    'workqueue_depth',
    'Keys pending in the work queue, including keys re-added while a worker holds them.',
    (s) => s.depth,
  );
  queueGauge(
    'workqueue_unfinished_work_seconds',
    'Seconds spent so far on the keys workers hold now (not yet in work_duration); a steady rise means stuck workers, its rate how many.',
    (s) => s.unfinished,
  );
  queueGauge(
    'workqueue_longest_running_processor_seconds',
    'Seconds the longest-held key has been held by its worker.',
    (s) => s.longest,
  );
  const countRestRequest = restRequestCounter(registry);
  return {
    addLockStateSource(source) {
      lockSources.add(source);
      return () => {
        lockSources.delete(source);
      };
    },
    addWorkQueueSource(name, gauges) {
      const s = { name, gauges };
      queueSources.add(s);
      return () => {
        queueSources.delete(s);
      };
    },
    countRestRequest,
    registry,
    reconcileTotal: new Counter({
      name: 'controller_runtime_reconcile_total',
      help: 'Reconciles by controller and result (success, error, requeue, requeue_after).',
      labelNames: ['controller', 'result'],
      registers,
    }),
    reconcileErrors: new Counter({
      name: 'controller_runtime_reconcile_errors_total',
      help: 'Reconciles that failed (result error), by controller.',
      labelNames: ['controller'],
      registers,
    }),
    terminalReconcileErrors: new Counter({
      name: 'controller_runtime_terminal_reconcile_errors_total',
      help: 'Reconciles that failed with an error a retry cannot fix (not retried), by controller.',
      labelNames: ['controller'],
      registers,
    }),
    reconcileErrorKinds: new Counter({
      name: 'fencepost_reconcile_errors_total',
      help: 'Failed reconciles by controller and error kind (controller_runtime_reconcile_errors_total broken down).',
      labelNames: ['controller', 'error_kind'],
      registers,
    }),
    reconcileTime: new Histogram({
      name: 'controller_runtime_reconcile_time_seconds',
      help: 'Time per reconcile, by controller.',
      labelNames: ['controller'],
      buckets: RECONCILE_BUCKETS,
      registers,
    }),
    activeWorkers: new Gauge({
      name: 'controller_runtime_active_workers',
      help: 'Workers reconciling now, by controller.',
      labelNames: ['controller'],
      registers,
    }),
    maxConcurrentReconciles: new Gauge({
      name: 'controller_runtime_max_concurrent_reconciles',
      help: 'Workers started, by controller: the most reconciles that run at once.',
      labelNames: ['controller'],
      registers,
    }),
    queueAdds: new Counter({
      name: 'workqueue_adds_total',
      help: 'Keys added to the work queue that were not already pending.',
      labelNames: ['name', 'controller'],
      registers,
    }),
    queueRetries: new Counter({
      name: 'workqueue_retries_total',
      help: 'Delayed re-adds to the work queue (backoff after a failure and time-driven requeues).',
      labelNames: ['name', 'controller'],
      registers,
    }),
    queueLatency: new Histogram({
      name: 'workqueue_queue_duration_seconds',
      help: 'Seconds a key waits in the work queue before a worker takes it.',
      labelNames: ['name', 'controller'],
      buckets: WORKQUEUE_BUCKETS,
      registers,
    }),
    queueWorkDuration: new Histogram({
      name: 'workqueue_work_duration_seconds',
      help: 'Seconds a worker holds a key, from taking it to done.',
      labelNames: ['name', 'controller'],
      buckets: WORKQUEUE_BUCKETS,
      registers,
    }),
    leader: new Gauge({
      name: 'leader_election_master_status',
      help: '1 while this replica leads the leader election called name (the Lease name), 0 while it stands by.',
      labelNames: ['name'],
      registers,
    }),
    informerWatching: new Gauge({
      name: 'fencepost_informer_watching',
      help: '1 while an informer has a live watch.',
      labelNames: ['informer'],
      registers,
    }),
    grants: new Counter({
      name: 'fencepost_grants_total',
      help: 'Locks granted, by cause (Vacant, Released, Expired, HolderTerminated) and fencing backend.',
      labelNames: ['cause', 'backend'],
      registers,
    }),
    expirations: new Counter({
      name: 'fencepost_expirations_total',
      help: 'Holders removed involuntarily, by cause (Expired, HolderTerminated).',
      labelNames: ['cause'],
      registers,
    }),
    releasesObserved: new Counter({
      name: 'fencepost_releases_observed_total',
      help: 'Voluntary releases seen on Leases.',
      registers,
    }),
    fencingErrors: new Counter({
      name: 'fencepost_fencing_errors_total',
      help: 'Failed attempts to issue a fencing token.',
      labelNames: ['backend', 'error_kind'],
      registers,
    }),
    fencingRefloored: new Counter({
      name: 'fencepost_fencing_refloored_total',
      help: 'Tokens the Redis counter could not issue alone: it was at or below the etcd high-water mark (data loss) or had a TTL.',
      labelNames: ['reason'],
      registers,
    }),
    fencingReady: new Gauge({
      name: 'fencepost_fencing_ready',
      help: '1 while the fencing backend can issue tokens.',
      labelNames: ['backend'],
      registers,
    }),
    handoffDuration: new Histogram({
      name: 'fencepost_handoff_duration_seconds',
      help: 'From when this controller saw what made a lock grantable (a release, a terminated holder; for Expired, the last renewal it saw) to the committed grant, by cause.',
      labelNames: ['cause'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 20, 30, 60, 120],
      registers,
    }),
    holdDuration: new Histogram({
      name: 'fencepost_hold_duration_seconds',
      help: 'How long a holder held a lock whose term the controller ended (Expired, HolderTerminated), from acquireTime.',
      labelNames: ['cause'],
      buckets: [1, 5, 15, 30, 60, 300, 900, 3600, 14400, 86400],
      registers,
    }),
    locks: new Gauge({
      name: 'fencepost_locks',
      help: "Locks by state: held, vacant (Election mode, no holder), idle (Mutex mode, no holder); counted from the leading replica's caches at scrape time.",
      labelNames: ['state'],
      registers,
      collect() {
        if (lockSources.size === 0) return; // a standby replica: no series, so max() across replicas sees the leader
        const sum = { held: 0, vacant: 0, idle: 0 };
        for (const count of lockSources) {
          const c = count();
          sum.held += c.held;
          sum.vacant += c.vacant;
          sum.idle += c.idle;
        }
        for (const [state, n] of Object.entries(sum)) this.set({ state }, n);
      },
    }),
  };
}
