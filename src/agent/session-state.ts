/**
 * The agent session's state, events and actions (the types of session-machine.ts's transition)
 * and the small pure helpers its shell shares with it: a Lease as a view, whether a record names
 * a term, whether the shell may follow another Lease. The phase, the ended token and the renew
 * flight are the holder core's (runtime/holder.ts); the rest is what only a Lease has.
 */
import type { V1Lease } from '@kubernetes/client-node';
import { parseLease, type LockRecord } from '../lease/record.ts';
import { sameHolder, type HolderRef } from '../protocol/holder.ts';
import type { TermTimings } from '../protocol/timings.ts';
import { initialHolder } from '../runtime/holder.ts';
import type * as core from '../runtime/holder.ts';

export type { LockState, RenewFlight } from '../runtime/holder.ts';

/** Term is one validly held term of the Lease (the holder core's Term, with the Lease's timings). */
export type Term = core.Term<TermTimings>;

/** Phase is the session's phase (the holder core's), with what that phase knows. */
export type Phase = core.Phase<TermTimings>;

/** LeaseView is one Lease as seen: the object, its resourceVersion, and its record (undefined if unparsable). */
export interface LeaseView {
  readonly object: V1Lease;
  readonly rv: bigint;
  readonly record: LockRecord | undefined;
}

/**
 * SessionState is everything the session decides from; the shell keeps it and never changes it
 * itself. Its phase, endedToken and renew flight are the holder core's (runtime/holder.ts); the
 * rest is what only a Lease has.
 */
export interface SessionState extends core.HolderState<TermTimings> {
  /** self is this pod incarnation. */
  readonly self: HolderRef;
  /** lease is the newest Lease seen (by resourceVersion), or the one our last release wrote. */
  readonly lease: LeaseView | undefined;
  /**
   * highestToken is the largest token seen on any Lease of this lock (any holder). The token only
   * grows when the controller writes it, so a Lease below it was lowered by someone else (L0).
   */
  readonly highestToken: bigint | undefined;
  /** lastTimings are the current or last term's timings (undefined before the first grant). */
  readonly lastTimings: TermTimings | undefined;
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

/**
 * RenewRequest is what a SendRenew was sent for (the core's); the shell passes it back with the
 * answer. Its timings are the term's as the Lease fixed them at grant (the agent does not read the lock).
 */
export type RenewRequest = core.RenewRequest<TermTimings>;

/** RenewFailure classifies a failed renew: a 409, a 404, or anything else (a timeout, the network). */
export type RenewFailure = 'conflict' | 'notFound' | 'other';

/** SessionEvent is one input to the session's transition (session-machine.ts). */
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

/** Transition is the result of one transition of the session (session-machine.ts). */
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
    ...initialHolder<TermTimings>(),
    self,
    minDrainMs,
    lease: undefined,
    highestToken: undefined,
    lastTimings: undefined,
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

export { heldTerm } from '../runtime/holder.ts';

function rvOf(l: V1Lease): bigint {
  const rv = l.metadata?.resourceVersion ?? '0';
  return /^[0-9]+$/.test(rv) ? BigInt(rv) : 0n;
}
