/**
 * The controller loop: a keyed work queue drained by N workers that call one Reconciler.
 *
 * The model is level-triggered: event sources only add keys ("namespace/name") to the queue;
 * the reconciler reads the full current state for a key and makes idempotent writes. It never
 * sees what event caused it to run. A key is processed by one worker at a time; a key added while
 * it is being processed runs once more afterwards.
 *
 * Result handling (STYLE G5): success → forget the key's backoff, and requeue after
 * `requeueAfterMs` when given (0 = at once); a 409 Conflict → rate-limited retry, logged at
 * debug (expected under optimistic concurrency); TerminalError → no retry (the reconciler reports
 * it in a condition); any other error → rate-limited retry, logged as an error.
 */
import { randomUUID } from 'node:crypto';
import { errorKind, isConflict, isTerminal } from './errors.ts';
import type { WorkQueue } from './workqueue.ts';

/** ObjectKey is "namespace/name". */
export type ObjectKey = `${string}/${string}`;

/** Result of one reconcile. requeueAfterMs: reconcile this key again after that long. */
export interface Result { readonly requeueAfterMs?: number }

/** ReconcileContext is per call: an id for logs, and a signal aborted at shutdown. */
export interface ReconcileContext {
  readonly reconcileId: string;
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

/** ControllerHooks report each reconcile (for metrics); all optional. */
export interface ControllerHooks {
  onReconcile?(result: 'success' | 'error' | 'requeue_after', seconds: number): void;
  onError?(kind: string): void;
  onActiveWorkers?(n: number): void;
}

/** ControllerOptions configures a Controller. workers defaults to 4. */
export interface ControllerOptions {
  readonly name: string;
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

  /** start launches the workers; call once, after every informer has synced (STYLE G8). */
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

  async #worker(): Promise<void> {
    const { queue, reconciler, log, hooks } = this.#opts;
    for (;;) {
      const key = await queue.get();
      if (key === undefined) return;
      if (this.#abort.signal.aborted) { queue.done(key); continue; }
      this.#active++;
      hooks?.onActiveWorkers?.(this.#active);
      const started = performance.now();
      const reconcileId = randomUUID();
      try {
        const r = await reconciler.reconcile(key, { reconcileId, signal: this.#abort.signal });
        queue.forget(key);
        if (r.requeueAfterMs !== undefined) {
          queue.addAfter(key, Math.max(0, r.requeueAfterMs));
          hooks?.onReconcile?.('requeue_after', (performance.now() - started) / 1000);
        } else {
          hooks?.onReconcile?.('success', (performance.now() - started) / 1000);
        }
      } catch (err) {
        hooks?.onReconcile?.('error', (performance.now() - started) / 1000);
        const kind = errorKind(err);
        if (isConflict(err)) {
          log.debug({ key, reconcileID: reconcileId }, 'Reconcile conflicted; retrying');
          queue.addRateLimited(key);
        } else if (isTerminal(err)) {
          hooks?.onError?.(kind);
          log.error({ key, reconcileID: reconcileId, err }, 'Reconcile failed permanently');
          queue.forget(key);
        } else {
          hooks?.onError?.(kind);
          log.error({ key, reconcileID: reconcileId, err }, 'Reconcile failed');
          queue.addRateLimited(key);
        }
      } finally {
        this.#active--;
        hooks?.onActiveWorkers?.(this.#active);
        queue.done(key);
      }
    }
  }
}
