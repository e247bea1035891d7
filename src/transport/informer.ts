/**
 * A lean list+watch cache of one collection over {@link ApiClient}: what the agent's session
 * watches its lock's Lease with. The same guarantees as runtime/informer.ts (the controller's
 * supervisor around client-node's ListWatch), without client-node:
 *
 * - it lists, then watches from the list's resourceVersion; a watch that ends cleanly (or is
 *   silent for the client's watchIdleMs, 30 s) is opened again from the last resourceVersion
 *   seen (bookmarks included), so nothing between the two is missed;
 * - a 410 Gone (as the watch's HTTP answer or as an ERROR event: the resourceVersion was
 *   compacted, or the API server restarted) relists: every cached object the new list lacks is
 *   reported as `delete` with its last known state, then `add`/`update` for the rest;
 * - any other failure (connection refused or reset, 401/403, 5xx, a failed list) restarts after
 *   `min(maxMs, baseMs · 2^n) · (0.5 + 0.5 · random())` for the n-th consecutive failure, keeping
 *   the cache and the resourceVersion (so a restart resumes the watch, and relists only on 410);
 * - `start()` resolves once the first list is in the cache and a watch was accepted (synced), and
 *   rejects after syncTimeoutMs (2 minutes) or on stop(); `watching()` says whether the cache is
 *   being kept current right now.
 *
 * Updates are reported only when the resourceVersion changed. Objects are plain JSON (string
 * timestamps), list items included; handlers must not mutate them.
 */
import type { TimerClock, Timer } from '../runtime/clock.ts';
import { isGone } from '../runtime/errors.ts';
import { restartDelays, syncTimeout, type InformerBackoff } from '../runtime/informer-backoff.ts';
import type { ApiClient } from './client.ts';

/** KubeObject is what the cache needs of an object. */
export interface KubeObject {
  readonly metadata?: { readonly name?: string; readonly namespace?: string; readonly resourceVersion?: string };
}

/** ChangeKind says how an object changed in the cache. */
export type ChangeKind = 'add' | 'update' | 'delete';

