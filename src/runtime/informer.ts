/**
 * Supervised informers: a list+watch cache of one resource that keeps itself running.
 *
 * @kubernetes/client-node's `ListWatch` (what `makeInformer` returns) lists, then watches from the
 * list's resourceVersion, and re-watches by itself when a watch ends cleanly, times out, or answers
 * 410 Gone (then it relists first). On any other failure (connection refused or reset, 401/403,
 * 5xx, a failed list) it emits `error` and stops for good; the caller has to call `start()` again
 * (kubernetes-client/javascript#364, #795 and #1933). This module is that caller: it restarts the
 * informer with jittered exponential backoff, keeps the cache across restarts, tells when the first
 * list has been delivered (`start()` resolves, `hasSynced()`), and reports whether it is watching
 * right now, for health checks and metrics.
 *
 * What a restart does (read from client-node 2.0.1 `dist/cache.js`, and observed against a real API
 * server in test/integration/runtime/informer.test.ts): `start()` keeps the cache and the last
 * resourceVersion, so it does not relist; it resumes the watch from that resourceVersion, and the
 * server replays every change since, deletions included. If that resourceVersion is no longer
 * available (compacted, or the API server restarted and its watch cache starts later, as it does in
 * practice) the server answers 410 Gone, and the informer relists: `deleteItems` compares the new list
 * with the cache and emits `delete` for every cached object the list lacks (with its last known
 * state), then `add`/`update` for new and changed ones. Either way an object deleted while we were
 * disconnected leaves the cache and produces one `delete`.
 */
import { ListWatch, type Watch } from '@kubernetes/client-node';
import type { KubernetesListObject, KubernetesObject, ListPromise } from '@kubernetes/client-node';
import type { Timer, TimerClock } from './clock.ts';
import { restartDelays, syncTimeout, type InformerBackoff } from './informer-backoff.ts';

/**
 * InformerLogger is the logging an informer needs: pino-style calls with the structured fields
 * first and a constant message second, like pino. A pino `Logger` satisfies it.
 */
