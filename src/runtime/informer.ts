/**
 * Supervised informers: a list+watch cache of one collection that keeps itself running — the one
 * informer of every binary (the controller's locks, Leases and pods, the dashboard's watches, the
 * agent's Lease, through transport/informer.ts). Lists come from the caller (`list` or paged
 * `listPage`), watches from a {@link WatchStream} (the transport's API client); nothing here loads
 * @kubernetes/client-node at run time (its types only), so the agent bundles none of it.
 *
 * - It lists, then watches from the list's resourceVersion with bookmarks on; a watch that ends
 *   cleanly (or is silent for the client's idle timeout, 30 s) is opened again at once from the
 *   last resourceVersion seen (a bookmark's included), so nothing between the two is missed.
 * - A 410 Gone (as the watch's HTTP answer, as an ERROR event, or from a list: the
 *   resourceVersion was compacted, or the API server restarted and its watch cache starts later)
 *   relists: every cached object the new list lacks is reported as `delete` with its last known
 *   state, then `add`/`update` for new and changed ones. An object deleted while we were away
 *   leaves the cache with one `delete` either way.
 * - Any other failure (connection refused or reset, 401/403, 5xx, a failed list, an ERROR event)
 *   restarts after `min(maxMs, baseMs · 2^n) · (0.5 + 0.5 · random())` for the n-th consecutive
 *   failure (informer-backoff.ts), keeping the cache and the resourceVersion: a restart resumes the
 *   watch, and relists only on 410. The count resets once a watch is open again.
 * - `transform` rewrites every object before the cache keeps it (a listed page is transformed
 *   before the next page is asked for), so the cache holds only the fields its readers use.
 * - `start()` resolves once the first list is in the cache and a watch was accepted (synced), and
 *   rejects after syncTimeoutMs (2 minutes) or on stop(); `watching()` says whether the cache is
 *   being kept current right now, for health checks and metrics.
 *
 * This file keeps the list/watch running (restarts, sync, state); the cache it fills — objects,
 * indexes, change handlers, and what a list or a watch event does to them — is informer-cache.ts.
 */
import type { KubernetesListObject, KubernetesObject, ListPromise } from '@kubernetes/client-node';
import type { Timer, TimerClock } from './clock.ts';
import { isGone } from './errors.ts';
import { restartDelays, syncTimeout, type InformerBackoff } from './informer-backoff.ts';
import { InformerCache, type ChangeHandler, type InformerLogger, type ListPage } from './informer-cache.ts';

export type { ChangeHandler, ChangeKind, InformerLogger, ListPage } from './informer-cache.ts';

export type { InformerBackoff } from './informer-backoff.ts';

/**
 * WatchStream opens one watch request and feeds it its events until the server ends it
 * (resolves), it fails (rejects: an error with `statusCode` when refused, a `TimeoutError` when
 * silent too long), or `signal` aborts it. The one API client (transport/client.ts `ApiClient`) is
 * one; so the informer's watches take the same connections, credentials and request counting as
 * every other request.
 */
export interface WatchStream {
  watch(
    spec: {
      readonly path: string;
      readonly query?: Readonly<Record<string, string | number | boolean | undefined>>;
      readonly signal?: AbortSignal | undefined;
    },
    handlers: { onOpen?(): void; onEvent(type: string, object: unknown): void },
  ): Promise<void>;
}

/** DEFAULT_PAGE_SIZE: 500 objects per page, client-go's reflector page size. */
const DEFAULT_PAGE_SIZE = 500;

