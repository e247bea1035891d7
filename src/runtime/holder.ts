/**
 * The holder core: one term of a lease-like lock as seen by its holder, as a pure transition
 * `holderTransition(state, event, nowMs, policy) → { state, effects }`. Every holder loop runs it:
 * the agent's Lease session (src/agent/session-machine.ts, which adds what only a Lease has), the
 * Redis and Redlock stores' hold (src/stores/hold.ts, behind `acquire()` with a store URL and the
 * agent's store session) and the controller's own leader election (src/runtime/leaderelection.ts).
 * No I/O, no timers, no clock reads: `nowMs` is the caller's monotonic time.
 *
 * What the core knows, the same for every backend:
 * - The phases: waiting (not the holder), confirming(u) (the record names this holder with token
 *   u, a first renew of it not yet answered), held(term), lost, released, stopped.
 * - Validity is counted from the monotonic time a renew (or the acquire) was SENT: a success sent
 *   at t_s holds the term until t_s + renewDeadline. An answer that arrives after that is worth
 *   nothing; the deadline is re-checked on every event, not only by timers, so a process paused
 *   past it steps down the moment it runs again.
 * - One renew flight at a time (idle, sending, reading the record after a conflict, backing off
 *   before a retry); a kick while it is busy runs once it ends. Each request is bounded by the
 *   time left in the term; failed renews are retried until the deadline, then the term is lost.
 * - A term that ended here (lost or released) is never taken up again: a new term needs a token
 *   above every token that ended here (`endedToken`), also when the record still names this holder
 *   with the old one.
 * - Step-down (Emit lost, timers cleared) and release (Emit released, then the Release effect:
 *   the holder stops believing before it writes) are effects; stopping never writes.
 *
 * What differs per backend stays with the caller, passed in as a {@link HolderPolicy}: whether the
 * record still names this holder with a token (Lease holder and UID, the Redis owner id, the
 * elector's identity), the timings a renew is sent with, how long to wait before a retry, and
 * hooks for what the backend does as a term ends (the agent cancels a drain, hands an ended term
 * back). Tokens are fencing tokens where the backend has them, and the elector's own term numbers
 * where it has none.
 *
 * {@link HolderStep} is the same step as a class over a mutable draft, for a caller whose own
 * transition (the agent's) wraps the core's rows within one step; {@link holderTransition} is the
 * pure function over it. holder-loop.ts is its shell for a holder whose renewal is one request
 * (the stores, the elector).
 *
 * Why this file is a little over ~450 lines: it is one transition table, its vocabulary (state,
 * events, effects, policy) and its step kept together, so that every rule the three holders share
 * is read in one place.
 */

/** HolderTimings are what the core needs of a term's timings (TermTimings and the elector's fit). */
export interface HolderTimings {
  /** renewDeadlineMs: a success sent at t holds the term until t + renewDeadlineMs. */
  readonly renewDeadlineMs: number;
  /** renewPeriodMs: the wait from a success to the next renew. */
  readonly renewPeriodMs: number;
}

/** Term is one validly held term: its token and until when (monotonic ms) the holder trusts it. */
export interface Term<T extends HolderTimings = HolderTimings> {
  readonly token: bigint;
  readonly validUntilMs: number;
  readonly timings: T;
}

/** LockState is the name of a phase: waiting, confirming, held, lost, released, stopped. */
export type LockState = 'waiting' | 'confirming' | 'held' | 'lost' | 'released' | 'stopped';

/** Phase is the holder's phase, with what that phase knows. */
export type Phase<T extends HolderTimings = HolderTimings> =
  | { readonly name: 'waiting' }
  | { readonly name: 'confirming'; readonly token: bigint }
  | { readonly name: 'held'; readonly term: Term<T> }
  | { readonly name: 'lost' }
  | { readonly name: 'released' }
  | { readonly name: 'stopped' };

/** RenewFlight is the single renew flight: idle, a renew out, a re-read after a conflict out, or waiting to retry. */
export type RenewFlight = 'idle' | 'sending' | 'reading' | 'backoff';

/** HolderState is what the core decides from; callers may keep more beside it (the agent does). */
export interface HolderState<T extends HolderTimings = HolderTimings> {
  readonly phase: Phase<T>;
  /** endedToken is the largest token of a term that ended here; a new term needs a larger one. */
  readonly endedToken: bigint | undefined;
  readonly renew: RenewFlight;
  /** renewAgain: a kick came while the flight was busy; it kicks again when the flight ends. */
  readonly renewAgain: boolean;
}

