/**
 * DistributedLockReconciler — the I/O shell of the lock protocol's controller side (DESIGN "The
 * protocol"): load the lock, keep its cleanup finalizer, and hand it to the policy of its kind —
 * Election and Mutex on one Lease (lease-lock.ts), Semaphore on a Lease per permit
 * (semaphore.ts), Redis and Redlock store locks observed only (store-locks.ts). The policies
 * decide with the pure decide*.ts modules and act through the one shared I/O of lock-io.ts: one
 * grant, end-of-term and deletion path, one memory record per lock (memory.ts). One reconciler,
 * one primary kind: Lease and Pod changes reach it only as lock keys (mappers.ts).
 *
 * Everything it reads and writes comes through its ports (ports.ts), and every call carries the
 * reconcile's abort signal.
 */
import type { V1Lease } from '@kubernetes/client-node';
import { storeOf, type DistributedLock } from '../../api/v1alpha1/distributedlock.ts';
import { leaseName, LOCK_FINALIZER, podKeys } from '../../protocol/names.ts';
import {
  type ObjectKey,
  type ReconcileContext,
  type Reconciler,
  type Result,
  splitKey,
} from '../../runtime/controller.ts';
import { TerminalError } from '../../runtime/errors.ts';
import { withFinalizer, type CleanupResult } from '../../runtime/finalizer.ts';
import { LeaseLockPolicy } from './lease-lock.ts';
import { EXPIRY_WAIT_MARGIN_MS, LockIO, type CallContext } from './lock-io.ts';
import { summarizePod } from './pods.ts';
import type { ReconcilerDeps } from './ports.ts';
import { SemaphorePolicy } from './semaphore.ts';
import { StoreLocks, type StoreActs } from './store-locks.ts';

export class DistributedLockReconciler implements Reconciler {
  readonly #io: LockIO;
  readonly #election: LeaseLockPolicy;
  readonly #mutex: LeaseLockPolicy;
  readonly #semaphore: SemaphorePolicy;
  /** #stores: the locks held in a Redis or Redlock store (spec.store), which this controller only observes. */
  readonly #stores: StoreLocks | undefined;

  constructor(deps: ReconcilerDeps) {
    this.#io = new LockIO(deps);
    this.#election = new LeaseLockPolicy(this.#io, { reportsPriorities: true });
    this.#mutex = new LeaseLockPolicy(this.#io, { reportsPriorities: false });
    this.#semaphore = new SemaphorePolicy(this.#io);
    this.#stores = deps.stores !== undefined ? new StoreLocks(deps.stores, deps.metrics, deps.clock) : undefined;
  }

