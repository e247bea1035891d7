/**
 * session-machine — the pure decision core of {@link LockSession} (src/agent/session.ts), the holder's
 * side of the protocol for one lock (DESIGN "The protocol", steps 2–4). `transition(state, event,
 * nowMs)` returns the next state and the actions the I/O shell performs: Lease requests, timers,
 * LockEvents. No I/O, no timers, no promises, no clock reads: `nowMs` is the shell's monotonic time.
 *
 * It runs the holder core (runtime/holder.ts: phases, validity from the send time, the renew
 * flight and its retries, step-down and release) with the Lease as its record: this module adds
 * what only a Lease has — the watch's views ordered by resourceVersion, a lowered token, the
 * term's timings read from the Lease and tightened, the hand-back of an ended term, planned
 * handover. The types are in session-state.ts.
 *
 * Safety rules, each enforced here or in the core it runs:
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
import { sameHolder } from '../protocol/holder.ts';
import type { LockRecord } from '../lease/record.ts';
import { termTimingsOf, tighterTimings, timingsContradiction, type TermTimings } from '../protocol/timings.ts';
import { HolderStep, heldTerm, type HolderEffect, type Mutable } from '../runtime/holder.ts';
import {
  GIVE_BACK_BUDGET_MS,
  RETRY_MAX_MS,
  RETRY_MIN_MS,
  mayFollow,
  namesTerm,
  type LeaseView,
  type RenewRequest,
  type SessionAction,
  type SessionEvent,
  type SessionState,
  type Transition,
} from './session-state.ts';

/** transition is the session's one step: see the module table. Pure; `nowMs` is the monotonic time. */
export function transition(state: SessionState, event: SessionEvent, nowMs: number): Transition {
  const s = new Step(state, nowMs);
  s.apply(event);
  return { state: s.state(), actions: s.actions };
}

/**
 * Step is one transition in progress: a private draft of the state and the actions so far. The
 * draft is shared with the holder core's step, which decides the rows the two have in common;
 * the policy tells the core what the Lease says.
 */
class Step {
  readonly actions: SessionAction[] = [];
  readonly #d: Mutable<SessionState>;
  readonly #now: number;
  readonly #core: HolderStep<TermTimings>;
  /** #stopping: within a Stop, no hand-back starts (stop leaves the Lease to expire). */
  #stopping = false;