/** SuperviseInformerOptions configures {@link superviseInformer}. */
export interface SuperviseInformerOptions<T extends KubernetesObject> {
  /** name identifies the informer in logs and errors (e.g. `pods`). */
  readonly name: string;
  /** watcher opens the watch requests (the API client). */
  readonly watcher: WatchStream;
  /** path is the collection's URL path, e.g. `/api/v1/namespaces/ns/configmaps`. */
  readonly path: string;
  /**
   * list returns the whole collection at `path`, e.g. `() => core.listNamespacedPod({ namespace })`.
   * WARNING: it must apply the same `labelSelector` itself; the informer only passes the selector
   * to the watch, so a list without it fills the cache with objects no watch will ever update.
   * Needed unless `listPage` is given (which then replaces it).
   */
  readonly list?: ListPromise<T>;
  /**
   * listPage, when given, replaces `list` for the informer's lists: it is called with a page size
   * and the `continue` token of the previous page (undefined for the first) and must pass both to
   * the API server (`limit`, `continue`) along with the same label selector. Each page is
   * transformed before the next is fetched, so a large collection is never held whole in its full
   * form: at 10,000 pods that whole first list was the controller's peak of memory.
   */
  readonly listPage?: (page: ListPage) => Promise<KubernetesListObject<T>>;
  /** pageSize is the `limit` of each `listPage` call. Defaults to {@link DEFAULT_PAGE_SIZE}. */
  readonly pageSize?: number;
  /** labelSelector restricts the watch (and, by the caller's list, the cache). Defaults to none. */
  readonly labelSelector?: string;
  /**
   * transform rewrites each object before the cache keeps it (listed or watched): keep only the
   * fields the readers need, so that a large cache costs less memory (client-go's
   * `SetTransform`). It must keep `metadata.name`, `namespace` and `resourceVersion`, which the
   * cache is keyed and updated by, must be pure and must not throw. Defaults to none.
   */
  readonly transform?: (obj: T) => T;
  /**
   * indexers name functions from an object to its index values (client-go's `Indexers`); the
   * cache keeps, per index and value, the objects that have it, for {@link SupervisedInformer.byIndex}.
   * Each must be pure and cheap. Defaults to none.
   */
  readonly indexers?: Readonly<Record<string, (obj: T) => readonly string[]>>;
  /** clock schedules restarts and the sync timeout. */
  readonly clock: TimerClock;
  /** log receives restarts, failures and handler errors. Defaults to discarding them. */
  readonly log?: InformerLogger;
  /** backoff shapes restart delays (informer-backoff.ts: ≤ 200 ms first, doubling to 30 s). */
  readonly backoff?: InformerBackoff;
  /** syncTimeoutMs bounds `start()` (informer-backoff.ts: 2 minutes by default). */
  readonly syncTimeoutMs?: number;
  /** random returns a number in [0, 1) for jitter. Defaults to `Math.random`; inject it in tests. */
  readonly random?: () => number;
  /**
   * onStateChange is called with the new value of `watching()` each time it changes (not on every
   * attempt), for a health check or a gauge. It must be synchronous and cheap; a throw is logged.
   */
  onStateChange?(watching: boolean): void;
}

/**
 * SupervisedInformer is a self-restarting list+watch cache of one collection.
 *
 * Caveats for readers of the cache: objects are the cache's own, shared by every reader; callers must
 * `structuredClone` one before changing it: other readers share it. Objects delivered by a list
 * may be client-node model instances with `Date` timestamps (when `list` is a client-node typed
 * call) and, as the API server sends list items, no `kind`/`apiVersion`; objects delivered by the
 * watch are plain JSON with string timestamps and both fields set. Do not rely on either shape;
 * read `metadata` and `spec` fields only, and compare timestamps by value.
 */
export interface SupervisedInformer<T extends KubernetesObject> {
  /**
   * start begins listing and watching, and resolves once the first list has been delivered to the
   * cache and the handlers and a watch has been established (synced). Until then it keeps retrying
   * with backoff, and rejects after `syncTimeoutMs` (the last failure as `cause`) or if `stop()` is
   * called first; the informer keeps retrying after a timeout, so call `stop()` (or exit).
   * Calling it again returns the same promise; once the informer has been stopped it rejects.
   */
  start(): Promise<void>;
  /**
   * hasSynced reports whether `start()` has resolved: the first list has been delivered and a watch
   * was established. Once true it stays true, also while
   * restarting: the cache is still valid, only possibly stale; see {@link SupervisedInformer.watching}.
   */
  hasSynced(): boolean;
  /**
   * watching reports whether the informer's last list/watch attempt succeeded and has not failed
   * since, i.e. whether the cache is being kept current. False before the first sync, while
   * restarting after an error, and after `stop()`. Caveat: a watch silent for the client's idle
   * timeout (30 s) or ended cleanly by the server is opened again at once from the last
   * resourceVersion; those short gaps do not show here.
   */
  watching(): boolean;
  /**
   * list returns the cached objects of `namespace`, or of all namespaces when it is omitted (and for
   * cluster-scoped resources). The array is new; its objects are the cache's (never mutate them).
   */
  list(namespace?: string): T[];
  /**
   * get returns the cached object, or `undefined`; pass `undefined` as `namespace` for
   * cluster-scoped objects. The object is the cache's (never mutate it).
   */
  get(namespace: string | undefined, name: string): T | undefined;
  /**
   * byIndex returns the cached objects whose index `index` (one of the `indexers`) has `value`,
   * in no particular order; empty for an unknown index or value. The objects are the cache's.
   */
  byIndex(index: string, value: string): T[];
  /**
   * onChange registers `handler` for every later change to the cache, including the adds of the
   * first list; register handlers before `start()` so none are missed. Each call is wrapped in
   * try/catch: a throwing handler is logged and cannot break the informer or other handlers.
   * Updates are reported only when the resourceVersion changed.
   */
  onChange(handler: ChangeHandler<T>): void;
  /**
   * stop ends the watch and any pending restart, and the informer for good (create a new one to
   * watch again). The cache keeps its last contents; handlers are not called any more. Idempotent.
   */
  stop(): Promise<void>;
}

