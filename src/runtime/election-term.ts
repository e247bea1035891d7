/**
 * The leader's term (leaderelection.ts) on the holder core (holder.ts), run by its shell
 * (holder-loop.ts): the acquire that won it, then renewals every retry period, each one attempt of
 * the elector bounded by what is left of the term; a failed renewal retried a retry period after
 * it was sent, within the term; the term held until renewDeadline after the send of the last
 * successful renewal.
 */
import type { TimerClock } from './clock.ts';
import { initialHolder, type HolderPolicy } from './holder.ts';
import { HolderLoop } from './holder-loop.ts';

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
    deadlineReason: () => 'RenewDeadlineExceeded',
  };
  return new Promise<StopReason>((resolve, reject) => {
    const onAbort = (): void => {
      loop.close();
      resolve('Cancelled');
    };
    const loop = new HolderLoop({
      clock: o.clock,
      policy,
      state: initialHolder(),
      renew: async (_request, budgetMs) => {
        const result = await o.renew(o.clock.monotonicMs() + budgetMs);
        if (result === 'ok') return { kind: 'renewed' };
        if (result === 'lost') return { kind: 'notOurs', reason: 'LeaseTakenOver' };
        return { kind: 'failed', err: undefined };
      },
      onEmit: (e) => {
        if (e.event === 'renewed') o.renewed();
        if (e.event !== 'lost') return;
        loop.close();
        o.signal.removeEventListener('abort', onAbort);
        resolve(e.reason === 'LeaseTakenOver' ? 'LeaseTakenOver' : 'RenewDeadlineExceeded');
      },
      onError: (err) => {
        o.signal.removeEventListener('abort', onAbort);
        reject(err instanceof Error ? err : new Error('Leader Lease renewal failed', { cause: err }));
      },
    });
    o.signal.addEventListener('abort', onAbort, { once: true });
    loop.feed({ type: 'Granted', request: { token: 1n, sentAtMs: o.sentAtMs, timings } });
    // A grant answered after its own deadline starts no term.
    if (loop.term() === undefined) {
      loop.close();
      o.signal.removeEventListener('abort', onAbort);
      resolve('RenewDeadlineExceeded');
    }
  });
}
