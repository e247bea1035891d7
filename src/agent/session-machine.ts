/**
 * session-machine — the pure decision core of {@link LockSession} (src/agent/session.ts), the holder's
 * side of the protocol for one lock (DESIGN "The protocol", steps 2–4). `transition(state, event,
 * nowMs)` returns the next state and the actions the I/O shell performs: Lease requests, timers,
 * LockEvents. No I/O, no timers, no promises, no clock reads: `nowMs` is the shell's monotonic time.
 *
 * Safety rules, each enforced here:
 * - Validity is counted from the monotonic time a renew request was SENT: after a successful
 *   renew sent at t_s the lock is held until t_s + renewDeadline (renewDeadline < lease duration,
 *   so it passes before the controller, which counts from when it SAW the renewal, can expire it).
 * - A grant seen on the watch is not trusted until the agent's own first renew of it succeeds:
 *   a grant delivered late (a pause, a slow watch) can never start a term that is already over.
 * - Every renew and release is a compare-and-swap on the resourceVersion and is sent only while
 *   the Lease names this pod incarnation (name and UID) with the term's token.
 * - `held` is re-checked against the clock on every read, not only by timers (the shell feeds a
 *   DeadlineCheck before each read), so a process that was paused past its deadline reports the
 *   loss the moment it runs again.
 * - A renew request is bounded by the time left in the term; failed renews are retried until the
 *   deadline (riding out API-server blips), then the lock is declared lost.
 * - A term that ended here (lost or released) is never taken up again, even if the Lease still
 *   names this pod with its token once the API server answers again: only a grant with a larger
 *   token starts a new term (after a step-down, never the old token again: a stale holder must not
 *   write again with a token the store may still accept). A lost term the Lease still names is
 *   handed back (a released Lease), so the controller does not have to wait out the lease to grant
 *   the next term.
 * - A token below one already seen on the Lease is never taken up (L0): only the controller writes
 *   the token, and it never lowers it; a co-tenant with `leases update` can, and the lowered value
 *   may be an earlier holder's token, which taken up would put two believers on one token (the
 *   co-tenant soak found it).
 * - Stopping never writes: the Lease is left to expire (no hand-back, no release).
 * - A term's timings are the most conservative reading of everything said about them: field by
 *   field the shortest of the confirming renew's Lease, every later renewal's and every Lease seen
 *   during the term ("tightened"; a lengthened deadline is never taken, a shortened one moves the
 *   deadline in). Timings that contradict each other (not all positive, or not renew period <
 *   renew deadline < lease duration: the controller writes no such thing, a co-tenant with
 *   `leases update` can) start no term (C1) and end a held one (C2); the token is handed back so
 *   that the controller grants again with timings of its own.
 *
 * ## State
 *
 * `phase` is one of waiting (not the holder), confirming(u) (the Lease names us with token u, our
 * first renew of it not yet answered), held(term), lost, released, stopped. Beside it: `lease`, the
 * newest Lease seen (by resourceVersion); `endedToken`, the largest token of a term that ended here;
 * `renew`, the single renew flight (idle, sending, reading after a conflict, backoff before a
 * retry) and `renewAgain` (a kick came while it was busy); `givingBack` (one hand-back at a time).
 * "Ours with u" below means: the Lease's holder is this pod incarnation and its token is u.
 *
 * ## Transition table
 *
 * Rows are checked top to bottom within an event; "as X" runs row X's transition in the same step.
 *
 * | row | event               | when                                                | next phase            | actions                                                    |
 * |-----|---------------------|-----------------------------------------------------|-----------------------|------------------------------------------------------------|
 * | L1  | LeaseSeen           | stopped, or older (rv) than the newest seen         | unchanged             | —                                                          |
 * | L2  | LeaseSeen           | unparsable                                          | unchanged             | Report (kept as the newest Lease)                          |
 * | L3  | LeaseSeen           | held, deadline passed                               | as D1                 | as D1                                                      |
 * | L4  | LeaseSeen           | held(t), not ours                                   | lost                  | ClearTimers, Emit lost "granted to X" / "revoked"          |
 * | L5  | LeaseSeen           | held(t), ours with t                                | held(t), timings tightened | ArmTimers if the deadline moved in; as C2 / D1        |
 * | L6  | LeaseSeen           | held(t), ours with u ≠ t                            | lost, then as L7/L8   | ClearTimers, Emit lost "superseded by token u", then L7/L8 |
 * | L0  | LeaseSeen           | ours with u < the highest token seen on the Lease   | confirming → waiting  | Report TokenWentBack (after L3–L6 for a held term)         |
 * | L7  | LeaseSeen           | ours with u ≤ endedToken                            | confirming → waiting  | GiveBack(u) if lost/released and none under way            |
 * | L8  | LeaseSeen           | ours with u, not confirming u                       | confirming(u)         | kick (K1–K5)                                               |
 * | L9  | LeaseSeen           | ours with the confirming token                      | unchanged             | —                                                          |
 * | L10 | LeaseSeen           | not ours                                            | confirming → waiting  | —                                                          |
 * | G1  | LeaseGone           | held(t)                                             | lost                  | ClearTimers, Emit lost "Lease deleted"                     |
 * | G2  | LeaseGone           | otherwise                                           | confirming → waiting  | — (the Lease is forgotten in every phase)                  |
 * | F1  | Follow              | waiting or lost, no renew or hand-back under way    | unchanged             | — (the Lease and highestToken are forgotten; endedToken kept) |
 * | F2  | Follow              | otherwise                                           | unchanged             | —                                                          |
 * | D1  | DeadlineCheck       | held(t), now ≥ validUntil                           | lost, then as L7–L9   | ClearTimers, Emit lost "renew deadline passed"             |
 * | D2  | DeadlineCheck       | otherwise                                           | unchanged             | —                                                          |
 * | K   | RenewTimerFired     |                                                     | unchanged             | kick (K1–K5)                                               |
 * | R1  | RenewAnswered       | released or stopped                                 | unchanged             | flight ends                                                |
 * | C1  | RenewAnswered       | confirming(token), tightened timings contradict     | lost (token ended)    | Report TimingsContradict, GiveBack(token), flight ends     |
 * | C2  | RenewAnswered, L5   | held(token), tightened timings contradict           | lost                  | ClearTimers, Emit lost "term timings contradict each other: …", as L7 |
 * | R2  | RenewAnswered       | sentAt + renewDeadline ≤ now (answered too late)    | as D1/D2              | flight ends                                                |
 * | R3  | RenewAnswered       | not held, token ≤ endedToken                        | unchanged             | GiveBack (as L7), flight ends                              |
 * | R4  | RenewAnswered       | confirming(token)                                   | held(token)           | Emit granted, ArmTimers, flight ends                       |
 * | R4' | RenewAnswered       | not held, not confirming that token (G2, L10)       | unchanged             | flight ends                                                |
 * | R5  | RenewAnswered       | held                                                | held, validUntil = sentAt + tightened deadline | Emit renewed, ArmTimers, flight ends |
 * | F1  | RenewFailed         | released or stopped                                 | unchanged             | flight ends                                                |
 * | F2  | RenewFailed         | conflict                                            | unchanged             | ReadLease (flight: reading)                                |
 * | F3  | RenewFailed         | not found                                           | as G1/G2              | flight ends                                                |
 * | F4  | RenewFailed         | other, still held/confirming after D1               | as D1/D2              | Report, ScheduleRetry (flight: backoff)                    |
 * | F5  | RenewFailed         | other, otherwise                                    | as D1                 | Report, flight ends                                        |
 * | E1  | LeaseRead           | a Lease                                             | as L1–L10             | attempt (K3–K5)                                            |
 * | E2  | LeaseRead           | none                                                | as G1/G2              | flight ends                                                |
 * | E3  | LeaseReadFailed     |                                                     | unchanged             | attempt (K3–K5)                                            |
 * | B   | RetryTimerFired     |                                                     | unchanged             | attempt (K3–K5)                                            |
 * | Q1  | ReleaseRequested    | held(t)                                             | released              | ClearTimers, Emit released, Release(t)                     |
 * | Q2  | ReleaseRequested    | otherwise                                           | unchanged             | —                                                          |
 * | W   | ReleaseAnswered     |                                                     | unchanged             | — (the written Lease becomes the newest)                   |
 * | H   | GiveBackDone        |                                                     | unchanged             | — (the next hand-back may start)                           |
 * | S1  | Stop                | held(t)                                             | stopped               | ClearTimers, Emit lost "session stopped", as S2            |
 * | V1  | LeaseSeen, L5       | held(t), a handover mark for t to another pod, not draining t | held(t), draining | ArmDrain(max(drainMs, minDrainMs)), Emit draining (that 0: as V3) |
 * | V2  | LeaseSeen, L5       | held(t), draining, the mark gone or for another token/pod | held(t)        | ClearDrain, Emit handoverCancelled                         |
 * | V3  | DrainTimerFired / DrainDone | held(t), draining t                         | released              | ClearTimers, Emit released "handed over to X", Release(t, handedOver) |
 * | V4  | DrainTimerFired / DrainDone | otherwise                                   | unchanged             | —                                                          |
 * | S2  | Stop                | otherwise                                           | stopped               | AbortRequests, ClearTimers                                 |
 *
 * The renew flight (one at a time; "kick" starts it, "attempt" is one request of it):
 *
 * | row | step    | when                                                                      | effect                                          |
 * |-----|---------|---------------------------------------------------------------------------|-------------------------------------------------|
 * | K1  | kick    | stopped                                                                   | nothing                                         |
 * | K2  | kick    | a flight is under way                                                     | renewAgain (a new flight once this one ends)    |
 * | K3  | attempt | released/stopped, or the Lease is not ours with the held/confirming token | flight ends                                     |
 * | K4  | attempt | no time left in the term                                                  | as D1, flight ends                              |
 * | K5  | attempt | otherwise                                                                 | SendRenew, budget: held ? validUntil − now : renewDeadline |
 *
 * "Flight ends": the flight is idle again and, if renewAgain, kicks once more. Answers and timer
 * events that do not match the flight's state (no flight is sending, reading or backing off) are
 * ignored; with one flight they cannot happen.
 *
 * Planned handover (V1–V3; protocol/handover.ts): the controller marks the held Lease with the
 * successor and this term's token; the agent keeps renewing while the app drains, and at the end
 * of the drain period (or when the app says it is done) it stops believing first and then
 * releases, as a release by the app does (Q1); the controller grants the successor its own mark
 * names (the release is written as kind `Released`: see session.ts). A mark for another token is never acted on.
 *
 * R4 starts a term only while still confirming that token: a watch event that arrived while the
 * first renew was out (the Lease deleted, released or handed to another after our write: G2, L10)
 * ends the confirming, and the answer then starts nothing (found in the extraction of this module;
 * before, the term ran until its deadline or the next Lease event).
 */
