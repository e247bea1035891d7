/**
 * The informer's cache (runtime/informer.ts keeps it running): the objects of one collection by
 * namespace/name, their index values, the handlers told of each change, and what a list or a
 * watch event does to all three. A relist reconciles the cache with the new list (what it lacks is
 * reported as `delete` with its last known state); a watch event adds, updates or deletes one
 * object; both remember the resourceVersion the next watch resumes from. Updates are reported only
 * when the resourceVersion changed.
 */
import type { KubernetesListObject, KubernetesObject } from '@kubernetes/client-node';
import { Interner, internShared } from './interner.ts';

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

/** ListPage is one page of a list: the page size, the previous page's `continue` token, and the informer's abort signal. */
export interface ListPage {
  readonly limit: number;
  readonly continue: string | undefined;
  /** signal aborts when the informer stops; a list that honours it ends at once then. */
  readonly signal: AbortSignal;
}

/** InformerCacheOptions are what the cache is filled with and how it reports. */
export interface InformerCacheOptions<T extends KubernetesObject> {
  readonly listPage: (page: ListPage) => Promise<KubernetesListObject<T>>;
  readonly pageSize: number;
  readonly transform: ((obj: T) => T) | undefined;
  readonly indexers: Readonly<Record<string, (obj: T) => readonly string[]>>;
  readonly log: InformerLogger;
  /** fields name the informer in its log lines. */
  readonly fields: () => object;
}

/** InformerCache holds one collection's objects (module comment). */
export class InformerCache<T extends KubernetesObject> {
  /** rv is the resourceVersion the next watch starts from; '' until listed, and after a 410. */
  rv = '';
  readonly #o: InformerCacheOptions<T>;
  readonly #cache = new Map<string, T>();
  readonly #handlers: ChangeHandler<T>[] = [];
  readonly #indexers: readonly (readonly [string, (obj: T) => readonly string[]])[];
  /** #index: per index, per value, the keys (namespace/name) of the objects that have it. */
  readonly #index = new Map<string, Map<string, Set<string>>>();
  /** #indexed: per object key, its values in each index as last indexed. */
  readonly #indexed = new Map<string, readonly (readonly string[])[]>();
  /** #interner: one copy of the strings the cached objects and their index values repeat (interner.ts). */
  readonly #interner = new Interner();
  #closed = false;