/** RenewRequest is what a SendRenew was sent for; the caller passes it back with the answer. */
export interface RenewRequest<T extends HolderTimings = HolderTimings> {
  readonly token: bigint;
  /** sentAtMs is the monotonic time the request was sent: the term's validity counts from it. */
  readonly sentAtMs: number;
  /** timings are the term's timings the request was sent under. */
  readonly timings: T;
}

/** HolderEvent is one input of {@link holderTransition}. */
export type HolderEvent<T extends HolderTimings = HolderTimings> =
  /** Granted: an acquire sent at sentAtMs was granted `token` (stores, the elector: the acquire itself confirms). */
  | { readonly type: 'Granted'; readonly request: RenewRequest<T> }
  /** Offered: the record names this holder with `token`; a first renew confirms it (the agent's Lease). */
  | { readonly type: 'Offered'; readonly token: bigint }
  /** NotOurs: the record names another holder or none: a held term is lost with `reason`, a confirming one dropped. */
  | { readonly type: 'NotOurs'; readonly reason: string }
  | { readonly type: 'RenewTimerFired' }
  /** DeadlineCheck: the deadline timer fired, or the caller is about to read the state. */
  | { readonly type: 'DeadlineCheck' }
  | { readonly type: 'RenewAnswered'; readonly request: RenewRequest<T> }
  /**
   * RenewFailed: `conflict` (someone else wrote the record: re-read it), `notOurs` (the record
   * names another holder or is gone: as NotOurs with `reason`), `other` (no answer: retry).
   */
  | {
      readonly type: 'RenewFailed';
      readonly request: RenewRequest<T>;
      readonly failure: 'conflict' | 'notOurs' | 'other';
      readonly reason?: string;
      readonly err?: unknown;
    }
  /** RecordRead: the re-read after a conflict answered (the caller has taken the record in); RecordReadFailed: it did not. */
  | { readonly type: 'RecordRead' }
  | { readonly type: 'RecordReadFailed' }
  | { readonly type: 'RetryTimerFired' }
  /** ReleaseRequested: the holder gives a held term up (`handedOver`: at the end of a planned handover). */
  | { readonly type: 'ReleaseRequested'; readonly reason?: string; readonly handedOver?: boolean }
  | { readonly type: 'Stop' };

/** HolderEventType is the kind of a holder's lock event. */
export type HolderEventType = 'granted' | 'renewed' | 'lost' | 'released';

/** HolderEffect is one thing for the caller to do, in order. */
export type HolderEffect<T extends HolderTimings = HolderTimings> =
  /** SendRenew: renew the term (compare-and-swap), aborted after `budgetMs`; answer RenewAnswered or RenewFailed with `request`. */
  | { readonly type: 'SendRenew'; readonly budgetMs: number; readonly request: RenewRequest<T> }
  /** ReadLease: read the record again (after a conflict); answer RecordRead or RecordReadFailed. */
  | { readonly type: 'ReadLease' }
  /** ScheduleRetry: feed RetryTimerFired after `inMs`. */
  | { readonly type: 'ScheduleRetry'; readonly inMs: number }
  /** ArmTimers replaces the renew and deadline timers: RenewTimerFired after `renewInMs`, DeadlineCheck after `deadlineInMs`. */
  | { readonly type: 'ArmTimers'; readonly renewInMs: number; readonly deadlineInMs: number }
  /** ClearTimers cancels the renew and deadline timers (not a scheduled retry). */
  | { readonly type: 'ClearTimers' }
  /** AbortRequests aborts every request out (the holder stops). */
  | { readonly type: 'AbortRequests' }
  /** Release: give the term of `token` up, only if the record still names this holder with it. */
  | { readonly type: 'Release'; readonly token: bigint; readonly handedOver?: boolean }
  /** Emit: log and deliver a lock event. */
  | {
      readonly type: 'Emit';
      readonly event: HolderEventType;
      readonly token: bigint;
      readonly reason?: string;
      readonly expiresInMs?: number;
    }
  /** Report logs a failure the core handles (a renew to retry). */
  | { readonly type: 'Report'; readonly what: 'RenewFailed'; readonly err: unknown };

