/**
 * Leader election among the controller's own replicas over a coordination.k8s.io/v1 Lease: a port
 * of client-go's `tools/leaderelection` with its `LeaseLock`.
 *
 * WARNING: leader election does not provide fencing. Two replicas may both believe they lead for a
 * while: a leader that is paused (GC, SIGSTOP, a frozen VM) or cut off from the API server keeps
 * believing it leads until its own renew deadline passes, and its last requests may still reach the
 * API server after a successor took over. Nothing here stops those requests. Anything that must not
 * run twice has to be protected by the resource it touches: a compare-and-swap on a resourceVersion
 * (what every fencepost grant is), or a fencing token checked by the resource.
 *
 * The model, as in client-go:
 * - *Observed time.* A candidate never compares the Lease's `renewTime` with its own clock (the
 *   holder's wall clock wrote it). It remembers the record it last saw (holderIdentity,
 *   leaseDurationSeconds, acquireTime, renewTime, leaseTransitions) and, on its own monotonic clock,
 *   when it first saw that value. The lease counts as expired only when that record has not
 *   changed for a full lease duration of the candidate's own time. So a restarted candidate waits
 *   a full duration before taking over, clock offsets between nodes do not matter, and wall-clock
 *   steps do not matter; only a difference in clock *rates* does, and `leaseDurationMs /
 *   renewDeadlineMs` is the ratio of rates tolerated.
 * - *Compare-and-swap.* Every write is a replace carrying the resourceVersion it was built from (or a
 *   create, which fails if the Lease exists). A 409 means another writer won: the elector re-reads
 *   on its next attempt. The leader first tries a fast path with the resourceVersion of its own last
 *   write, and only re-reads the Lease when that fails.
 * - *Stepping down.* The term is the holder core's (holder.ts), as for the agent and the stores:
 *   a renewal (or the acquire) that succeeded holds the term until `renewDeadlineMs` after the
 *   moment it was SENT. Renewals go out every `retryPeriodMs`; a failed one is retried every
 *   `retryPeriodMs` (from its send) within the term, an attempt still in flight at the deadline is
 *   abandoned, and at the deadline the leader stops leading (aborts the signal given to
 *   `onStartedLeading`, then calls `onStoppedLeading`). `renewDeadlineMs < leaseDurationMs` is what
 *   makes the old leader stop before others expire its lease, given equal clock rates: others count
 *   the lease from when they saw the renewal, which was after it was sent.
 *
 * Where this port differs from client-go, and why:
 * - The renew deadline counts from the send of the last successful renewal, not from the start of
 *   the round that fails (client-go's `renewDeadline` starts a `retryPeriod` after that success,
 *   so its leader may believe up to `retryPeriod + renewDeadline` after it; here at most
 *   `renewDeadline`, so `retryPeriod + renewDeadline < leaseDuration` is no longer needed).
 * - A leader that reads the Lease and finds another holder steps down at once, instead of retrying
 *   until the renew deadline (it is certainly no longer the leader).
 * - After losing the lease (renew deadline, or another holder) it never releases it: the workers it
 *   is stopping may still be running. Only a cancel of `run()` with `releaseOnCancel` releases.
 * - `onStoppedLeading` is called once per term, and only if `onStartedLeading` was called (client-go
 *   also calls it when `run` is cancelled before ever leading).
 * - `leaseDurationSeconds` is written rounded up to whole seconds, and a candidate waits for the
 *   longer of its own `leaseDurationMs` and the record's `leaseDurationSeconds` (client-go truncates
 *   the seconds and, in current versions, trusts the record alone).
 * - The first renew happens `retryPeriodMs` after acquiring (client-go renews at once, a write that
 *   changes nothing).
 * - A release that gets a 409 re-reads the Lease once and releases it if it still names this
 *   replica (a renewal abandoned by the cancel may have landed on the server after all, leaving the
 *   cached resourceVersion stale; client-go then leaves the Lease to expire).
 * - Acquire attempts and the release are bounded by `renewDeadlineMs` too, so that a request that
 *   never answers cannot stall the elector (client-go relies on the HTTP client's timeout).
 *
 * Why this file is longer than ~450 lines: what is left here is the elector's Lease protocol as
 * one unit over the LeaseClient seam (campaign, acquire-or-renew with its fast path, create,
 * take-over, release with its one re-read) and the list above; the term is election-term.ts, the
 * configuration leaderelection-config.ts, the record comparison election-record.ts.
 */
