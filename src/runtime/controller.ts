/**
 * The controller loop: a keyed work queue drained by N workers that call one Reconciler.
 *
 * The model is level-triggered: event sources only add keys ("namespace/name") to the queue;
 * the reconciler reads the full current state for a key and makes idempotent writes. It never
 * sees what event caused it to run. A key is processed by one worker at a time; a key added while
 * it is being processed runs once more afterwards.
 *
 * Result handling (errors drive retries, `requeueAfterMs` drives time), with controller-runtime's
 * names for the outcome (the `result` label of `controller_runtime_reconcile_total`):
 * - success → forget the key's backoff: `success`; with `requeueAfterMs` > 0 the key is added again
 *   after that long (`requeue_after`), with `requeueAfterMs` ≤ 0 at once (`requeue`);
 * - a 409 Conflict → rate-limited retry, logged at debug (expected under optimistic concurrency):
 *   `requeue`, as a controller-runtime reconciler returning `Requeue: true` for a conflict;
 * - TerminalError → no retry (the reconciler reports it in a condition): `error`, also terminal;
 * - any other error → rate-limited retry, logged as an error: `error`.
 *
 * Logs carry controller-runtime's keys (see {@link ReconcileLogFields}); the reconciler gets the same
 * fields in its context, for its own child logger.
 */
import { randomUUID } from 'node:crypto';
import { errorKind, isConflict, isTerminal } from './errors.ts';
import type { WorkQueue } from './workqueue.ts';

/** ObjectKey is "namespace/name". */
export type ObjectKey = `${string}/${string}`;

/** Result of one reconcile. requeueAfterMs: reconcile this key again after that long. */
export interface Result {
  readonly requeueAfterMs?: number;
}

/**
 * ReconcileLogFields are the structured log fields of one reconcile, under controller-runtime's
 * keys so that log pipelines built for controller-runtime operators read them as they are:
 * `controller`, `controllerGroup`, `controllerKind`, the object as `{ <Kind>: { name, namespace } }`,
 * `namespace`, `name` and `reconcileID` (a fresh UUID per reconcile).
 */
export type ReconcileLogFields = Readonly<Record<string, string | Readonly<Record<string, string>>>> & {
  readonly controller: string;
  readonly controllerGroup: string;
  readonly controllerKind: string;
  readonly namespace: string;
  readonly name: string;
  readonly reconcileID: string;
};

/**
 * ReconcileContext is per call: an id for logs, the log fields of this reconcile (make the
 * reconcile's child logger from them), and a signal aborted at shutdown.
 */
export interface ReconcileContext {
  readonly reconcileId: string;
  readonly logFields: ReconcileLogFields;
  readonly signal: AbortSignal;
}

/** Reconciler drives the world toward the spec of the object named by key. Must be idempotent. */
export interface Reconciler {
  reconcile(key: ObjectKey, ctx: ReconcileContext): Promise<Result>;
}

