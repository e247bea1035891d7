/**
 * LockSession — the holder's side of the protocol for one lock (DESIGN "The protocol", steps 2–4),
 * shared by the `fencepost agent` sidecar, `fencepost exec` and the `acquire()` library.
 *
 * This is the I/O shell around the pure state machine in session-machine.ts, which holds every
 * decision and the safety rules (validity counted from a renew's send time, confirm by the first
 * renew, a term that ended never taken up again, hand-back of a lost term, stop never writes).
 * The shell only turns the world into the machine's events — watch events, Lease answers, timers
 * on the injected clock, reads of the state (each preceded by a deadline check) — and performs the
 * actions it returns: Lease requests bounded by AbortSignal budgets, timers, LockEvents and logs.
 *
 * The pod-annotation side of a lock (Mutex requests) is MutexRequests (mutex-requests.ts), and
 * the run-once record on the Lease is RunCompletions (run-completions.ts); the session delegates
 * to them so that callers need one object.
 */
import type { LockEvent } from '../protocol/lock-event.ts';
import type { V1Lease } from '@kubernetes/client-node';
import { heldByAnother, sameHolder, type HolderRef } from '../protocol/holder.ts';
import { leaseName, permitLeaseName, permitOfLease } from '../protocol/names.ts';
import type { TermTimings } from '../protocol/timings.ts';
import { conservativeClock, type Timer, type TimerClock } from '../runtime/clock.ts';
import type { LeaseClient } from '../runtime/leaderelection.ts';
import { leaseRequests } from '../transport/resources.ts';
import { MutexRequests, type RequestBound } from './mutex-requests.ts';
import { NotRunHolderError, RunCompletions } from './run-completions.ts';
import { transition } from './session-machine.ts';
import {
  announce,
  leaseInformerOf,
  logReport,
  snapshotOf,
  type HandoverNotice,
  type LeaseInformer,
  type LockSessionOptions,
  type LockSnapshot,
} from './session-options.ts';
import { SessionRequests } from './session-requests.ts';
import {
  heldTerm,
  initialState,
  mayFollow,
  viewOf,
  type SessionAction,
  type SessionEvent,
  type SessionState,
} from './session-state.ts';

export type { LockState } from './session-state.ts';
export type { RequestBound } from './mutex-requests.ts';
export type { HandoverNotice, LeaseInformer, LockSessionOptions, LockSnapshot } from './session-options.ts';
export type { LockEvent };

/** LockSession tracks and renews one lock for one pod incarnation. */
export class LockSession {
  readonly #o: LockSessionOptions;
  /** #clock measures terms: elapsed time is the larger of monotonic and wall progress. */
  readonly #clock: TimerClock;
  readonly #leases: LeaseClient;
  readonly #informer: LeaseInformer;
  readonly #mutex: MutexRequests;
  readonly #runs: RunCompletions;
  readonly #listeners = new Set<(e: LockEvent) => void>();
  readonly #noticeListeners = new Set<(e: HandoverNotice) => void>();
  readonly #holderListeners = new Set<(holder: HolderRef | undefined) => void>();
  /** #s is the machine's state; only #feed replaces it. */
  #s: SessionState;
  #renewTimer: Timer | undefined;
  #deadlineTimer: Timer | undefined;
  #drainTimer: Timer | undefined;
  /** #abort aborts every request out when the session stops (AbortRequests). */
  readonly #abort = new AbortController();
  /**
   * #followed is the Lease whose events feed the machine: the lock's Lease (leaseName), or for a
   * Semaphore the permit Lease that named this pod last. The controller never grants one pod two
   * permits, so at most one Lease of the lock names it (a stale one aside, which the machine
   * handles as it handles one Lease).
   */
  #followed: string;
  /** #idleWaiters: stop() waits here until the renew flight is over. */
  readonly #idleWaiters: (() => void)[] = [];
  readonly #requests: SessionRequests;