import { MicroTime } from './micro-time.ts';
import type { V1Lease, V1LeaseSpec } from '@kubernetes/client-node';
import { sleep } from './clock.ts';
import type { TimerClock } from './clock.ts';
import { recordOf, renewTimeAfter, sameRecord, type ElectionRecord } from './election-record.ts';
import { isAlreadyExists, isConflict } from './errors.ts';
import { leadTerm, type AttemptResult, type StopReason } from './election-term.ts';
import {
  DEFAULT_LEASE_DURATION_MS,
  DEFAULT_RENEW_DEADLINE_MS,
  DEFAULT_RETRY_PERIOD_MS,
  JITTER_FACTOR,
  NOOP_LOGGER,
  validateLeaderElectionConfig,
  type LeaderCallbacks,
  type LeaderElectionConfig,
  type LeaderElectionLogger,
} from './leaderelection-config.ts';

/** LeaseRequestOptions are per-request options for a {@link LeaseClient}. */
export interface LeaseRequestOptions {
  /** signal aborts the request; the call should then reject promptly (the elector stops waiting regardless). */
  readonly signal?: AbortSignal;
}

/**
 * LeaseClient is the part of the coordination.k8s.io/v1 API the elector (and the agent's session)
 * needs: the port, defined here so that runtime/ depends on nothing of ours. `leaseRequests` in
 * src/transport/resources.ts is the one over the API client; unit tests fake it.
 *
 * Contract: `get` resolves `undefined` for a Lease that does not exist (404) and rejects on every
 * other failure. `create` rejects with a 409 (reason AlreadyExists) when the Lease exists.
 * `replace` is a compare-and-swap: it must reject with a 409 (reason Conflict) when the
 * `metadata.resourceVersion` of `lease` is not the stored one. Errors are the transport's
 * `ApiError`s or anything else {@link isConflict}/{@link isAlreadyExists} understand. Every call
 * resolves to the Lease as stored (with its new resourceVersion).
 */
export interface LeaseClient {
  get(namespace: string, name: string, options?: LeaseRequestOptions): Promise<V1Lease | undefined>;
  create(namespace: string, lease: V1Lease, options?: LeaseRequestOptions): Promise<V1Lease>;
  replace(namespace: string, name: string, lease: V1Lease, options?: LeaseRequestOptions): Promise<V1Lease>;
}

/**
 * LeaderElector runs leader election for one replica; see the module comment for the model.
 *
 * Guarantees: every Lease write is a compare-and-swap; a candidate takes over a held Lease only
 * after `leaseDurationMs` of its own monotonic time without a change of the record; the leader steps
 * down (aborting the `onStartedLeading` signal, then calling `onStoppedLeading` once) when no
 * renewal succeeded within `renewDeadlineMs` of its send, or it sees another holder; a release is a compare-and-swap that
 * succeeds only while the Lease still names this replica.
 *
 * Assumptions: clocks of the replicas run at about the same rate; identities are unique.
 *
 * Caveats: not fencing (see the module comment). API errors never reject `run()`: they are logged
 * and retried, and a leader that cannot renew steps down.
 */
export class LeaderElector {
  readonly #leases: LeaseClient;
  readonly #namespace: string;
  readonly #name: string;
  readonly #identity: string;
  readonly #leaseDurationMs: number;
  readonly #renewDeadlineMs: number;
  readonly #retryPeriodMs: number;
  readonly #clock: TimerClock;
  readonly #releaseOnCancel: boolean;
  readonly #log: LeaderElectionLogger;
  readonly #random: () => number;
  readonly #callbacks: LeaderCallbacks;
  readonly #fields: Readonly<Record<string, string>>;