/** HolderPolicy is what differs per backend; every member is pure. */
export interface HolderPolicy<T extends HolderTimings = HolderTimings> {
  /** names: the record as last seen names this holder with `token` (a renew of it may be sent). */
  names(token: bigint): boolean;
  /** timingsFor: the timings a renew of `token` is sent under now. */
  timingsFor(token: bigint): T;
  /** retryInMs: the wait before the failed `request` is tried again, with `leftMs` left of the term at `nowMs`. */
  retryInMs(request: RenewRequest<T>, leftMs: number, nowMs: number): number;
  /** deadlineReason: the reason a term lost at its deadline for `cause` is reported with (`err`: the last renew's failure). */
  deadlineReason(cause: DeadlineCause, err?: unknown): string;
  /** termEnding: a held term is ending (before its timers are cleared). */
  termEnding?(): void;
  /** termEnded: a held term ended as `phase` (after its event was emitted). */
  termEnded?(phase: 'lost' | 'released'): void;
  /** endedTermNamed: the record, or a late answer, names this holder with a token of a term that ended here. */
  endedTermNamed?(token: bigint): void;
}

/**
 * DeadlineCause is how a term's deadline was found passed: at a check (a timer, a read, an event),
 * after a failed renew, by an answer that came after the validity it would have given, or before a
 * renew could be sent.
 */
export type DeadlineCause = 'check' | 'failed' | 'late' | 'unsent';

/** HolderTransition is the result of one {@link holderTransition}. */
export interface HolderTransition<T extends HolderTimings = HolderTimings> {
  readonly state: HolderState<T>;
  readonly effects: readonly HolderEffect<T>[];
}

/** initialHolder is a holder that has seen nothing yet. */
export function initialHolder<T extends HolderTimings = HolderTimings>(): HolderState<T> {
  return { phase: { name: 'waiting' }, endedToken: undefined, renew: 'idle', renewAgain: false };
}

/** heldTerm is the term while the phase is held. It does not check the deadline: feed DeadlineCheck first. */
export function heldTerm<T extends HolderTimings>(state: Pick<HolderState<T>, 'phase'>): Term<T> | undefined {
  return state.phase.name === 'held' ? state.phase.term : undefined;
}

/** holderTransition is the core's one step: see the module comment. Pure; `nowMs` is the monotonic time. */
export function holderTransition<T extends HolderTimings>(
  state: HolderState<T>,
  event: HolderEvent<T>,
  nowMs: number,
  policy: HolderPolicy<T>,
): HolderTransition<T> {
  const draft: Mutable<HolderState<T>> = { ...state };
  const effects: HolderEffect<T>[] = [];
  new HolderStep(draft, nowMs, policy, (e) => effects.push(e)).apply(event);
  return { state: { ...draft }, effects };
}

/** Mutable is a draft of a readonly state. */
export type Mutable<S> = { -readonly [K in keyof S]: S[K] };

/**
 * HolderStep is one step of the core over a mutable draft, emitting effects through `out` in
 * order. A caller with more state than the core's (the agent) shares its draft with the step and
 * calls the methods between its own rows; the draft must not be used after the step.
 */
export class HolderStep<T extends HolderTimings> {
  readonly #d: Mutable<HolderState<T>>;
  readonly #now: number;
  readonly #policy: HolderPolicy<T>;
  readonly #out: (e: HolderEffect<T>) => void;

  constructor(
    draft: Mutable<HolderState<T>>,
    nowMs: number,
    policy: HolderPolicy<T>,
    out: (e: HolderEffect<T>) => void,
  ) {
    this.#d = draft;
    this.#now = nowMs;
    this.#policy = policy;
    this.#out = out;
  }

  apply(e: HolderEvent<T>): void {
    const d = this.#d;
    switch (e.type) {
      case 'Granted':
        // The acquire itself confirms: a grant is taken up from any phase but held, confirming or stopped.
        if (d.phase.name === 'held' || d.phase.name === 'confirming' || d.phase.name === 'stopped') return;
        if (this.endedHere(e.request.token)) return;
        d.phase = { name: 'confirming', token: e.request.token };
        if (!this.renewed(e.request) && d.phase.name === 'confirming') d.phase = { name: 'waiting' };
        return;
      case 'Offered':
        this.offered(e.token);
        return;
      case 'NotOurs':
        this.notOurs(e.reason);
        return;
      case 'RenewTimerFired':
        this.kick();
        return;
      case 'DeadlineCheck':
        this.checkDeadline();
        return;
      case 'RenewAnswered':
        if (d.renew !== 'sending') return;
        if (!this.ended()) this.renewed(e.request);
        this.flightEnds();
        return;
      case 'RenewFailed':
        if (d.renew !== 'sending') return;
        if (this.ended()) return this.flightEnds();
        if (e.failure === 'conflict') return this.conflict();
        if (e.failure === 'notOurs') {
          this.notOurs(e.reason ?? 'the record names another holder');
          return this.flightEnds();
        }
        this.failed(e.request, e.err);
        return;
      case 'RecordRead':
      case 'RecordReadFailed':
        if (d.renew === 'reading') this.attempt();
        return;
      case 'RetryTimerFired':
        if (d.renew === 'backoff') this.attempt();
        return;
      case 'ReleaseRequested':
        this.release(e.reason ?? 'released by the holder', e.handedOver);
        return;
      case 'Stop':
        this.stop();
        return;
    }
  }

