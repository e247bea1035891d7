/**
 * The holder core (src/runtime/holder.ts) on its own, with a plain policy (the record names the
 * term while `names` says so; a 3 s term: renew deadline 2 s, renew period 1 s): the rules every
 * holder loop inherits from it — validity from the send time, a late answer worth nothing, retries
 * bounded by the deadline, a term that ended never taken up again, release before the write, stop
 * never writes — and its shell for the stores and the elector (src/runtime/holder-loop.ts). The
 * agent's Lease rows are in test/unit/agent/session-machine.test.ts.
 */
import { describe, expect, it } from 'vitest';
import {
  holderTransition,
  initialHolder,
  type HolderEffect,
  type HolderEvent,
  type HolderPolicy,
  type HolderState,
  type HolderTimings,
  type RenewRequest,
} from '../../../src/runtime/holder.ts';
import { HolderLoop, type RenewOutcome } from '../../../src/runtime/holder-loop.ts';
import { FakeClock } from '../../support/fake-clock.ts';

const TIMINGS: HolderTimings = { renewDeadlineMs: 2000, renewPeriodMs: 1000 };

function policy(named = true): HolderPolicy {
  return {
    names: () => named,
    timingsFor: () => TIMINGS,
    retryInMs: (_request, leftMs) => Math.min(100, leftMs),
    deadlineReason: () => 'deadline passed',
  };
}

const req = (token: bigint, sentAtMs: number): RenewRequest => ({ token, sentAtMs, timings: TIMINGS });

function show(e: HolderEffect): string {
  switch (e.type) {
    case 'SendRenew':
      return `SendRenew ${e.request.token} budget ${e.budgetMs} @${e.request.sentAtMs}`;
    case 'ScheduleRetry':
      return `ScheduleRetry ${e.inMs}`;
    case 'ArmTimers':
      return `ArmTimers renew ${e.renewInMs} deadline ${e.deadlineInMs}`;
    case 'Release':
      return `Release ${e.token}`;
    case 'Emit':
      return [`Emit ${e.event} ${e.token}`, ...(e.reason !== undefined ? [`(${e.reason})`] : [])].join(' ');
    default:
      return e.type;
  }
}

/** run feeds `steps` in order and returns the last state and every effect, shown. */
function run(
  steps: readonly (readonly [HolderEvent, number])[],
  from: HolderState = initialHolder(),
  p: HolderPolicy = policy(),
): { state: HolderState; effects: string[] } {
  let state = from;
  const effects: string[] = [];
  for (const [event, now] of steps) {
    const t = holderTransition(state, event, now, p);
    state = t.state;
    effects.push(...t.effects.map(show));
  }
  return { state, effects };
}

const phaseOf = (s: HolderState): string =>
  s.phase.name === 'held' ? `held ${s.phase.term.token} until ${s.phase.term.validUntilMs}` : s.phase.name;