export interface InformerLogger {
  info(obj: object, msg: string): void;
  debug(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/** ChangeKind says how an object changed in the cache. */
export type ChangeKind = 'add' | 'update' | 'delete';

/**
 * ChangeHandler is told about each change to the cache. It must be synchronous, cheap, and only
 * enqueue (`queue.add(keyOf(obj))`, no await, no logic); `obj` is the cache's own object (for `delete`, its last
 * known state) and must not be mutated.
 */
export type ChangeHandler<T> = (obj: T, kind: ChangeKind) => void;

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
    handlers: { onEvent(type: string, object: unknown): void },
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
   */
  readonly list: ListPromise<T>;
  /**
   * listPage, when given, replaces `list` for the informer's lists: it is called with a page size
   * and the `continue` token of the previous page (undefined for the first) and must pass both to
   * the API server (`limit`, `continue`) along with the same label selector. Each page is
   * transformed before the next is fetched, so a large collection is never held whole in its full
   * form: at 10,000 pods that whole first list was the controller's peak of memory.
   */
  readonly listPage?: (page: {
    readonly limit: number;
    readonly continue: string | undefined;
  }) => Promise<KubernetesListObject<T>>;
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
 * `structuredClone` one before changing it: other readers share it. Objects delivered by a list are client-node model
 * instances with `Date` timestamps and, as the API server sends list items, no `kind`/`apiVersion`;
 * objects delivered by the watch are plain JSON with string timestamps and both fields set. Do not
 * rely on either shape; read `metadata` and `spec` fields only, and compare timestamps by value.
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
   * restarting after an error, and after `stop()`. Caveat: client-node re-watches by itself every
   * 30 s of silence and after clean ends; those short gaps do not show here.
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
 * happens until `start()`.
 *
 * Restarts: every `error` from the informer (after it has stopped itself) schedules one restart
 * after `min(maxMs, baseMs · 2^n) · (0.5 + 0.5 · random())` for the n-th consecutive failure
 * (equal jitter: half fixed, half random, never above `maxMs`). The count resets once a (re)start
 * lists (if needed) and establishes a watch without error.
 *
 * Hardening over plain `makeInformer` (which is `new ListWatch(path, new Watch(kc), list, false,
 * labelSelector)`; this builds the same thing with a guarded `Watch`):
 * - client-node does not re-check `stopped` after its awaits, so a `stop()` during a list or a
 *   re-watch delay would still open a watch afterwards; the guarded watch refuses to open, and
 *   aborts one that opened, once stopped;
 * - a watch that fails before its request is sent (credentials could not be loaded) rejects inside
 *   client-node's re-watch callback, which nothing awaits (an unhandled rejection, fatal in Node);
 *   the guarded watch turns it into an `error` event, which is restarted like any other;
 * - client-node's own re-watch delays run on `opts.clock` and end at once on `stop()`.
 *
 * @throws RangeError unless 0 < baseMs ≤ maxMs (finite) and syncTimeoutMs > 0.
 */
export function superviseInformer<T extends KubernetesObject>(
  opts: SuperviseInformerOptions<T>,
): SupervisedInformer<T> {
  return new Supervisor(opts);
}

/** NOOP_LOGGER discards everything; the default when no logger is passed. */
const NOOP_LOGGER: InformerLogger = Object.freeze({ info() {}, debug() {}, error() {} });

/**
 * GuardedWatch is the watch ListWatch drives, over a {@link WatchStream}: it will not open a watch
 * once `stopped()` is true, reports the end of each watch through `done` once (null when the
 * server ended it, else the error) the way client-node's Watch does, and says nothing of a watch
 * that ListWatch itself aborted (it has stopped, or is starting another).
 */
class GuardedWatch<T> {
  readonly #source: WatchStream;
  readonly #stopped: () => boolean;
  readonly #transform: ((obj: T) => T) | undefined;

  constructor(source: WatchStream, stopped: () => boolean, transform: ((obj: T) => T) | undefined) {
    this.#source = source;
    this.#stopped = stopped;
    this.#transform = transform;
  }

  watch(
    path: string,
    queryParams: Record<string, string | number | boolean | undefined>,
    callback: (phase: string, apiObj: unknown, watchObj?: unknown) => void,
    done: (err: unknown) => void,
  ): Promise<AbortController> {
    if (this.#stopped()) return Promise.resolve(abortedController());
    const controller = new AbortController();
    const transform = this.#transform;
    // A path may carry its own query (a field selector): it is merged with ListWatch's.
    const q = path.indexOf('?');
    const query: Record<string, string | number | boolean | undefined> =
      q < 0 ? {} : Object.fromEntries(new URLSearchParams(path.slice(q + 1)));
    Object.assign(query, queryParams);
    this.#source
      .watch(
        { path: q < 0 ? path : path.slice(0, q), query, signal: controller.signal },
        {
          onEvent: (type, object) => {
            // ERROR and BOOKMARK events carry a Status or a bare object: only the object events are transformed.
            const obj =
              transform !== undefined && (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED')
                ? transform(object as T)
                : object;
            callback(type, obj, { type, object: obj });
          },
        },
      )
      .then(
        () => {
          if (!controller.signal.aborted) done(null);
        },
        (err: unknown) => {
          if (!controller.signal.aborted) done(err);
        },
      );
    return Promise.resolve(controller);
  }
}

/** continueToken: a list page's `continue` token (`_continue` in client-node's models, `continue` in raw JSON), or undefined on the last page. */
function continueToken(list: KubernetesListObject<KubernetesObject>): string | undefined {
  const md = list.metadata as { _continue?: unknown; continue?: unknown } | undefined;
  const token = md?._continue ?? md?.continue;
  return typeof token === 'string' && token !== '' ? token : undefined;
}

function abortedController(): AbortController {
  const c = new AbortController();
  c.abort();
  return c;
}

class Supervisor<T extends KubernetesObject> implements SupervisedInformer<T> {
  readonly #name: string;
  readonly #path: string;
  readonly #clock: TimerClock;
  readonly #log: InformerLogger;
  /** #delayFor is the restart delay after the n-th consecutive failure (informer-backoff.ts). */
  readonly #delayFor: (failures: number) => number;
  readonly #syncTimeoutMs: number;
  readonly #onStateChange: ((watching: boolean) => void) | undefined;
  readonly #informer: ListWatch<T>;
  readonly #handlers: ChangeHandler<T>[] = [];
  readonly #indexers: readonly (readonly [string, (obj: T) => readonly string[]])[];
  /** #index: per index, per value, the keys (namespace/name) of the objects that have it. */
  readonly #index = new Map<string, Map<string, Set<string>>>();
  /** #indexed: per object key, its values in each index as last indexed. */
  readonly #indexed = new Map<string, readonly (readonly string[])[]>();
  /** #delays are client-node's pending re-watch delays, ended early by stop(). */
  readonly #delays = new Set<() => void>();

  #started: Promise<void> | undefined;
  #resolveSync: (() => void) | undefined;
  #rejectSync: ((err: Error) => void) | undefined;
  #syncTimer: Timer | undefined;
  #restartTimer: Timer | undefined;
  #synced = false;
  #watching = false;
  #stopped = false;
  /** #attempting is true from calling the informer's start() until that promise settles. */
  #attempting = false;
  /** #attemptFailed records an error during the current attempt; the attempt's end restarts. */
  #attemptFailed = false;
  /** #failures counts consecutive failed attempts, the exponent of the backoff. */
  #failures = 0;
  #lastError: unknown;

  constructor(opts: SuperviseInformerOptions<T>) {
    this.#delayFor = restartDelays('superviseInformer', opts.backoff, opts.random ?? Math.random);
    this.#syncTimeoutMs = syncTimeout('superviseInformer', opts.syncTimeoutMs);
    this.#name = opts.name;
    this.#path = opts.path;
    this.#clock = opts.clock;
    this.#log = opts.log ?? NOOP_LOGGER;
    this.#onStateChange = opts.onStateChange?.bind(opts);

    this.#indexers = Object.entries(opts.indexers ?? {});
    for (const [name] of this.#indexers) this.#index.set(name, new Map());
    const transform = opts.transform;
    const watch = new GuardedWatch(opts.watcher, () => this.#stopped, transform);
    const listPage = opts.listPage;
    const pageSize = opts.pageSize ?? DEFAULT_PAGE_SIZE;
    const list: ListPromise<T> =
      listPage !== undefined
        ? async () => {
            const items: T[] = [];
            let cont: string | undefined;
            let last: KubernetesListObject<T>;
            do {
              last = await listPage({ limit: pageSize, continue: cont });
              for (const item of last.items) items.push(transform !== undefined ? transform(item) : item);
              last.items = [];
              cont = continueToken(last);
            } while (cont !== undefined && !this.#stopped);
            last.items = items;
            return last;
          }
        : transform === undefined
          ? opts.list
          : async () => {
              const l = await opts.list();
              l.items = l.items.map(transform);
              return l;
            };
    // ListWatch asks for client-node's Watch class, whose private field makes its type nominal;
    // it calls nothing of it but watch(), which GuardedWatch has with the same contract.
    this.#informer = new ListWatch<T>(
      opts.path,
      watch as unknown as Watch,
      list,
      false,
      opts.labelSelector,
      undefined,
      {
        delayFn: (ms) => this.#delay(ms),
      },
    );
    this.#informer.on('add', (obj) => this.#dispatch(obj, 'add'));
    this.#informer.on('update', (obj) => this.#dispatch(obj, 'update'));
    this.#informer.on('delete', (obj) => this.#dispatch(obj, 'delete'));
    this.#informer.on('error', (err: unknown) => this.#onError(err));
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
    this.#attempt();
    return promise;
  }

  hasSynced(): boolean {
    return this.#synced;
  }

  watching(): boolean {
    return this.#watching;
  }

  list(namespace?: string): T[] {
    return [...this.#informer.list(namespace)];
  }

  get(namespace: string | undefined, name: string): T | undefined {
    return this.#informer.get(name, namespace);
  }

  byIndex(index: string, value: string): T[] {
    const keys = this.#index.get(index)?.get(value);
    if (keys === undefined) return [];
    const out: T[] = [];
    for (const k of keys) {
      const i = k.indexOf('/');
      const obj = this.#informer.get(k.slice(i + 1), i > 0 ? k.slice(0, i) : undefined);
      if (obj !== undefined) out.push(obj);
    }
    return out;
  }

  onChange(handler: ChangeHandler<T>): void {
    this.#handlers.push(handler);
  }

  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#restartTimer?.cancel();
    this.#restartTimer = undefined;
    this.#syncTimer?.cancel();
    this.#syncTimer = undefined;
    this.#failSync(new Error(`Informer ${this.#name} was stopped before it synced`));
    for (const end of this.#delays) end();
    this.#delays.clear();
    this.#setWatching(false);
    // Aborts the open watch; client-node then emits an AbortError `error`, which #onError ignores.
    await this.#informer.stop();
    if (this.#started !== undefined) this.#log.info(this.#fields(), 'Stopped informer');
  }

  /** #attempt (re)starts the informer; its outcome arrives through #onError and #attemptEnded. */
  #attempt(): void {
    this.#restartTimer = undefined;
    if (this.#stopped) return;
    this.#attempting = true;
    this.#attemptFailed = false;
    void this.#informer.start().then(
      () => this.#attemptEnded(),
      (err: unknown) => {
        // Rejections bypass the `error` event (a thrown list handler cannot happen: #dispatch catches).
        this.#onError(err);
        this.#attemptEnded();
      },
    );
  }

  /**
   * #attemptEnded runs when the informer's start() settles. client-node's start() resolves after it
   * has listed (when it had no resourceVersion) and opened the watch, or after it emitted `error`.
   */
  #attemptEnded(): void {
    this.#attempting = false;
    if (this.#stopped) return;
    if (this.#attemptFailed) {
      this.#scheduleRestart();
      return;
    }
    const recovered = this.#failures > 0;
    this.#failures = 0;
    this.#lastError = undefined;
    this.#setWatching(true);
    if (!this.#synced) {
      this.#synced = true;
      this.#syncTimer?.cancel();
      this.#syncTimer = undefined;
      const resolve = this.#resolveSync;
      this.#resolveSync = undefined;
      this.#rejectSync = undefined;
      this.#log.info({ ...this.#fields(), objects: this.#informer.list().length }, 'Synced informer cache');
      resolve?.();
    } else if (recovered) {
      this.#log.info(this.#fields(), 'Restored informer watch');
    }
  }

  /** #onError handles client-node's `error` event, after which the informer has stopped itself. */
  #onError(err: unknown): void {
    // After stop(), the aborted watch reports an AbortError; nothing to restart.
    if (this.#stopped) return;
    this.#lastError = err;
    this.#setWatching(false);
    if (this.#attempting) {
      this.#attemptFailed = true;
      return;
    }
    this.#scheduleRestart();
  }

  #scheduleRestart(): void {
    if (this.#stopped || this.#restartTimer !== undefined) return;
    const delayMs = this.#delayFor(this.#failures);
    this.#failures++;
    this.#log.error(
      { ...this.#fields(), err: this.#lastError, failures: this.#failures, retryInMs: Math.round(delayMs) },
      'Failed to list or watch resource',
    );
    this.#restartTimer = this.#clock.setTimeout(() => this.#attempt(), delayMs);
  }

  /** #reindex moves the object's key to its current index values (none once deleted). */
  #reindex(obj: T, kind: ChangeKind): void {
    if (this.#indexers.length === 0) return;
    const key = `${obj.metadata?.namespace ?? ''}/${obj.metadata?.name ?? ''}`;
    const old = this.#indexed.get(key);
    const now = kind === 'delete' ? undefined : this.#indexers.map(([, fn]) => fn(obj));
    this.#indexers.forEach(([name], i) => {
      const byValue = this.#index.get(name);
      if (byValue === undefined) return;
      for (const v of old?.[i] ?? []) {
        const keys = byValue.get(v);
        keys?.delete(key);
        if (keys?.size === 0) byValue.delete(v);
      }
      for (const v of now?.[i] ?? []) {
        let keys = byValue.get(v);
        if (keys === undefined) byValue.set(v, (keys = new Set()));
        keys.add(key);
      }
    });
    if (now === undefined) this.#indexed.delete(key);
    else this.#indexed.set(key, now);
  }

  #dispatch(obj: T, kind: ChangeKind): void {
    try {
      this.#reindex(obj, kind);
    } catch (err) {
      this.#log.error({ ...this.#fields(), err, kind }, 'Failed to index informer object');
    }
    if (this.#stopped) return;
    for (const handler of this.#handlers) {
      try {
        handler(obj, kind);
      } catch (err) {
        this.#log.error(
          { ...this.#fields(), err, kind, namespace: obj.metadata?.namespace, objectName: obj.metadata?.name },
          'Failed to handle informer event',
        );
      }
    }
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

  /** #delay is client-node's re-watch delay on our clock; stop() ends it early. */
  #delay(ms: number): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    return new Promise((resolve) => {
      const end = (): void => {
        timer.cancel();
        this.#delays.delete(end);
        resolve();
      };
      const timer = this.#clock.setTimeout(end, ms);
      this.#delays.add(end);
    });
  }

  #fields(): { informer: string; path: string } {
    return { informer: this.#name, path: this.#path };
  }
}