  /** ended: released or stopped (re-checked after an answer; it may have changed meanwhile). */
  ended(): boolean {
    return this.#d.phase.name === 'stopped' || this.#d.phase.name === 'released';
  }

  /** endedHere: a term with this token (or a smaller one) already ended here. */
  endedHere(token: bigint): boolean {
    return this.#d.endedToken !== undefined && token <= this.#d.endedToken;
  }

  /**
   * offered: the record names this holder with `token` (not while held: the caller ends a held
   * term first). A term that ended here is never confirmed again; a new token starts confirming.
   */
  offered(token: bigint): void {
    const d = this.#d;
    if (d.phase.name === 'stopped' || d.phase.name === 'held') return;
    if (this.endedHere(token)) {
      if (d.phase.name === 'confirming') d.phase = { name: 'waiting' };
      this.#policy.endedTermNamed?.(token);
      return;
    }
    if (d.phase.name === 'confirming' && d.phase.token === token) return;
    d.phase = { name: 'confirming', token };
    this.kick();
  }

  /** notOurs: the record names another holder or none. */
  notOurs(reason: string): void {
    const d = this.#d;
    if (d.phase.name === 'held') this.endTerm('lost', reason);
    else if (d.phase.name === 'confirming') d.phase = { name: 'waiting' };
  }

