/**
 * DistributedLockReconciler — the I/O shell around decide(): observe the lock, its Lease and its
 * pods; decide; act in crash-safe order; report status. One reconciler, one primary kind: Lease
 * and Pod changes reach it only as lock keys (mappers.ts).
 *
 * Order of side effects for a grant, so that a crash at any point leaves a state the next reconcile
 * finishes: (1) take a token from the fencing backend, (2) compare-and-swap the Lease to the new
 * holder and token, (3) label and annotate the holder pod, (4) patch status. A crash after (1)
 * burns a token (a harmless gap); after (2) the next reconcile does (3) and (4); a pod is never
 * marked with a token the Lease does not hold. test/unit/controllers/reconciler-order.test.ts pins
 * the order and what a crash after each step leaves; the model test (test/property/race) runs this
 * class under fast-check's scheduler with crashes before each write.
 *
 * Everything it reads and writes comes through its ports (ports.ts), and every call carries the
 * reconcile's abort signal.
 */
import type { V1Lease, V1Pod } from '@kubernetes/client-node';
import { EventReason } from '../../api/v1alpha1/conditions.ts';
import {
  API_VERSION,
  KIND,
  resolveTimings,
  storeOf,
  type DistributedLock,
  type DistributedLockStatus,
} from '../../api/v1alpha1/distributedlock.ts';
import type { FenceResult } from '../../fencing/redis-fence.ts';
import type { EventTarget } from '../../kube/events.ts';
import type { PodMetadataPatch } from '../../kube/pods.ts';
import {
  grantedLease,
  handoverMarkedLease,
  leaseDurationSecondsFor,
  newLease,
  parseLease,
  parseLeaseTolerant,
  raisedAnchor,
  releasedLease,
  renewFingerprint,
  type LockRecord,
} from '../../lease/record.ts';
import type { Logger } from '../../observability/logger.ts';
import {
  FORCE_RELEASE_REQUEST_ANNOTATION,
  FORCE_RELEASE_RESULT_ANNOTATION,
  HANDOVER_REQUEST_ANNOTATION,
  HANDOVER_RESULT_ANNOTATION,
  formatHandoverResult,
} from '../../protocol/handover.ts';
import { holderIdentity, type HolderRef } from '../../protocol/holder.ts';
import {
  LOCK_LABEL,
  PRIORITY_ANNOTATION,
  TOKEN_ANNOTATION,
  leaseName,
  permitLeaseName,
  permitOfLease,
  podKeys,
} from '../../protocol/names.ts';
import { termTimingsOf } from '../../protocol/timings.ts';
import { MAX_TOKEN } from '../../protocol/token.ts';
import {
  type ObjectKey,
  type ReconcileContext,
  type Reconciler,
  type Result,
  splitKey,
} from '../../runtime/controller.ts';
import { TerminalError, errorKind, isAlreadyExists, isConflict, isInvalid, isNotFound } from '../../runtime/errors.ts';
import { withFinalizer, type CleanupResult } from '../../runtime/finalizer.ts';
import {
  decideSemaphore,
  type LostPermit,
  type PermitView,
  type SemaphoreAction,
  type SemaphoreDecision,
  type SemaphoreObservation,
} from './decide-semaphore.ts';
import type { HandoverAnswer } from './decide-handover.ts';
import {
  decide,
  describeTamper,
  unactionable,
  type Action,
  type Decision,
  type FencingState,
  type LeaseView,
  type Observation,
} from './decide.ts';
import { MAX_PRIORITY, MIN_PRIORITY, summarizePod, matchesSelector } from './pods.ts';
import type { ReconcilerDeps } from './ports.ts';
import { LockMemories } from './memory.ts';
import { StoreLocks, type StoreActs } from './store-locks.ts';
import { computeSemaphoreStatus, computeStatus, refusedCompletions } from './status.ts';

/** FINALIZER guards the lock's cleanup: release the Lease and unmark pods before deletion. */
const FINALIZER = 'fencepost.io/lease-cleanup';

/** CallContext is what every call of one reconcile carries: its logger and its abort signal. */
interface CallContext {
  readonly log: Logger;
  readonly signal: AbortSignal;
}

/** EXPIRY_WAIT_MARGIN_MS: look again just after a wait ends, not just before it. */
const EXPIRY_WAIT_MARGIN_MS = 10;

/** EXPECTATION_TTL_MS bounds how long a reconcile prefers its own last Lease write over the cache. */
const EXPECTATION_TTL_MS = 5000;

/**
 * MAX_PASSES bounds the observe→act loop of one reconcile: create the Lease, record it in status,
 * grant, one re-read after a conflict, and the final look.
 */
const MAX_PASSES = 6;

/**
 * SEMAPHORE_MAX_PASSES bounds the observe→act loop of one Semaphore reconcile: a grant is one pass,
 * a new permit two; what is left goes on through the queue at once.
 */
const SEMAPHORE_MAX_PASSES = 16;

/** DistributedLockReconciler implements the lock protocol's controller side (DESIGN "The protocol"). */
export class DistributedLockReconciler implements Reconciler {
  readonly #d: ReconcilerDeps;
  /** #memory: what this process remembers of each lock between reconciles (memory.ts), one record per lock. */
  readonly #memory = new LockMemories();

  /** #stores: the locks held in a Redis or Redlock store (spec.store), which this controller only observes. */
  readonly #stores: StoreLocks | undefined;

  constructor(deps: ReconcilerDeps) {
    this.#d = deps;
    this.#stores = deps.stores !== undefined ? new StoreLocks(deps.stores, deps.metrics, deps.clock) : undefined;
  }