import type { V1Lease } from '@kubernetes/client-node';
import { parseLease, type LockRecord } from '../lease/record.ts';
import { sameHolder, type HolderRef } from '../protocol/holder.ts';
import { termTimingsOf, tighterTimings, timingsContradiction, type TermTimings } from '../protocol/timings.ts';

/** LockState: waiting (not the holder), confirming (granted, first renew in flight), held, lost, released, stopped. */
export type LockState = 'waiting' | 'confirming' | 'held' | 'lost' | 'released' | 'stopped';

/** Term is one validly held term: its token and until when (monotonic ms) this agent trusts it. */
export interface Term {
  readonly token: bigint;
  readonly validUntilMs: number;
  readonly timings: TermTimings;
}

/** Phase is the session's phase, with what that phase knows. */
export type Phase =
  | { readonly name: 'waiting' }
  | { readonly name: 'confirming'; readonly token: bigint }
  | { readonly name: 'held'; readonly term: Term }
  | { readonly name: 'lost' }
  | { readonly name: 'released' }
  | { readonly name: 'stopped' };

/** LeaseView is one Lease as seen: the object, its resourceVersion, and its record (undefined if unparsable). */
export interface LeaseView {
  readonly object: V1Lease;
  readonly rv: bigint;
  readonly record: LockRecord | undefined;
}

