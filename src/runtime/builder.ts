/**
 * ControllerBuilder declares a controller the way controller-runtime's
 * `NewControllerManagedBy(mgr).For(...).Watches(...).WithEventFilter(...)` does, and derives the
 * wiring from the declaration: one supervised informer per watched collection (its URL path from
 * the resource and namespace, its paged list from the one list request), handlers that only map
 * a change to keys and enqueue them, one rate-limited work queue, and N workers started only once
 * every cache has synced.
 *
 * - `for(resource)`: the primary kind; each change enqueues the object's own key.
 * - `watches(resource, map)`: a secondary kind; each change enqueues the keys `map` returns
 *   (synchronous and cheap: it runs in the informer's delivery loop).
 * - `withEventFilter(accept)`: a predicate on every key before it is queued, and again before it is
 *   reconciled (a key queued for later, `requeueAfterMs`, is looked at again when it comes due): a
 *   refused key is dropped without a reconcile. This is where "does this replica own this key"
 *   goes when the keys are sharded between replicas; `enqueueAll()` re-offers every primary
 *   object after the predicate's answer changed (a shard moved).
 *
 * The informer implementation is injected (`informer`), so this module depends only on the
 * informer's interface (informer.ts), never on how it lists and watches.
 */
import type { KubernetesListObject, KubernetesObject } from '@kubernetes/client-node';
import type { TimerClock } from './clock.ts';
import {
  Controller,
  type ControllerHooks,
  type ControllerLogger,
  type ObjectKey,
  type Reconciler,
  type Result,
} from './controller.ts';
import type {
  ChangeKind,
  InformerLogger,
  ListPage,
  SuperviseInformerOptions,
  SupervisedInformer,
  WatchStream,
} from './informer.ts';
import { defaultControllerRateLimiter } from './ratelimiter.ts';
import { WorkQueue, type WorkQueueHooks } from './workqueue.ts';

/** Resource names a collection: `group` is '' for the core API (pods, events). */
export interface Resource {
  readonly group: string;
  readonly version: string;
  readonly plural: string;
}

/** collectionPath is the URL path of a resource's collection, in one namespace or (undefined) all. */
export function collectionPath(r: Resource, namespace: string | undefined): string {
  const base = r.group === '' ? `/api/${r.version}` : `/apis/${r.group}/${r.version}`;
  return namespace !== undefined ? `${base}/namespaces/${namespace}/${r.plural}` : `${base}/${r.plural}`;
}

/**
 * PagesFn gives an informer its paged list of a collection (`path` from {@link collectionPath}) with
 * the watch's label selector: the one list request of every informer (transport/resources.ts
 * `listPages` over the API client), one GET per page.
 */
export type PagesFn = <T extends KubernetesObject>(
  path: string,
  labelSelector: string | undefined,
) => (page: ListPage) => Promise<KubernetesListObject<T>>;

/** InformerFactory makes a supervised informer (informer.ts `superviseInformer`, or a replacement with its interface). */
export type InformerFactory = <T extends KubernetesObject>(o: SuperviseInformerOptions<T>) => SupervisedInformer<T>;

/** WatchOptions describes one watched collection. */
export interface WatchOptions<T extends KubernetesObject> {
  readonly resource: Resource;
  /** name of the informer in logs and the watching hook; defaults to the resource's plural. */
  readonly name?: string;
  /** labelSelector restricts the list and the watch alike. Defaults to none. */
  readonly labelSelector?: string;
  /** transform rewrites each object before the cache keeps it (informer.ts). */
  readonly transform?: (obj: T) => T;
  /** indexers of the cache (informer.ts). */
  readonly indexers?: Readonly<Record<string, (obj: T) => readonly string[]>>;
}

/** BuilderHooks report the controller's work for metrics; all optional, synchronous, must not throw. */
export interface BuilderHooks {
  readonly queue?: WorkQueueHooks;
  readonly controller?: ControllerHooks;
  /** informerWatching is told each time an informer starts or stops watching. */
  informerWatching?(informer: string, watching: boolean): void;
}