  /** withdrawn: the record no longer names this holder as confirming; a held term is the caller's to end. */
  withdrawn(): void {
    if (this.#d.phase.name === 'confirming') this.#d.phase = { name: 'waiting' };
  }

  /** checkDeadline ends the term if its deadline has passed (timers may fire late after a pause). */
  checkDeadline(cause: DeadlineCause = 'check', err?: unknown): void {
    const term = heldTerm(this.#d);
    if (term !== undefined && this.#now >= term.validUntilMs)
      this.endTerm('lost', this.#policy.deadlineReason(cause, err));
  }

  /** endTerm ends the held term as lost or released: timers cleared, the event emitted, its token never taken up again. */
  endTerm(phase: 'lost' | 'released', reason: string): void {
    const d = this.#d;
    const term = heldTerm(d);
    d.phase = { name: phase };
    this.#policy.termEnding?.();
    this.#out({ type: 'ClearTimers' });
    if (term === undefined) return;
    d.endedToken = term.token; // larger than any before: a term only starts with a token not endedHere
    this.#out({ type: 'Emit', event: phase, token: term.token, reason });
    this.#policy.termEnded?.(phase);
  }

  /** refuse: the term of `token` is not started after all (its answer came with something the caller rejects); never taken up again. */
  refuse(token: bigint): void {
    this.#d.phase = { name: 'lost' };
    this.#d.endedToken = token;
  }

  /** release: the holder stops believing first (so its application stops writing), then writes the release. */
  release(reason: string, handedOver?: boolean): void {
    const term = heldTerm(this.#d);
    if (term === undefined) return;
    this.endTerm('released', reason);
    this.#out(
      handedOver === true
        ? { type: 'Release', token: term.token, handedOver: true }
        : { type: 'Release', token: term.token },
    );
  }

  /** stop: a held term is lost; nothing is written (the record is left to expire). */
  stop(): void {
    if (this.#d.phase.name === 'held') this.endTerm('lost', 'session stopped');
    this.#d.phase = { name: 'stopped' };
    this.#out({ type: 'AbortRequests' });
    this.#out({ type: 'ClearTimers' });
  }

  /** kick starts a renew flight unless one is under way (then it runs once that one ends). */
  kick(): void {
    const d = this.#d;
    if (d.phase.name === 'stopped') return;
    if (d.renew !== 'idle') {
      d.renewAgain = true;
      return;
    }
    this.attempt();
  }

  /** attempt sends one renew of the held or confirming token, bounded by what is left of the term, or ends the flight. */
  attempt(): void {
    const d = this.#d;
    if (this.ended()) return this.flightEnds();
    const term = heldTerm(d);
    const token = term?.token ?? (d.phase.name === 'confirming' ? d.phase.token : undefined);
    if (token === undefined || !this.#policy.names(token)) return this.flightEnds();
    const timings = this.#policy.timingsFor(token);
    // Bound the request by what is left of the term (or, confirming, by one deadline).
    const budgetMs = term !== undefined ? term.validUntilMs - this.#now : timings.renewDeadlineMs;
    if (budgetMs <= 0) {
      this.checkDeadline('unsent');
      return this.flightEnds();
    }
    d.renew = 'sending';
    this.#out({ type: 'SendRenew', budgetMs, request: { token, sentAtMs: this.#now, timings } });
  }

  /** flightEnds: the flight is idle again, and kicks once more if a kick came meanwhile. */
  flightEnds(): void {
    const d = this.#d;
    d.renew = 'idle';
    if (d.renewAgain) {
      d.renewAgain = false;
      this.kick();
    }
  }

  /** conflict: someone else wrote the record; re-read it and go on only if it still names this holder. */
  conflict(): void {
    this.#d.renew = 'reading';
    this.#out({ type: 'ReadLease' });
  }

  /** failed: a renew got no answer: retried until the deadline (riding out blips), then the term is lost. */
  failed(request: RenewRequest<T>, err: unknown): void {
    const d = this.#d;
    this.#out({ type: 'Report', what: 'RenewFailed', err });
    this.checkDeadline('failed', err);
    if (d.phase.name !== 'held' && d.phase.name !== 'confirming') return this.flightEnds();
    d.renew = 'backoff';
    const term = heldTerm(d);
    const leftMs = term !== undefined ? term.validUntilMs - this.#now : request.timings.renewDeadlineMs;
    this.#out({ type: 'ScheduleRetry', inMs: this.#policy.retryInMs(request, leftMs, this.#now) });
  }

  /**
   * renewed: a renew (or the acquire) sent at `r.sentAtMs` succeeded under `r.timings`: it
   * confirms or extends the term, valid until sentAt + renewDeadline, unless that has already
   * passed or the term ended here meanwhile. Returns whether it started or extended the term.
   */
  renewed(r: RenewRequest<T>): boolean {
    const d = this.#d;
    const validUntilMs = r.sentAtMs + r.timings.renewDeadlineMs;
    if (validUntilMs <= this.#now) {
      this.checkDeadline('late'); // the reply came too late to trust
      return false;
    }
    const term = heldTerm(d);
    if (term === undefined && this.endedHere(r.token)) {
      // A renew sent before the term's deadline, answered after it: the term is over all the same.
      this.#policy.endedTermNamed?.(r.token);
      return false;
    }
    // While the first renew was out, the record may have moved on (the confirming ended): our
    // write came before that, so it starts no term.
    if (term === undefined && !(d.phase.name === 'confirming' && d.phase.token === r.token)) return false;
    const expiresInMs = validUntilMs - this.#now;
    // A renewal moves the deadline; the term keeps its token.
    d.phase = {
      name: 'held',
      term:
        term !== undefined
          ? { ...term, validUntilMs, timings: r.timings }
          : { token: r.token, validUntilMs, timings: r.timings },
    };
    this.#out({ type: 'Emit', event: term === undefined ? 'granted' : 'renewed', token: r.token, expiresInMs });
    this.#out({ type: 'ArmTimers', renewInMs: r.timings.renewPeriodMs, deadlineInMs: Math.max(1, expiresInMs) });
    return true;
  }

  /**
   * shorten moves a held term's deadline in to `timings` (a shorter reading of them) and re-arms
   * the timers if it moved; a deadline passed by that ends the term.
   */
  shorten(timings: T): void {
    const d = this.#d;
    const term = heldTerm(d);
    if (term === undefined) return;
    const validUntilMs = term.validUntilMs - (term.timings.renewDeadlineMs - timings.renewDeadlineMs);
    d.phase = { name: 'held', term: { ...term, timings, validUntilMs } };
    if (validUntilMs === term.validUntilMs) return;
    this.checkDeadline();
    if (d.phase.name !== 'held') return;
    const leftMs = validUntilMs - this.#now;
    this.#out({
      type: 'ArmTimers',
      renewInMs: Math.max(1, Math.min(timings.renewPeriodMs, Math.floor(leftMs / 2))),
      deadlineInMs: Math.max(1, leftMs),
    });
  }
}
