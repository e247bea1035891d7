/**
 * LockSession — the holder's side of the protocol for one lock (DESIGN "The protocol", steps 2–4),
 * shared by the `fencepost agent` sidecar, `fencepost exec` and the `acquire()` library.
 *
 * Safety rules, each enforced here:
 * - Validity is counted from the monotonic time a renew request was SENT: after a successful
 *   renew sent at t_s the lock is held until t_s + renewDeadline (renewDeadline < lease duration,
 *   so it passes before the controller, which counts from when it SAW the renewal, can expire it).
 * - A grant seen on the watch is not trusted until the agent's own first renew of it succeeds:
 *   a grant delivered late (a pause, a slow watch) can never start a term that is already over.
 * - Every renew and release is a compare-and-swap on the resourceVersion and is sent only while
 *   the Lease names this pod incarnation (name and UID) with the term's token.
 * - `held` is re-checked against the clock on every read, not only by timers, so a process that
 *   was paused past its deadline reports the loss the moment it runs again.
 * - A renew request is bounded by the time left in the term; failed renews are retried until the
 *   deadline (riding out API-server blips), then the lock is declared lost.
 * - A term that ended here (lost or released) is never taken up again, even if the Lease still
 *   names this pod with its token once the API server answers again: only a grant with a larger
 *   token starts a new term (docs/safety.md T11: after a step-down, never the old token again). A lost
 *   term the Lease still names is handed back (a released Lease), so the controller does not have
 *   to wait out the lease to grant the next term.
 */
import type { KubeConfig, V1Lease } from '@kubernetes/client-node';
import { CoordinationV1Api } from '@kubernetes/client-node';
import { leaseClientFrom, type LeaseClient } from '../kube/leases.ts';
import { parseLease, releasedLease, renewedLease, type LockRecord } from '../lease/record.ts';
import type { Logger } from '../observability/logger.ts';
import { sameHolder, type HolderRef } from '../protocol/holder.ts';
import { leaseName, lockLabelSelector } from '../protocol/names.ts';
import { termTimingsOf, type TermTimings } from '../protocol/timings.ts';
import type { Timer, TimerClock } from '../runtime/clock.ts';
import { isConflict, isNotFound } from '../runtime/errors.ts';
import { superviseInformer, type SupervisedInformer } from '../runtime/informer.ts';
import { MutexRequests } from './mutex-requests.ts';

/** LockState: waiting (not the holder), confirming (granted, first renew in flight), held, lost, released, stopped. */
export type LockState = 'waiting' | 'confirming' | 'held' | 'lost' | 'released' | 'stopped';

/** LockSnapshot is what the agent's HTTP API returns for a lock. Tokens are decimal strings. */
export interface LockSnapshot {
  readonly lock: string;
  readonly held: boolean;
  readonly token: string | undefined;
  /** holder: the Lease's holder pod name, whoever it is. */
  readonly holder: string | undefined;
  /** expiresInMs: for a held lock, the time left before this agent stops trusting it. */
  readonly expiresInMs: number | undefined;
  readonly state: LockState;
}

/** LockEvent is one change of a session, in order. */
export interface LockEvent {
  readonly type: 'granted' | 'renewed' | 'lost' | 'released';
  readonly lock: string;
  readonly token: string;
  readonly reason?: string;
  /** expiresInMs: for granted/renewed, the new time left. */
  readonly expiresInMs?: number;
}

/** LockSessionOptions configures a session. */
export interface LockSessionOptions {
  readonly kc: KubeConfig;
  readonly namespace: string;
  readonly lock: string;
  /** self is this pod incarnation (downward API POD_NAME and POD_UID). */
  readonly self: HolderRef;
  readonly clock: TimerClock;
  readonly log: Logger;
  /** leases overrides the Lease client (tests); defaults to one made from kc. */
  readonly leases?: LeaseClient;
  /** random for renew jitter; defaults to Math.random. */
  readonly random?: () => number;
  /**
   * leaseInformer overrides the watch of the lock's Lease (tests: the model-based race test feeds
   * Lease changes itself); defaults to a supervised informer made from kc.
   */
  readonly leaseInformer?: LeaseInformer;
}

/** LeaseInformer is the part of a Lease informer a session uses. */
export type LeaseInformer = Pick<SupervisedInformer<V1Lease>, 'start' | 'get' | 'onChange' | 'stop'>;