  constructor(state: SessionState, nowMs: number) {
    const d: Mutable<SessionState> = { ...state };
    this.#d = d;
    this.#now = nowMs;
    this.#core = new HolderStep<TermTimings>(
      d,
      nowMs,
      {
        names: (token) => d.lease !== undefined && namesTerm(d.lease.record, d.self, token),
        timingsFor: () => termTimingsOf(d.lease?.record),
        retryInMs: ({ timings }) => Math.max(RETRY_MIN_MS, Math.min(timings.renewPeriodMs / 4, RETRY_MAX_MS)),
        deadlineReason: () => 'renew deadline passed',
        termEnding: () => {
          if (d.draining === undefined) return;
          d.draining = undefined;
          this.actions.push({ type: 'ClearDrain' });
        },
        // A new grant to us (a larger token) starts a new term through #observe; a Lease that
        // still names the lost term is handed back there.
        termEnded: (phase) => {
          if (phase === 'lost' && d.lease?.record !== undefined && sameHolder(d.lease.record.holder, d.self))
            this.#observe(d.lease);
        },
        endedTermNamed: (token) => {
          this.#giveBack(token);
        },
      },
      (e) => {
        this.#out(e);
      },
    );
  }

  state(): SessionState {
    return { ...this.#d };
  }

  apply(e: SessionEvent): void {
    const d = this.#d;
    const core = this.#core;
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
        core.checkDeadline();
        return;
      case 'RenewTimerFired':
        core.kick();
        return;
      case 'RenewAnswered':
        if (d.renew !== 'sending') return;
        // Keep the newest Lease: the watch may already have delivered a later version.
        if (d.lease === undefined || e.stored.rv >= d.lease.rv) d.lease = e.stored;
        if (!core.ended()) this.#renewed(e.request);
        core.flightEnds();
        return;
      case 'RenewFailed':
        if (d.renew !== 'sending') return;
        if (core.ended()) return core.flightEnds();
        // A conflict: someone wrote the Lease: re-read it and go on only if it is still ours.
        if (e.failure === 'conflict') return core.conflict();
        if (e.failure === 'notFound') {
          this.#leaseGone();
          return core.flightEnds();
        }
        core.failed(e.request, e.err);
        return;
      case 'LeaseRead':
        if (d.renew !== 'reading') return;
        if (e.lease === undefined) {
          this.#leaseGone();
          return core.flightEnds();
        }
        this.#observe(e.lease, e.parseError);
        core.attempt();
        return;
      case 'LeaseReadFailed':
        if (d.renew === 'reading') core.attempt();
        return;
      case 'RetryTimerFired':
        if (d.renew === 'backoff') core.attempt();
        return;
      case 'ReleaseRequested':
        // The session stops trusting the term first (so the application stops writing), then writes.
        core.release('released by the holder');
        return;
      case 'DrainTimerFired':
        if (d.draining?.token === e.token) this.#handOver();
        return;
      case 'DrainDone':
        core.checkDeadline();
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
        core.stop();
        return;
    }
  }

  /** #out takes the core's effects as the session's actions; a renew carries the Lease it swaps. */
  #out(e: HolderEffect<TermTimings>): void {
    if (e.type !== 'SendRenew') {
      this.actions.push(e);
      return;
    }
    // The core sends a renew only of a Lease that names the term (policy.names).
    const lease = this.#d.lease;
    if (lease === undefined) throw new Error('SendRenew without a Lease');
    this.actions.push({ type: 'SendRenew', lease: lease.object, budgetMs: e.budgetMs, request: e.request });
  }

  /** #observe takes the newest Lease (by resourceVersion) and reacts to its holder (rows L1–L10). */
  #observe(view: LeaseView, parseError?: unknown): void {
    const d = this.#d;
    const core = this.#core;
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
      core.checkDeadline();
      if (d.phase.name !== 'held') return;
      if (!ours) {
        core.endTerm('lost', rec.holder !== undefined ? `granted to ${rec.holder.name}` : 'revoked');
        return;
      }
      if (rec.token === term.token) {
        this.#tighten(termTimingsOf(rec));
        if (d.phase.name === 'held') this.#followHandover(rec, term.token);
        return;
      }
      core.endTerm('lost', `superseded by token ${String(rec.token)}`);
    }
    if (ours && lowered) {
      // L0: a token below one this session saw on the Lease was written by someone other than the
      // controller (a co-tenant with `leases update`): it may be an earlier holder's. Never taken up.
      core.withdrawn();
      this.actions.push({
        type: 'Report',
        what: 'TokenWentBack',
        err: new Error(
          `the Lease names this pod with token ${String(rec.token)}, below token ${String(d.highestToken)} seen on it before: not taken up`,
        ),
      });
    } else if (ours && rec.token !== undefined) {
      // A term that ended here is never confirmed again, whatever the Lease says (see the header);
      // a new token is confirmed by a first renew (L7–L9).
      core.offered(rec.token);
    } else if (!ours) {
      core.withdrawn();
    }
  }

  /** #leaseGone: the Lease was deleted (rows G1, G2). */
  #leaseGone(): void {
    this.#d.lease = undefined;
    this.#core.notOurs('Lease deleted');
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
    this.#core.release(`handed over to pod ${to ?? '?'}`, true);
  }

  /** #giveBack hands an ended term back: one at a time, never while stopping, only once it ended here. */
  #giveBack(token: bigint): void {
    const d = this.#d;
    if (d.givingBack || this.#stopping || (d.phase.name !== 'lost' && d.phase.name !== 'released')) return;
    d.givingBack = true;
    this.actions.push({ type: 'GiveBack', token, budgetMs: GIVE_BACK_BUDGET_MS });
  }

  /**
   * #tighten takes a new reading of the held term's timings (rows L5, C2): the term keeps, field by
   * field, the shorter of what it had and what the Lease now says; timings that contradict each
   * other end it; a shortened renew deadline moves its deadline in (and the timers with it).
   */
  #tighten(reading: TermTimings): void {
    const term = heldTerm(this.#d);
    if (term === undefined) return;
    const timings = tighterTimings(term.timings, reading);
    const why = timingsContradiction(timings);
    if (why !== undefined) return this.#core.endTerm('lost', `term timings contradict each other: ${why}`);
    this.#d.lastTimings = timings;
    this.#core.shorten(timings);
  }

  /**
   * #refuse: a confirming renew succeeded, but the term's timings contradict each other (row C1).
   * No term starts; the token counts as ended here (never taken up) and is handed back, so that
   * the controller grants again with timings of its own.
   */
  #refuse(token: bigint, why: string): void {
    const d = this.#d;
    this.#core.refuse(token);
    this.actions.push({
      type: 'Report',
      what: 'TimingsContradict',
      err: new Error(`Refused the term of token ${String(token)}: its timings contradict each other: ${why}`),
    });
    if (namesTerm(d.lease?.record, d.self, token)) this.#giveBack(token);
  }

  /**
   * #renewed: a renew succeeded; it confirms or extends the term (the core's rows R2–R5) unless the
   * term's timings contradict each other (rows C1, C2). The timings are the most conservative
   * reading: the term's own, the request's and the newest Lease's, field by field.
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
      if (held !== undefined) this.#core.endTerm('lost', `term timings contradict each other: ${why}`);
      else this.#refuse(r.token, why);
      return;
    }
    if (this.#core.renewed({ ...r, timings })) d.lastTimings = timings;
  }
}
