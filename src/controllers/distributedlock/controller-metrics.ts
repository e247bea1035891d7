/**
 * The lock controller's own metrics (controller-runtime's vocabulary: reconciles, errors, active
 * workers, the work queue's adds, retries, latency and work duration, the informers' watching
 * gauge), as the builder's hooks. One controller per watched namespace shares the one name, so
 * the gauges are added to and taken from (inc/dec) rather than set.
 */
import type { ControllerMetrics } from '../../observability/metrics.ts';
import type { BuilderHooks } from '../../runtime/builder.ts';
import { RECONCILE_RESULTS, type ObjectKey } from '../../runtime/controller.ts';
import type { WorkQueue } from '../../runtime/workqueue.ts';

/** controllerHooks reports the controller named `name` to `metrics`. */
export function controllerHooks(metrics: ControllerMetrics, name: string): BuilderHooks {
  const q = { name, controller: name };
  let active = 0;
  return {
    queue: {
      onAdd: () => metrics.queueAdds.inc(q),
      onRetry: () => metrics.queueRetries.inc(q),
      onLatency: (ms) => metrics.queueLatency.observe(q, ms / 1000),
      onWorkDuration: (ms) => metrics.queueWorkDuration.observe(q, ms / 1000),
    },
    controller: {
      onReconcile: (result, s) => {
        metrics.reconcileTotal.inc({ controller: name, result });
        metrics.reconcileTime.observe({ controller: name }, s);
      },
      onError: (kind, terminal) => {
        metrics.reconcileErrors.inc({ controller: name });
        if (terminal) metrics.terminalReconcileErrors.inc({ controller: name });
        metrics.reconcileErrorKinds.inc({ controller: name, error_kind: kind });
      },
      onActiveWorkers: (n) => {
        metrics.activeWorkers.inc({ controller: name }, n - active);
        active = n;
      },
    },
    informerWatching: (informer, watching) => {
      metrics.informerWatching.set({ informer }, watching ? 1 : 0);
    },
  };
}

/**
 * registerControllerSeries makes every series of the controller exist from the start at 0, as
 * controller-runtime does, so that rate() and alerts see them, and adds the queue's gauges (read
 * at scrape time). Returns the undo, for stop().
 */
export function registerControllerSeries(
  metrics: ControllerMetrics,
  name: string,
  workers: number,
  queue: Pick<WorkQueue<ObjectKey>, 'depth' | 'unfinishedWork'>,
): () => void {
  const q = { name, controller: name };
  const removeQueueSource = metrics.addWorkQueueSource(name, () => {
    const w = queue.unfinishedWork();
    return { depthKeys: queue.depth(), unfinishedMs: w.totalMs, longestMs: w.longestMs };
  });
  for (const result of RECONCILE_RESULTS) metrics.reconcileTotal.inc({ controller: name, result }, 0);
  metrics.reconcileErrors.inc({ controller: name }, 0);
  metrics.terminalReconcileErrors.inc({ controller: name }, 0);
  metrics.activeWorkers.inc({ controller: name }, 0);
  metrics.maxConcurrentReconciles.inc({ controller: name }, workers);
  metrics.queueAdds.inc(q, 0);
  metrics.queueRetries.inc(q, 0);
  return () => {
    removeQueueSource();
    metrics.maxConcurrentReconciles.dec({ controller: name }, workers);
  };
}
