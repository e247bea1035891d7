/**
 * The Lease requests of a LockSession (session.ts): the renew, the re-read after a conflict, the
 * release and the hand-back of an ended term. Each is bounded (a budget, the session's stop) and
 * feeds its answer back to the session's machine as an event; none decides anything.
 */
import { parseLease, releasedLease, renewedLease } from '../lease/record.ts';
import type { Logger } from '../observability/logger.ts';
import type { HolderRef } from '../protocol/holder.ts';
import type { TimerClock } from '../runtime/clock.ts';
import { isConflict, isNotFound } from '../runtime/errors.ts';
import type { LeaseClient } from '../runtime/leaderelection.ts';
import {
  namesTerm,
  viewOf,
  type LeaseView,
  type RenewFailure,
  type SessionAction,
  type SessionEvent,
} from './session-state.ts';

/** SessionHost is what the requests need of their session. */
export interface SessionHost {
  readonly namespace: string;
  readonly lock: string;
  readonly self: HolderRef;
  readonly log: Logger;
  /** clock: the session's (conservative) clock. */
  readonly clock: TimerClock;
  readonly leases: LeaseClient;
  /** stopped aborts when the session stops (AbortRequests). */
  readonly stopped: AbortSignal;
  /** followed: the name of the Lease the session follows now. */
  followed(): string;
  /** lease: the machine's newest Lease. */
  lease(): LeaseView | undefined;
  /** step feeds an event to the machine and performs its actions. */
  step(event: SessionEvent): void;
  /** stepAndWait is step for an event whose awaited actions (a release, a re-read) the caller waits for. */
  stepAndWait(event: SessionEvent, signal?: AbortSignal): Promise<void>;
}

/** SessionRequests sends a session's Lease requests; see the module comment. */
export class SessionRequests {
  readonly #h: SessionHost;

  constructor(host: SessionHost) {
    this.#h = host;
  }

  /** renew sends one renew, bounded by its budget and by stop, and feeds the answer back. */
  async renew(a: Extract<SessionAction, { type: 'SendRenew' }>): Promise<void> {
    const clock = this.#h.clock;
    const ac = new AbortController();
    const timeout = clock.setTimeout(() => {
      ac.abort(new Error('renew timed out'));
    }, a.budgetMs);
    const onStop = (): void => {
      ac.abort(new Error('stopped'));
    };
    this.#h.stopped.addEventListener('abort', onStop, { once: true });
    try {
      let answer: SessionEvent;
      try {
        const stored = await this.#h.leases.replace(
          this.#h.namespace,
          a.lease.metadata?.name ?? this.#h.followed(),
          renewedLease(a.lease, clock.now()),
          { signal: ac.signal },
        );
        answer = { type: 'RenewAnswered', request: a.request, stored: viewOf(stored).view };
      } catch (err) {
        answer = { type: 'RenewFailed', request: a.request, failure: failureOf(err), err };
      }
      // A conflict re-reads the Lease under the same budget before this request is done with.
      await this.#h.stepAndWait(answer, ac.signal);
    } finally {
      timeout.cancel();
      this.#h.stopped.removeEventListener('abort', onStop);
    }
  }

  /** readLease re-reads the Lease after a renew conflicted (ReadLease). */
  async readLease(signal: AbortSignal): Promise<void> {
    let answer: SessionEvent;
    try {
      const fresh = await this.#h.leases.get(this.#h.namespace, this.#h.followed(), { signal });
      if (fresh === undefined) answer = { type: 'LeaseRead', lease: undefined };
      else {
        const { view, parseError } = viewOf(fresh);
        answer = { type: 'LeaseRead', lease: view, ...(parseError !== undefined ? { parseError } : {}) };
      }
    } catch {
      answer = { type: 'LeaseReadFailed' }; // the renew is retried
    }
    this.#h.step(answer);
  }

  /**
   * giveBack hands an ended term back (GiveBack): best effort within its budget, so that a
   * request hung in a partition does not block the next hand-back; if it fails, the controller
   * expires the Lease after its duration anyway.
   */
  giveBack(token: bigint, budgetMs: number): void {
    const ac = new AbortController();
    const timeout = this.#h.clock
      .setTimeout(() => {
        ac.abort(new Error('hand-back timed out'));
      }, budgetMs)
      .unref();
    this.releaseLease(token, 'Handed back a lost term', ac.signal)
      .catch((err: unknown) => {
        this.#h.log.info(
          { lock: this.#h.lock, token: token.toString(), err },
          'Failed to hand back a lost term; the Lease will expire',
        );
      })
      .finally(() => {
        timeout.cancel();
        this.#h.step({ type: 'GiveBackDone' });
      });
  }

  /** releaseLease compare-and-swaps the holder away if the Lease still names this pod with `token`. */
  async releaseLease(
    token: bigint,
    logMessage: string,
    signal?: AbortSignal,
    kind: 'Released' | 'HandedOver' = 'Released',
  ): Promise<void> {
    const opts = signal !== undefined ? { signal } : undefined;
    // The Lease of the term: the machine's newest (its name), else the one followed now.
    const name = this.#h.lease()?.object.metadata?.name ?? this.#h.followed();
    for (let attempt = 0; attempt < 5; attempt++) {
      const lease = attempt === 0 ? this.#h.lease()?.object : await this.#h.leases.get(this.#h.namespace, name, opts);
      if (lease === undefined) return;
      if (!namesTerm(parseLease(lease), this.#h.self, token)) return; // no longer ours: nothing to release
      try {
        const stored = await this.#h.leases.replace(this.#h.namespace, name, releasedLease(lease, kind), opts);
        this.#h.step({ type: 'ReleaseAnswered', lease: viewOf(stored).view });
        this.#h.log.info({ lock: this.#h.lock, token: token.toString() }, logMessage);
        return;
      } catch (err) {
        if (isNotFound(err)) return;
        if (!isConflict(err)) throw new Error(`Failed to release Lease ${name}`, { cause: err });
      }
    }
  }
}

function failureOf(err: unknown): RenewFailure {
  if (isConflict(err)) return 'conflict';
  if (isNotFound(err)) return 'notFound';
  return 'other';
}