  constructor(o: LockSessionOptions) {
    this.#o = o;
    this.#clock = conservativeClock(o.clock);
    this.#s = initialState(o.self, o.minDrainMs);
    this.#leases = o.leases ?? leaseRequests<V1Lease>(o.api);
    this.#informer = o.leaseInformer ?? leaseInformerOf(o);
    this.#mutex = new MutexRequests(o);
    this.#runs = new RunCompletions({ ...o, leases: this.#leases });
    this.#followed = leaseName(o.lock);
    this.#requests = new SessionRequests({
      namespace: o.namespace,
      lock: o.lock,
      self: o.self,
      log: o.log,
      clock: this.#clock,
      leases: this.#leases,
      stopped: this.#abort.signal,
      followed: () => this.#followed,
      lease: () => this.#s.lease,
      step: (e) => {
        this.#step(e);
      },
      stepAndWait: (e, signal) => this.#stepAndWait(e, signal),
    });
    this.#informer.onChange((lease, kind) => {
      const name = lease.metadata?.name ?? '';
      if (name !== this.#followed) {
        // Another Lease of the lock that names this pod (a Semaphore granted it a permit): turn
        // to it, but only between terms (mayFollow), never away from a term held or in flight.
        if (kind === 'delete' || !this.#isLockLease(name) || !namesSelf(lease, o.self) || !mayFollow(this.#s)) return;
        this.#step({ type: 'Follow' });
        this.#followed = name;
      }
      this.#step(kind === 'delete' ? { type: 'LeaseGone' } : seen(lease));
      const holder = this.holder();
      for (const l of this.#holderListeners) l(holder);
    });
  }

  /** start begins watching the lock's Lease; resolves once the watch has synced. */
  async start(): Promise<void> {
    await this.#informer.start();
    const current = this.#informer.get(this.#o.namespace, this.#followed);
    if (current !== undefined) this.#step(seen(current));
  }

  /** onEvent subscribes to changes; returns the unsubscribe function. Listeners must not throw. */
  onEvent(listener: (e: LockEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }

  /** onHandover subscribes to planned-handover notices; returns the unsubscribe function. Listeners must not throw. */
  onHandover(listener: (e: HandoverNotice) => void): () => void {
    this.#noticeListeners.add(listener);
    return () => {
      this.#noticeListeners.delete(listener);
    };
  }

  /**
   * holder is the holder the newest Lease seen names (any pod incarnation, this one included), or
   * undefined when nobody holds it (never granted, released, revoked, deleted). It says who the
   * server has granted the lock to, not whether that holder is still renewing: a holder that died
   * stays named until the controller expires it.
   */
  holder(): HolderRef | undefined {
    return this.#s.lease?.record?.holder;
  }

  /**
   * otherHolder is {@link holder} when that is another pod incarnation than this session's (the
   * lock is held elsewhere: `ifHeld`), else undefined.
   */
  otherHolder(): HolderRef | undefined {
    const holder = this.holder();
    return heldByAnother(holder, this.#o.self) ? holder : undefined;
  }

  /**
   * otherPermitHolders: for a Semaphore of `permits` permits, the holders its permit Leases
   * 0…permits−1 name (as the watch last saw them) other than this pod incarnation, one per permit
   * whose Lease names one. Like {@link holder}, who the server granted each permit to.
   */
  otherPermitHolders(permits: number): HolderRef[] {
    const out: HolderRef[] = [];
    for (let i = 0; i < permits; i++) {
      const lease = this.#informer.get(this.#o.namespace, permitLeaseName(this.#o.lock, i));
      const holder = lease !== undefined ? viewOf(lease).view.record?.holder : undefined;
      if (heldByAnother(holder, this.#o.self)) out.push(holder);
    }
    return out;
  }

  /**
   * onHolderChange subscribes to the Lease watch: `listener` gets {@link holder} after every
   * change the watch delivers (also when the holder stayed the same). Returns the unsubscribe
   * function. Listeners must not throw.
   */
  onHolderChange(listener: (holder: HolderRef | undefined) => void): () => void {
    this.#holderListeners.add(listener);
    return () => {
      this.#holderListeners.delete(listener);
    };
  }

  /** snapshot is the current state; it first checks the term's deadline against the clock. */
  snapshot(): LockSnapshot {
    this.#step({ type: 'DeadlineCheck' });
    return snapshotOf(this.#s, this.#o.lock, permitOfLease(this.#o.lock, this.#followed), this.#clock.monotonicMs());
  }

  /**
   * drained: the app has drained for the planned handover under way: the agent stops believing
   * and releases the lock to the successor now, without waiting for the rest of the drain period.
   * Returns false (and does nothing) when no handover is under way. Resolves after the release
   * (best effort: a release the API server does not take is logged, and the Lease expires).
   */
  async drained(bound?: RequestBound): Promise<boolean> {
    this.#step({ type: 'DeadlineCheck' });
    if (this.#s.draining === undefined || heldTerm(this.#s) === undefined) return false;
    try {
      await this.#stepAndWait({ type: 'DrainDone' }, bound?.signal);
    } catch (err) {
      // The term ended here before the write (the app may go on as drained); a Lease not
      // released expires on the server, and the next grant then follows the usual order.
      this.#o.log.info(
        { lock: this.#o.lock, err },
        'Failed to release the Lease at the end of a handover; it will expire',
      );
    }
    return true;
  }

  /** #isLockLease: the lock's own Lease, or one of its permit Leases. */
  #isLockLease(name: string): boolean {
    return name === leaseName(this.#o.lock) || permitOfLease(this.#o.lock, name) !== undefined;
  }

  /**
   * request asks for the lock in Mutex mode: the pod's request annotation (now, to the ms) and
   * the run id, if any. The controller grants requesters first come, first served. Harmless in
   * Election mode, where every Ready candidate may be granted anyway.
   */
  request(runId?: string): Promise<void> {
    return this.#mutex.request(runId);
  }

  /**
   * withdraw removes the request (Mutex mode), so that the pod is not granted again. `bound.signal`
   * aborts the request on the wire (the call then rejects).
   */
  withdraw(bound?: RequestBound): Promise<void> {
    return this.#mutex.withdraw(bound);
  }

  /**
   * complete records runId completed on the Lease by the term of `token` (default: the term this
   * session holds now), in a compare-and-swap made only while the Lease names this pod with that
   * token (RunCompletions.complete). Rejects with NotRunHolderError otherwise: only the holder of
   * the run's term may complete it. `bound.signal` aborts the requests on the wire.
   */
  async complete(runId: string, bound?: RequestBound, token?: bigint): Promise<void> {
    const term = token ?? this.heldToken();
    if (term === undefined)
      throw new NotRunHolderError(
        `lock ${this.#o.lock}: only the holder of the run's term may complete it; pod ${this.#o.self.name} holds no term`,
      );
    await this.#runs.complete(runId, term, bound);
  }

  /**
   * runCompleted: whether runId is recorded completed, on the Lease (read directly) or in the
   * lock's status.completedRuns (RunCompletions.runCompleted).
   */
  runCompleted(runId: string): Promise<boolean> {
    return this.#runs.runCompleted(runId);
  }

  /** termTimings: the current or last term's timings (undefined before the first grant). */
  termTimings(): TermTimings | undefined {
    return this.#s.lastTimings;
  }

  /** heldToken returns the token while the lock is validly held, else undefined (checks the clock). */
  heldToken(): bigint | undefined {
    this.#step({ type: 'DeadlineCheck' });
    return heldTerm(this.#s)?.token;
  }

  /**
   * release gives the lock up: the session stops trusting the term first (so the application
   * stops writing), then compare-and-swaps the holder away if the Lease still names this pod and
   * token. Idempotent; a lock not held is a no-op.
   *
   * `bound.signal` aborts the Lease requests on the wire (the call then rejects): the term has
   * ended here all the same, and a Lease not released expires on the server after its duration.
   */
  async release(bound?: RequestBound): Promise<void> {
    await this.#stepAndWait({ type: 'ReleaseRequested' }, bound?.signal);
  }

  /** stop ends watching and renewing without releasing (the lease then expires on the server). */
  async stop(): Promise<void> {
    this.#step({ type: 'Stop' });
    await this.#informer.stop();
    // The renew out (aborted) or a retry waiting for its timer ends the flight.
    if (this.#s.renew !== 'idle') {
      await new Promise<void>((resolve) => {
        this.#idleWaiters.push(resolve);
      });
    }
  }

  // --- internals ---

  /** #step feeds one event to the machine, keeps its state, and performs its actions in order. */
  #step(event: SessionEvent): void {
    this.#feed(event, undefined, undefined);
  }

  /**
   * #stepAndWait is #step for an event whose actions the caller waits for: the release of a term
   * (release() reports its failure), or the re-read of a conflicted renew (within the renew's budget).
   */
  async #stepAndWait(event: SessionEvent, signal?: AbortSignal): Promise<void> {
    const pending: Promise<void>[] = [];
    this.#feed(event, signal, pending);
    await Promise.all(pending);
  }

  /**
   * #feed runs one transition. Listeners run inside it and may read the session: a nested step
   * starts from the new state, as the machine's state is kept before any action is performed.
   */
  #feed(event: SessionEvent, signal: AbortSignal | undefined, pending: Promise<void>[] | undefined): void {
    const { state, actions } = transition(this.#s, event, this.#clock.monotonicMs());
    this.#s = state;
    for (const a of actions) {
      const p = this.#perform(a, signal);
      if (p === undefined) continue;
      // Only events fed through #stepAndWait produce awaited actions; never lose a failure all the same.
      if (pending !== undefined) pending.push(p);
      else
        p.catch((err: unknown) => {
          this.#o.log.error({ err, lock: this.#o.lock }, 'Lock session action failed');
        });
    }
    if (this.#s.renew === 'idle') for (const resolve of this.#idleWaiters.splice(0)) resolve();
  }

  #perform(a: SessionAction, signal: AbortSignal | undefined): Promise<void> | undefined {
    const { log, lock } = this.#o;
    const clock = this.#clock;
    switch (a.type) {
      case 'SendRenew':
        void this.#requests.renew(a);
        return undefined;
      case 'ReadLease':
        if (signal === undefined) throw new Error('ReadLease outside a renew');
        return this.#requests.readLease(signal);
      case 'ScheduleRetry':
        clock
          .setTimeout(() => {
            this.#step({ type: 'RetryTimerFired' });
          }, a.inMs)
          .unref();
        return undefined;
      case 'ArmTimers': {
        this.#clearTimers();
        const jitter = 1 - 0.1 * (this.#o.random ?? Math.random)();
        this.#renewTimer = clock.setTimeout(
          () => {
            this.#step({ type: 'RenewTimerFired' });
          },
          Math.max(1, a.renewInMs * jitter),
        );
        this.#deadlineTimer = clock.setTimeout(() => {
          this.#step({ type: 'DeadlineCheck' });
        }, a.deadlineInMs);
        return undefined;
      }
      case 'ClearTimers':
        this.#clearTimers();
        return undefined;
      case 'ArmDrain': {
        this.#drainTimer?.cancel();
        const token = a.token;
        this.#drainTimer = clock.setTimeout(() => {
          this.#step({ type: 'DrainTimerFired', token });
        }, a.inMs);
        return undefined;
      }
      case 'ClearDrain':
        this.#drainTimer?.cancel();
        this.#drainTimer = undefined;
        return undefined;
      case 'AbortRequests':
        this.#abort.abort(new Error('session stopped'));
        return undefined;
      case 'Release':
        return this.#requests.releaseLease(
          a.token,
          a.handedOver === true ? 'Released Lease at the end of a planned handover' : 'Released Lease',
          signal,
          // Written as Released: the chart's agent admission policy (and test/safety/agent-policy.yaml)
          // lets an agent clear its holder only with release kind Released. The controller tells
          // the handover by its own mark on the Lease (decide-handover.ts handoverTarget).
          'Released',
        );
      case 'GiveBack':
        this.#requests.giveBack(a.token, a.budgetMs);
        return undefined;
      case 'Emit': {
        const { event, notice } = announce(a, log, lock);
        if (notice !== undefined) this.#notify(notice);
        if (event !== undefined) this.#emit(event);
        return undefined;
      }
      case 'Report':
        logReport(a, log, lock);
        return undefined;
    }
  }

  #clearTimers(): void {
    this.#renewTimer?.cancel();
    this.#deadlineTimer?.cancel();
    this.#renewTimer = undefined;
    this.#deadlineTimer = undefined;
  }

  #notify(e: HandoverNotice): void {
    for (const l of this.#noticeListeners) {
      try {
        l(e);
      } catch (err) {
        this.#o.log.error({ err }, 'Handover listener failed');
      }
    }
  }

  #emit(e: LockEvent): void {
    for (const l of this.#listeners) {
      try {
        l(e);
      } catch (err) {
        this.#o.log.error({ err }, 'Lock event listener failed');
      }
    }
  }
}

/** namesSelf: the Lease's holder is this pod incarnation. */
function namesSelf(lease: V1Lease, self: HolderRef): boolean {
  return sameHolder(viewOf(lease).view.record?.holder, self);
}

/** seen is the LeaseSeen event of a Lease from the watch. */
function seen(lease: V1Lease): SessionEvent {
  const { view, parseError } = viewOf(lease);
  return { type: 'LeaseSeen', lease: view, ...(parseError !== undefined ? { parseError } : {}) };
}
