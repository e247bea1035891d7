/**
 * LockIO — the I/O every kind of lock shares (reconciler.ts picks the kind's policy): the lock's
 * memory record, reads from the caches with our own Lease writes preferred until the cache shows
 * them, and the one grant, end-of-term and deletion path of a Lease — take a token above the floor,
 * compare-and-swap the Lease, mark or unmark the holder pod, write status only when it changed,
 * record Events. The policies (lease-lock.ts for Election and Mutex, semaphore.ts, and
 * store-locks.ts) decide with the pure decide*.ts modules and act only through this.
 *
 * Everything it reads and writes comes through the reconciler's ports (ports.ts), and every call
 * carries the reconcile's abort signal.
 */
import type { V1Lease, V1Pod } from '@kubernetes/client-node';
import { EventReason } from '../../api/v1alpha1/conditions.ts';
import {
  API_VERSION,
  KIND,
  type DistributedLock,
  type DistributedLockStatus,
} from '../../api/v1alpha1/distributedlock.ts';
import type { FenceResult } from '../../fencing/redis-fence.ts';
import type { EventTarget } from '../../kube/events.ts';
import type { PodMetadataPatch } from '../../kube/pods.ts';
import { parseLeaseTolerant, releasedLease, renewFingerprint, type LockRecord } from '../../lease/record.ts';
import type { Logger } from '../../observability/logger.ts';
import type { HolderRef } from '../../protocol/holder.ts';
import { podKeys } from '../../protocol/names.ts';
import { termTimingsOf } from '../../protocol/timings.ts';
import { MAX_TOKEN } from '../../protocol/token.ts';
import type { ObjectKey } from '../../runtime/controller.ts';
import { errorKind, isAlreadyExists, isConflict, isNotFound } from '../../runtime/errors.ts';
import type { FencingState } from './decide.ts';
import { LockMemories, type LockMemory } from './memory.ts';
import { statusPatch, withOwnStatus } from './own-status.ts';
import { matchesSelector } from './pods.ts';
import type { ReconcilerDeps } from './ports.ts';

/** CallContext is what every call of one reconcile carries: its logger and its abort signal. */
export interface CallContext {
  readonly log: Logger;
  readonly signal: AbortSignal;
}

/** EXPIRY_WAIT_MARGIN_MS: look again just after a wait ends, not just before it. */
export const EXPIRY_WAIT_MARGIN_MS = 10;

/** EXPECTATION_TTL_MS bounds how long a reconcile prefers its own last write over the cache. */
const EXPECTATION_TTL_MS = 5000;

/** InvoluntaryEnd: a term the controller ended because the holder expired or its containers terminated. */
export type InvoluntaryEnd = 'Expired' | 'HolderTerminated';

/**
 * END_REASON: the Warning Event reason for a term the controller ended: `HolderExpired` when the
 * holder stopped renewing for a full lease duration, `HolderTerminated` when the kubelet reported
 * its containers terminated (spec.handoff.onPodTerminated) — different causes, different fixes.
 */
export const END_REASON = {
  Expired: EventReason.HolderExpired,
  HolderTerminated: EventReason.HolderTerminated,
} as const satisfies Record<InvoluntaryEnd, EventReason>;

/** endMessage is the human sentence of an END_REASON Event. */
export function endMessage(cause: InvoluntaryEnd, holder: HolderRef, outcome: string): string {
  return cause === 'Expired'
    ? `Pod ${holder.name} stopped renewing for a full lease duration; ${outcome}`
    : `Pod ${holder.name}'s containers terminated; ${outcome}`;
}

/** describeCause is the grant Event's reason in words. */
export function describeCause(cause: string, previous: HolderRef | undefined): string {
  switch (cause) {
    case 'Released':
      return 'the previous holder released it';
    case 'HandedOver':
      return `pod ${previous?.name ?? '?'} handed it over (planned handover)`;
    case 'ForceReleased':
      return "the previous holder's grant was force-released by a user";
    case 'Expired':
      return previous !== undefined ? `pod ${previous.name} stopped renewing` : 'the previous holder expired';
    case 'HolderTerminated':
      return `pod ${previous?.name ?? '?'}'s containers terminated`;
    default:
      return 'it was vacant';
  }
}

/** lockKey is the queue key of a lock. */
export function lockKey(lock: DistributedLock): ObjectKey {
  return `${lock.metadata.namespace ?? ''}/${lock.metadata.name ?? ''}`;
}

/** lockRef is the owner reference a lock's Leases carry. */
export function lockRef(lock: DistributedLock): { name: string; uid: string; apiVersion: string; kind: string } {
  return { name: lock.metadata.name ?? '', uid: lock.metadata.uid ?? '', apiVersion: API_VERSION, kind: KIND };
}