interface Term {
  readonly token: bigint;
  validUntilMs: number;
  readonly leaseDurationMs: number;
  readonly renewDeadlineMs: number;
  readonly renewPeriodMs: number;
}

/** GIVE_BACK_TIMEOUT_MS bounds one hand-back of an ended term (its Lease then expires instead). */
const GIVE_BACK_TIMEOUT_MS = 5000;

/** RETRY_MS bounds how often a failing renew is retried within the deadline. */
const RETRY_MIN_MS = 50;

/** LockSession tracks and renews one lock for one pod incarnation. */
export class LockSession {
  readonly #o: LockSessionOptions;
  readonly #leases: LeaseClient;
  readonly #informer: LeaseInformer;
  /** #mutex is the pod-annotation side of the lock (Mutex requests, run completion). */
  readonly #mutex: MutexRequests;
  readonly #listeners = new Set<(e: LockEvent) => void>();
  #lease: V1Lease | undefined;
  #term: Term | undefined;
  #confirming: bigint | undefined;
  #state: LockState = 'waiting';
  #renewTimer: Timer | undefined;
  #deadlineTimer: Timer | undefined;
  #inFlight: Promise<void> | undefined;
  #kickAgain = false;
  #stopping = false;
  #abort = new AbortController();
  #lastTimings: TermTimings | undefined;
  /** #endedToken: the largest token of a term that ended here; a grant must carry a larger one. */
  #endedToken: bigint | undefined;
  /** #givingBack: a hand-back is under way (single flight). */
  #givingBack = false;