/** ControllerLogger is the slice of pino the loop uses. */
export interface ControllerLogger {
  debug(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/**
 * RECONCILE_RESULTS are the outcomes of a reconcile, with controller-runtime's names (see the module
 * comment for when each applies).
 */
export const RECONCILE_RESULTS = ['success', 'error', 'requeue', 'requeue_after'] as const;

/** ReconcileResult is one of {@link RECONCILE_RESULTS}. */
export type ReconcileResult = (typeof RECONCILE_RESULTS)[number];

/**
 * ControllerHooks report each reconcile (for metrics); all optional, synchronous, must not throw.
 * onReconcile reports every reconcile's outcome and duration; onError every `error` outcome with
 * its bounded kind (`errors.errorKind`) and whether it was terminal (not retried).
 */
export interface ControllerHooks {
  onReconcile?(result: ReconcileResult, seconds: number): void;
  onError?(kind: string, terminal: boolean): void;
  onActiveWorkers?(n: number): void;
}

/**
 * ControllerOptions configures a Controller. workers defaults to 4. `group` and `kind` name the
 * reconciled kind in logs (`controllerGroup`, `controllerKind`).
 */
export interface ControllerOptions {
  readonly name: string;
  readonly group: string;
  readonly kind: string;
  readonly reconciler: Reconciler;
  readonly queue: WorkQueue<ObjectKey>;
  readonly workers?: number;
  readonly log: ControllerLogger;
  readonly hooks?: ControllerHooks;
}

/** splitKey returns the namespace and name of a key. */
export function splitKey(key: ObjectKey): { namespace: string; name: string } {
  const i = key.indexOf('/');
  return { namespace: key.slice(0, i), name: key.slice(i + 1) };
}

/** Controller runs workers over a queue until stopped. */
export class Controller {
  readonly #opts: ControllerOptions;
  readonly #abort = new AbortController();
  #active = 0;
  #running: Promise<void> | undefined;

  constructor(opts: ControllerOptions) {
    this.#opts = opts;
  }

  /** enqueue adds a key (deduplicated). Safe to call from informer handlers. */
  enqueue(key: ObjectKey): void {
    this.#opts.queue.add(key);
  }

  /** start launches the workers; call once, after every informer has synced, so that no worker acts on an unfilled cache. */
  start(): void {
    if (this.#running !== undefined) throw new Error(`Controller ${this.#opts.name} already started`);
    const n = this.#opts.workers ?? 4;
    this.#running = Promise.all(Array.from({ length: n }, () => this.#worker())).then(() => undefined);
  }

  /**
   * stop shuts the queue down, aborts in-flight reconciles' signals, and waits for the workers
   * to finish the keys they hold (they do not take new ones).
   */
  async stop(): Promise<void> {
    this.#opts.queue.shutDown();
    this.#abort.abort(new Error('controller stopping'));
    await this.#running;
  }

  /** #logFields are one reconcile's log fields (controller-runtime's keys). */
  #logFields(key: ObjectKey, reconcileID: string): ReconcileLogFields {
    const { name: controller, group: controllerGroup, kind: controllerKind } = this.#opts;
    const { namespace, name } = splitKey(key);
    return {
      controller,
      controllerGroup,
      controllerKind,
      [controllerKind]: { name, namespace },
      namespace,
      name,
      reconcileID,
    };
  }

  async #worker(): Promise<void> {
    const { queue, reconciler, log, hooks } = this.#opts;
    for (;;) {
      const key = await queue.get();
      if (key === undefined) return;
      if (this.#abort.signal.aborted) {
        queue.done(key);
        continue;
      }
      this.#active++;
      hooks?.onActiveWorkers?.(this.#active);
      const started = performance.now();
      const reconcileId = randomUUID();
      const fields = this.#logFields(key, reconcileId);
      const seconds = (): number => (performance.now() - started) / 1000;
      try {
        const r = await reconciler.reconcile(key, { reconcileId, logFields: fields, signal: this.#abort.signal });
        queue.forget(key);
        if (r.requeueAfterMs !== undefined) {
          queue.addAfter(key, Math.max(0, r.requeueAfterMs));
          hooks?.onReconcile?.(r.requeueAfterMs > 0 ? 'requeue_after' : 'requeue', seconds());
        } else {
          hooks?.onReconcile?.('success', seconds());
        }
      } catch (err) {
        if (this.#abort.signal.aborted) {
          // Stopping: the reconcile was abandoned on purpose (its requests aborted); the next
          // leader or process reconciles the key again. Not an error, nor a retry.
          hooks?.onReconcile?.('requeue', seconds());
          log.debug({ ...fields, err }, 'Reconcile abandoned; the controller is stopping');
        } else if (isConflict(err)) {
          hooks?.onReconcile?.('requeue', seconds());
          log.debug(fields, 'Reconcile conflicted; retrying');
          queue.addRateLimited(key);
        } else {
          const terminal = isTerminal(err);
          hooks?.onReconcile?.('error', seconds());
          hooks?.onError?.(errorKind(err), terminal);
          if (terminal) {
            log.error({ ...fields, err }, 'Reconcile failed permanently');
            queue.forget(key);
          } else {
            log.error({ ...fields, err }, 'Reconcile failed');
            queue.addRateLimited(key);
          }
        }
      } finally {
        this.#active--;
        hooks?.onActiveWorkers?.(this.#active);
        queue.done(key);
      }
    }
  }
}
