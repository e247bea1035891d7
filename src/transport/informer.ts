/**
 * The agent's list+watch cache of one collection over {@link ApiClient}: the one informer
 * (runtime/informer.ts `superviseInformer`, which the controller and the dashboard run too) fed by
 * the transport's client — lists by GET in pages of 500 with the label selector, watches by its
 * watch. See runtime/informer.ts for the guarantees (resume from the last resourceVersion,
 * bookmarks, relist on 410 Gone, jittered backoff, sync timeout). Objects are plain JSON (string
 * timestamps), list items included; handlers must not mutate them.
 */
import type { TimerClock } from '../runtime/clock.ts';
import type { InformerBackoff } from '../runtime/informer-backoff.ts';
import {
  superviseInformer,
  type ChangeKind,
  type InformerLogger,
  type SupervisedInformer,
} from '../runtime/informer.ts';
import type { ApiClient } from './client.ts';
import { listPages } from './resources.ts';

export type { ChangeKind, InformerLogger } from '../runtime/informer.ts';

/** KubeObject is what the cache needs of an object. */
export interface KubeObject {
  readonly metadata?: { readonly name?: string; readonly namespace?: string; readonly resourceVersion?: string };
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

/** ListWatchInformer is the one informer over the transport's client (module comment). */
export class ListWatchInformer<T extends KubeObject> {
  readonly #inner: SupervisedInformer<T>;

  constructor(o: ListWatchOptions) {
    const { api, path, labelSelector } = o;
    this.#inner = superviseInformer<T>({
      name: o.name,
      watcher: api,
      path,
      ...(labelSelector !== undefined ? { labelSelector } : {}),
      listPage: listPages<T>(api, path, labelSelector),
      clock: o.clock,
      ...(o.log !== undefined ? { log: o.log } : {}),
      ...(o.backoff !== undefined ? { backoff: o.backoff } : {}),
      ...(o.syncTimeoutMs !== undefined ? { syncTimeoutMs: o.syncTimeoutMs } : {}),
      ...(o.random !== undefined ? { random: o.random } : {}),
      ...(o.onStateChange !== undefined ? { onStateChange: o.onStateChange } : {}),
    });
  }

  /** start begins listing and watching; resolves once synced. Calling it again returns the same promise. */
  start(): Promise<void> {
    return this.#inner.start();
  }

  /** hasSynced: start() has resolved; stays true while restarting. */
  hasSynced(): boolean {
    return this.#inner.hasSynced();
  }

  /** watching: a watch is open and has not failed since (false before sync, while restarting, after stop). */
  watching(): boolean {
    return this.#inner.watching();
  }

  /** list returns the cached objects (of `namespace`, if given). */
  list(namespace?: string): T[] {
    return this.#inner.list(namespace);
  }

  /** get returns the cached object, or undefined. */
  get(namespace: string | undefined, name: string): T | undefined {
    return this.#inner.get(namespace, name);
  }

  /** onChange registers a handler for every later change, the first list's adds included. Must be synchronous. */
  onChange(handler: (obj: T, kind: ChangeKind) => void): void {
    this.#inner.onChange(handler);
  }

  /** stop ends the watch and the informer for good; the cache keeps its contents. Idempotent. */
  stop(): Promise<void> {
    return this.#inner.stop();
  }
}