  constructor(o: InformerCacheOptions<T>) {
    this.#o = o;
    this.#indexers = Object.entries(o.indexers);
    for (const [name] of this.#indexers) this.#index.set(name, new Map());
  }

  get size(): number {
    return this.#cache.size;
  }

  /** close stops telling handlers and ends a relist under way; the objects stay. */
  close(): void {
    this.#closed = true;
  }

  list(namespace?: string): T[] {
    const out: T[] = [];
    for (const o of this.#cache.values())
      if (namespace === undefined || o.metadata?.namespace === namespace) out.push(o);
    return out;
  }

  get(namespace: string | undefined, name: string): T | undefined {
    return this.#cache.get(keyOf(namespace, name));
  }

  byIndex(index: string, value: string): T[] {
    const keys = this.#index.get(index)?.get(value);
    if (keys === undefined) return [];
    const out: T[] = [];
    for (const k of keys) {
      const obj = this.#cache.get(k);
      if (obj !== undefined) out.push(obj);
    }
    return out;
  }

  onChange(handler: ChangeHandler<T>): void {
    this.#handlers.push(handler);
  }

  /** relist lists the collection page by page (each page transformed before the next is asked for) and reconciles the cache with it. */
  async relist(signal: AbortSignal): Promise<void> {
    const { listPage, pageSize } = this.#o;
    const items: T[] = [];
    let cont: string | undefined;
    let last: KubernetesListObject<T>;
    do {
      last = await untilAborted(listPage({ limit: pageSize, continue: cont, signal }), signal);
      if (this.#closed) return;
      for (const item of last.items) items.push(this.#kept(item));
      cont = continueToken(last);
    } while (cont !== undefined);
    const fresh = new Set(items.map((o) => keyOf(o.metadata?.namespace, o.metadata?.name)));
    for (const [key, old] of [...this.#cache]) {
      if (fresh.has(key)) continue;
      this.#cache.delete(key);
      this.#dispatch(key, old, 'delete');
    }
    for (const o of items) this.#upsert(o);
    this.rv = last.metadata?.resourceVersion ?? '';
  }

  /** apply takes one watch event (not ERROR) into the cache. */
  apply(type: string, raw: T): void {
    const rv = raw.metadata?.resourceVersion;
    if (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED') {
      const obj = this.#kept(raw);
      if (type === 'DELETED') {
        const key = keyOf(obj.metadata?.namespace, obj.metadata?.name);
        if (this.#cache.delete(key)) this.#dispatch(key, obj, 'delete');
      } else this.#upsert(obj);
    }
    // BOOKMARK events carry only a resourceVersion: resuming from it skips nothing we need.
    if (rv !== undefined && rv !== '') this.rv = rv;
  }

  /** #kept: the object as the cache keeps it, transformed, with its shared strings interned. */
  #kept(raw: T): T {
    const transform = this.#o.transform;
    return internShared(transform !== undefined ? transform(raw) : raw, this.#interner);
  }

  #upsert(obj: T): void {
    const key = keyOf(obj.metadata?.namespace, obj.metadata?.name);
    const old = this.#cache.get(key);
    // A Map keeps the key it was first given, so the cache and the index share the add's copy.
    this.#cache.set(key, obj);
    if (old === undefined) this.#dispatch(key, obj, 'add');
    else if (old.metadata?.resourceVersion !== obj.metadata?.resourceVersion) this.#dispatch(key, obj, 'update');
  }

  /** #reindex moves the object's key to its current index values (none once deleted). */
  #reindex(key: string, obj: T, kind: ChangeKind): void {
    if (this.#indexers.length === 0) return;
    const old = this.#indexed.get(key);
    const now =
      kind === 'delete' ? undefined : this.#indexers.map(([, fn]) => fn(obj).map((v) => this.#interner.of(v)));
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

  #dispatch(key: string, obj: T, kind: ChangeKind): void {
    try {
      this.#reindex(key, obj, kind);
    } catch (err) {
      this.#o.log.error({ ...this.#o.fields(), err, kind }, 'Failed to index informer object');
    }
    if (this.#closed) return;
    for (const handler of this.#handlers) {
      try {
        handler(obj, kind);
      } catch (err) {
        this.#o.log.error(
          { ...this.#o.fields(), err, kind, namespace: obj.metadata?.namespace, objectName: obj.metadata?.name },
          'Failed to handle informer event',
        );
      }
    }
  }
}

function keyOf(namespace: string | undefined, name: string | undefined): string {
  return `${namespace ?? ''}/${name ?? ''}`;
}

/** continueToken: a list page's `continue` token (`_continue` in client-node's models, `continue` in raw JSON), or undefined on the last page. */
function continueToken(list: KubernetesListObject<KubernetesObject>): string | undefined {
  const md = list.metadata as { _continue?: unknown; continue?: unknown } | undefined;
  const token = md?._continue ?? md?.continue;
  return typeof token === 'string' && token !== '' ? token : undefined;
}

/**
 * untilAborted settles with `p`, or rejects with the signal's reason once it aborts: stop() never
 * waits on a list that does not honour the signal (a list function of the caller's).
 */
function untilAborted<R>(p: Promise<R>, signal: AbortSignal): Promise<R> {
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<R>((resolve, reject) => {
    const onAbort = (): void => {
      reject(signal.reason as Error);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(resolve, reject).finally(() => {
      signal.removeEventListener('abort', onAbort);
    });
  });
}
