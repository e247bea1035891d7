/**
 * The leader's term (leaderelection.ts) on the holder core (holder.ts): the acquire that won it,
 * then renewals every retry period, each one attempt of the elector bounded by what is left of the
 * term; a failed renewal retried a retry period after it was sent, within the term; the term held
 * until renewDeadline after the send of the last successful renewal. This is the timers and the
 * attempts around the core; the core decides.
 */
import type { Timer, TimerClock } from './clock.ts';
import {
  holderTransition,
  initialHolder,
  type HolderEffect,
  type HolderEvent,
  type HolderPolicy,
  type HolderState,
} from './holder.ts';

/** AttemptResult: 'ok' holds the Lease now; 'failed' does not (retry); 'lost' another holder was seen while leading. */
export type AttemptResult = 'ok' | 'failed' | 'lost';

/** StopReason is why a term ended, as logged with 'Stopped leading'. */
export type StopReason = 'Cancelled' | 'RenewDeadlineExceeded' | 'LeaseTakenOver';

/** TermOptions are what {@link leadTerm} runs a term with. */
export interface TermOptions {
  readonly clock: TimerClock;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;
  /** sentAtMs: when the acquire that won the term was sent (monotonic). */
  readonly sentAtMs: number;
  /** signal ends the term ('Cancelled'). */
  readonly signal: AbortSignal;
  /** renew makes one renewal attempt, abandoned at `deadline` (monotonic); it may reject (a callback threw). */
  renew(deadline: number): Promise<AttemptResult>;
  /** renewed is told of each successful renewal. */
  renewed(): void;
}

/**
 * leadTerm runs a leader's term to its end and resolves with why it ended: at the deadline, at
 * once when a renewal finds another holder, or when `signal` aborts. It rejects when `renew` does.
 * It leaves no timer behind.
 */
export function leadTerm(o: TermOptions): Promise<StopReason> {
  const timings = { renewDeadlineMs: o.renewDeadlineMs, renewPeriodMs: o.retryPeriodMs };
  const policy: HolderPolicy = {
    // The renewal attempt reads the Lease itself when its fast path fails: "ours" is checked there.
    names: () => true,
    timingsFor: () => timings,
    // A failed renewal is retried a retry period after it was sent, never past the deadline.
    retryInMs: (request, leftMs, nowMs) => Math.max(0, Math.min(request.sentAtMs + o.retryPeriodMs - nowMs, leftMs)),
    deadlineReason: 'RenewDeadlineExceeded',
  };
  return new Promise<StopReason>((resolve, reject) => {
    let state: HolderState = initialHolder();
    let renewTimer: Timer | undefined;
    let deadlineTimer: Timer | undefined;
    let ended = false;
    const clearTimers = (): void => {
      renewTimer?.cancel();
      deadlineTimer?.cancel();
    };
    const end = (settle: () => void): void => {
      if (ended) return;
      ended = true;
      clearTimers();
      o.signal.removeEventListener('abort', onAbort);
      settle();
    };
    const perform = (effect: HolderEffect, now: number): void => {
      switch (effect.type) {
        case 'SendRenew': {
          const request = effect.request;
          o.renew(now + effect.budgetMs).then(
            (result) => {
              if (result === 'ok') step({ type: 'RenewAnswered', request });
              else if (result === 'lost')
                step({ type: 'RenewFailed', request, failure: 'notOurs', reason: 'LeaseTakenOver' });
              else step({ type: 'RenewFailed', request, failure: 'other' });
            },
            (err: unknown) => {
              end(() => {
                reject(err instanceof Error ? err : new Error('Leader Lease renewal failed', { cause: err }));
              });
            },
          );
          return;
        }
        case 'ArmTimers':
          clearTimers();
          renewTimer = o.clock.setTimeout(() => {
            step({ type: 'RenewTimerFired' });
          }, effect.renewInMs);
          deadlineTimer = o.clock.setTimeout(() => {
            step({ type: 'DeadlineCheck' });
          }, effect.deadlineInMs);
          return;
        case 'ScheduleRetry':
          renewTimer = o.clock.setTimeout(() => {
            step({ type: 'RetryTimerFired' });
          }, effect.inMs);
          return;
        case 'ClearTimers':
          clearTimers();
          return;
        case 'Emit':
          if (effect.event === 'renewed') o.renewed();
          if (effect.event === 'lost') {
            const reason: StopReason = effect.reason === 'LeaseTakenOver' ? 'LeaseTakenOver' : 'RenewDeadlineExceeded';
            end(() => {
              resolve(reason);
            });
          }
          return;
        default:
          // Report: the attempt logged its failure. ReadLease, Release, AbortRequests: the attempt
          // re-reads the Lease itself, run() releases, and a cancel ends the term here.
          return;
      }
    };
    const step = (e: HolderEvent): void => {
      if (ended) return;
      const now = o.clock.monotonicMs();
      const next = holderTransition(state, e, now, policy);
      state = next.state;
      for (const effect of next.effects) perform(effect, now);
    };
    const onAbort = (): void => {
      end(() => {
        resolve('Cancelled');
      });
    };
    o.signal.addEventListener('abort', onAbort, { once: true });
    step({ type: 'Granted', request: { token: 1n, sentAtMs: o.sentAtMs, timings } });
    // A grant answered after its own deadline starts no term.
    if (state.phase.name !== 'held')
      end(() => {
        resolve('RenewDeadlineExceeded');
      });
  });
}