/**
 * superviseInformer creates a {@link SupervisedInformer} for the collection at `opts.path`; nothing
 * happens until `start()`. `path` may carry a query of its own (a field selector): it is sent with
 * the watch's.
 *
 * @throws RangeError unless 0 < baseMs ≤ maxMs (finite) and syncTimeoutMs > 0, or when neither
 * `list` nor `listPage` is given.
 */
export function superviseInformer<T extends KubernetesObject>(
  opts: SuperviseInformerOptions<T>,
): SupervisedInformer<T> {
  return new Supervisor(opts);
}

/** NOOP_LOGGER discards everything; the default when no logger is passed. */
const NOOP_LOGGER: InformerLogger = Object.freeze({ info() {}, debug() {}, error() {} });

/** A Status as an ERROR event carries it. */
interface WatchStatus {
  readonly code?: number;
  readonly reason?: string;
  readonly message?: string;
}

class Supervisor<T extends KubernetesObject> implements SupervisedInformer<T> {
  readonly #name: string;
  readonly #path: string;
  readonly #query: Readonly<Record<string, string>>;
  readonly #watcher: WatchStream;
  readonly #labelSelector: string | undefined;
  readonly #clock: TimerClock;
  readonly #log: InformerLogger;
  /** #delayFor is the restart delay after the n-th consecutive failure (informer-backoff.ts). */
  readonly #delayFor: (failures: number) => number;
  readonly #syncTimeoutMs: number;
  readonly #onStateChange: ((watching: boolean) => void) | undefined;
  readonly #cache: InformerCache<T>;
  readonly #abort = new AbortController();
  #started: Promise<void> | undefined;
  #resolveSync: (() => void) | undefined;
  #rejectSync: ((err: Error) => void) | undefined;
  #syncTimer: Timer | undefined;
  #synced = false;
  #watching = false;
  #stopped = false;
  #loop: Promise<void> | undefined;
  #wake: (() => void) | undefined;
  #lastError: unknown;

