/**
 * StoreLocks — the controller's side of locks with spec.store Redis or Redlock: it reads each lock
 * from its store (the StoreObserver port), decides with decide-store.ts, and acts through the
 * reconciler's own pod marking, status writing and Events, so that a store lock shows exactly as
 * a Lease lock does. It never writes the store: the holders take, renew and release these locks
 * themselves (docs/stores.md, "In a cluster").
 *
 * Per lock it uses what it saw last (StoreMemory) and the owners heard releasing since, both kept
 * in the lock's record of the reconciler's memory (memory.ts), in this process only. A new leader starts with none: its first read reports the current holder
 * as granted again (an Event, no harm) and an end it did not see is not reported.
 */
import type { V1Pod } from '@kubernetes/client-node';
import type { EventReason } from '../../api/v1alpha1/conditions.ts';
import { storeOf, type DistributedLock, type DistributedLockStatus } from '../../api/v1alpha1/distributedlock.ts';
import type { HolderRef } from '../../protocol/holder.ts';
import type { ControllerMetrics } from '../../observability/metrics.ts';
import type { Clock } from '../../runtime/clock.ts';
import type { ObjectKey } from '../../runtime/controller.ts';
import { decideStore, STORE_EVENT, type StoreRead } from './decide-store.ts';
import { NOTHING_REPORTED, type LockMemory } from './memory.ts';

/** StoreKind is a store the controller observes. */
export type StoreKind = 'Redis' | 'Redlock';

/** StoreObserver is the port to the stores (setup.ts fills it from --redis-store-url and --redlock-store-url). */
export interface StoreObserver {
  /** read one lock; `ok: false` when the store does not answer or is not configured (the error says which flag). */
  read(kind: StoreKind, namespace: string, name: string): Promise<StoreRead>;
  /** onRelease: `listener` hears every release on every configured store (namespace, name, owner id). */
  onRelease(listener: (namespace: string, name: string, owner: string) => void): void;
  close(): Promise<void>;
}

/** StoreActs is what StoreLocks asks of the reconciler. */
export interface StoreActs {
  mark(lock: DistributedLock, pod: HolderRef, token: bigint, acquired: Date, expires: Date): Promise<void>;
  unmark(lock: DistributedLock, pod: HolderRef): Promise<void>;
  writeStatus(lock: DistributedLock, status: DistributedLockStatus): Promise<void>;
  event(lock: DistributedLock, type: 'Normal' | 'Warning', reason: EventReason, message: string): void;
}

/** MAX_HEARD: releases remembered per lock between two reads (a lock released faster than it is read keeps the newest). */
const MAX_HEARD = 64;

export class StoreLocks {
  readonly #observer: StoreObserver;
  readonly #metrics: ControllerMetrics | undefined;
  readonly #clock: Clock;

  constructor(observer: StoreObserver, metrics: ControllerMetrics | undefined, clock: Clock) {
    this.#observer = observer;
    this.#metrics = metrics;
    this.#clock = clock;
  }

  /** heard records a release in the lock's memory (from the observer's channel listener); the caller enqueues the lock. */
  static heard(memory: LockMemory, owner: string): void {
    const heard = (memory.heard ??= new Set());
    if (heard.size >= MAX_HEARD) heard.delete(heard.values().next().value ?? '');
    heard.add(owner);
  }

  /** apply reads the lock, decides, and acts; returns when to look again. */
  async apply(
    key: ObjectKey,
    lock: DistributedLock,
    pods: readonly V1Pod[],
    acts: StoreActs,
    memory: LockMemory,
  ): Promise<number> {
    const kind = storeOf(lock.spec);
    if (kind === 'Lease') throw new Error(`StoreLocks.apply: ${key} is a Lease lock`);
    const namespace = lock.metadata.namespace ?? '';
    const read = await this.#observer.read(kind, namespace, lock.metadata.name ?? '');
    // The decision takes the releases heard so far; any heard from here on start a new set.
    const heard: ReadonlySet<string> = memory.heard ?? NOTHING_REPORTED;
    memory.heard = undefined;
    const dec = decideStore({
      lock,
      read,
      memory: memory.store,
      released: heard,
      pods: pods.map((p) => ({
        name: p.metadata?.name ?? '',
        uid: p.metadata?.uid ?? '',
        labels: p.metadata?.labels ?? {},
      })),
      now: this.#clock.now(),
      store: kind,
    });
    // Heard releases this decision did not use are kept for the next: of an owner whose end is
    // still undecided, and of the owner this read still found holding — its release reached the
    // store just after the read did, and the next read, which finds the key gone, must know it.
    for (const owner of [dec.memory.ending?.owner, dec.memory.owner])
      if (owner !== undefined && heard.has(owner)) StoreLocks.heard(memory, owner);
    if (dec.unmark !== undefined) await acts.unmark(lock, dec.unmark);
    if (dec.mark !== undefined)
      await acts.mark(lock, dec.mark.pod, dec.mark.token, dec.mark.acquired, dec.mark.expires);
    for (const t of dec.transitions) {
      const token = t.token?.toString() ?? '?';
      if (t.type === 'granted') {
        this.#metrics?.grants.inc({ cause: 'Store', backend: kind });
        acts.event(
          lock,
          'Normal',
          STORE_EVENT.granted,
          `${t.pod !== undefined ? `Pod ${t.pod.name}` : 'An owner that names no candidate pod'} took the lock in ${kind} with fencing token ${token}`,
        );
      } else if (t.type === 'released') {
        this.#metrics?.releasesObserved.inc();
        acts.event(
          lock,
          'Normal',
          STORE_EVENT.released,
          `The holder with fencing token ${token} released the lock in ${kind}`,
        );
      } else {
        this.#metrics?.expirations.inc({ cause: 'Expired' });
        if (t.heldMs !== undefined) this.#metrics?.holdDuration.observe({ cause: 'Expired' }, t.heldMs / 1000);
        acts.event(
          lock,
          'Warning',
          STORE_EVENT.expired,
          `The holder with fencing token ${token} let the lock expire in ${kind} without releasing it (it stopped renewing, or ${kind} lost the key)`,
        );
      }
    }
    await acts.writeStatus(lock, dec.status);
    memory.store = dec.memory;
    return dec.requeueAfterMs;
  }
}
