/**
 * HolderLoop — the I/O shell of the holder core (holder.ts) for a holder whose renewal is one
 * request: it keeps the core's state, feeds it events, and performs its effects — the renew and
 * deadline timers, a retry's timer, the renewal (the caller's `renew`, answered back as an
 * event) and the lock events. The stores' hold (stores/hold.ts) and the controller's leader term
 * (election-term.ts) run on it; the agent's Lease session, whose effects include Lease reads,
 * hand-backs and drains, has its own shell (agent/session.ts).
 */
import type { Timer, TimerClock } from './clock.ts';
import {
  heldTerm,
  holderTransition,
  type HolderEffect,
  type HolderEvent,
  type HolderPolicy,
  type HolderState,
  type HolderTimings,
  type RenewRequest,
  type Term,
} from './holder.ts';

/** RenewOutcome is what one renewal came back with. */
export type RenewOutcome =
  | { readonly kind: 'renewed' }
  /** notOurs: the record names another holder or none; `reason` is the loss's. */
  | { readonly kind: 'notOurs'; readonly reason: string }
  /** failed: no answer (a timeout, the network); retried within the term. */
  | { readonly kind: 'failed'; readonly err: unknown };

/** Emit is the core's lock-event effect. */
export type Emit<T extends HolderTimings> = Extract<HolderEffect<T>, { type: 'Emit' }>;

/** HolderLoopOptions configures a {@link HolderLoop}. */
export interface HolderLoopOptions<T extends HolderTimings> {
  /** clock: the term's clock (monotonic time for every decision, its timers). */
  readonly clock: TimerClock;
  readonly policy: HolderPolicy<T>;
  /** state: the core's state to start from (initialHolder(), or a term already granted). */
  readonly state: HolderState<T>;
  /** renew sends one renewal, to be abandoned after `budgetMs`. A rejection ends the loop (onError). */
  renew(request: RenewRequest<T>, budgetMs: number): Promise<RenewOutcome>;
  /** onEmit receives the core's lock events (granted, renewed, lost, released), after the state changed. */
  onEmit(e: Emit<T>, loop: HolderLoop<T>): void;
  /** onReport receives a failure the core handles (a renewal to retry). */
  onReport?(err: unknown): void;
  /** onError receives a rejection of `renew`; the loop is closed first. */
  onError?(err: unknown): void;
}

/** HolderLoop runs the holder core for one holder; see the module comment. */
export class HolderLoop<T extends HolderTimings> {
  readonly #o: HolderLoopOptions<T>;
  #state: HolderState<T>;
  #renewTimer: Timer | undefined;
  #deadlineTimer: Timer | undefined;
  #closed = false;

  constructor(o: HolderLoopOptions<T>) {
    this.#o = o;
    this.#state = o.state;
  }

  /** term is the held term, or undefined; it does not check the deadline (the caller compares validUntilMs). */
  term(): Term<T> | undefined {
    return heldTerm(this.#state);
  }

  /** feed runs one transition and performs its effects, unless the loop is closed. Returns the effects. */
  feed(e: HolderEvent<T>): readonly HolderEffect<T>[] {
    if (this.#closed) return [];
    const now = this.#o.clock.monotonicMs();
    const t = holderTransition(this.#state, e, now, this.#o.policy);
    this.#state = t.state;
    for (const effect of t.effects) {
      if (this.#closed) break; // an event listener closed the loop
      this.#perform(effect);
    }
    return t.effects;
  }

  /** arm arms the timers of a held term the loop started with (its next renewal a renew period from now). */
  arm(): void {
    const term = this.term();
    if (this.#closed || term === undefined) return;
    this.#perform({
      type: 'ArmTimers',
      renewInMs: term.timings.renewPeriodMs,
      deadlineInMs: term.validUntilMs - this.#o.clock.monotonicMs(),
    });
  }

  /**
   * close ends the loop: `last` (a release, a stop) is the final event, its effects performed but
   * for what the caller does itself (`skip`); then the timers are cleared and every later event
   * and answer is ignored. Returns the final event's effects.
   */
  close(last?: HolderEvent<T>, skip: readonly HolderEffect<T>['type'][] = []): readonly HolderEffect<T>[] {
    if (this.#closed) return [];
    let effects: readonly HolderEffect<T>[] = [];
    if (last !== undefined) {
      const now = this.#o.clock.monotonicMs();
      const t = holderTransition(this.#state, last, now, this.#o.policy);
      this.#state = t.state;
      effects = t.effects;
      for (const effect of effects) if (!skip.includes(effect.type)) this.#perform(effect);
    }
    this.#closed = true;
    this.#clearTimers();
    return effects;
  }

  #clearTimers(): void {
    this.#renewTimer?.cancel();
    this.#deadlineTimer?.cancel();
  }

  #perform(effect: HolderEffect<T>): void {
    const { clock } = this.#o;
    switch (effect.type) {
      case 'SendRenew':
        void this.#renew(effect.request, effect.budgetMs);
        return;
      case 'ArmTimers':
        this.#clearTimers();
        this.#renewTimer = clock.setTimeout(() => {
          this.feed({ type: 'RenewTimerFired' });
        }, effect.renewInMs);
        this.#armDeadline(effect.deadlineInMs);
        return;
      case 'ScheduleRetry':
        this.#renewTimer = clock.setTimeout(() => {
          this.feed({ type: 'RetryTimerFired' });
        }, effect.inMs);
        return;
      case 'ClearTimers':
        this.#clearTimers();
        return;
      case 'Report':
        this.#o.onReport?.(effect.err);
        return;
      case 'Emit':
        this.#o.onEmit(effect, this);
        return;
      default:
        // ReadLease, Release, AbortRequests: a one-request renewal never conflicts, and the
        // caller releases and stops through close().
        return;
    }
  }

  /**
   * #armDeadline ends trust at the deadline even while a renewal is still out (or the process was
   * paused): whatever the renewal later says, it cannot reach back. A timer that fires before the
   * deadline by the clock is armed again for what is left.
   */
  #armDeadline(inMs: number): void {
    this.#deadlineTimer?.cancel();
    this.#deadlineTimer = this.#o.clock.setTimeout(() => {
      this.feed({ type: 'DeadlineCheck' });
      const term = this.term();
      if (!this.#closed && term !== undefined) this.#armDeadline(term.validUntilMs - this.#o.clock.monotonicMs());
    }, inMs);
  }

  async #renew(request: RenewRequest<T>, budgetMs: number): Promise<void> {
    let outcome: RenewOutcome;
    try {
      outcome = await this.#o.renew(request, budgetMs);
    } catch (err) {
      this.close();
      this.#o.onError?.(err);
      return;
    }
    if (outcome.kind === 'renewed') this.feed({ type: 'RenewAnswered', request });
    else if (outcome.kind === 'notOurs')
      this.feed({ type: 'RenewFailed', request, failure: 'notOurs', reason: outcome.reason });
    else this.feed({ type: 'RenewFailed', request, failure: 'other', err: outcome.err });
  }
}