export class LockIO {
  readonly d: ReconcilerDeps;
  readonly #memory = new LockMemories();

  constructor(deps: ReconcilerDeps) {
    this.d = deps;
  }

  /** memory: the lock's record (memory.ts), made on first use. */
  memory(key: ObjectKey): LockMemory {
    return this.#memory.of(key);
  }

  /** forget drops everything remembered of the lock. */
  forget(key: ObjectKey): void {
    this.#memory.forget(key);
  }

  /** remembered: how many locks have a memory record. */
  get remembered(): number {
    return this.#memory.size;
  }

  // ----- reads -----

  /**
   * leaseDelivered: the Lease informer delivered `lease` (every add, update and delete, in order,
   * before the key is enqueued): stop preferring our own last write once the cache shows it.
   */
  leaseDelivered(key: ObjectKey, lease: V1Lease, deleted: boolean): void {
    const rv = lease.metadata?.resourceVersion ?? '';
    if (deleted) {
      // No record is made for a Lease of a lock that has none (deleted, or never reconciled).
      const m = this.#memory.peek(key);
      if (m !== undefined) {
        m.delivered = undefined;
        m.expected = undefined;
      }
      return;
    }
    const m = this.#memory.of(key);
    m.delivered = rv;
    if (m.expected?.lease.metadata?.resourceVersion === rv) m.expected = undefined;
  }

  /** expect records our write of the lock's Lease, unless the informer has already delivered it. */
  expect(key: ObjectKey, lease: V1Lease | undefined): void {
    const rv = lease?.metadata?.resourceVersion;
    const m = this.#memory.of(key);
    if (lease === undefined || rv === undefined || m.delivered === rv) {
      m.expected = undefined;
      return;
    }
    m.expected = { lease, untilMs: this.d.clock.monotonicMs() + EXPECTATION_TTL_MS };
  }

  /** cachedLease: the lock's Lease from the cache, or our own last write while the cache has not shown it yet. */
  cachedLease(key: ObjectKey, namespace: string, name: string): V1Lease | undefined {
    const m = this.#memory.of(key);
    if (m.expected !== undefined) {
      if (this.d.clock.monotonicMs() < m.expected.untilMs) return m.expected.lease;
      m.expected = undefined;
    }
    return this.d.leases.get(namespace, name);
  }

  /**
   * observedAt: our monotonic time when the lock's Lease `lease` last changed its renew
   * fingerprint; the expiry clock restarts at each change (client-go observedTime).
   */
  observedAt(key: ObjectKey, lease: string, record: LockRecord): number {
    const fingerprint = renewFingerprint(record);
    const seen = this.#memory.of(key).seen;
    const last = seen.get(lease);
    if (last !== undefined && last.fingerprint === fingerprint) return last.atMs;
    const atMs = this.d.clock.monotonicMs();
    seen.set(lease, { fingerprint, atMs });
    return atMs;
  }

  /** fencingOf: the observation of the lock's fencing backend. */
  fencingOf(lock: DistributedLock): FencingState {
    const fencing = this.d.fencing.forLock(lock);
    return {
      backend: fencing.backend,
      ready: fencing.ready,
      ...(fencing.detail !== undefined ? { detail: fencing.detail } : {}),
      ...(fencing.notConfigured === true ? { notConfigured: true } : {}),
    };
  }

  /** podsOf: the pods of the lock's namespace that the lock selects or that carry its marks. */
  podsOf(lock: DistributedLock): V1Pod[] {
    const namespace = lock.metadata.namespace ?? '';
    const lockName = lock.metadata.name ?? '';
    const selector = lock.spec.candidates.selector;
    const lookup = this.d.podLookup;
    if (lookup === undefined) {
      const keys = podKeys(lockName);
      return this.d.pods.list(namespace).filter((p) => {
        const labels = p.metadata?.labels ?? {};
        const mine = labels[keys.holder] !== undefined || p.metadata?.annotations?.[keys.token] !== undefined;
        return mine || matchesSelector(selector, labels);
      });
    }
    const byName = new Map<string, V1Pod>();
    for (const p of lookup.marked(namespace, lockName)) byName.set(p.metadata?.name ?? '', p);
    for (const p of lookup.selected(namespace, selector)) byName.set(p.metadata?.name ?? '', p);
    return [...byName.values()];
  }

  // ----- the Lease: create, grant, end, retire -----

  /** createLease creates a Lease of deterministic name; one that exists already (us, earlier) is read instead. */
  async createLease(
    namespace: string,
    body: V1Lease,
    { signal }: CallContext,
  ): Promise<{ lease: V1Lease | undefined; created: boolean }> {
    try {
      return { lease: await this.d.leaseStore.create(namespace, body, { signal }), created: true };
    } catch (err) {
      if (!isAlreadyExists(err)) throw err;
      return { lease: await this.d.leaseStore.get(namespace, body.metadata?.name ?? '', { signal }), created: false };
    }
  }

