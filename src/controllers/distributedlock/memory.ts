/**
 * LockMemory — everything this process remembers of one lock between two reconciles, in one
 * record. The reconciler keeps one record per lock key in `LockMemories`, which is the only place a
 * record is made (`of`) and the only place one is dropped (`forget`): forgetting a lock drops every
 * field at once, so that a field added later cannot be left behind.
 *
 * Nothing here is the lock's state: that lives in the API server (the lock, its Leases, the pods)
 * or in a store. This is what makes one process's decisions quick and its Events once-only: when
 * and how a Lease last changed by our clock, our own writes the caches have not shown yet, and
 * what was already reported. A new process (or a new leader) starts with none, and waits a full
 * lease duration before it calls a holder expired.
 */
import type { V1Lease } from '@kubernetes/client-node';
import type { DistributedLockStatus, QueuedRequest } from '../../api/v1alpha1/distributedlock.ts';
import type { ObjectKey } from '../../runtime/controller.ts';
import type { StoreMemory } from './decide-store.ts';

/** Seen: a fingerprint of something observed and our monotonic time when we first saw it. */
export interface Seen {
  readonly fingerprint: string;
  readonly atMs: number;
}

/**
 * NOTHING_REPORTED: the one empty set every record's report sets start as and go back to. Reports
 * are rare, and at 10,000 locks an empty set per lock and per kind of report is megabytes of heap.
 */
export const NOTHING_REPORTED: ReadonlySet<string> = new Set();

/** LockMemory is one lock's record; every field starts empty (see `LockMemories.of`). */
export interface LockMemory {
  /** seen: per Lease name (the lock's own, or a permit's), its renew fingerprint last seen and our time then. */
  readonly seen: Map<string, Seen>;
  /** handoverMark: the Lease's handover mark last seen and our time when we first saw it. */
  handoverMark: Seen | undefined;
  /** fencingDegraded: we last reported the lock's fencing unavailable (transition-only Events). */
  fencingDegraded: boolean;
  /** tampered: the tampering last reported (what was found), for once-per-finding Events. */
  tampered: string | undefined;
  /**
   * queue: this process's record of the requests in the order it first saw them, the newest copy
   * of status.queue, kept by every status write (LockIO.writeStatus): the lock cache may not show
   * our last status write yet when the next request arrives. Unset: seed from status.queue (what an
   * earlier process or leader recorded).
   */
  queue: readonly QueuedRequest[] | undefined;
  /** badPriorities: the invalid Election priorities already reported (`pod/uid=value`), for once-only Events. */
  badPriorities: ReadonlySet<string>;
  /** refused: the refused completions already reported (`runId|token|verdict`), for once-only Events. */
  refused: ReadonlySet<string>;
  /**
   * expected: the Lease as our last write left it, until the Lease informer has delivered that
   * version (client-go's "expectations"): a reconcile that runs before then decides from it rather
   * than from the cache, which would still show the version before our write — a grant decided
   * from that would burn a token and a write on a sure 409. Bounded by `untilMs` in case the watch
   * skips the version (a relist).
   */
  expected: { readonly lease: V1Lease; readonly untilMs: number } | undefined;
  /** delivered: the resourceVersion of the Lease the informer delivered last. */
  delivered: string | undefined;
  /** grantFailure: why this process's last grant attempt failed (Ready=False GrantFailed) until one succeeds. */
  grantFailure: string | undefined;
  /**
   * statusWritten: the status our last write sent, and the status the lock cache showed under it
   * (`base`, serialised), until the cache shows another status (our write, or anyone's) or
   * `untilMs` passes: a reconcile that runs before the cache has our write (a pod or Lease event
   * of the same grant) reads the lock with this status (LockIO.withOwnStatus) rather than the
   * cache's, and so neither sends the same status again nor a copy of it stamped with a later
   * transition time.
   */
  statusWritten:
    { readonly base: string; readonly status: DistributedLockStatus; readonly untilMs: number } | undefined;
  /** store: what the controller saw of a store lock (spec.store Redis or Redlock) at its last read. */
  store: StoreMemory;
  /** heard: the owners heard releasing a store lock since its last read; unset while there are none (most locks never have any). */
  heard: Set<string> | undefined;
}

/** LockMemories holds one LockMemory per lock key. */
export class LockMemories {
  readonly #byKey = new Map<ObjectKey, LockMemory>();

  /** of returns the lock's record, making an empty one the first time: the one place a record is made. */
  of(key: ObjectKey): LockMemory {
    let m = this.#byKey.get(key);
    if (m === undefined) {
      m = {
        seen: new Map(),
        handoverMark: undefined,
        fencingDegraded: false,
        tampered: undefined,
        queue: undefined,
        badPriorities: NOTHING_REPORTED,
        refused: NOTHING_REPORTED,
        expected: undefined,
        delivered: undefined,
        grantFailure: undefined,
        statusWritten: undefined,
        store: {},
        heard: undefined,
      };
      this.#byKey.set(key, m);
    }
    return m;
  }

  /** peek returns the lock's record if there is one, without making one. */
  peek(key: ObjectKey): LockMemory | undefined {
    return this.#byKey.get(key);
  }

  /** forget drops everything remembered of the lock: the one place a record is dropped. */
  forget(key: ObjectKey): void {
    this.#byKey.delete(key);
  }

  /** size: how many locks have a record (tests assert that deleted locks leave none). */
  get size(): number {
    return this.#byKey.size;
  }
}