/** RenewFlight is the single renew flight: idle, a renew out, a re-read after a conflict out, or waiting to retry. */
export type RenewFlight = 'idle' | 'sending' | 'reading' | 'backoff';

/** SessionState is everything the session decides from; the shell keeps it and never changes it itself. */
export interface SessionState {
  /** self is this pod incarnation. */
  readonly self: HolderRef;
  readonly phase: Phase;
  /** lease is the newest Lease seen (by resourceVersion), or the one our last release wrote. */
  readonly lease: LeaseView | undefined;
  /** endedToken is the largest token of a term that ended here; a new term needs a larger one. */
  readonly endedToken: bigint | undefined;
  /**
   * highestToken is the largest token seen on any Lease of this lock (any holder). The token only
   * grows when the controller writes it, so a Lease below it was lowered by someone else (L0).
   */
  readonly highestToken: bigint | undefined;
  /** lastTimings are the current or last term's timings (undefined before the first grant). */
  readonly lastTimings: TermTimings | undefined;
  readonly renew: RenewFlight;
  /** renewAgain: a kick came while the flight was busy; it kicks again when the flight ends. */
  readonly renewAgain: boolean;
  /** givingBack: a hand-back is under way (single flight). */
  readonly givingBack: boolean;
  /** draining: a planned handover of the held term is under way (V1–V3): to whom, and until when (monotonic ms). */
  readonly draining: Draining | undefined;
  /**
   * minDrainMs: the shortest drain this session's app needs (V1), a pure function of the held
   * term's timings: a handover mark's drain period below it is lengthened to it, so that an app
   * that must stop work before the release (exec stopping its job's process group, whose grace
   * follows from the term's timings) holds the handover until it answers (DrainDone), however
   * short the period the user asked for. Returning 0: the mark's period as given.
   */
  readonly minDrainMs: MinDrain;
}

/** MinDrain is SessionState.minDrainMs: the app's shortest drain for a term of these timings. */
export type MinDrain = (timings: TermTimings) => number;

/** Draining is a planned handover in progress: the held term's token, the successor's pod name, the drain's end. */
export interface Draining {
  readonly token: bigint;
  readonly to: string;
  readonly untilMs: number;
}

/** RenewRequest is what a SendRenew was sent for; the shell passes it back with the answer. */
export interface RenewRequest {
  readonly token: bigint;
  /** sentAtMs is the monotonic time the request was sent: the term's validity counts from it. */
  readonly sentAtMs: number;
  /** timings are the term's timings as the Lease fixed them at grant (the agent does not read the lock). */
  readonly timings: TermTimings;
}