/** InformerLogger: pino-style calls, fields first. */
export interface InformerLogger {
  info(obj: object, msg: string): void;
  debug(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/** ListWatchOptions configures {@link ListWatchInformer}. */
export interface ListWatchOptions {
  /** name identifies the informer in logs and errors. */
  readonly name: string;
  readonly api: ApiClient;
  /** path is the collection's URL path, e.g. `/apis/coordination.k8s.io/v1/namespaces/ns/leases`. */
  readonly path: string;
  /** labelSelector restricts the list and the watch alike. */
  readonly labelSelector?: string;
  readonly clock: TimerClock;
  readonly log?: InformerLogger;
  /** backoff: first restart delay ≤ baseMs (200 ms), doubling to maxMs (30 s): runtime/informer-backoff.ts. */
  readonly backoff?: InformerBackoff;
  /** syncTimeoutMs bounds start(); 2 minutes. */
  readonly syncTimeoutMs?: number;
  /** random in [0, 1) for jitter; Math.random. */
  readonly random?: () => number;
  /** onStateChange is told each change of watching(). */
  readonly onStateChange?: (watching: boolean) => void;
}

const NOOP_LOGGER: InformerLogger = Object.freeze({ info() {}, debug() {}, error() {} });

/** ListWatchInformer is a self-restarting list+watch cache (module comment). */
export class ListWatchInformer<T extends KubeObject> {
  readonly #o: ListWatchOptions;
  readonly #log: InformerLogger;
  /** #delayFor is the restart delay after the n-th consecutive failure (informer-backoff.ts). */
  readonly #delayFor: (failures: number) => number;
  readonly #syncTimeoutMs: number;
  readonly #cache = new Map<string, T>();
  readonly #handlers: ((obj: T, kind: ChangeKind) => void)[] = [];
  readonly #abort = new AbortController();
  #rv = '';
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

  constructor(o: ListWatchOptions) {
    this.#o = o;
    this.#log = o.log ?? NOOP_LOGGER;
    this.#delayFor = restartDelays('ListWatchInformer', o.backoff, o.random ?? Math.random);
    this.#syncTimeoutMs = syncTimeout('ListWatchInformer', o.syncTimeoutMs);
  }

  /** start begins listing and watching; resolves once synced (module comment). Calling it again returns the same promise. */
  start(): Promise<void> {
    if (this.#stopped) return Promise.reject(new Error(`Informer ${this.#o.name} was stopped; create a new one`));
    if (this.#started !== undefined) return this.#started;
    const { promise, resolve, reject } = Promise.withResolvers<void>();
    this.#started = promise;
    this.#resolveSync = resolve;
    this.#rejectSync = reject;
    this.#syncTimer = this.#o.clock.setTimeout(() => {
      this.#syncTimer = undefined;
      this.#failSync(
        new Error(`Informer ${this.#o.name} did not sync within ${this.#syncTimeoutMs} ms`, { cause: this.#lastError }),
      );
    }, this.#syncTimeoutMs);
    this.#loop = this.#run();
    return promise;
  }

  /** hasSynced: start() has resolved; stays true while restarting. */
  hasSynced(): boolean {
    return this.#synced;
  }

  /** watching: a watch is open and has not failed since (false before sync, while restarting, after stop). */
  watching(): boolean {
    return this.#watching;
  }

  /** list returns the cached objects (of `namespace`, if given). */
  list(namespace?: string): T[] {
    return [...this.#cache.values()].filter((o) => namespace === undefined || o.metadata?.namespace === namespace);
  }

  /** get returns the cached object, or undefined. */
  get(namespace: string | undefined, name: string): T | undefined {
    return this.#cache.get(keyOf(namespace, name));
  }

  /** onChange registers a handler for every later change, the first list's adds included. Must be synchronous. */
  onChange(handler: (obj: T, kind: ChangeKind) => void): void {
    this.#handlers.push(handler);
  }

  /** stop ends the watch and the informer for good; the cache keeps its contents. Idempotent. */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#syncTimer?.cancel();
    this.#syncTimer = undefined;
    this.#failSync(new Error(`Informer ${this.#o.name} was stopped before it synced`));
    this.#abort.abort(new Error(`informer ${this.#o.name} stopped`));
    this.#wake?.();
    this.#setWatching(false);
    await this.#loop;
  }

  async #run(): Promise<void> {
    let failures = 0;
    while (!this.#stopped) {
      let opened = false;
      let events = 0;
      const began = this.#o.clock.monotonicMs();
      try {
        if (this.#rv === '') await this.#relist();
        let gone = false;
        const watchAbort = new AbortController();
        const onStop = (): void => {
          watchAbort.abort(this.#abort.signal.reason);
        };
        this.#abort.signal.addEventListener('abort', onStop, { once: true });
        try {
          await this.#o.api.watch(
            {
              path: this.#o.path,
              query: { resourceVersion: this.#rv, allowWatchBookmarks: true, labelSelector: this.#o.labelSelector },
              signal: watchAbort.signal,
            },
            {
              onOpen: () => {
                opened = true;
                failures = 0;
                this.#lastError = undefined;
                this.#setWatching(true);
                this.#markSynced();
              },
              onEvent: (type, obj) => {
                events++;
                if (type === 'ERROR') {
                  // A Status: 410 means the resourceVersion is gone; anything else ends this watch as a failure.
                  const status = obj as { code?: number; reason?: string; message?: string } | undefined;
                  if (status?.code === 410 || status?.reason === 'Expired' || status?.reason === 'Gone') gone = true;
                  else this.#lastError = new Error(`watch ${this.#o.path}: ${status?.message ?? 'ERROR event'}`);
                  watchAbort.abort(new Error('watch ERROR event'));
                  return;
                }
                this.#onWatchEvent(type, obj as T);
              },
            },
          );
        } catch (err) {
          if (this.#stopped) break;
          if (gone) {
            this.#rv = '';
            continue;
          }
          if (this.#lastError instanceof Error && watchAbort.signal.aborted) throw this.#lastError;
          if (err instanceof Error && err.name === 'TimeoutError' && opened) continue; // silent: re-watch at once
          throw err;
        } finally {
          this.#abort.signal.removeEventListener('abort', onStop);
        }
        if (gone) this.#rv = '';
        // A clean end. One that came at once with nothing in it (a misbehaving proxy) is paced like a failure.
        if (!opened || (events === 0 && this.#o.clock.monotonicMs() - began < 1000)) {
          await this.#pause(failures++);
        }
      } catch (err) {
        if (this.#stopped) break;
        if (isGone(err)) {
          this.#rv = '';
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
          { informer: this.#o.name, path: this.#o.path, err, failures, retryInMs: Math.round(delayMs) },
          'Failed to list or watch resource',
        );
        await this.#sleep(delayMs);
      }
    }
  }

  async #relist(): Promise<void> {
    const list = await this.#o.api.request<{ metadata?: { resourceVersion?: string }; items?: T[] }>({
      method: 'GET',
      path: this.#o.path,
      query: { labelSelector: this.#o.labelSelector },
      signal: this.#abort.signal,
    });
    if (this.#stopped) return;
    const items = list.items ?? [];
    const fresh = new Set(items.map((o) => keyOf(o.metadata?.namespace, o.metadata?.name ?? '')));
    for (const [key, old] of [...this.#cache]) {
      if (fresh.has(key)) continue;
      this.#cache.delete(key);
      this.#dispatch(old, 'delete');
    }
    for (const o of items) this.#upsert(o);
    this.#rv = list.metadata?.resourceVersion ?? '';
  }

  #onWatchEvent(type: string, obj: T): void {
    const rv = obj.metadata?.resourceVersion;
    if (type === 'ADDED' || type === 'MODIFIED') this.#upsert(obj);
    else if (type === 'DELETED') {
      const key = keyOf(obj.metadata?.namespace, obj.metadata?.name ?? '');
      if (this.#cache.delete(key)) this.#dispatch(obj, 'delete');
    }
    if (rv !== undefined && rv !== '') this.#rv = rv;
  }

  #upsert(obj: T): void {
    const key = keyOf(obj.metadata?.namespace, obj.metadata?.name ?? '');
    const old = this.#cache.get(key);
    this.#cache.set(key, obj);
    if (old === undefined) this.#dispatch(obj, 'add');
    else if (old.metadata?.resourceVersion !== obj.metadata?.resourceVersion) this.#dispatch(obj, 'update');
  }

  #dispatch(obj: T, kind: ChangeKind): void {
    if (this.#stopped) return;
    for (const h of this.#handlers) {
      try {
        h(obj, kind);
      } catch (err) {
        this.#log.error(
          { informer: this.#o.name, err, kind, objectName: obj.metadata?.name },
          'Failed to handle informer event',
        );
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
    this.#log.info({ informer: this.#o.name, path: this.#o.path, objects: this.#cache.size }, 'Synced informer cache');
    resolve?.();
  }

  #failSync(err: Error): void {
    const reject = this.#rejectSync;
    this.#resolveSync = undefined;
    this.#rejectSync = undefined;
    reject?.(err);
  }

  #setWatching(watching: boolean): void {
    if (this.#watching === watching) return;
    this.#watching = watching;
    try {
      this.#o.onStateChange?.(watching);
    } catch (err) {
      this.#log.error({ informer: this.#o.name, err, watching }, 'Failed to report informer state');
    }
  }

  #pause(failures: number): Promise<void> {
    return this.#sleep(this.#delayFor(failures));
  }

  /** #sleep waits on the clock; stop() ends it early. */
  #sleep(ms: number): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = this.#o.clock.setTimeout(() => {
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
}

function keyOf(namespace: string | undefined, name: string): string {
  return `${namespace ?? ''}/${name}`;
}