  /** releaseHeard records a store lock's release heard on its channel (setup.ts enqueues the lock). */
  releaseHeard(key: ObjectKey, owner: string): void {
    if (this.#stores !== undefined) StoreLocks.heard(this.#io.memory(key), owner);
  }

  /** rememberedLocks: how many locks this process keeps a memory record of (a deleted lock leaves none). */
  get rememberedLocks(): number {
    return this.#io.remembered;
  }

  /**
   * leaseDelivered tells the reconciler that the Lease informer delivered `lease` (every add,
   * update and delete, in order, before the key is enqueued), so that it stops preferring its own
   * last write once the cache has caught up with it. Synchronous and cheap.
   */
  leaseDelivered(key: ObjectKey, lease: V1Lease, deleted: boolean): void {
    this.#io.leaseDelivered(key, lease, deleted);
  }

  /**
   * forget drops what this process remembers of the lock, as if it had never seen it: for a
   * replica that gains the lock's shard, whose memory of an earlier term may be stale.
   */
  forget(key: ObjectKey): void {
    this.#io.forget(key);
  }

  async reconcile(key: ObjectKey, ctx: ReconcileContext): Promise<Result> {
    const log = this.#io.d.log.child(ctx.logFields); // controller-runtime's keys: controller, namespace, name, reconcileID…
    // Load the lock; gone means nothing to do, and nothing of it to remember.
    const { namespace, name } = splitKey(key);
    const cached = this.#io.d.locks.get(namespace, name);
    if (cached === undefined) {
      this.#io.forget(key);
      return {};
    }
    // The cache may not show our own last status write yet: read the lock as we left it.
    const lock = this.#io.withOwnStatus(key, structuredClone(cached));
    const call = { log, signal: ctx.signal };
    return withFinalizer(
      lock,
      LOCK_FINALIZER,
      this.#io.d.finalizers,
      { apply: (l, { added }) => this.#apply(key, l, call, added), cleanup: (l) => this.#cleanup(key, l, call) },
      ctx.signal,
    );
  }

  /** #apply hands the lock to the policy of its kind. */
  #apply(key: ObjectKey, lock: DistributedLock, call: CallContext, finalizerAdded: boolean): Promise<Result> {
    // A Semaphore holds its permits on Leases of their own: never run it with the one-holder policy.
    if (lock.spec.mode === 'Semaphore') return this.#semaphore.apply(key, lock, call);
    // A Redis or Redlock store lock is held in its store; this controller only observes it.
    if (storeOf(lock.spec) !== 'Lease') return this.#applyStore(key, lock, call);
    const policy = lock.spec.mode === 'Mutex' ? this.#mutex : this.#election;
    return policy.apply(key, lock, call, finalizerAdded);
  }

  // A store lock (store-locks.ts, decide-store.ts): read, decide, and act as for a Lease lock — the
  // same pod marks, status writes and Events — but never a write to the store.
  async #applyStore(key: ObjectKey, lock: DistributedLock, call: CallContext): Promise<Result> {
    if (this.#stores === undefined)
      throw new TerminalError(`${key}: spec.store ${storeOf(lock.spec)} but no store observer`);
    const io = this.#io;
    const acts: StoreActs = {
      mark: (l, pod, token, acquired, expires) => io.markStorePod(l, pod, token, acquired, expires, call),
      unmark: (l, pod) => io.unmarkPod(l, pod, call),
      writeStatus: (l, status) => io.writeStatus(l, status, call.signal),
      event: (l, type, reason, message) => {
        io.event(l, type, reason, message);
      },
    };
    const requeueAfterMs = await this.#stores.apply(key, lock, io.podsOf(lock), acts, io.memory(key));
    return { requeueAfterMs };
  }

  // Deletion: unmark pods; end each held term and wait until its holder must have stepped down
  // (lock-io.ts retireLease) — a Semaphore's permits first, then the lock's own Lease; then drop
  // the finalizer and everything remembered of the lock.
  async #cleanup(key: ObjectKey, lock: DistributedLock, call: CallContext): Promise<CleanupResult> {
    const io = this.#io;
    const namespace = lock.metadata.namespace ?? '';
    const lockName = lock.metadata.name ?? '';
    const keys = podKeys(lockName);
    const marked = io.d.podLookup?.marked(namespace, lockName) ?? io.d.pods.list(namespace);
    for (const p of marked) {
      const s = summarizePod(p);
      if (s.labels[keys.holder] !== undefined || s.annotations[keys.token] !== undefined)
        await io.unmarkPod(lock, s.ref, call);
    }
    if (lock.spec.mode === 'Semaphore') {
      let waitMs = 0;
      for (const name of this.#semaphore.permitLeases(lock))
        waitMs = Math.max(waitMs, await io.retireLease(key, lock, name, call));
      if (waitMs > 0) return { pending: true, requeueAfterMs: waitMs + EXPIRY_WAIT_MARGIN_MS };
    }
    const waitMs = await io.retireLease(key, lock, leaseName(lockName), call);
    if (waitMs > 0) return { pending: true, requeueAfterMs: waitMs + EXPIRY_WAIT_MARGIN_MS };
    io.forget(key); // the lock is gone once its finalizer is: nothing of it is needed again
    return {};
  }
}