/** RenewFailure classifies a failed renew: a 409, a 404, or anything else (a timeout, the network). */
export type RenewFailure = 'conflict' | 'notFound' | 'other';

/** SessionEvent is one input to {@link transition}. */
export type SessionEvent =
  /** LeaseSeen: the watch (or the first list) delivered the lock's Lease. */
  | { readonly type: 'LeaseSeen'; readonly lease: LeaseView; readonly parseError?: unknown }
  /** LeaseGone: the watch delivered the Lease's deletion. */
  | { readonly type: 'LeaseGone' }
  | { readonly type: 'RenewTimerFired' }
  /** DeadlineCheck: the deadline timer fired, or the shell is about to read the state. */
  | { readonly type: 'DeadlineCheck' }
  | { readonly type: 'RenewAnswered'; readonly request: RenewRequest; readonly stored: LeaseView }
  | {
      readonly type: 'RenewFailed';
      readonly request: RenewRequest;
      readonly failure: RenewFailure;
      readonly err: unknown;
    }
  /** LeaseRead: the answer to a ReadLease (lease undefined: there is no Lease). */
  | { readonly type: 'LeaseRead'; readonly lease: LeaseView | undefined; readonly parseError?: unknown }
  | { readonly type: 'LeaseReadFailed' }
  | { readonly type: 'RetryTimerFired' }
  | { readonly type: 'ReleaseRequested' }
  /** DrainTimerFired: the drain period of the handover of `token` is over (V3). */
  | { readonly type: 'DrainTimerFired'; readonly token: bigint }
  /** DrainDone: the app says it has drained (the agent API); hands over now if draining (V3). */
  | { readonly type: 'DrainDone' }
  /** ReleaseAnswered: a release or hand-back wrote the Lease. */
  | { readonly type: 'ReleaseAnswered'; readonly lease: LeaseView }
  /** GiveBackDone: a hand-back finished, whatever its outcome. */
  | { readonly type: 'GiveBackDone' }
  | { readonly type: 'Stop' }
  /**
   * Follow: the shell turns to another Lease of the lock, one that names this pod (a Semaphore's
   * permit Lease). Only when {@link mayFollow}: no term held or being confirmed, no renew or
   * hand-back under way. Forgets the Lease seen and the highest token seen on it — each permit
   * Lease has its own sequence of tokens, so a lowered token is judged per Lease — and keeps
   * endedToken: tokens grow across all Leases of a lock, so a term that ended here is never taken
   * up again under another Lease.
   */
  | { readonly type: 'Follow' };

/**
 * mayFollow: whether the shell may turn to another Lease of the lock now (the Follow event): the
 * session is waiting, has lost its term or released it, and no renew, re-read or hand-back is
 * under way. Released too: a pod that gave a Semaphore permit back and asks again is granted
 * whichever permit is free, often another one than it held.
 */
export function mayFollow(state: SessionState): boolean {
  const between = state.phase.name === 'waiting' || state.phase.name === 'lost' || state.phase.name === 'released';
  return between && state.renew === 'idle' && !state.givingBack;
}

/** LockEventType is the kind of a LockEvent. */
export type LockEventType = 'granted' | 'renewed' | 'lost' | 'released' | 'draining' | 'handoverCancelled';

/** SessionAction is one thing for the shell to do, in order. */
export type SessionAction =
  /**
   * SendRenew: compare-and-swap `lease` with a fresh renewTime, aborted after `budgetMs` or at
   * stop; answer with RenewAnswered or RenewFailed carrying `request`.
   */
  | { readonly type: 'SendRenew'; readonly lease: V1Lease; readonly budgetMs: number; readonly request: RenewRequest }
  /** ReadLease: GET the Lease under the same budget as the renew that conflicted; answer LeaseRead(Failed). */
  | { readonly type: 'ReadLease' }
  /** ScheduleRetry: feed RetryTimerFired after `inMs`. */
  | { readonly type: 'ScheduleRetry'; readonly inMs: number }
  /**
   * ArmTimers replaces the renew and deadline timers: RenewTimerFired after `renewInMs` (the shell
   * shortens it by a random 0–10 % jitter, never below 1 ms) and DeadlineCheck after `deadlineInMs`.
   */
  | { readonly type: 'ArmTimers'; readonly renewInMs: number; readonly deadlineInMs: number }
  /** ClearTimers cancels the renew and deadline timers (not a scheduled retry). */
  | { readonly type: 'ClearTimers' }
  /** AbortRequests aborts every request out (the session stops). */
  | { readonly type: 'AbortRequests' }
  /**
   * Release: compare-and-swap the holder away if the Lease still names this pod with `token`; the
   * caller awaits it. `handedOver`: at the end of a planned handover (logged as such; written as kind Released).
   */
  | { readonly type: 'Release'; readonly token: bigint; readonly handedOver?: boolean }
  /** ArmDrain: feed DrainTimerFired(token) after `inMs` (replacing an earlier drain timer). */
  | { readonly type: 'ArmDrain'; readonly token: bigint; readonly inMs: number }
  /** ClearDrain cancels the drain timer. */
  | { readonly type: 'ClearDrain' }
  /** GiveBack: as Release for an ended term, best effort within `budgetMs`; then feed GiveBackDone. */
  | { readonly type: 'GiveBack'; readonly token: bigint; readonly budgetMs: number }
  /** Emit: log and deliver a LockEvent. */
  | {
      readonly type: 'Emit';
      readonly event: LockEventType;
      readonly token: bigint;
      readonly reason?: string;
      readonly expiresInMs?: number;
      /** handover: for draining, the successor and the drain period. */
      readonly handover?: { readonly to: string; readonly drainMs: number };
    }
  /** Report logs a failure that the machine handles (a renew to retry, a Lease it cannot read). */
  | {
      readonly type: 'Report';
      readonly what: 'RenewFailed' | 'LeaseUnparsable' | 'TimingsContradict' | 'TokenWentBack';
      readonly err: unknown;
    };