  /** #lease is the Lease as last read or written: its resourceVersion is the one the next write expects. */
  #lease: V1Lease | undefined;
  /** #observed is the record last seen; #observedAt is when (monotonic) it was first seen or written. */
  #observed: ElectionRecord | undefined;
  #observedAt = 0;
  #reportedLeader = '';
  #leading = false;
  #started = false;

  /** The constructor validates `config` with {@link validateLeaderElectionConfig} and throws its RangeError. */
  constructor(config: LeaderElectionConfig) {
    validateLeaderElectionConfig(config);
    this.#leases = config.leases;
    this.#namespace = config.namespace;
    this.#name = config.name;
    this.#identity = config.identity;
    this.#leaseDurationMs = config.leaseDurationMs ?? DEFAULT_LEASE_DURATION_MS;
    this.#renewDeadlineMs = config.renewDeadlineMs ?? DEFAULT_RENEW_DEADLINE_MS;
    this.#retryPeriodMs = config.retryPeriodMs ?? DEFAULT_RETRY_PERIOD_MS;
    this.#clock = config.clock;
    this.#releaseOnCancel = config.releaseOnCancel ?? true;
    this.#log = config.log ?? NOOP_LOGGER;
    this.#random = config.random ?? Math.random;
    this.#callbacks = config.callbacks;
    this.#fields = Object.freeze({ lease: `${config.namespace}/${config.name}`, identity: config.identity });
  }