  constructor(opts: SuperviseInformerOptions<T>) {
    this.#delayFor = restartDelays('superviseInformer', opts.backoff, opts.random ?? Math.random);
    this.#syncTimeoutMs = syncTimeout('superviseInformer', opts.syncTimeoutMs);
    this.#name = opts.name;
    const q = opts.path.indexOf('?');
    this.#path = q < 0 ? opts.path : opts.path.slice(0, q);
    this.#query = q < 0 ? {} : Object.fromEntries(new URLSearchParams(opts.path.slice(q + 1)));
    this.#watcher = opts.watcher;
    const list = opts.list;
    let listPage: (page: ListPage) => Promise<KubernetesListObject<T>>;
    if (opts.listPage !== undefined) listPage = opts.listPage;
    else if (list !== undefined) listPage = () => list();
    else throw new RangeError(`superviseInformer ${opts.name}: give list or listPage`);
    this.#labelSelector = opts.labelSelector;
    this.#clock = opts.clock;
    this.#log = opts.log ?? NOOP_LOGGER;
    this.#onStateChange = opts.onStateChange?.bind(opts);
    this.#cache = new InformerCache({
      listPage,
      pageSize: opts.pageSize ?? DEFAULT_PAGE_SIZE,
      transform: opts.transform,
      indexers: opts.indexers ?? {},
      log: this.#log,
      fields: () => this.#fields(),
    });
  }

  start(): Promise<void> {
    if (this.#stopped) return Promise.reject(new Error(`Informer ${this.#name} was stopped; create a new one`));
    if (this.#started !== undefined) return this.#started;
    const { promise, resolve, reject } = Promise.withResolvers<void>();
    this.#started = promise;
    this.#resolveSync = resolve;
    this.#rejectSync = reject;
    this.#syncTimer = this.#clock.setTimeout(() => {
      this.#syncTimer = undefined;
      this.#failSync(
        new Error(`Informer ${this.#name} did not sync within ${this.#syncTimeoutMs} ms`, { cause: this.#lastError }),
      );
    }, this.#syncTimeoutMs);
    this.#log.debug(this.#fields(), 'Started informer');
    this.#loop = this.#run();
    return promise;
  }

  hasSynced(): boolean {
    return this.#synced;
  }

  watching(): boolean {
    return this.#watching;
  }

  list(namespace?: string): T[] {
    return this.#cache.list(namespace);
  }

  get(namespace: string | undefined, name: string): T | undefined {
    return this.#cache.get(namespace, name);
  }

  byIndex(index: string, value: string): T[] {
    return this.#cache.byIndex(index, value);
  }

  onChange(handler: ChangeHandler<T>): void {
    this.#cache.onChange(handler);
  }

  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#cache.close();
    this.#syncTimer?.cancel();
    this.#syncTimer = undefined;
    this.#failSync(new Error(`Informer ${this.#name} was stopped before it synced`));
    this.#abort.abort(new Error(`informer ${this.#name} stopped`));
    this.#wake?.();
    this.#setWatching(false);
    await this.#loop;
    if (this.#started !== undefined) this.#log.info(this.#fields(), 'Stopped informer');
  }

  /** #run lists and watches until stop(), restarting after failures (module comment). */
  async #run(): Promise<void> {
    let failures = 0;
    while (!this.#stopped) {
      let opened = false;
      let events = 0;
      const began = this.#clock.monotonicMs();
      try {
        if (this.#cache.rv === '') await this.#cache.relist(this.#abort.signal);
        if (this.#stopped) break;
        let gone = false;
        let failed: Error | undefined;
        const watchAbort = new AbortController();
        const onStop = (): void => {
          watchAbort.abort(this.#abort.signal.reason);
        };
        this.#abort.signal.addEventListener('abort', onStop, { once: true });
        try {
          await this.#watcher.watch(
            {
              path: this.#path,
              query: {
                ...this.#query,
                resourceVersion: this.#cache.rv,
                allowWatchBookmarks: true,
                labelSelector: this.#labelSelector,
              },
              signal: watchAbort.signal,
            },
            {
              onOpen: () => {
                opened = true;
                const recovered = failures > 0 && this.#synced;
                failures = 0;
                this.#lastError = undefined;
                this.#setWatching(true);
                this.#markSynced();
                if (recovered) this.#log.info(this.#fields(), 'Restored informer watch');
              },
              onEvent: (type, obj) => {
                events++;
                if (type === 'ERROR') {
                  // A Status: 410 means the resourceVersion is gone; anything else ends this watch as a failure.
                  const status = obj as WatchStatus | undefined;
                  if (status?.code === 410 || status?.reason === 'Expired' || status?.reason === 'Gone') gone = true;
                  else failed = new Error(`watch ${this.#path}: ${status?.message ?? 'ERROR event'}`);
                  watchAbort.abort(new Error('watch ERROR event'));
                  return;
                }
                this.#cache.apply(type, obj as T);
              },
            },
          );
        } catch (err) {
          if (this.#stopped) break;
          if (gone) {
            this.#cache.rv = '';
            continue;
          }
          if (failed !== undefined) throw failed;
          if (err instanceof Error && err.name === 'TimeoutError' && opened) continue; // silent: re-watch at once
          throw err;
        } finally {
          this.#abort.signal.removeEventListener('abort', onStop);
        }
        if (gone) this.#cache.rv = '';
        // A clean end. One that came at once with nothing in it (a misbehaving proxy) is paced like a failure.
        if (!opened || (events === 0 && this.#clock.monotonicMs() - began < 1000))
          await this.#sleep(this.#delayFor(failures++));
      } catch (err) {
        if (this.#stopped) break;
        if (isGone(err)) {
          this.#cache.rv = '';
          if (failures === 0) {
            failures++;
            continue; // relist at once, once
          }
        }
        this.#lastError = err;
        this.#setWatching(false);
        const delayMs = this.#delayFor(failures);
        failures++;
        this.#log.error(
          { ...this.#fields(), err, failures, retryInMs: Math.round(delayMs) },
          'Failed to list or watch resource',
        );
        await this.#sleep(delayMs);
      }
    }
  }

  #markSynced(): void {
    if (this.#synced) return;
    this.#synced = true;
    this.#syncTimer?.cancel();
    this.#syncTimer = undefined;
    const resolve = this.#resolveSync;
    this.#resolveSync = undefined;
    this.#rejectSync = undefined;
    this.#log.info({ ...this.#fields(), objects: this.#cache.size }, 'Synced informer cache');
    resolve?.();
  }

  #setWatching(watching: boolean): void {
    if (this.#watching === watching) return;
    this.#watching = watching;
    try {
      this.#onStateChange?.(watching);
    } catch (err) {
      this.#log.error({ ...this.#fields(), err, watching }, 'Failed to report informer state');
    }
  }

  #failSync(err: Error): void {
    const reject = this.#rejectSync;
    this.#resolveSync = undefined;
    this.#rejectSync = undefined;
    reject?.(err);
  }

  /** #sleep waits on the clock; stop() ends it early. */
  #sleep(ms: number): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = this.#clock.setTimeout(() => {
        this.#wake = undefined;
        resolve();
      }, ms);
      this.#wake = () => {
        timer.cancel();
        this.#wake = undefined;
        resolve();
      };
    });
  }

  #fields(): { informer: string; path: string } {
    return { informer: this.#name, path: this.#path };
  }
}