/** BuilderOptions configures a {@link ControllerBuilder}. */
export interface BuilderOptions {
  /** name of the controller and of its queue (controller-runtime uses one name for both). */
  readonly name: string;
  /** group and kind of the primary resource, for logs. */
  readonly group: string;
  readonly kind: string;
  /** watcher opens the informers' watch requests (the API client). */
  readonly watcher: WatchStream;
  readonly clock: TimerClock;
  readonly log: ControllerLogger & InformerLogger & { child(fields: object): InformerLogger };
  /** namespace: watch only this one; undefined: every namespace. */
  readonly namespace?: string | undefined;
  readonly informer: InformerFactory;
  readonly pages: PagesFn;
  /** workers reconciling at once. Defaults to 4. */
  readonly workers?: number;
  /** syncTimeoutMs bounds each informer's first list (informer.ts default: 2 minutes). */
  readonly syncTimeoutMs?: number | undefined;
  readonly hooks?: BuilderHooks;
}

/** StartOptions are given when the controller starts. */
export interface StartOptions {
  /**
   * beforeWorkers runs after every cache synced and before the workers start (e.g. wait for a
   * backend the reconciler needs); the workers start when it resolves.
   */
  beforeWorkers?(): Promise<void>;
  /** cleanup runs at stop(), after the workers finished. */
  cleanup?(): Promise<void>;
}

/** RunningController is a started controller. */
export interface RunningController {
  /** synced: every informer has delivered its first list. */
  synced(): boolean;
  /** watching: every informer currently has a live watch. */
  watching(): boolean;
  /** stop stops the informers, then the workers (they finish the keys they hold), then runs `cleanup`. */
  stop(): Promise<void>;
}

/** ControllerBuilder declares a controller's watches, then starts it; see the module comment. */
export class ControllerBuilder {
  readonly #o: BuilderOptions;
  readonly #queue: WorkQueue<ObjectKey>;
  readonly #informers: SupervisedInformer<KubernetesObject>[] = [];
  #primary: SupervisedInformer<KubernetesObject> | undefined;
  #accept: (key: ObjectKey) => boolean = () => true;
  #started = false;