/** Transition is the result of one {@link transition}. */
export interface Transition {
  readonly state: SessionState;
  readonly actions: readonly SessionAction[];
}

/** GIVE_BACK_BUDGET_MS bounds one hand-back of an ended term (its Lease then expires instead). */
export const GIVE_BACK_BUDGET_MS = 5000;

/** RETRY_MIN_MS bounds how often a failing renew is retried within the deadline. */
export const RETRY_MIN_MS = 50;

/** RETRY_MAX_MS caps the wait before a failed renew is retried (a quarter period otherwise). */
export const RETRY_MAX_MS = 500;

/** initialState is a session that has seen nothing yet. */
export function initialState(self: HolderRef, minDrainMs: MinDrain = () => 0): SessionState {
  return {
    self,
    minDrainMs,
    phase: { name: 'waiting' },
    lease: undefined,
    endedToken: undefined,
    highestToken: undefined,
    lastTimings: undefined,
    renew: 'idle',
    renewAgain: false,
    givingBack: false,
    draining: undefined,
  };
}

/** viewOf parses a Lease into a view; an unparsable Lease has no record, and the error is returned. */
export function viewOf(lease: V1Lease): { readonly view: LeaseView; readonly parseError?: unknown } {
  const rv = rvOf(lease);
  try {
    return { view: { object: lease, rv, record: parseLease(lease) } };
  } catch (err) {
    return { view: { object: lease, rv, record: undefined }, parseError: err };
  }
}

/** namesTerm: the record names `self` as holder with `token` (what every renew and release requires). */
export function namesTerm(record: LockRecord | undefined, self: HolderRef, token: bigint): boolean {
  return record !== undefined && sameHolder(record.holder, self) && record.token === token;
}

/** heldTerm is the term while the phase is held. It does not check the deadline: feed DeadlineCheck first. */
export function heldTerm(state: SessionState): Term | undefined {
  return state.phase.name === 'held' ? state.phase.term : undefined;
}