  constructor(o: LockSessionOptions) {
    this.#o = o;
    this.#leases = o.leases ?? leaseClientFrom(o.kc.makeApiClient(CoordinationV1Api));
    this.#informer = o.leaseInformer ?? leaseInformerOf(o);
    this.#mutex = new MutexRequests(o);
    this.#informer.onChange((lease, kind) => {
      if (lease.metadata?.name !== leaseName(o.lock)) return;
      if (kind === 'delete') {
        this.#onLeaseGone();
        return;
      }
      this.#observe(lease);
    });
  }

  /** start begins watching the lock's Lease; resolves once the watch has synced. */
  async start(): Promise<void> {
    await this.#informer.start();
    const current = this.#informer.get(this.#o.namespace, leaseName(this.#o.lock));
    if (current !== undefined) this.#observe(current);
  }

  /** onEvent subscribes to changes; returns the unsubscribe function. Listeners must not throw. */
  onEvent(listener: (e: LockEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }

  /** snapshot is the current state; it first checks the term's deadline against the clock. */
  snapshot(): LockSnapshot {
    this.#checkDeadline();
    const rec = this.#record();
    const term = this.#term;
    const held = this.#state === 'held' && term !== undefined;
    return {
      lock: this.#o.lock,
      held,
      token: held ? term.token.toString() : undefined,
      holder: rec?.holder?.name,
      expiresInMs: held ? Math.max(0, Math.floor(term.validUntilMs - this.#o.clock.monotonicMs())) : undefined,
      state: this.#state,
    };
  }

  /**
   * request asks for the lock in Mutex mode: the pod's request annotation (now, to the ms) and
   * the run id, if any. The controller grants requesters first come, first served. Harmless in
   * Election mode, where every Ready candidate may be granted anyway.
   */
  request(runId?: string): Promise<void> {
    return this.#mutex.request(runId);
  }

  /** withdraw removes the request (Mutex mode), so that the pod is not granted again. */
  withdraw(): Promise<void> {
    return this.#mutex.withdraw();
  }

  /** complete reports a run id done (the controller records it in status.completedRuns). */
  complete(runId: string): Promise<void> {
    return this.#mutex.complete(runId);
  }

  /**
   * runCompleted: whether some holder's report of runId is recorded in the lock's
   * status.completedRuns (the controller's record; a report still only on a pod annotation does
   * not count yet). A lock without its DistributedLock has no completed runs.
   */
  runCompleted(runId: string): Promise<boolean> {
    return this.#mutex.runCompleted(runId);
  }

  /** termTimings: the current or last term's timings (undefined before the first grant). */
  termTimings(): TermTimings | undefined {
    return this.#lastTimings;
  }

  /** heldToken returns the token while the lock is validly held, else undefined (checks the clock). */
  heldToken(): bigint | undefined {
    this.#checkDeadline();
    return this.#state === 'held' ? this.#term?.token : undefined;
  }

  /**
   * release gives the lock up: the session stops trusting the term first (so the application
   * stops writing), then compare-and-swaps the holder away if the Lease still names this pod and
   * token. Idempotent; a lock not held is a no-op.
   */
  async release(): Promise<void> {
    const term = this.#term;
    if (term === undefined) return;
    this.#endTerm('released', 'released by the holder');
    await this.#releaseLease(term.token, 'Released Lease');
  }

  /** #releaseLease compare-and-swaps the holder away if the Lease still names this pod with `token`. */
  async #releaseLease(token: bigint, logMessage: string, signal?: AbortSignal): Promise<void> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const lease =
        attempt === 0
          ? this.#lease
          : await this.#leases.get(
              this.#o.namespace,
              leaseName(this.#o.lock),
              signal !== undefined ? { signal } : undefined,
            );
      if (lease === undefined) return;
      const rec = parseLease(lease);
      if (!sameHolder(rec.holder, this.#o.self) || rec.token !== token) return; // no longer ours: nothing to release
      try {
        this.#lease = await this.#leases.replace(
          this.#o.namespace,
          leaseName(this.#o.lock),
          releasedLease(lease, 'Released'),
          signal !== undefined ? { signal } : undefined,
        );
        this.#o.log.info({ lock: this.#o.lock, token: token.toString() }, logMessage);
        return;
      } catch (err) {
        if (isNotFound(err)) return;
        if (!isConflict(err)) throw new Error(`Failed to release Lease ${leaseName(this.#o.lock)}`, { cause: err });
      }
    }
  }

  /**
   * #giveBack hands an ended term back once the Lease is seen naming it again: best effort, one
   * flight at a time (if it fails, the controller expires the Lease after its duration anyway).
   */
  #giveBack(token: bigint): void {
    // Not while stopping: stop() leaves the Lease to expire, as documented.
    if (this.#givingBack || this.#stopping || (this.#state !== 'lost' && this.#state !== 'released')) return;
    this.#givingBack = true;
    // Bounded, so that a request hung in a partition does not block the next hand-back.
    const ac = new AbortController();
    const timeout = this.#o.clock
      .setTimeout(() => {
        ac.abort(new Error('hand-back timed out'));
      }, GIVE_BACK_TIMEOUT_MS)
      .unref();
    this.#releaseLease(token, 'Handed back a lost term', ac.signal)
      .catch((err: unknown) => {
        this.#o.log.info(
          { lock: this.#o.lock, token: token.toString(), err },
          'Failed to hand back a lost term; the Lease will expire',
        );
      })
      .finally(() => {
        timeout.cancel();
        this.#givingBack = false;
      });
  }

  /** stop ends watching and renewing without releasing (the lease then expires on the server). */
  async stop(): Promise<void> {
    this.#stopping = true;
    if (this.#term !== undefined) this.#endTerm('lost', 'session stopped');
    this.#state = 'stopped';
    this.#abort.abort(new Error('session stopped'));
    this.#clearTimers();
    await this.#informer.stop();
    await this.#inFlight;
  }

  // --- internals ---

  /** #endedHere: a term with this token (or a smaller one) already ended in this session. */
  #endedHere(token: bigint): boolean {
    return this.#endedToken !== undefined && token <= this.#endedToken;
  }

  /** #ended re-reads the state after an await (it may have changed meanwhile). */
  #ended(): boolean {
    return this.#state === 'stopped' || this.#state === 'released';
  }

  #record(): LockRecord | undefined {
    if (this.#lease === undefined) return undefined;
    try {
      return parseLease(this.#lease);
    } catch {
      return undefined;
    }
  }

  /** #observe takes the newest Lease (by resourceVersion) and reacts to its holder. */
  #observe(lease: V1Lease): void {
    if (this.#state === 'stopped') return;
    if (this.#lease !== undefined && rvOf(lease) < rvOf(this.#lease)) return; // an older event than what we wrote
    this.#lease = lease;
    let rec: LockRecord;
    try {
      rec = parseLease(lease);
    } catch (err) {
      this.#o.log.error({ err, lock: this.#o.lock }, 'Failed to parse Lease');
      return;
    }
    const ours = sameHolder(rec.holder, this.#o.self) && rec.token !== undefined;
    const term = this.#term;
    if (term !== undefined) {
      this.#checkDeadline();
      if (this.#term === undefined) return;
      if (!ours) {
        this.#endTerm('lost', rec.holder !== undefined ? `granted to ${rec.holder.name}` : 'revoked');
        return;
      }
      if (rec.token !== term.token) {
        this.#endTerm('lost', `superseded by token ${String(rec.token)}`);
      } else return;
    }
    if (ours && rec.token !== undefined && this.#endedHere(rec.token)) {
      // A term that ended here: never confirmed again, whatever the Lease says (see the header).
      this.#confirming = undefined;
      if (this.#state === 'confirming') this.#state = 'waiting';
      this.#giveBack(rec.token);
    } else if (ours && rec.token !== undefined && this.#confirming !== rec.token) {
      this.#confirming = rec.token;
      this.#state = 'confirming';
      this.#kick();
    } else if (!ours && this.#state !== 'released') {
      this.#confirming = undefined;
      if (this.#state === 'confirming') this.#state = 'waiting';
    }
  }

  #onLeaseGone(): void {
    this.#lease = undefined;
    this.#confirming = undefined;
    if (this.#term !== undefined) this.#endTerm('lost', 'Lease deleted');
    else if (this.#state === 'confirming') this.#state = 'waiting';
  }

  /** #kick runs a renew now unless one is in flight (single flight). */
  #kick(): void {
    if (this.#state === 'stopped') return;
    // A kick while a renew is out (a new grant seen meanwhile) runs once that one is done.
    if (this.#inFlight !== undefined) {
      this.#kickAgain = true;
      return;
    }
    this.#inFlight = this.#renew().finally(() => {
      this.#inFlight = undefined;
      if (this.#kickAgain) {
        this.#kickAgain = false;
        this.#kick();
      }
    });
  }

  async #renew(): Promise<void> {
    const { clock, log } = this.#o;
    for (;;) {
      if (this.#state === 'stopped' || this.#state === 'released') return;
      const lease = this.#lease;
      const rec = this.#record();
      const token = this.#term?.token ?? this.#confirming;
      if (
        lease === undefined ||
        rec === undefined ||
        token === undefined ||
        !sameHolder(rec.holder, this.#o.self) ||
        rec.token !== token
      )
        return;
      // The term's timings as the Lease fixed them at grant (the agent does not read the lock's spec).
      const timings = termTimingsOf(rec);
      const deadlineMs = timings.renewDeadlineMs;
      const periodMs = timings.renewPeriodMs;
      const sentAt = clock.monotonicMs();
      // Bound the request by what is left of the term (or, confirming, by one deadline).
      const budget = this.#term !== undefined ? this.#term.validUntilMs - sentAt : deadlineMs;
      if (budget <= 0) {
        this.#checkDeadline();
        return;
      }
      const ac = new AbortController();
      const timeout = clock.setTimeout(() => {
        ac.abort(new Error('renew timed out'));
      }, budget);
      const onStop = (): void => {
        ac.abort(new Error('stopped'));
      };
      this.#abort.signal.addEventListener('abort', onStop, { once: true });
      try {
        const stored = await this.#leases.replace(
          this.#o.namespace,
          leaseName(this.#o.lock),
          renewedLease(lease, clock.now()),
          { signal: ac.signal },
        );
        // Keep the newest Lease: the watch may already have delivered a later version.
        if (this.#lease === undefined || rvOf(stored) >= rvOf(this.#lease)) this.#lease = stored;
        if (this.#ended()) return; // stopped or released while the request was out
        this.#onRenewed(token, sentAt, timings.leaseDurationMs, deadlineMs, periodMs);
        return;
      } catch (err) {
        if (this.#ended()) return;
        if (isConflict(err)) {
          // Someone wrote the Lease: re-read and go on only if it is still ours.
          try {
            const fresh = await this.#leases.get(this.#o.namespace, leaseName(this.#o.lock), { signal: ac.signal });
            if (fresh === undefined) {
              this.#onLeaseGone();
              return;
            }
            this.#observe(fresh);
          } catch {
            /* retried below */
          }
          continue;
        }
        if (isNotFound(err)) {
          this.#onLeaseGone();
          return;
        }
        log.info({ lock: this.#o.lock, err }, 'Failed to renew Lease; retrying');
        this.#checkDeadline();
        if (this.#term === undefined && this.#state !== 'confirming') return;
        await delay(clock, Math.max(RETRY_MIN_MS, Math.min(periodMs / 4, 500)));
      } finally {
        timeout.cancel();
        this.#abort.signal.removeEventListener('abort', onStop);
      }
    }
  }

  #onRenewed(token: bigint, sentAt: number, leaseMs: number, deadlineMs: number, periodMs: number): void {
    const validUntilMs = sentAt + deadlineMs;
    const now = this.#o.clock.monotonicMs();
    if (validUntilMs <= now) {
      this.#checkDeadline();
      return;
    } // the reply came too late to trust
    if (this.#term === undefined && this.#endedHere(token)) {
      // A renew sent before the term's deadline, answered after it: the term is over all the same.
      this.#giveBack(token);
      return;
    }
    if (this.#term === undefined) {
      this.#term = {
        token,
        validUntilMs,
        leaseDurationMs: leaseMs,
        renewDeadlineMs: deadlineMs,
        renewPeriodMs: periodMs,
      };
      this.#lastTimings = { leaseDurationMs: leaseMs, renewDeadlineMs: deadlineMs, renewPeriodMs: periodMs };
      this.#confirming = undefined;
      this.#state = 'held';
      this.#o.log.info({ lock: this.#o.lock, token: token.toString() }, 'Acquired lock');
      this.#emit({ type: 'granted', lock: this.#o.lock, token: token.toString(), expiresInMs: validUntilMs - now });
    } else {
      this.#term.validUntilMs = validUntilMs;
      this.#emit({ type: 'renewed', lock: this.#o.lock, token: token.toString(), expiresInMs: validUntilMs - now });
    }
    this.#clearTimers();
    const jitter = 1 - 0.1 * (this.#o.random ?? Math.random)();
    this.#renewTimer = this.#o.clock.setTimeout(
      () => {
        this.#kick();
      },
      Math.max(1, periodMs * jitter),
    );
    this.#deadlineTimer = this.#o.clock.setTimeout(
      () => {
        this.#checkDeadline();
      },
      Math.max(1, validUntilMs - now),
    );
  }

  /** #checkDeadline ends the term if its local deadline has passed (timers may fire late after a pause). */
  #checkDeadline(): void {
    const term = this.#term;
    if (term !== undefined && this.#o.clock.monotonicMs() >= term.validUntilMs)
      this.#endTerm('lost', 'renew deadline passed');
  }

  #endTerm(state: 'lost' | 'released', reason: string): void {
    const term = this.#term;
    this.#term = undefined;
    this.#confirming = undefined;
    this.#clearTimers();
    this.#state = state;
    if (term === undefined) return;
    this.#endedToken = term.token; // larger than any before: a term only starts with a token not #endedHere
    this.#o.log.info(
      { lock: this.#o.lock, token: term.token.toString(), reason },
      state === 'lost' ? 'Lost lock' : 'Released lock',
    );
    this.#emit({ type: state, lock: this.#o.lock, token: term.token.toString(), reason });
    if (state === 'lost') {
      // A new grant to us (a larger token) starts a new term through #observe; a Lease that still
      // names the lost term is handed back there.
      const rec = this.#record();
      if (rec !== undefined && sameHolder(rec.holder, this.#o.self)) this.#observe(this.#lease as V1Lease);
    }
  }

  #clearTimers(): void {
    this.#renewTimer?.cancel();
    this.#deadlineTimer?.cancel();
    this.#renewTimer = undefined;
    this.#deadlineTimer = undefined;
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

/** leaseInformerOf watches the Leases labelled with the lock (the session picks its own by name). */
function leaseInformerOf(o: LockSessionOptions): LeaseInformer {
  const api = o.kc.makeApiClient(CoordinationV1Api);
  const labelSelector = lockLabelSelector(o.lock);
  return superviseInformer<V1Lease>({
    name: `lease:${o.lock}`,
    kc: o.kc,
    clock: o.clock,
    log: o.log,
    labelSelector,
    path: `/apis/coordination.k8s.io/v1/namespaces/${o.namespace}/leases`,
    list: () => api.listNamespacedLease({ namespace: o.namespace, labelSelector }),
  });
}

function rvOf(l: V1Lease): bigint {
  const rv = l.metadata?.resourceVersion ?? '0';
  return /^[0-9]+$/.test(rv) ? BigInt(rv) : 0n;
}

function delay(clock: TimerClock, ms: number): Promise<void> {
  return new Promise((resolve) => {
    clock.setTimeout(resolve, ms).unref();
  });
}