  /**
   * issueToken takes the grant's token from the lock's fencing backend: a failure is reported
   * (metric, FencingUnavailable Event) and thrown; a token above the largest is refused. No token
   * is taken after a shutdown (the dispenser takes no signal).
   */
  async issueToken(key: ObjectKey, lock: DistributedLock, floor: bigint, io: CallContext): Promise<FenceResult> {
    const fencing = this.d.fencing.forLock(lock);
    io.signal.throwIfAborted();
    let issued: FenceResult;
    try {
      issued = await fencing.dispenser.next(fencing.key, floor);
    } catch (err) {
      this.d.metrics?.fencingErrors.inc({ backend: fencing.backend, error_kind: errorKind(err) });
      this.reportFencing(
        key,
        lock,
        { backend: fencing.backend, ready: false, detail: err instanceof Error ? err.message : String(err) },
        io.log,
      );
      throw new Error(`Failed to issue fencing token from ${fencing.backend}`, { cause: err });
    }
    if (issued.token > MAX_TOKEN) throw new Error(`Fencing token ${issued.token} above the largest token; not granted`);
    return issued;
  }

  /**
   * endTerm ends a term the controller decided is over (the holder expired, or its containers
   * terminated): a compare-and-swap of the Lease as read to released, the metric, the Event.
   */
  async endTerm(
    lock: DistributedLock,
    name: string,
    held: V1Lease,
    end: { readonly cause: InvoluntaryEnd; readonly holder: HolderRef; readonly outcome: string },
    { log, signal }: CallContext,
  ): Promise<V1Lease> {
    const how = end.cause === 'Expired' ? 'Expired' : 'Terminated';
    const ended = await this.d.leaseStore.replace(lock.metadata.namespace ?? '', name, releasedLease(held, how), {
      signal,
    });
    this.d.metrics?.expirations.inc({ cause: end.cause });
    log.info({ lease: name, holder: end.holder.name, cause: end.cause }, 'Revoked Lease');
    this.event(lock, 'Warning', END_REASON[end.cause], endMessage(end.cause, end.holder, end.outcome));
    return ended;
  }

  /**
   * retireLease is the deletion of one Lease of a lock being deleted: end a held term (`Lost`) and
   * wait a full lease duration from then — a holder cut off from the API server cannot see the
   * end, and a lock applied again at once would otherwise grant while it still believes — then
   * delete the Lease. Returns how long to wait still (0: the Lease is gone).
   */
  async retireLease(key: ObjectKey, lock: DistributedLock, name: string, io: CallContext): Promise<number> {
    const { log, signal } = io;
    const namespace = lock.metadata.namespace ?? '';
    const lease = await this.d.leaseStore.get(namespace, name, { signal });
    if (lease === undefined) return 0;
    const { record } = parseLeaseTolerant(lease); // a token someone made unreadable must not block the deletion
    const leaseMs = termTimingsOf(record, lock.spec).leaseDurationMs;
    if (record.holder !== undefined) {
      const ended = await this.d.leaseStore.replace(namespace, name, releasedLease(lease, 'Lost'), { signal }); // CAS
      this.observedAt(key, name, parseLeaseTolerant(ended).record); // the wait starts now
      log.info({ lease: name, holder: record.holder.name }, 'Ended the term of a lock being deleted');
      return leaseMs;
    }
    if (record.released === 'Lost') {
      const waitedMs = this.d.clock.monotonicMs() - this.observedAt(key, name, record);
      if (waitedMs < leaseMs) return leaseMs - waitedMs;
    }
    await this.d.leaseStore.delete(namespace, name, { signal }); // already gone is fine
    log.info({ lease: name }, 'Deleted Lease');
    return 0;
  }

  // ----- pods -----

  /** markPod labels and annotates the holder pod of `lease` with its token and its term's times. */
  async markPod(
    lock: DistributedLock,
    record: LockRecord | undefined,
    lease: string,
    pod: HolderRef,
    token: bigint,
    io: CallContext,
  ): Promise<void> {
    const keys = podKeys(lock.metadata.name ?? '');
    const leaseMs = termTimingsOf(record, lock.spec).leaseDurationMs;
    const acquired = record?.acquireTime;
    const patch: PodMetadataPatch = {
      labels: { [keys.holder]: 'true' },
      annotations: {
        [keys.token]: token.toString(),
        [keys.lease]: lease,
        ...(acquired !== undefined
          ? {
              [keys.acquireTime]: acquired.toISOString(),
              [keys.expireTime]: new Date(acquired.getTime() + leaseMs).toISOString(),
            }
          : {}),
      },
    };
    await this.#patchPod(lock, pod, patch, io, 'Labelled holder Pod');
  }