  /**
   * run campaigns until this replica acquires the Lease, calls `onStartedLeading`, renews until the
   * term ends, then resolves. It resolves without leading when `signal` aborts first. It may be
   * called once per elector.
   *
   * On abort while leading: the `onStartedLeading` signal aborts, the Lease is released if
   * `releaseOnCancel` (bounded by `renewDeadlineMs`; a failed release is logged and the Lease then
   * expires), `onStoppedLeading` is called, and the promise resolves. It rejects only when called
   * twice or when a callback throws.
   */
  async run(signal: AbortSignal): Promise<void> {
    if (this.#started) throw new Error('LeaderElector.run was already called; create a new LeaderElector');
    this.#started = true;
    const acquiredAt = await this.#acquire(signal);
    if (acquiredAt === undefined) return;

    const term = new AbortController();
    this.#leading = true;
    let reason = 'Cancelled';
    try {
      this.#callbacks.onStartedLeading(term.signal);
      reason = await this.#lead(signal, acquiredAt);
    } catch (err) {
      reason = 'CallbackFailed';
      throw err;
    } finally {
      this.#leading = false;
      term.abort(new Error('Stopped leading'));
      this.#log.info({ ...this.#fields, reason }, 'Stopped leading');
      if (reason === 'Cancelled' && this.#releaseOnCancel) await this.#release();
      this.#callbacks.onStoppedLeading();
    }
  }

  /**
   * isLeader reports whether this replica is leading right now: true from just before
   * `onStartedLeading` until just before `onStoppedLeading`. (client-go's `IsLeader` instead reports
   * whether the last observed holder is this replica; compare {@link LeaderElector.getLeader} with
   * the identity for that.)
   */
  isLeader(): boolean {
    return this.#leading;
  }

  /** getLeader returns the holder of the Lease as last observed, or `undefined` if none was seen or it was released. */
  getLeader(): string | undefined {
    const holder = this.#observed?.holderIdentity;
    return holder === undefined || holder === '' ? undefined : holder;
  }

  /**
   * healthy is client-go's `Check` for a liveness probe: true unless the last observed holder is this
   * replica and that record was last written or seen more than `leaseDurationMs + toleranceMs` ago.
   * It turns false when a leader is stuck (or stepped down but did not exit), since others may have
   * expired its lease by then. A candidate that does not lead is always healthy. `toleranceMs`
   * defaults to 0.
   */
  healthy(toleranceMs = 0): boolean {
    if (this.#observed?.holderIdentity !== this.#identity) return true;
    return this.#clock.monotonicMs() - this.#observedAt <= this.#leaseDurationMs + toleranceMs;
  }

  /**
   * #acquire tries every retryPeriod (+ jitter) until it holds the Lease, and resolves with the
   * monotonic time the winning attempt was sent (the term counts from it), or undefined when
   * signal aborts first.
   */
  async #acquire(signal: AbortSignal): Promise<number | undefined> {
    this.#log.info(this.#fields, 'Started campaigning for leader Lease');
    while (!signal.aborted) {
      const sentAtMs = this.#clock.monotonicMs();
      const result = await this.#attempt(signal, sentAtMs + this.#renewDeadlineMs, false);
      this.#reportTransition();
      if (result === 'ok') {
        this.#log.info(this.#fields, 'Acquired leader Lease');
        return sentAtMs;
      }
      const jitterMs = this.#random() * JITTER_FACTOR * this.#retryPeriodMs;
      if (!(await this.#pause(this.#retryPeriodMs + jitterMs, signal))) break;
    }
    return undefined;
  }

  /**
   * #lead holds the term that the acquire sent at `sentAtMs` won, on the holder core
   * (election-term.ts), with one attempt per renewal; resolves with why the term ended.
   */
  #lead(signal: AbortSignal, sentAtMs: number): Promise<StopReason> {
    return leadTerm({
      clock: this.#clock,
      renewDeadlineMs: this.#renewDeadlineMs,
      retryPeriodMs: this.#retryPeriodMs,
      sentAtMs,
      signal,
      renew: (deadline) => this.#renewOnce(signal, deadline),
      renewed: () => {
        this.#log.debug(this.#fields, 'Renewed leader Lease');
      },
    });
  }

  /** #renewOnce is one renewal attempt bounded by `deadline`; it reports a change of leader it saw. */
  async #renewOnce(signal: AbortSignal, deadline: number): Promise<AttemptResult> {
    const result = await this.#attempt(signal, deadline, true);
    this.#reportTransition();
    return result;
  }

  /**
   * #attempt runs one tryAcquireOrRenew bounded by `deadline` (monotonic) and by `parent`: when
   * either passes, the requests in flight are aborted and abandoned, and the attempt fails.
   */
  async #attempt(parent: AbortSignal, deadline: number, mustHold: boolean): Promise<AttemptResult> {
    if (parent.aborted) return 'failed';
    const controller = new AbortController();
    const onAbort = (): void => controller.abort(parent.reason);
    parent.addEventListener('abort', onAbort, { once: true });
    const timer = this.#clock.setTimeout(
      () => controller.abort(new DOMException('Leader Lease attempt passed its deadline', 'TimeoutError')),
      deadline - this.#clock.monotonicMs(),
    );
    try {
      return await this.#tryAcquireOrRenew(controller.signal, mustHold);
    } finally {
      timer.cancel();
      parent.removeEventListener('abort', onAbort);
    }
  }

  /**
   * #tryAcquireOrRenew is client-go's tryAcquireOrRenew: one attempt to take or keep the Lease.
   * With `mustHold` (renewing), a Lease found with any other holder means 'lost'.
   */
  async #tryAcquireOrRenew(signal: AbortSignal, mustHold: boolean): Promise<AttemptResult> {
    const now = this.#clock.now();