/** transition is the session's one step: see the module table. Pure; `nowMs` is the monotonic time. */
export function transition(state: SessionState, event: SessionEvent, nowMs: number): Transition {
  const s = new Step(state, nowMs);
  s.apply(event);
  return { state: s.state(), actions: s.actions };
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** Step is one transition in progress: a private draft of the state and the actions so far. */
class Step {
  readonly actions: SessionAction[] = [];
  readonly #d: Mutable<SessionState>;
  readonly #now: number;
  /** #stopping: within a Stop, no hand-back starts (stop leaves the Lease to expire). */
  #stopping = false;

  constructor(state: SessionState, nowMs: number) {
    this.#d = { ...state };
    this.#now = nowMs;
  }

  state(): SessionState {
    return { ...this.#d };
  }

  apply(e: SessionEvent): void {
    const d = this.#d;
    switch (e.type) {
      case 'LeaseSeen':
        this.#observe(e.lease, e.parseError);
        return;
      case 'LeaseGone':
        this.#leaseGone();
        return;
      case 'Follow':
        if (!mayFollow(d)) return;
        d.lease = undefined;
        d.highestToken = undefined;
        return;
      case 'DeadlineCheck':
        this.#checkDeadline();
        return;
      case 'RenewTimerFired':
        this.#kick();
        return;
      case 'RenewAnswered':
        if (d.renew !== 'sending') return;
        // Keep the newest Lease: the watch may already have delivered a later version.
        if (d.lease === undefined || e.stored.rv >= d.lease.rv) d.lease = e.stored;
        if (!this.#ended()) this.#renewed(e.request);
        this.#flightEnds();
        return;
      case 'RenewFailed':
        if (d.renew !== 'sending') return;
        if (this.#ended()) return this.#flightEnds();
        if (e.failure === 'conflict') {
          // Someone wrote the Lease: re-read it and go on only if it is still ours.
          d.renew = 'reading';
          this.actions.push({ type: 'ReadLease' });
          return;
        }
        if (e.failure === 'notFound') {
          this.#leaseGone();
          return this.#flightEnds();
        }
        this.actions.push({ type: 'Report', what: 'RenewFailed', err: e.err });
        this.#checkDeadline();
        if (d.phase.name !== 'held' && d.phase.name !== 'confirming') return this.#flightEnds();
        d.renew = 'backoff';
        this.actions.push({
          type: 'ScheduleRetry',
          inMs: Math.max(RETRY_MIN_MS, Math.min(e.request.timings.renewPeriodMs / 4, RETRY_MAX_MS)),
        });
        return;
      case 'LeaseRead':
        if (d.renew !== 'reading') return;
        if (e.lease === undefined) {
          this.#leaseGone();
          return this.#flightEnds();
        }
        this.#observe(e.lease, e.parseError);
        this.#attempt();
        return;
      case 'LeaseReadFailed':
        if (d.renew === 'reading') this.#attempt();
        return;
      case 'RetryTimerFired':
        if (d.renew === 'backoff') this.#attempt();
        return;
      case 'ReleaseRequested': {
        const term = heldTerm(d);
        if (term === undefined) return;
        // The session stops trusting the term first (so the application stops writing), then writes.
        this.#endTerm('released', 'released by the holder');
        this.actions.push({ type: 'Release', token: term.token });
        return;
      }
      case 'DrainTimerFired':
        if (d.draining?.token === e.token) this.#handOver();
        return;
      case 'DrainDone':
        this.#checkDeadline();
        if (d.draining !== undefined) this.#handOver();
        return;
      case 'ReleaseAnswered':
        d.lease = e.lease;
        return;
      case 'GiveBackDone':
        d.givingBack = false;
        return;
      case 'Stop':
        this.#stopping = true;
        if (d.phase.name === 'held') this.#endTerm('lost', 'session stopped');
        d.phase = { name: 'stopped' };
        this.actions.push({ type: 'AbortRequests' }, { type: 'ClearTimers' });
        return;
    }
  }

  /** #ended: released or stopped (re-checked after an answer; it may have changed meanwhile). */
  #ended(): boolean {
    return this.#d.phase.name === 'stopped' || this.#d.phase.name === 'released';
  }

  /** #endedHere: a term with this token (or a smaller one) already ended in this session. */
  #endedHere(token: bigint): boolean {
    return this.#d.endedToken !== undefined && token <= this.#d.endedToken;
  }

  /** #observe takes the newest Lease (by resourceVersion) and reacts to its holder (rows L1–L10). */
  #observe(view: LeaseView, parseError?: unknown): void {
    const d = this.#d;
    if (d.phase.name === 'stopped') return;
    if (d.lease !== undefined && view.rv < d.lease.rv) return; // an older event than what we wrote
    d.lease = view;
    const rec = view.record;
    if (rec === undefined) {
      this.actions.push({ type: 'Report', what: 'LeaseUnparsable', err: parseError });
      return;
    }
    const ours = sameHolder(rec.holder, d.self) && rec.token !== undefined;
    const lowered = rec.token !== undefined && d.highestToken !== undefined && rec.token < d.highestToken;
    if (rec.token !== undefined && !lowered) d.highestToken = rec.token;
    if (d.phase.name === 'held') {
      const term = d.phase.term;
      this.#checkDeadline();
      if (d.phase.name !== 'held') return;
      if (!ours) {
        this.#endTerm('lost', rec.holder !== undefined ? `granted to ${rec.holder.name}` : 'revoked');
        return;
      }
      if (rec.token === term.token) {
        this.#tighten(termTimingsOf(rec));
        if (d.phase.name === 'held') this.#followHandover(rec, term.token);
        return;
      }
      this.#endTerm('lost', `superseded by token ${String(rec.token)}`);
    }
    const confirming = d.phase.name === 'confirming' ? d.phase.token : undefined;
    if (ours && lowered) {
      // L0: a token below one this session saw on the Lease was written by someone other than the
      // controller (a co-tenant with `leases update`): it may be an earlier holder's. Never taken up.
      if (d.phase.name === 'confirming') d.phase = { name: 'waiting' };
      this.actions.push({
        type: 'Report',
        what: 'TokenWentBack',
        err: new Error(
          `the Lease names this pod with token ${String(rec.token)}, below token ${String(d.highestToken)} seen on it before: not taken up`,
        ),
      });
    } else if (ours && rec.token !== undefined && this.#endedHere(rec.token)) {
      // A term that ended here: never confirmed again, whatever the Lease says (see the header).
      if (d.phase.name === 'confirming') d.phase = { name: 'waiting' };
      this.#giveBack(rec.token);
    } else if (ours && rec.token !== undefined && confirming !== rec.token) {
      d.phase = { name: 'confirming', token: rec.token };
      this.#kick();
    } else if (!ours && d.phase.name === 'confirming') {
      d.phase = { name: 'waiting' };
    }
  }

  /** #leaseGone: the Lease was deleted (rows G1, G2). */
  #leaseGone(): void {
    const d = this.#d;
    d.lease = undefined;
    if (d.phase.name === 'held') this.#endTerm('lost', 'Lease deleted');
    else if (d.phase.name === 'confirming') d.phase = { name: 'waiting' };
  }

  /** #checkDeadline ends the term if its local deadline has passed (timers may fire late after a pause). */
  #checkDeadline(): void {
    const term = heldTerm(this.#d);
    if (term !== undefined && this.#now >= term.validUntilMs) this.#endTerm('lost', 'renew deadline passed');
  }

  /**
   * #followHandover reacts to the controller's handover mark on the held term's Lease (V1, V2): a
   * mark for this token naming another pod starts a drain (once); a drain whose mark is gone (the
   * request withdrawn, or lapsed) is cancelled, and the term goes on.
   */
  #followHandover(rec: LockRecord, token: bigint): void {
    const d = this.#d;
    const mark = rec.handover;
    const applies = mark !== undefined && mark.token === token && !sameHolder(mark.to, d.self);
    if (!applies) {
      if (d.draining === undefined) return;
      d.draining = undefined;
      this.actions.push({ type: 'ClearDrain' }, { type: 'Emit', event: 'handoverCancelled', token });
      return;
    }
    if (d.draining?.token === token && d.draining.to === mark.to.name) return;
    // The app's own floor may lengthen the period (never shorten it): the event says the period in force.
    const term = heldTerm(d);
    const drainMs = Math.max(mark.drainMs, term !== undefined ? d.minDrainMs(term.timings) : 0);
    d.draining = { token, to: mark.to.name, untilMs: this.#now + drainMs };
    this.actions.push({
      type: 'Emit',
      event: 'draining',
      token,
      reason: `handing over to pod ${mark.to.name}`,
      handover: { to: mark.to.name, drainMs },
    });
    if (drainMs <= 0) return this.#handOver();
    this.actions.push({ type: 'ArmDrain', token, inMs: drainMs });
  }

  /** #handOver ends a draining term (V3): stop believing first, then release as HandedOver. */
  #handOver(): void {
    const d = this.#d;
    const term = heldTerm(d);
    const to = d.draining?.to;
    if (term === undefined || d.draining?.token !== term.token) {
      d.draining = undefined;
      return;
    }
    this.#endTerm('released', `handed over to pod ${to ?? '?'}`);
    this.actions.push({ type: 'Release', token: term.token, handedOver: true });
  }

  #endTerm(phase: 'lost' | 'released', reason: string): void {
    const d = this.#d;
    const term = heldTerm(d);
    d.phase = { name: phase };
    if (d.draining !== undefined) {
      d.draining = undefined;
      this.actions.push({ type: 'ClearDrain' });
    }
    this.actions.push({ type: 'ClearTimers' });
    if (term === undefined) return;
    d.endedToken = term.token; // larger than any before: a term only starts with a token not #endedHere
    this.actions.push({ type: 'Emit', event: phase, token: term.token, reason });
    // A new grant to us (a larger token) starts a new term through #observe; a Lease that still
    // names the lost term is handed back there.
    if (phase === 'lost' && d.lease?.record !== undefined && sameHolder(d.lease.record.holder, d.self))
      this.#observe(d.lease);
  }

  /** #giveBack hands an ended term back: one at a time, never while stopping, only once it ended here. */
  #giveBack(token: bigint): void {
    const d = this.#d;
    if (d.givingBack || this.#stopping || (d.phase.name !== 'lost' && d.phase.name !== 'released')) return;
    d.givingBack = true;
    this.actions.push({ type: 'GiveBack', token, budgetMs: GIVE_BACK_BUDGET_MS });
  }

  /** #kick starts a renew flight unless one is under way (rows K1, K2). */
  #kick(): void {
    const d = this.#d;
    if (d.phase.name === 'stopped') return;
    // A kick while a renew is out (a new grant seen meanwhile) runs once that one is done.
    if (d.renew !== 'idle') {
      d.renewAgain = true;
      return;
    }
    this.#attempt();
  }

  /** #attempt sends one renew of the held or confirming token, or ends the flight (rows K3–K5). */
  #attempt(): void {
    const d = this.#d;
    if (this.#ended()) return this.#flightEnds();
    const term = heldTerm(d);
    const token = term?.token ?? (d.phase.name === 'confirming' ? d.phase.token : undefined);
    const lease = d.lease;
    if (lease === undefined || token === undefined || !namesTerm(lease.record, d.self, token))
      return this.#flightEnds();
    const timings = termTimingsOf(lease.record);
    // Bound the request by what is left of the term (or, confirming, by one deadline).
    const budgetMs = term !== undefined ? term.validUntilMs - this.#now : timings.renewDeadlineMs;
    if (budgetMs <= 0) {
      this.#checkDeadline();
      return this.#flightEnds();
    }
    d.renew = 'sending';
    this.actions.push({
      type: 'SendRenew',
      lease: lease.object,
      budgetMs,
      request: { token, sentAtMs: this.#now, timings },
    });
  }

  #flightEnds(): void {
    const d = this.#d;
    d.renew = 'idle';
    if (d.renewAgain) {
      d.renewAgain = false;
      this.#kick();
    }
  }

  /**
   * #tighten takes a new reading of the held term's timings (rows L5, C2): the term keeps, field by
   * field, the shorter of what it had and what the Lease now says; timings that contradict each
   * other end it; a shortened renew deadline moves its deadline in (and the timers with it).
   */
  #tighten(reading: TermTimings): void {
    const d = this.#d;
    const term = heldTerm(d);
    if (term === undefined) return;
    const timings = tighterTimings(term.timings, reading);
    const why = timingsContradiction(timings);
    if (why !== undefined) return this.#endTerm('lost', `term timings contradict each other: ${why}`);
    const validUntilMs = term.validUntilMs - (term.timings.renewDeadlineMs - timings.renewDeadlineMs);
    d.phase = { name: 'held', term: { ...term, timings, validUntilMs } };
    d.lastTimings = timings;
    if (validUntilMs === term.validUntilMs) return;
    this.#checkDeadline();
    if (d.phase.name !== 'held') return;
    const leftMs = validUntilMs - this.#now;
    this.actions.push({
      type: 'ArmTimers',
      renewInMs: Math.max(1, Math.min(timings.renewPeriodMs, Math.floor(leftMs / 2))),
      deadlineInMs: Math.max(1, leftMs),
    });
  }

  /**
   * #refuse: a confirming renew succeeded, but the term's timings contradict each other (row C1).
   * No term starts; the token counts as ended here (never taken up) and is handed back, so that
   * the controller grants again with timings of its own.
   */
  #refuse(token: bigint, why: string): void {
    const d = this.#d;
    d.phase = { name: 'lost' };
    d.endedToken = token;
    this.actions.push({
      type: 'Report',
      what: 'TimingsContradict',
      err: new Error(`Refused the term of token ${String(token)}: its timings contradict each other: ${why}`),
    });
    if (namesTerm(d.lease?.record, d.self, token)) this.#giveBack(token);
  }

  /**
   * #renewed: a renew succeeded; it confirms or extends the term unless it came too late or the
   * term's timings contradict each other (rows C1, C2, R2–R5). The timings are the most
   * conservative reading: the term's own, the request's and the newest Lease's, field by field.
   */
  #renewed(r: RenewRequest): void {
    const d = this.#d;
    const held = heldTerm(d);
    const ofThisTerm =
      held !== undefined ? held.token === r.token : d.phase.name === 'confirming' && d.phase.token === r.token;
    let timings = held !== undefined ? tighterTimings(held.timings, r.timings) : r.timings;
    if (d.lease?.record !== undefined && namesTerm(d.lease.record, d.self, r.token))
      timings = tighterTimings(timings, termTimingsOf(d.lease.record));
    const why = ofThisTerm ? timingsContradiction(timings) : undefined;
    if (why !== undefined) {
      if (held !== undefined) this.#endTerm('lost', `term timings contradict each other: ${why}`);
      else this.#refuse(r.token, why);
      return;
    }
    const validUntilMs = r.sentAtMs + timings.renewDeadlineMs;
    if (validUntilMs <= this.#now) {
      this.#checkDeadline(); // the reply came too late to trust
      return;
    }
    const term = heldTerm(d);
    if (term === undefined && this.#endedHere(r.token)) {
      // A renew sent before the term's deadline, answered after it: the term is over all the same.
      this.#giveBack(r.token);
      return;
    }
    // While the first renew was out, the watch may have shown the Lease deleted, released or handed
    // on (G2, L10 ended the confirming): our write came before that, so it starts no term.
    if (term === undefined && !(d.phase.name === 'confirming' && d.phase.token === r.token)) return;
    const expiresInMs = validUntilMs - this.#now;
    // A renewal moves the deadline; the term keeps its token, and its timings only ever get shorter.
    d.phase = {
      name: 'held',
      term: term !== undefined ? { ...term, validUntilMs, timings } : { token: r.token, validUntilMs, timings },
    };
    d.lastTimings = timings;
    if (term === undefined) {
      this.actions.push({ type: 'Emit', event: 'granted', token: r.token, expiresInMs });
    } else {
      this.actions.push({ type: 'Emit', event: 'renewed', token: r.token, expiresInMs });
    }
    this.actions.push({
      type: 'ArmTimers',
      renewInMs: timings.renewPeriodMs,
      deadlineInMs: Math.max(1, expiresInMs),
    });
  }
}

function rvOf(l: V1Lease): bigint {
  const rv = l.metadata?.resourceVersion ?? '0';
  return /^[0-9]+$/.test(rv) ? BigInt(rv) : 0n;
}