  /** markStorePod labels and annotates the holder pod of a store lock (no Lease to name). */
  async markStorePod(
    lock: DistributedLock,
    pod: HolderRef,
    token: bigint,
    acquired: Date,
    expires: Date,
    io: CallContext,
  ): Promise<void> {
    const keys = podKeys(lock.metadata.name ?? '');
    const patch: PodMetadataPatch = {
      labels: { [keys.holder]: 'true' },
      annotations: {
        [keys.token]: token.toString(),
        [keys.acquireTime]: acquired.toISOString(),
        [keys.expireTime]: expires.toISOString(),
      },
    };
    await this.#patchPod(lock, pod, patch, io, 'Labelled holder Pod');
  }

  async unmarkPod(lock: DistributedLock, pod: HolderRef, io: CallContext): Promise<void> {
    const keys = podKeys(lock.metadata.name ?? '');
    const patch: PodMetadataPatch = {
      labels: { [keys.holder]: null },
      annotations: { [keys.token]: null, [keys.lease]: null, [keys.acquireTime]: null, [keys.expireTime]: null },
    };
    await this.#patchPod(lock, pod, patch, io, 'Unlabelled former holder Pod');
  }

  async #patchPod(
    lock: DistributedLock,
    pod: HolderRef,
    patch: PodMetadataPatch,
    { log, signal }: CallContext,
    msg: string,
  ): Promise<void> {
    const namespace = lock.metadata.namespace ?? '';
    try {
      // The patcher's uid precondition makes sure a re-created pod of the same name is not marked by mistake.
      await this.d.podPatcher.patchMetadata(namespace, pod, patch, { signal });
      log.info({ pod: pod.name }, msg);
    } catch (err) {
      if (isNotFound(err) || isConflict(err)) {
        log.debug({ pod: pod.name }, 'Pod gone or replaced; skipped');
        return;
      }
      throw new Error(`Failed to patch Pod ${namespace}/${pod.name}`, { cause: err });
    }
  }

  // ----- status and Events -----

  /** withOwnStatus is `lock` as this process last wrote it (own-status.ts). */
  withOwnStatus(key: ObjectKey, lock: DistributedLock): DistributedLock {
    return withOwnStatus(this.#memory.of(key), lock, this.d.clock.monotonicMs());
  }

  /**
   * writeStatus sends the lock's status as a merge patch, only when it changes what `lock.status`
   * shows (the cache's, or our own last write's: withOwnStatus).
   */
  async writeStatus(lock: DistributedLock, next: DistributedLockStatus, signal: AbortSignal): Promise<void> {
    const m = this.#memory.of(lockKey(lock));
    // The queue is remembered before the write: a failed write must not lose the order, and the
    // lock cache may not show this write when the next request arrives.
    m.queue = next.queue ?? [];
    const w = statusPatch(m, lock, next);
    if (w === undefined) return;
    await this.d.statusWriter.patchStatus(lock, w.patch, signal);
    w.done(this.d.clock.monotonicMs(), EXPECTATION_TTL_MS);
  }

  /** reportFencing records the fencing gauge, and an Event when the backend becomes unavailable or available again. */
  reportFencing(key: ObjectKey, lock: DistributedLock, f: FencingState, log: Logger): void {
    this.d.metrics?.fencingReady.set({ backend: f.backend }, f.ready ? 1 : 0);
    const m = this.#memory.of(key);
    const was = m.fencingDegraded;
    if (!f.ready && !was) {
      m.fencingDegraded = true;
      log.info({ backend: f.backend, detail: f.detail }, 'Fencing backend unavailable');
      this.event(
        lock,
        'Warning',
        EventReason.FencingUnavailable,
        `Fencing backend ${f.backend} unavailable (${f.detail ?? 'not ready'}); no new grants until it is back, holders keep renewing`,
      );
    } else if (f.ready && was) {
      m.fencingDegraded = false;
      m.tampered = undefined;
      this.event(lock, 'Normal', EventReason.FencingAvailable, `Fencing backend ${f.backend} is issuing tokens again`);
    }
  }

  event(lock: DistributedLock, type: 'Normal' | 'Warning', reason: EventReason, message: string): void {
    const target: EventTarget = {
      apiVersion: API_VERSION,
      kind: KIND,
      namespace: lock.metadata.namespace ?? '',
      name: lock.metadata.name ?? '',
      uid: lock.metadata.uid ?? '',
    };
    this.d.events.emit(target, type, reason, message);
  }
}