  constructor(o: BuilderOptions) {
    this.#o = o;
    this.#queue = new WorkQueue<ObjectKey>({
      clock: o.clock,
      rateLimiter: defaultControllerRateLimiter<ObjectKey>(o.clock),
      hooks: o.hooks?.queue ?? {},
    });
  }

  /** queue is the controller's work queue (for gauges read at scrape time: depth, unfinished work). */
  get queue(): WorkQueue<ObjectKey> {
    return this.#queue;
  }

  /** for declares the primary resource: each change enqueues the object's own key. Call once. */
  for<T extends KubernetesObject>(w: WatchOptions<T>): SupervisedInformer<T> {
    if (this.#primary !== undefined) throw new Error(`Controller ${this.#o.name}: for() called twice`);
    const inf = this.#watch(w, (obj) => [keyOf(obj)]);
    this.#primary = inf;
    return inf;
  }

  /**
   * watches declares a secondary resource: each change enqueues the keys `map` returns for it.
   * `delivered`, when given, is told of each change for each key the event filter accepts, in
   * order, just before that key is queued (synchronous and cheap, as `map`).
   */
  watches<T extends KubernetesObject>(
    w: WatchOptions<T>,
    map: (obj: T, kind: ChangeKind) => Iterable<ObjectKey>,
    delivered?: (key: ObjectKey, obj: T, kind: ChangeKind) => void,
  ): SupervisedInformer<T> {
    return this.#watch(w, map, delivered);
  }

  /** withEventFilter sets the predicate every key must pass to be queued and reconciled (see the module comment). */
  withEventFilter(accept: (key: ObjectKey) => boolean): this {
    this.#accept = accept;
    return this;
  }

  /** enqueue queues a key (deduplicated) if the event filter accepts it. Safe from any handler. */
  enqueue(key: ObjectKey): void {
    if (this.#accept(key)) this.#queue.add(key);
  }

  /** enqueueAll queues the key of every cached primary object the event filter accepts. */
  enqueueAll(): void {
    for (const obj of this.#primary?.list() ?? []) this.enqueue(keyOf(obj));
  }

  /**
   * start starts every informer and waits until each has synced (a sync failure stops them all and
   * rejects), runs `beforeWorkers`, then starts the workers with `reconciler`.
   */
  async start(reconciler: Reconciler, s: StartOptions = {}): Promise<RunningController> {
    if (this.#started) throw new Error(`Controller ${this.#o.name} already started`);
    if (this.#primary === undefined) throw new Error(`Controller ${this.#o.name}: no for() resource`);
    this.#started = true;
    const o = this.#o;
    const informers = this.#informers;
    const accept = (key: ObjectKey): boolean => this.#accept(key);
    const filtered: Reconciler = {
      reconcile: (key, ctx): Promise<Result> => (accept(key) ? reconciler.reconcile(key, ctx) : Promise.resolve({})),
    };
    const controller = new Controller({
      name: o.name,
      group: o.group,
      kind: o.kind,
      reconciler: filtered,
      queue: this.#queue,
      workers: o.workers ?? 4,
      log: o.log,
      hooks: o.hooks?.controller ?? {},
    });
    try {
      await Promise.all(informers.map((i) => i.start()));
      await s.beforeWorkers?.();
    } catch (err) {
      await Promise.allSettled(informers.map((i) => i.stop()));
      await s.cleanup?.();
      throw new Error('Caches did not sync', { cause: err });
    }
    controller.start();
    return {
      synced: () => informers.every((i) => i.hasSynced()),
      watching: () => informers.every((i) => i.watching()),
      async stop() {
        await Promise.allSettled(informers.map((i) => i.stop()));
        await controller.stop();
        await s.cleanup?.();
      },
    };
  }

  #watch<T extends KubernetesObject>(
    w: WatchOptions<T>,
    map: (obj: T, kind: ChangeKind) => Iterable<ObjectKey>,
    delivered?: (key: ObjectKey, obj: T, kind: ChangeKind) => void,
  ): SupervisedInformer<T> {
    if (this.#started) throw new Error(`Controller ${this.#o.name}: watches must be declared before start()`);
    const o = this.#o;
    const name = w.name ?? w.resource.plural;
    const path = collectionPath(w.resource, o.namespace);
    const selector = w.labelSelector !== undefined ? { labelSelector: w.labelSelector } : {};
    const inf = o.informer<T>({
      name,
      watcher: o.watcher,
      clock: o.clock,
      log: o.log.child({ component: 'informer' }),
      path,
      ...selector,
      listPage: o.pages<T>(path, w.labelSelector),
      ...(w.transform !== undefined ? { transform: w.transform } : {}),
      ...(w.indexers !== undefined ? { indexers: w.indexers } : {}),
      ...(o.syncTimeoutMs !== undefined ? { syncTimeoutMs: o.syncTimeoutMs } : {}),
      onStateChange: (watching) => o.hooks?.informerWatching?.(name, watching),
    });
    // Handlers only enqueue: no await, no logic (the informer calls them synchronously).
    inf.onChange((obj, kind) => {
      for (const key of map(obj, kind)) {
        if (!this.#accept(key)) continue;
        delivered?.(key, obj, kind);
        this.#queue.add(key);
      }
    });
    this.#informers.push(inf);
    return inf;
  }
}

/** keyOf is an object's "namespace/name" key. */
export function keyOf(obj: KubernetesObject): ObjectKey {
  return `${obj.metadata?.namespace ?? ''}/${obj.metadata?.name ?? ''}`;
}