  /** releaseHeard records a store lock's release heard on its channel (setup.ts enqueues the lock). */
  releaseHeard(key: ObjectKey, owner: string): void {
    if (this.#stores !== undefined) StoreLocks.heard(this.#memory.of(key), owner);
  }

  /** rememberedLocks: how many locks this process keeps a memory record of (a deleted lock leaves none). */
  get rememberedLocks(): number {
    return this.#memory.size;
  }

  /**
   * leaseDelivered tells the reconciler that the Lease informer delivered `lease` (every add,
   * update and delete, in order, before the key is enqueued), so that it stops preferring its own
   * last write once the cache has caught up with it. Synchronous and cheap.
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

  /** #expect records our write of the lock's Lease, unless the informer has already delivered it. */
  #expect(key: ObjectKey, lease: V1Lease | undefined): void {
    const rv = lease?.metadata?.resourceVersion;
    const m = this.#memory.of(key);
    if (lease === undefined || rv === undefined || m.delivered === rv) {
      m.expected = undefined;
      return;
    }
    m.expected = { lease, untilMs: this.#d.clock.monotonicMs() + EXPECTATION_TTL_MS };
  }

  /** #cachedLease: the lock's Lease from the cache, or our own last write while the cache has not shown it yet. */
  #cachedLease(key: ObjectKey, namespace: string, name: string): V1Lease | undefined {
    const m = this.#memory.of(key);
    if (m.expected !== undefined) {
      if (this.#d.clock.monotonicMs() < m.expected.untilMs) return m.expected.lease;
      m.expected = undefined;
    }
    return this.#d.leases.get(namespace, name);
  }

  async reconcile(key: ObjectKey, ctx: ReconcileContext): Promise<Result> {
    const log = this.#d.log.child(ctx.logFields); // controller-runtime's keys: controller, namespace, name, reconcileID…
    // ### 1: Load the lock; gone means nothing to do.
    const { namespace, name } = splitKey(key);
    const cached = this.#d.locks.get(namespace, name);
    if (cached === undefined) {
      this.#memory.forget(key);
      return {};
    }
    const lock = structuredClone(cached);
    const io = { log, signal: ctx.signal };
    return withFinalizer(
      lock,
      FINALIZER,
      this.#d.finalizers,
      { apply: (l, { added }) => this.#apply(key, l, io, added), cleanup: (l) => this.#cleanup(key, l, io) },
      ctx.signal,
    );
  }

  // ### 2: Observe → decide → act, until no Lease action remains.
  //
  // Reads come from the informers' caches, never a GET on the way to a grant: every Lease write is
  // a compare-and-swap on the resourceVersion of the Lease it was decided from, so a cache that is
  // behind costs a 409, never a wrong grant. After a write of ours the loop goes on from the
  // server's answer (the cache has not seen it yet); after a 409 it reads the Lease once and
  // decides again (DESIGN: "On conflict: re-read and decide again"), without a trip through the
  // rate-limited queue.
  async #apply(key: ObjectKey, lock: DistributedLock, io: CallContext, finalizerAdded: boolean): Promise<Result> {
    const { log, signal } = io;
    // A Semaphore holds its permits on Leases of their own: never run it with the one-holder logic below.
    if (lock.spec.mode === 'Semaphore') return this.#applySemaphore(key, lock, io);
    // A Redis or Redlock store lock is held in its store; this controller only observes it.
    if (storeOf(lock.spec) !== 'Lease') return this.#applyStore(key, lock, io);
    const namespace = lock.metadata.namespace ?? '';
    const lName = leaseName(lock.metadata.name ?? '');
    let current = lock;
    /** known: the Lease as our last write (or re-read) left it, which the cache may not show yet. */
    let known: { readonly lease: V1Lease | undefined } | undefined;
    let recorded = false;
    let obs: Observation | undefined;
    let dec: Decision | undefined;
    for (let pass = 0; pass < MAX_PASSES; pass++) {
      const lease = known !== undefined ? known.lease : this.#cachedLease(key, namespace, lName);
      obs = { ...this.#observe(key, current, lease), finalized: finalizerAdded ? 'now' : 'before' };
      dec = decide(obs, this.#d.clock.monotonicMs());
      this.#reportTampering(key, current, obs, dec, log);
      const leaseAction = dec.actions.find(
        (a) =>
          a.type === 'CreateLease' ||
          a.type === 'Grant' ||
          a.type === 'Revoke' ||
          a.type === 'MarkHandover' ||
          a.type === 'ForceRelease',
      );
      if (leaseAction !== undefined) {
        try {
          known = { lease: await this.#actOnLease(key, current, obs, lease, leaseAction, io) };
        } catch (err) {
          this.#memory.of(key).expected = undefined;
          // A grant that creates the Lease finds it made meanwhile (AlreadyExists): a conflict too.
          const raced =
            isConflict(err) || (leaseAction.type === 'Grant' && leaseAction.create === true && isAlreadyExists(err));
          if (!raced || pass === MAX_PASSES - 1) {
            if (leaseAction.type === 'Grant') await this.#reportGrantFailure(key, current, obs, dec, err, signal);
            throw err;
          }
          log.debug({ lease: lName }, 'Lease changed since it was read; reading it again');
          known = { lease: await this.#d.leaseStore.get(namespace, lName, { signal }) };
        }
        if (leaseAction.type === 'Grant') this.#memory.of(key).grantFailure = undefined;
        this.#expect(key, known.lease);
        continue;
      }
      if (dec.waiting === 'LeaseNotRecorded' && !recorded) {
        // The first grant waits until status records the Lease: write that now and go on to the
        // grant in this same reconcile, rather than after another trip through the queue.
        const status = computeStatus(obs, dec, current.status, this.#d.clock.now());
        this.#memory.of(key).queue = status.queue ?? [];
        await this.#writeStatus(current, status, signal);
        current = { ...current, status };
        recorded = true;
        continue;
      }
      break;
    }
    if (obs === undefined || dec === undefined) return {};
    lock = current;
    // ### 3: Pod labels and annotations.
    for (const a of dec.actions) {
      if (a.type === 'MarkHolderPod')
        await this.#markPod(lock, obs.lease?.record, leaseName(lock.metadata.name ?? ''), a.pod, a.token, io);
      if (a.type === 'UnmarkPod') await this.#unmarkPod(lock, a.pod, io);
      if (a.type === 'AnswerHandover') await this.#answerHandover(lock, a.answer, io);
    }
    // ### 4: Status, written only when it changed; fencing and tampering transitions as Events.
    this.#reportFencing(key, lock, obs.fencing, log);
    const now = this.#d.clock.now();
    this.#reportRefusedCompletions(key, lock, obs, now, log);
    this.#reportBadPriorities(key, lock, dec, log);
    const status = computeStatus(obs, dec, lock.status, now);
    this.#memory.of(key).queue = status.queue ?? []; // before the write: a failed write must not lose the order
    await this.#writeStatus(lock, status, signal);
    // A spec no retry can fix (status says Ready=False, InvalidSpec): fail without requeue; the lock waits for an event.
    const stuck = unactionable(obs, dec);
    if (stuck !== undefined) throw new TerminalError(`Cannot act on DistributedLock: ${stuck}`);
    return { requeueAfterMs: dec.requeueAfterMs };
  }

  /**
   * #reportGrantFailure records why a grant failed (not a conflict: that is decided again) and
   * writes status with Ready=False (GrantFailed, the error's message) before the error goes to the
   * queue's backoff, so that a lock that cannot be granted never shows Ready. A failed status
   * write is left to the retry; nothing is recorded after a shutdown.
   */
  async #reportGrantFailure(
    key: ObjectKey,
    lock: DistributedLock,
    obs: Observation,
    dec: Decision,
    err: unknown,
    signal: AbortSignal,
  ): Promise<void> {
    if (signal.aborted) return; // a shutdown is no failure of the lock, and nothing is written after it
    const why = (e: unknown): string =>
      e instanceof Error ? (e.cause !== undefined ? `${e.message}: ${why(e.cause)}` : e.message) : String(e);
    const message = why(err);
    this.#memory.of(key).grantFailure = message;
    const status = computeStatus({ ...obs, grantFailure: message }, dec, lock.status, this.#d.clock.now());
    await this.#writeStatus(lock, status, signal).catch(() => undefined);
  }

  // ### 2c: A store lock (store-locks.ts, decide-store.ts): read, decide, and act as for a Lease
  // lock — the same pod marks, status writes and Events — but never a write to the store.
  async #applyStore(key: ObjectKey, lock: DistributedLock, io: CallContext): Promise<Result> {
    const namespace = lock.metadata.namespace ?? '';
    if (this.#stores === undefined)
      throw new TerminalError(`${key}: spec.store ${storeOf(lock.spec)} but no store observer`);
    const acts: StoreActs = {
      mark: (l, pod, token, acquired, expires) => this.#markStorePod(l, pod, token, acquired, expires, io),
      unmark: (l, pod) => this.#unmarkPod(l, pod, io),
      writeStatus: (l, status) => this.#writeStatus(l, status, io.signal),
      event: (l, type, reason, message) => {
        this.#event(l, type, reason, message);
      },
    };
    const requeueAfterMs = await this.#stores.apply(
      key,
      lock,
      this.#podsOf(namespace, lock),
      acts,
      this.#memory.of(key),
    );
    return { requeueAfterMs };
  }

  async #markStorePod(
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

  // ### 2b: A Semaphore (decide-semaphore.ts): its anchor Lease and one Lease per permit.
  //
  // As #apply: decide from the caches, act on the first Lease action, and decide again from what
  // we wrote (`written`, which the caches may not show yet); a 409 re-reads the Leases the action
  // touched. A grant is (1) the permit Lease as read, (2) a token above the floor, (3) the anchor's
  // compare-and-swap up to that token, (4) the permit Lease's compare-and-swap to the holder: (1)
  // before (3) is what keeps each permit's tokens in grant order (notes D2).
  async #applySemaphore(key: ObjectKey, lock: DistributedLock, io: CallContext): Promise<Result> {
    const { signal } = io;
    const namespace = lock.metadata.namespace ?? '';
    const lockName = lock.metadata.name ?? '';
    /** written: Leases as our own writes (or re-reads) in this reconcile left them; null: absent. */
    const written = new Map<string, V1Lease | null>();
    let current = lock;
    let recorded = false;
    let obs: SemaphoreObservation | undefined;
    let dec: SemaphoreDecision | undefined;
    let pass = 0;
    for (; pass < SEMAPHORE_MAX_PASSES; pass++) {
      obs = this.#observeSemaphore(key, current, written);
      dec = decideSemaphore(obs, this.#d.clock.monotonicMs());
      const act = dec.actions.find((a) => a.type !== 'MarkPermitHolderPod' && a.type !== 'UnmarkPod');
      if (act !== undefined) {
        try {
          await this.#actOnSemaphore(current, obs, act, written, io);
        } catch (err) {
          if (!isConflict(err) || pass === SEMAPHORE_MAX_PASSES - 1) throw err;
          io.log.debug({ action: act.type }, 'Lease changed since it was read; reading it again');
          const names = [leaseName(lockName), ...('permit' in act ? [permitLeaseName(lockName, act.permit)] : [])];
          for (const n of names) written.set(n, (await this.#d.leaseStore.get(namespace, n, { signal })) ?? null);
        }
        continue;
      }
      if (dec.waiting === 'LeaseNotRecorded' && obs.anchor !== undefined && !recorded) {
        const status = computeSemaphoreStatus(obs, dec, current.status, this.#d.clock.now());
        this.#memory.of(key).queue = status.queue ?? [];
        await this.#writeStatus(current, status, signal);
        current = { ...current, status };
        recorded = true;
        continue;
      }
      break;
    }
    if (obs === undefined || dec === undefined) return {};
    for (const a of dec.actions) {
      if (a.type === 'MarkPermitHolderPod') {
        const view = obs.permits.find((p) => p.permit === a.permit)?.lease.record;
        await this.#markPod(current, view, permitLeaseName(lockName, a.permit), a.pod, a.token, io);
      }
      if (a.type === 'UnmarkPod') await this.#unmarkPod(current, a.pod, io);
    }
    this.#reportFencing(key, current, obs.fencing, io.log);
    const status = computeSemaphoreStatus(obs, dec, current.status, this.#d.clock.now());
    this.#memory.of(key).queue = status.queue ?? [];
    await this.#writeStatus(current, status, signal);
    // Out of passes with Lease work left (many waiters at once): go on at once, through the queue.
    return { requeueAfterMs: pass === SEMAPHORE_MAX_PASSES ? 0 : dec.requeueAfterMs };
  }

  /** #observeSemaphore gathers a Semaphore's observation: the anchor and permit Leases (cache, or `written`), pods, fencing. */
  #observeSemaphore(
    key: ObjectKey,
    lock: DistributedLock,
    written: ReadonlyMap<string, V1Lease | null>,
  ): SemaphoreObservation {
    const namespace = lock.metadata.namespace ?? '';
    const lockName = lock.metadata.name ?? '';
    const byName = new Map<string, V1Lease>();
    for (const l of this.#d.leases.list(namespace)) {
      const n = l.metadata?.name ?? '';
      if (l.metadata?.labels?.[LOCK_LABEL] === lockName) byName.set(n, l);
    }
    for (const [n, l] of written) {
      if (l === null) byName.delete(n);
      else byName.set(n, l);
    }
    const view = (l: V1Lease): LeaseView => {
      const record = parseLease(l);
      return { record, observedAtMs: this.#observedAt(key, l.metadata?.name ?? '', record) };
    };
    const anchor = byName.get(leaseName(lockName));
    const permits: PermitView[] = [];
    for (const [n, l] of byName) {
      const permit = permitOfLease(lockName, n);
      if (permit !== undefined) permits.push({ permit, lease: view(l) });
    }
    // A permit Lease missing while status records a holder on it was deleted while held: that
    // holder may still believe (it cannot see a deletion while cut off), so the permit counts as
    // taken and is created again as Lost (decideSemaphore). Only once the pod cache has synced,
    // as the single-Lease lostTerm.
    const specMs = termTimingsOf(undefined, lock.spec).leaseDurationMs;
    // A permit Lease this reconcile deleted itself was vacant then: status, written after, lags.
    const deleted = (h: { readonly permit: number }): boolean =>
      written.get(permitLeaseName(lockName, h.permit)) === null;
    const lost: LostPermit[] = (lock.status?.holders ?? [])
      .filter((h) => !permits.some((p) => p.permit === h.permit) && !deleted(h))
      .map((h) => ({
        permit: h.permit,
        holder: { name: h.name, uid: h.uid },
        leaseDurationSeconds: leaseDurationSecondsFor(Math.max((h.leaseDurationSeconds ?? 0) * 1000, specMs)),
      }));
    const fencing = this.#d.fencing.forLock(lock);
    return {
      lock,
      timings: resolveTimings(lock.spec),
      anchor: anchor !== undefined ? view(anchor) : undefined,
      permits,
      ...(lost.length > 0 ? { lost } : {}),
      pods: this.#podsOf(namespace, lock).map(summarizePod),
      podsSynced: this.#d.pods.hasSynced(),
      fencing: {
        backend: fencing.backend,
        ready: fencing.ready,
        ...(fencing.detail !== undefined ? { detail: fencing.detail } : {}),
        ...(fencing.notConfigured === true ? { notConfigured: true } : {}),
      },
      requests: this.#memory.of(key).queue ?? lock.status?.queue ?? [],
    };
  }

  /** #actOnSemaphore performs one Lease action of a Semaphore decision and records the result in `written`. */
  async #actOnSemaphore(
    lock: DistributedLock,
    obs: SemaphoreObservation,
    action: SemaphoreAction,
    written: Map<string, V1Lease | null>,
    io: CallContext,
  ): Promise<void> {
    const { log, signal } = io;
    const namespace = lock.metadata.namespace ?? '';
    const lockName = lock.metadata.name ?? '';
    const anchorName = leaseName(lockName);
    const lockRef = { name: lockName, uid: lock.metadata.uid ?? '', apiVersion: API_VERSION, kind: KIND };
    const objectOf = (name: string): V1Lease | undefined => {
      const w = written.get(name);
      return w === null ? undefined : (w ?? this.#d.leases.get(namespace, name));
    };
    const create = async (body: V1Lease): Promise<void> => {
      const name = body.metadata?.name ?? '';
      try {
        written.set(name, await this.#d.leaseStore.create(namespace, body, { signal }));
        log.info({ lease: name }, 'Created Lease');
      } catch (err) {
        if (!isAlreadyExists(err)) throw err; // deterministic name: someone (us, earlier) made it
        written.set(name, (await this.#d.leaseStore.get(namespace, name, { signal })) ?? null);
      }
    };
    switch (action.type) {
      case 'CreateAnchor':
        return create(newLease(lockRef, undefined));
      case 'CreatePermit':
        return create(newLease(lockRef, action.lost, action.permit));
      case 'GrantPermit': {
        const name = permitLeaseName(lockName, action.permit);
        // (1) The permit Lease as read: its resourceVersion is what the grant's CAS will use.
        const permitLease = objectOf(name);
        const anchor = objectOf(anchorName);
        if (permitLease === undefined || anchor === undefined)
          throw new Error(
            `Lease ${namespace}/${permitLease === undefined ? name : anchorName} vanished before the grant`,
          );
        const fencing = this.#d.fencing.forLock(lock);
        signal.throwIfAborted(); // the dispenser takes no signal: do not start one after shutdown
        let issued: FenceResult;
        try {
          issued = await fencing.dispenser.next(fencing.key, action.floor); // (2)
        } catch (err) {
          this.#d.metrics?.fencingErrors.inc({ backend: fencing.backend, error_kind: errorKind(err) });
          throw new Error(`Failed to issue fencing token from ${fencing.backend}`, { cause: err });
        }
        if (issued.token > MAX_TOKEN || issued.token <= action.floor)
          throw new Error(`Fencing token ${issued.token} outside (${action.floor}, ${MAX_TOKEN}]; not granted`);
        signal.throwIfAborted(); // a burnt token is a harmless gap; a grant after shutdown is not ours to make
        // (3) The lock-wide high-water mark first: a 409 here means another grant raised it.
        written.set(
          anchorName,
          await this.#d.leaseStore.replace(namespace, anchorName, raisedAnchor(anchor, issued.token), { signal }),
        );
        // (4) The permit, from the Lease as read in (1): a 409 means it changed since.
        const body = grantedLease(permitLease, action.to, issued.token, obs.timings, this.#d.clock.now());
        written.set(name, await this.#d.leaseStore.replace(namespace, name, body, { signal }));
        this.#d.metrics?.grants.inc({ cause: action.cause, backend: fencing.backend });
        log.info(
          {
            lease: name,
            permit: action.permit,
            holder: action.to.name,
            uid: action.to.uid,
            token: issued.token.toString(),
            cause: action.cause,
          },
          'Granted permit Lease',
        );
        this.#event(
          lock,
          'Normal',
          EventReason.LeaseGranted,
          `Granted permit ${action.permit} to pod ${action.to.name} with fencing token ${issued.token} (${describeCause(action.cause, action.previous)})`,
        );
        return;
      }
      case 'RevokePermit': {
        const name = permitLeaseName(lockName, action.permit);
        const held = objectOf(name);
        if (held === undefined) throw new Error(`Lease ${namespace}/${name} vanished before the revoke`);
        const how = action.cause === 'Expired' ? 'Expired' : 'Terminated';
        written.set(name, await this.#d.leaseStore.replace(namespace, name, releasedLease(held, how), { signal }));
        this.#d.metrics?.expirations.inc({ cause: action.cause });
        log.info({ lease: name, holder: action.holder.name, cause: action.cause }, 'Revoked permit Lease');
        this.#event(
          lock,
          'Warning',
          END_REASON[action.cause],
          endMessage(action.cause, action.holder, `permit ${action.permit} revoked`),
        );
        return;
      }
      case 'DeletePermit': {
        // Only the version decided from: a grant of it since (another leader) makes this a 409.
        const name = permitLeaseName(lockName, action.permit);
        const vacant = objectOf(name);
        if (vacant === undefined) return;
        const opts = {
          signal,
          ...(vacant.metadata?.resourceVersion !== undefined
            ? { resourceVersion: vacant.metadata.resourceVersion }
            : {}),
        };
        await this.#d.leaseStore.delete(namespace, name, opts);
        written.set(name, null);
        log.info({ lease: name, permit: action.permit }, 'Deleted permit Lease above spec.permits');
        return;
      }
      default:
        return;
    }
  }

  /** #observe gathers the Observation of the lock with `lease` (from the cache, or our last write). */
  #observe(key: ObjectKey, lock: DistributedLock, lease: V1Lease | undefined): Observation {
    const namespace = lock.metadata.namespace ?? '';
    let leaseView: Observation['lease'];
    let malformedToken: string | undefined;
    if (lease !== undefined) {
      const parsed = parseLeaseTolerant(lease);
      malformedToken = parsed.malformedToken;
      leaseView = {
        record: parsed.record,
        observedAtMs: this.#observedAt(key, leaseName(lock.metadata.name ?? ''), parsed.record),
      };
    }
    const fencing = this.#d.fencing.forLock(lock);
    const obs: Observation = {
      lock,
      timings: resolveTimings(lock.spec),
      lease: leaseView,
      pods: this.#podsOf(namespace, lock).map(summarizePod),
      podsSynced: this.#d.pods.hasSynced(),
      fencing: {
        backend: fencing.backend,
        ready: fencing.ready,
        ...(fencing.detail !== undefined ? { detail: fencing.detail } : {}),
        ...(fencing.notConfigured === true ? { notConfigured: true } : {}),
      },
      requests: this.#memory.of(key).queue ?? lock.status?.queue ?? [],
      ...this.#handoverSeen(key, leaseView?.record),
      ...grantFailureOf(this.#memory.of(key).grantFailure),
      ...(malformedToken !== undefined ? { malformedToken } : {}),
      wallNowMs: this.#d.clock.now().getTime(),
    };
    return obs;
  }

  /**
   * #handoverSeen: our monotonic time when we first saw the Lease's current handover mark (the
   * handover's timeout counts from it, on our own clock, as expiry does). A restarted controller
   * starts counting again at its first sight: a handover lapses later, never earlier.
   */
  #handoverSeen(key: ObjectKey, record: LockRecord | undefined): { handoverMarkSeenAtMs?: number } {
    const m = this.#memory.of(key);
    const mark = record?.handover;
    if (mark === undefined || record?.holder === undefined) {
      m.handoverMark = undefined;
      return {};
    }
    const fingerprint = `${holderIdentity(mark.to)}|${mark.token}|${mark.drainMs}`;
    const seen = m.handoverMark;
    if (seen !== undefined && seen.fingerprint === fingerprint) return { handoverMarkSeenAtMs: seen.atMs };
    const atMs = this.#d.clock.monotonicMs();
    m.handoverMark = { fingerprint, atMs };
    return { handoverMarkSeenAtMs: atMs };
  }

  /** #podsOf: the pods of the namespace that the lock selects or that carry its marks. */
  #podsOf(namespace: string, lock: DistributedLock): V1Pod[] {
    const lockName = lock.metadata.name ?? '';
    const selector = lock.spec.candidates.selector;
    const lookup = this.#d.podLookup;
    if (lookup === undefined) {
      const keys = podKeys(lockName);
      return this.#d.pods.list(namespace).filter((p) => {
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

  /**
   * #observedAt: our monotonic time when the lock's Lease `lease` last changed its renew
   * fingerprint; the expiry clock restarts at each change (client-go observedTime).
   */
  #observedAt(key: ObjectKey, lease: string, record: LockRecord): number {
    const fingerprint = renewFingerprint(record);
    const seen = this.#memory.of(key).seen;
    const last = seen.get(lease);
    if (last !== undefined && last.fingerprint === fingerprint) return last.atMs;
    const atMs = this.#d.clock.monotonicMs();
    seen.set(lease, { fingerprint, atMs });
    return atMs;
  }

  async #actOnLease(
    key: ObjectKey,
    lock: DistributedLock,
    obs: Observation,
    read: V1Lease | undefined,
    action: Action,
    io: CallContext,
  ): Promise<V1Lease | undefined> {
    const { log, signal } = io;
    const namespace = lock.metadata.namespace ?? '';
    const name = leaseName(lock.metadata.name ?? '');
    switch (action.type) {
      case 'CreateLease': {
        const lockRef = {
          name: lock.metadata.name ?? '',
          uid: lock.metadata.uid ?? '',
          apiVersion: API_VERSION,
          kind: KIND,
        };
        let created: V1Lease;
        try {
          created = await this.#d.leaseStore.create(namespace, newLease(lockRef, action.lost), { signal });
          if (action.lost !== undefined) {
            log.info(
              { lease: name, lastHolder: action.lost.holder?.name },
              'Created Lease again after it was deleted while held',
            );
            this.#event(
              lock,
              'Warning',
              EventReason.LeaseLost,
              `The Lease was deleted while ${action.lost.holder !== undefined ? `pod ${action.lost.holder.name} held the lock` : 'an earlier lost term was still being waited out'}; created it again, and no grant for ${action.lost.leaseDurationSeconds}s while the old holder steps down`,
            );
          } else {
            log.info({ lease: name }, 'Created Lease');
          }
        } catch (err) {
          if (!isAlreadyExists(err)) throw err; // deterministic name: someone (us, earlier) made it
          return await this.#d.leaseStore.get(namespace, name, { signal });
        }
        return created;
      }
      case 'Grant': {
        if (read === undefined && action.create !== true)
          throw new Error(`Lease ${namespace}/${name} vanished before the grant`);
        const lockRef = {
          name: lock.metadata.name ?? '',
          uid: lock.metadata.uid ?? '',
          apiVersion: API_VERSION,
          kind: KIND,
        };
        const current = read ?? newLease(lockRef, undefined);
        const fencing = this.#d.fencing.forLock(lock);
        let issued;
        signal.throwIfAborted(); // the dispenser takes no signal (a Redis script): do not start one after shutdown
        try {
          issued = await fencing.dispenser.next(fencing.key, action.floor);
        } catch (err) {
          this.#d.metrics?.fencingErrors.inc({ backend: fencing.backend, error_kind: errorKind(err) });
          this.#reportFencing(
            key,
            lock,
            { backend: fencing.backend, ready: false, detail: err instanceof Error ? err.message : String(err) },
            log,
          );
          throw new Error(`Failed to issue fencing token from ${fencing.backend}`, { cause: err });
        }
        if (issued.token > MAX_TOKEN)
          throw new Error(`Fencing token ${issued.token} above the largest token; not granted`);
        const firstToken = current.metadata?.annotations?.[TOKEN_ANNOTATION] === undefined;
        const loss = fenceLoss(issued, firstToken);
        if (loss !== undefined) {
          this.#d.metrics?.fencingRefloored.inc({ reason: loss });
          this.#event(
            lock,
            'Warning',
            EventReason.FencingRefloored,
            `${LOSS_MESSAGE[loss]} (key ${fencing.key}); issued token ${issued.token} above the etcd high-water mark ${action.floor}`,
          );
          log.info(
            { key: fencing.key, floor: action.floor.toString(), token: issued.token.toString(), reason: loss },
            'Re-floored fencing counter',
          );
        }
        const timings = obs.timings;
        const body = grantedLease(current, action.to, issued.token, timings, this.#d.clock.now(), action.request);
        signal.throwIfAborted(); // a token burnt by a shutdown is a harmless gap; a grant after it is not ours to make
        // CAS on resourceVersion (409 → re-read); a lock's first grant creates the Lease (409 AlreadyExists → re-read).
        const granted =
          read === undefined
            ? await this.#d.leaseStore.create(namespace, body, { signal })
            : await this.#d.leaseStore.replace(namespace, name, body, { signal });
        this.#d.metrics?.grants.inc({ cause: action.cause, backend: fencing.backend });
        if (obs.lease !== undefined && action.cause !== 'Vacant') {
          this.#d.metrics?.handoffDuration.observe(
            { cause: action.cause },
            (this.#d.clock.monotonicMs() - obs.lease.observedAtMs) / 1000,
          );
        }
        this.#observeHold(obs, action.cause);
        if (action.cause === 'Expired' || action.cause === 'HolderTerminated')
          this.#d.metrics?.expirations.inc({ cause: action.cause });
        if (action.cause === 'Released') this.#d.metrics?.releasesObserved.inc();
        log.info(
          {
            holder: action.to.name,
            uid: action.to.uid,
            token: issued.token.toString(),
            cause: action.cause,
            previous: action.previous?.name,
          },
          'Granted Lease',
        );
        if ((action.cause === 'Expired' || action.cause === 'HolderTerminated') && action.previous !== undefined) {
          // The term ended involuntarily and went straight to a successor: report the end under
          // its own reason too, as the Revoke path does, so that alerts on it see every one.
          this.#event(
            lock,
            'Warning',
            END_REASON[action.cause],
            endMessage(action.cause, action.previous, 'lock handed over'),
          );
        }
        this.#event(
          lock,
          'Normal',
          EventReason.LeaseGranted,
          `Granted to pod ${action.to.name} with fencing token ${issued.token} (${describeCause(action.cause, action.previous)})`,
        );
        return granted;
      }
      case 'ForceRelease': {
        if (read === undefined) throw new Error(`Lease ${namespace}/${name} vanished before the forced release`);
        const revoked = await this.#d.leaseStore.replace(namespace, name, releasedLease(read, 'Revoked'), { signal }); // CAS
        this.#observeHold(obs, 'ForceReleased');
        log.info({ holder: action.holder.name, by: action.by }, 'Force-released Lease');
        this.#event(
          lock,
          'Warning',
          EventReason.ForceReleased,
          `${action.by !== undefined ? `${action.by} forced` : 'A user forced'} the release of pod ${action.holder.name}'s grant (token ${String(obs.lease?.record.token)}); the pod may still be running: only fencing guards stop its writes`,
        );
        return revoked;
      }
      case 'MarkHandover': {
        if (read === undefined) throw new Error(`Lease ${namespace}/${name} vanished before the handover mark`);
        const marked = await this.#d.leaseStore.replace(namespace, name, handoverMarkedLease(read, action.mark), {
          signal,
        }); // CAS: a holder's renewal in between is a 409, and we decide again
        const holder = obs.lease?.record.holder?.name ?? '?';
        if (action.mark !== undefined) {
          log.info({ holder, to: action.mark.to.name, drainMs: action.mark.drainMs }, 'Marked Lease for handover');
          this.#event(
            lock,
            'Normal',
            EventReason.HandoverStarted,
            `Handing over from pod ${holder} (token ${action.mark.token}) to pod ${action.mark.to.name}${action.why !== undefined ? ` because ${action.why}` : ''}: the holder's agent drains for up to ${action.mark.drainMs / 1000}s, then releases`,
          );
        } else {
          log.info({ holder }, 'Removed the handover mark from the Lease');
        }
        return marked;
      }
      case 'Revoke': {
        if (read === undefined) throw new Error(`Lease ${namespace}/${name} vanished before the revoke`);
        const current = read;
        const revoked = await this.#d.leaseStore.replace(
          namespace,
          name,
          releasedLease(current, action.cause === 'Expired' ? 'Expired' : 'Terminated'),
          { signal },
        );
        this.#d.metrics?.expirations.inc({ cause: action.cause });
        this.#observeHold(obs, action.cause);
        log.info({ holder: action.holder.name, cause: action.cause }, 'Revoked Lease');
        this.#event(lock, 'Warning', END_REASON[action.cause], endMessage(action.cause, action.holder, 'lock revoked'));
        return revoked;
      }
      default:
        return read;
    }
  }

  /** #observeHold records how long an involuntarily ended term lasted (releases clear acquireTime). */
  #observeHold(obs: Observation, cause: string): void {
    const acquired = obs.lease?.record.acquireTime;
    if (obs.lease?.record.holder === undefined || acquired === undefined) return;
    this.#d.metrics?.holdDuration.observe(
      { cause },
      Math.max(0, this.#d.clock.now().getTime() - acquired.getTime()) / 1000,
    );
  }

  async #markPod(
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

  async #unmarkPod(lock: DistributedLock, pod: HolderRef, io: CallContext): Promise<void> {
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
      await this.#d.podPatcher.patchMetadata(namespace, pod, patch, { signal });
      log.info({ pod: pod.name }, msg);
    } catch (err) {
      if (isNotFound(err) || isConflict(err)) {
        log.debug({ pod: pod.name }, 'Pod gone or replaced; skipped');
        return;
      }
      throw new Error(`Failed to patch Pod ${namespace}/${pod.name}`, { cause: err });
    }
  }

  #reportFencing(key: ObjectKey, lock: DistributedLock, f: FencingState, log: Logger): void {
    this.#d.metrics?.fencingReady.set({ backend: f.backend }, f.ready ? 1 : 0);
    const m = this.#memory.of(key);
    const was = m.fencingDegraded;
    if (!f.ready && !was) {
      m.fencingDegraded = true;
      log.info({ backend: f.backend, detail: f.detail }, 'Fencing backend unavailable');
      this.#event(
        lock,
        'Warning',
        EventReason.FencingUnavailable,
        `Fencing backend ${f.backend} unavailable (${f.detail ?? 'not ready'}); no new grants until it is back, holders keep renewing`,
      );
    } else if (f.ready && was) {
      m.fencingDegraded = false;
      m.tampered = undefined;
      this.#event(lock, 'Normal', EventReason.FencingAvailable, `Fencing backend ${f.backend} is issuing tokens again`);
    }
  }

  /**
   * #reportTampering records a Warning Event once for each tampering found (per values found): the
   * Lease's token lowered below status.fencingToken — the next grant is taken above every token
   * known, and the Event names what was found — or no token left to issue. Called for every
   * decision, before its actions, so that a lowered token on a vacant Lease, granted in the same
   * reconcile, is reported too.
   */
  #reportTampering(key: ObjectKey, lock: DistributedLock, obs: Observation, dec: Decision, log: Logger): void {
    const lease = leaseName(lock.metadata.name ?? '');
    const t = dec.tampered;
    const found =
      dec.waiting === 'TokenRegressed'
        ? `exhausted|${obs.lease?.record.token ?? ''}|${lock.status?.fencingToken ?? ''}`
        : t !== undefined
          ? `tampered|${describeTamper(t)}`
          : undefined;
    const m = this.#memory.of(key);
    if (found === undefined) {
      m.tampered = undefined;
      return;
    }
    if (m.tampered === found) return;
    m.tampered = found;
    if (t !== undefined && dec.waiting !== 'TokenRegressed') {
      log.info(
        {
          leaseToken: t.malformed ?? t.leaseToken?.toString(),
          statusToken: t.statusToken?.toString(),
          revision: t.revision?.toString(),
          floor: t.floor.toString(),
        },
        'Lease fencing token went backwards',
      );
      const above = [
        ...(t.statusToken !== undefined ? [`status.fencingToken ${t.statusToken}`] : []),
        ...(t.revision !== undefined ? [`the Lease's resourceVersion ${t.revision}`] : []),
        ...(obs.fencing.backend === 'Redis' ? ['the Redis counter'] : []),
      ].join(', ');
      this.#event(
        lock,
        'Warning',
        EventReason.LeaseTampered,
        `Lease ${lease} annotation ${TOKEN_ANNOTATION} is ${describeTamper(t)}: someone other than the controller wrote it. The next grant takes a token above every token known (${above})${dec.holder !== undefined ? `, once the term of pod ${dec.holder.name} ends` : ''}`,
      );
      return;
    }
    log.info(
      { leaseToken: obs.lease?.record.token?.toString(), statusToken: lock.status?.fencingToken },
      'No fencing token left to issue',
    );
    this.#event(
      lock,
      'Warning',
      EventReason.LeaseTampered,
      `No fencing token is left to issue: status.fencingToken is ${lock.status?.fencingToken ?? 'unset'} and Lease ${lease} annotation ${TOKEN_ANNOTATION} is ${obs.lease?.record.token?.toString() ?? 'unset'}; one of them is at the largest token, 2^63-1 (someone raised it). No grant until it is set back below it`,
    );
  }

  /** #reportRefusedCompletions logs and records a Warning Event once for each refused completion on the Lease. */
  #reportRefusedCompletions(key: ObjectKey, lock: DistributedLock, obs: Observation, now: Date, log: Logger): void {
    const refused = refusedCompletions(obs, now);
    const m = this.#memory.of(key);
    const seen = m.refused;
    const current = new Set<string>();
    for (const { entry, verdict } of refused) {
      const id = `${entry.runId}|${entry.token}|${verdict}`;
      current.add(id);
      if (seen.has(id)) continue;
      const why =
        verdict === 'future'
          ? `its completedAt ${entry.completedAt.toISOString()} is in the future`
          : `its token ${entry.token} is above every token of the Lease (${obs.lease?.record.token ?? 'none'})`;
      log.info({ runId: entry.runId, token: entry.token.toString(), verdict }, 'Refused a completed run on the Lease');
      this.#event(
        lock,
        'Warning',
        EventReason.CompletionRefused,
        `Run ${JSON.stringify(entry.runId)} recorded completed by pod ${entry.holder || '?'} was not accepted: ${why}; it does not count as completed`,
      );
    }
    m.refused = current;
  }

  /**
   * #answerHandover removes the handover request from the lock — only while it is still the
   * request decided about (a JSON Patch `test`: a newer request is never cleared) — and records
   * the answer beside it and in an Event. A failed test (422) or a vanished lock is skipped: the
   * lock's own update event brings the next reconcile.
   */
  async #answerHandover(lock: DistributedLock, a: HandoverAnswer, { log, signal }: CallContext): Promise<void> {
    const writer = this.#d.lockMetadata;
    if (writer === undefined) return;
    const at = this.#d.clock.now().toISOString();
    const result = formatHandoverResult({
      to: a.to,
      token: a.token,
      outcome: a.outcome,
      message: a.message,
      at,
      ...(a.newToken !== undefined ? { newToken: a.newToken.toString() } : {}),
    });
    const path = (k: string): string => `/metadata/annotations/${k.replaceAll('~', '~0').replaceAll('/', '~1')}`;
    const force = a.kind === 'forceRelease';
    const requestKey = force ? FORCE_RELEASE_REQUEST_ANNOTATION : HANDOVER_REQUEST_ANNOTATION;
    const resultKey = force ? FORCE_RELEASE_RESULT_ANNOTATION : HANDOVER_RESULT_ANNOTATION;
    try {
      await writer.jsonPatch(
        lock,
        [
          { op: 'test', path: path(requestKey), value: a.raw },
          { op: 'remove', path: path(requestKey) },
          { op: 'add', path: path(resultKey), value: result },
        ],
        signal,
      );
    } catch (err) {
      if (isNotFound(err) || isInvalid(err) || isConflict(err)) {
        log.debug({ err }, 'Handover request changed before it was answered; skipped');
        return;
      }
      throw new Error('Failed to answer the handover request on the DistributedLock', { cause: err });
    }
    log.info({ to: a.to, token: a.token, outcome: a.outcome, kind: a.kind ?? 'handover' }, 'Answered handover request');
    // A forced release has its Event when the Lease is released (ForceReleased); only a refusal is reported here.
    if (force) {
      if (a.outcome !== 'Completed')
        this.#event(lock, 'Warning', EventReason.ForceReleased, `Forced release refused: ${a.message}`);
      return;
    }
    const reason =
      a.outcome === 'Completed'
        ? EventReason.HandoverCompleted
        : a.outcome === 'TimedOut'
          ? EventReason.HandoverTimedOut
          : EventReason.HandoverRefused;
    this.#event(
      lock,
      a.outcome === 'Completed' ? 'Normal' : 'Warning',
      reason,
      a.outcome === 'Completed'
        ? `Handed over to ${a.message}`
        : `Handover${a.to !== '' ? ` to pod ${a.to}` : ''} ${a.outcome === 'TimedOut' ? 'timed out' : 'refused'}: ${a.message}`,
    );
  }

  /**
   * #reportBadPriorities records a Warning Event once for each Election candidate whose
   * fencepost.io/priority is not an int32 (it counts as 0): per pod incarnation and value, so a
   * fixed and broken-again annotation is reported again, and a reconcile loop is not.
   */
  #reportBadPriorities(key: ObjectKey, lock: DistributedLock, dec: Decision, log: Logger): void {
    if ((lock.spec.mode ?? 'Election') !== 'Election') return;
    const m = this.#memory.of(key);
    const seen = m.badPriorities;
    const current = new Set<string>();
    for (const p of dec.candidates) {
      if (p.invalidPriority === undefined) continue;
      const id = `${p.ref.name}/${p.ref.uid}=${p.invalidPriority}`;
      current.add(id);
      if (seen.has(id)) continue;
      log.info({ pod: p.ref.name, value: p.invalidPriority }, 'Ignored an invalid Pod priority');
      this.#event(
        lock,
        'Warning',
        EventReason.InvalidPriority,
        `Pod ${p.ref.name} has annotation ${PRIORITY_ANNOTATION}=${JSON.stringify(p.invalidPriority)}, which is not an integer from ${MIN_PRIORITY} to ${MAX_PRIORITY}; it counts as 0`,
      );
    }
    m.badPriorities = current;
  }

  async #writeStatus(lock: DistributedLock, next: DistributedLockStatus, signal: AbortSignal): Promise<void> {
    const prev = lock.status ?? {};
    const base = stableJson(prev);
    const sent = stableJson(next);
    const m = this.#memory.of(`${lock.metadata.namespace ?? ''}/${lock.metadata.name ?? ''}`);
    if (base === sent) {
      m.statusWritten = undefined;
      return;
    }
    const nowMs = this.#d.clock.monotonicMs();
    const last = m.statusWritten;
    if (last !== undefined && last.base === base && last.sent === sent && nowMs < last.untilMs) return; // sent already; the cache is behind
    // A merge patch only adds and changes keys; keys that disappeared are sent as null.
    const patch: Record<string, unknown> = { ...next };
    for (const k of Object.keys(prev)) if (!(k in next)) patch[k] = null;
    m.statusWritten = undefined; // a failed write is sent again
    await this.#d.statusWriter.patchStatus(lock, patch, signal);
    m.statusWritten = { base, sent, untilMs: nowMs + EXPECTATION_TTL_MS };
  }

  // ### 5: Deletion: unmark pods; end a held term and wait until its holder must have stepped down
  // (a holder cut off from the API server cannot see the end, and a lock applied again at once
  // would otherwise grant while it still believes); then delete the Lease and drop the finalizer.
  async #cleanup(key: ObjectKey, lock: DistributedLock, io: CallContext): Promise<CleanupResult> {
    const { log, signal } = io;
    const namespace = lock.metadata.namespace ?? '';
    const keys = podKeys(lock.metadata.name ?? '');
    const marked = this.#d.podLookup?.marked(namespace, lock.metadata.name ?? '') ?? this.#d.pods.list(namespace);
    for (const p of marked) {
      const s = summarizePod(p);
      if (s.labels[keys.holder] !== undefined || s.annotations[keys.token] !== undefined)
        await this.#unmarkPod(lock, s.ref, io);
    }
    if (lock.spec.mode === 'Semaphore') {
      const waiting = await this.#cleanupPermits(key, lock, io);
      if (waiting !== undefined) return waiting;
    }
    const lName = leaseName(lock.metadata.name ?? '');
    const lease = await this.#d.leaseStore.get(namespace, lName, { signal });
    if (lease !== undefined) {
      const { record } = parseLeaseTolerant(lease); // a token someone made unreadable must not block the deletion
      const leaseMs = termTimingsOf(record, lock.spec).leaseDurationMs;
      if (record.holder !== undefined) {
        const ended = await this.#d.leaseStore.replace(namespace, lName, releasedLease(lease, 'Lost'), { signal }); // CAS
        this.#observedAt(key, lName, parseLeaseTolerant(ended).record); // the wait starts now
        log.info({ lease: lName, holder: record.holder.name }, 'Ended the term of a lock being deleted');
        return { pending: true, requeueAfterMs: leaseMs + EXPIRY_WAIT_MARGIN_MS };
      }
      if (record.released === 'Lost') {
        const waitedMs = this.#d.clock.monotonicMs() - this.#observedAt(key, lName, record);
        if (waitedMs < leaseMs) return { pending: true, requeueAfterMs: leaseMs - waitedMs + EXPIRY_WAIT_MARGIN_MS };
      }
      await this.#d.leaseStore.delete(namespace, lName, { signal }); // already gone is fine
      log.info({ lease: lName }, 'Deleted Lease');
    }
    this.#memory.forget(key); // the lock is gone once its finalizer is: nothing of it is needed again
    return {};
  }

  /**
   * #cleanupPermits does for every permit Lease of a Semaphore being deleted what #cleanup does for
   * the one Lease of another lock: end a held term (`Lost`), wait a full lease duration from then
   * for its holder to step down, then delete the Lease. Returns the wait while any term is being
   * waited out, undefined once every permit Lease is gone.
   */
  async #cleanupPermits(key: ObjectKey, lock: DistributedLock, io: CallContext): Promise<CleanupResult | undefined> {
    const { log, signal } = io;
    const namespace = lock.metadata.namespace ?? '';
    const lockName = lock.metadata.name ?? '';
    let waitMs = 0;
    const names = this.#d.leases
      .list(namespace)
      .map((l) => l.metadata?.name ?? '')
      .filter((n) => permitOfLease(lockName, n) !== undefined);
    for (const name of names) {
      const lease = await this.#d.leaseStore.get(namespace, name, { signal });
      if (lease === undefined) continue;
      const record = parseLease(lease);
      const leaseMs = termTimingsOf(record, lock.spec).leaseDurationMs;
      if (record.holder !== undefined) {
        const ended = await this.#d.leaseStore.replace(namespace, name, releasedLease(lease, 'Lost'), { signal }); // CAS
        this.#observedAt(key, name, parseLease(ended)); // the wait starts now
        log.info({ lease: name, holder: record.holder.name }, 'Ended the term of a lock being deleted');
        waitMs = Math.max(waitMs, leaseMs);
        continue;
      }
      if (record.released === 'Lost') {
        const waitedMs = this.#d.clock.monotonicMs() - this.#observedAt(key, name, record);
        if (waitedMs < leaseMs) {
          waitMs = Math.max(waitMs, leaseMs - waitedMs);
          continue;
        }
      }
      await this.#d.leaseStore.delete(namespace, name, { signal }); // already gone is fine
      log.info({ lease: name }, 'Deleted Lease');
    }
    return waitMs > 0 ? { pending: true, requeueAfterMs: waitMs + EXPIRY_WAIT_MARGIN_MS } : undefined;
  }

  #event(lock: DistributedLock, type: 'Normal' | 'Warning', reason: EventReason, message: string): void {
    const target: EventTarget = {
      apiVersion: API_VERSION,
      kind: KIND,
      namespace: lock.metadata.namespace ?? '',
      name: lock.metadata.name ?? '',
      uid: lock.metadata.uid ?? '',
    };
    this.#d.events.emit(target, type, reason, message);
  }
}