describe('holder core', () => {
  it('a grant is valid from the time its request was sent, not answered', () => {
    const r = run([[{ type: 'Granted', request: req(7n, 100) }, 600]]);
    expect(phaseOf(r.state)).toBe('held 7 until 2100');
    expect(r.effects).toEqual(['Emit granted 7', 'ArmTimers renew 1000 deadline 1500']);
  });

  it('a grant answered after its validity starts no term', () => {
    const r = run([[{ type: 'Granted', request: req(7n, 100) }, 2100]]);
    expect(phaseOf(r.state)).toBe('waiting');
    expect(r.effects).toEqual([]);
  });

  it('an offered token is confirmed only by the first renew of it', () => {
    const r = run([
      [{ type: 'Offered', token: 7n }, 0],
      [{ type: 'RenewAnswered', request: req(7n, 0) }, 300],
    ]);
    expect(r.effects).toEqual(['SendRenew 7 budget 2000 @0', 'Emit granted 7', 'ArmTimers renew 1000 deadline 1700']);
    expect(phaseOf(r.state)).toBe('held 7 until 2000');
  });

  it('a renew is bounded by what is left of the term, and extends it from its own send time', () => {
    const r = run([
      [{ type: 'Granted', request: req(7n, 0) }, 0],
      [{ type: 'RenewTimerFired' }, 1000],
      [{ type: 'RenewAnswered', request: req(7n, 1000) }, 1500],
    ]);
    expect(r.effects.slice(2)).toEqual([
      'SendRenew 7 budget 1000 @1000',
      'Emit renewed 7',
      'ArmTimers renew 1000 deadline 1500',
    ]);
    expect(phaseOf(r.state)).toBe('held 7 until 3000');
  });

  it('failed renews are retried until the deadline, then the term is lost', () => {
    const r = run([
      [{ type: 'Granted', request: req(7n, 0) }, 0],
      [{ type: 'RenewTimerFired' }, 1000],
      [{ type: 'RenewFailed', request: req(7n, 1000), failure: 'other', err: new Error('down') }, 1950],
      [{ type: 'RetryTimerFired' }, 2000],
    ]);
    expect(r.effects.slice(2)).toEqual([
      'SendRenew 7 budget 1000 @1000',
      'Report',
      'ScheduleRetry 50',
      'ClearTimers',
      'Emit lost 7 (deadline passed)',
    ]);
    expect(phaseOf(r.state)).toBe('lost');
    expect(r.state.renew).toBe('idle');
  });

  it('a paused holder steps down at the first event after its deadline, whatever the event', () => {
    const r = run([
      [{ type: 'Granted', request: req(7n, 0) }, 0],
      [{ type: 'DeadlineCheck' }, 5000],
    ]);
    expect(r.effects.slice(2)).toEqual(['ClearTimers', 'Emit lost 7 (deadline passed)']);
  });

  it('a term that ended here is never taken up again, by an offer or a late answer', () => {
    const lost = run([
      [{ type: 'Granted', request: req(7n, 0) }, 0],
      [{ type: 'NotOurs', reason: 'taken' }, 500],
    ]).state;
    expect(lost.endedToken).toBe(7n);
    const again = run(
      [
        [{ type: 'Offered', token: 7n }, 600],
        [{ type: 'Granted', request: req(7n, 600) }, 700],
        [{ type: 'Granted', request: req(6n, 600) }, 700],
      ],
      lost,
    );
    expect(again.effects).toEqual([]);
    expect(phaseOf(again.state)).toBe('lost');
    const next = run([[{ type: 'Granted', request: req(8n, 600) }, 700]], lost);
    expect(phaseOf(next.state)).toBe('held 8 until 2600');
  });

  it('a release stops believing first, then writes; a second release does nothing', () => {
    const r = run([
      [{ type: 'Granted', request: req(7n, 0) }, 0],
      [{ type: 'ReleaseRequested' }, 500],
      [{ type: 'ReleaseRequested' }, 600],
    ]);
    expect(r.effects.slice(2)).toEqual(['ClearTimers', 'Emit released 7 (released by the holder)', 'Release 7']);
    expect(phaseOf(r.state)).toBe('released');
  });

  it('stop ends a held term without writing', () => {
    const r = run([
      [{ type: 'Granted', request: req(7n, 0) }, 0],
      [{ type: 'Stop' }, 500],
    ]);
    expect(r.effects.slice(2)).toEqual([
      'ClearTimers',
      'Emit lost 7 (session stopped)',
      'AbortRequests',
      'ClearTimers',
    ]);
  });

  it('a renew the record no longer names is not sent; a refusal by the record loses the term at once', () => {
    const held = run([[{ type: 'Granted', request: req(7n, 0) }, 0]]).state;
    expect(run([[{ type: 'RenewTimerFired' }, 1000]], held, policy(false)).effects).toEqual([]);
    const r = run(
      [
        [{ type: 'RenewTimerFired' }, 1000],
        [{ type: 'RenewFailed', request: req(7n, 1000), failure: 'notOurs', reason: 'the key is gone' }, 1100],
      ],
      held,
    );
    expect(r.effects).toEqual(['SendRenew 7 budget 1000 @1000', 'ClearTimers', 'Emit lost 7 (the key is gone)']);
  });

  it('one renew flight at a time: a kick while one is out runs once it ends', () => {
    const r = run([
      [{ type: 'Granted', request: req(7n, 0) }, 0],
      [{ type: 'RenewTimerFired' }, 1000],
      [{ type: 'RenewTimerFired' }, 1100],
      [{ type: 'RenewAnswered', request: req(7n, 1000) }, 1200],
    ]);
    expect(r.effects.filter((e) => e.startsWith('SendRenew'))).toEqual([
      'SendRenew 7 budget 1000 @1000',
      'SendRenew 7 budget 1800 @1200',
    ]);
  });
});

describe('holder loop (the shell the stores and the elector run)', () => {
  function loopWith(
    clock: FakeClock,
    renew: () => Promise<RenewOutcome>,
  ): { loop: HolderLoop<HolderTimings>; events: string[] } {
    const events: string[] = [];
    const loop = new HolderLoop<HolderTimings>({
      clock,
      policy: policy(),
      state: initialHolder(),
      renew,
      onEmit: (e) => events.push(`${e.event} ${e.token}${e.reason !== undefined ? ` (${e.reason})` : ''}`),
    });
    return { loop, events };
  }

  it('renews every period; a renewal that never answers does not keep the term past its deadline', async () => {
    const clock = new FakeClock();
    let answer: () => Promise<RenewOutcome> = () => Promise.resolve({ kind: 'renewed' });
    const { loop, events } = loopWith(clock, () => answer());
    loop.feed({ type: 'Granted', request: req(7n, clock.monotonicMs()) });
    await clock.advanceAsync(1000);
    expect(events).toEqual(['granted 7', 'renewed 7']);
    answer = () => new Promise(() => undefined);
    await clock.advanceAsync(1999); // renewed at 1 000: held until 3 000; the renewal at 2 000 hangs
    expect(loop.term()).toBeDefined();
    await clock.advanceAsync(1);
    expect(loop.term()).toBeUndefined();
    expect(events.at(-1)).toBe('lost 7 (deadline passed)');
    expect(clock.pendingTimers()).toBe(0);
  });

  it('close() performs the last event, clears the timers and ignores every later answer', async () => {
    const clock = new FakeClock();
    let answer: (o: RenewOutcome) => void = () => undefined;
    const { loop, events } = loopWith(clock, () => new Promise((resolve) => (answer = resolve)));
    loop.feed({ type: 'Granted', request: req(7n, clock.monotonicMs()) });
    await clock.advanceAsync(1000); // the renewal is out
    const effects = loop.close({ type: 'ReleaseRequested' }, ['Emit']);
    expect(effects.map(show)).toEqual(['ClearTimers', 'Emit released 7 (released by the holder)', 'Release 7']);
    expect(events).toEqual(['granted 7']);
    answer({ kind: 'renewed' });
    await clock.advanceAsync(5000);
    expect(events).toEqual(['granted 7']);
    expect(clock.pendingTimers()).toBe(0);
  });
});