    // 1. Fast path: the leader renews with the resourceVersion of its own last write.
    const cached = this.#lease;
    if (cached !== undefined && this.#observedIsSelf() && this.#observedIsValid()) {
      try {
        const spec = this.#heldSpec(
          now,
          cached.spec?.acquireTime,
          cached.spec?.leaseTransitions,
          cached.spec?.renewTime,
        );
        this.#observe(
          await this.#call(this.#leases.replace(this.#namespace, this.#name, { ...cached, spec }, { signal }), signal),
          true,
        );
        return 'ok';
      } catch (err) {
        if (signal.aborted) return this.#abandoned();
        this.#log.debug({ ...this.#fields, err }, 'Failed to renew leader Lease with cached resourceVersion');
      }
    }

    // 2. Read the Lease, or create it.
    let current: V1Lease | undefined;
    try {
      current = await this.#call(this.#leases.get(this.#namespace, this.#name, { signal }), signal);
    } catch (err) {
      if (signal.aborted) return this.#abandoned();
      this.#log.error({ ...this.#fields, err }, 'Failed to get leader Lease');
      return 'failed';
    }
    if (current === undefined) {
      const lease: V1Lease = {
        metadata: { name: this.#name, namespace: this.#namespace },
        spec: this.#heldSpec(now, new MicroTime(now.getTime()), 0, undefined),
      };
      try {
        this.#observe(await this.#call(this.#leases.create(this.#namespace, lease, { signal }), signal), true);
        return 'ok';
      } catch (err) {
        if (signal.aborted) return this.#abandoned();
        if (isAlreadyExists(err) || isConflict(err)) {
          this.#log.debug({ ...this.#fields, err }, 'Lost race to create leader Lease');
        } else {
          this.#log.error({ ...this.#fields, err }, 'Failed to create leader Lease');
        }
        return 'failed';
      }
    }

    // 3. Judge the record by when we first saw it, never by its timestamps.
    this.#observe(current, false);
    const holder = this.#observed?.holderIdentity ?? '';
    const self = holder === this.#identity;
    if (mustHold && !self) return 'lost';
    if (holder !== '' && !self && this.#observedIsValid()) {
      this.#log.debug({ ...this.#fields, holder }, 'Found leader Lease held by another candidate');
      return 'failed';
    }

    // 4. Take it over (a new term) or renew it, by compare-and-swap on what we just read.
    const spec = self
      ? this.#heldSpec(now, current.spec?.acquireTime, current.spec?.leaseTransitions, current.spec?.renewTime)
      : this.#heldSpec(
          now,
          new MicroTime(now.getTime()),
          (current.spec?.leaseTransitions ?? 0) + 1,
          current.spec?.renewTime,
        );
    try {
      this.#observe(
        await this.#call(this.#leases.replace(this.#namespace, this.#name, { ...current, spec }, { signal }), signal),
        true,
      );
      return 'ok';
    } catch (err) {
      if (signal.aborted) return this.#abandoned();
      if (isConflict(err)) {
        this.#log.debug({ ...this.#fields, err }, 'Lost race to update leader Lease');
      } else {
        this.#log.error({ ...this.#fields, err }, 'Failed to update leader Lease');
      }
      return 'failed';
    }
  }

  /**
   * #release gives the Lease up (no holder, leaseDurationSeconds 1, same leaseTransitions) by
   * compare-and-swap on this replica's last write. On a 409 it re-reads the Lease once and, if it
   * still names this replica, releases that version: a renew abandoned by the cancel may have landed
   * after all, or someone may have edited labels. Bounded by renewDeadline; failures are logged.
   */
  async #release(): Promise<void> {
    let base = this.#lease;
    if (base === undefined || !this.#observedIsSelf()) return;
    const controller = new AbortController();
    const { signal } = controller;
    const timer = this.#clock.setTimeout(
      () => controller.abort(new DOMException('Leader Lease release passed its deadline', 'TimeoutError')),
      this.#renewDeadlineMs,
    );
    try {
      for (let reread = false; ; reread = true) {
        const now = new MicroTime(this.#clock.now().getTime());
        const spec: V1LeaseSpec = { leaseDurationSeconds: 1, acquireTime: now, renewTime: now };
        const transitions = base.spec?.leaseTransitions;
        if (transitions !== undefined) spec.leaseTransitions = transitions;
        try {
          this.#observe(
            await this.#call(this.#leases.replace(this.#namespace, this.#name, { ...base, spec }, { signal }), signal),
            true,
          );
          this.#reportTransition();
          this.#log.info(this.#fields, 'Released leader Lease');
          return;
        } catch (err) {
          if (!isConflict(err) || reread) throw err;
          this.#log.debug({ ...this.#fields, err }, 'Failed to release leader Lease with cached resourceVersion');
        }
        const current = await this.#call(this.#leases.get(this.#namespace, this.#name, { signal }), signal);
        if (current !== undefined) this.#observe(current, false);
        if (current === undefined || current.spec?.holderIdentity !== this.#identity) {
          this.#reportTransition();
          this.#log.info(
            { ...this.#fields, holder: current?.spec?.holderIdentity },
            'Skipped release of leader Lease held by another candidate',
          );
          return;
        }
        base = current;
      }
    } catch (err) {
      this.#log.error({ ...this.#fields, err }, 'Failed to release leader Lease');
    } finally {
      timer.cancel();
    }
  }

  /** #heldSpec is the spec of a Lease held by this replica, renewed now. */
  #heldSpec(
    now: Date,
    acquireTime: MicroTime | undefined,
    transitions: number | undefined,
    previousRenew: unknown,
  ): V1LeaseSpec {
    const spec: V1LeaseSpec = {
      holderIdentity: this.#identity,
      leaseDurationSeconds: Math.ceil(this.#leaseDurationMs / 1000),
      renewTime: renewTimeAfter(now, previousRenew),
    };
    if (acquireTime !== undefined) spec.acquireTime = acquireTime;
    if (transitions !== undefined) spec.leaseTransitions = transitions;
    return spec;
  }

  /**
   * #observe caches `lease` for the next compare-and-swap and notes the time of the record: always
   * after our own write (as client-go does), otherwise only when the record differs from the last one.
   */
  #observe(lease: V1Lease, wrote: boolean): void {
    this.#lease = lease;
    const record = recordOf(lease);
    if (wrote || this.#observed === undefined || !sameRecord(record, this.#observed)) {
      this.#observed = record;
      this.#observedAt = this.#clock.monotonicMs();
    }
  }

  #observedIsSelf(): boolean {
    return this.#observed?.holderIdentity === this.#identity;
  }

  /** #observedIsValid: the observed record has been unchanged for less than the lease duration (ours or the record's, the longer). */
  #observedIsValid(): boolean {
    const recordMs = (this.#observed?.leaseDurationSeconds ?? 0) * 1000;
    const durationMs = Math.max(this.#leaseDurationMs, recordMs);
    return this.#observedAt + durationMs > this.#clock.monotonicMs();
  }

  #reportTransition(): void {
    const holder = this.#observed?.holderIdentity ?? '';
    if (holder === this.#reportedLeader) return;
    this.#reportedLeader = holder;
    if (holder === '') return;
    this.#log.info({ ...this.#fields, leader: holder }, 'Observed new leader');
    this.#callbacks.onNewLeader?.(holder);
  }

  #abandoned(): AttemptResult {
    this.#log.debug(this.#fields, 'Abandoned leader Lease request at its deadline');
    return 'failed';
  }

  /** #pause sleeps on the elector's clock; false when `signal` aborted. */
  async #pause(ms: number, signal: AbortSignal): Promise<boolean> {
    try {
      await sleep(this.#clock, ms, signal);
      return true;
    } catch (err) {
      if (signal.aborted) return false;
      throw err;
    }
  }

  /**
   * #call settles with `request`, or rejects with the abort reason as soon as `signal` aborts, even if
   * the client ignores the signal (the request is then abandoned; its late outcome is ignored).
   */
  #call<T>(request: Promise<T>, signal: AbortSignal): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const onAbort = (): void => reject(abortReason(signal));
      request.finally(() => signal.removeEventListener('abort', onAbort)).then(resolve, reject);
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    });
  }
}

/** AttemptResult: 'ok' holds the Lease now; 'failed' does not (retry); 'lost' another holder was seen while leading. */

function abortReason(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  return reason instanceof Error ? reason : new Error('Aborted', { cause: reason });
}