type FenceLoss = 'ttl' | 'key_lost' | 'counter_behind';

const LOSS_MESSAGE: Record<FenceLoss, string> = {
  ttl: 'The Redis fencing counter had a TTL, which fencepost removed',
  key_lost: 'The Redis fencing counter was missing although tokens were issued before (Redis lost data)',
  counter_behind: 'The Redis fencing counter was behind tokens already issued (restored or failed over to older data)',
};

/** fenceLoss says what the dispenser had to repair, if anything; seeding a new lock's counter is not a loss. */
function fenceLoss(r: FenceResult, firstToken: boolean): FenceLoss | undefined {
  if (r.hadTtl) return 'ttl';
  if (!r.refloored) return undefined;
  if (!r.existed) return firstToken ? undefined : 'key_lost';
  return 'counter_behind';
}

/**
 * END_REASON: the Warning Event reason for a term the controller ended: `HolderExpired` when the
 * holder stopped renewing for a full lease duration, `HolderTerminated` when the kubelet reported
 * its containers terminated (spec.handoff.onPodTerminated) — different causes, different fixes.
 */
const END_REASON = { Expired: EventReason.HolderExpired, HolderTerminated: EventReason.HolderTerminated } as const;

/** endMessage is the human sentence of an END_REASON Event. */
function endMessage(cause: keyof typeof END_REASON, holder: HolderRef, outcome: string): string {
  return cause === 'Expired'
    ? `Pod ${holder.name} stopped renewing for a full lease duration; ${outcome}`
    : `Pod ${holder.name}'s containers terminated; ${outcome}`;
}

function describeCause(cause: string, previous: HolderRef | undefined): string {
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

/** grantFailureOf: the Observation field for a recorded grant failure (none: no field). */
function grantFailureOf(failure: string | undefined): { grantFailure?: string } {
  return failure !== undefined ? { grantFailure: failure } : {};
}

/** stableJson serialises with sorted keys, for change detection. */
function stableJson(v: unknown): string {
  return JSON.stringify(v, (_k, val: unknown) =>
    val !== null && typeof val === 'object' && !Array.isArray(val)
      ? Object.fromEntries(
          Object.entries(val as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
        )
      : val,
  );
}
