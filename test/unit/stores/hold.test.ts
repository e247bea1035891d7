/**
 * Holding a store lock (src/stores/hold.ts) over a scripted backend on a fake clock: the waiter
 * wakes on a release notification before its backoff, gives up at waitMs or under ifHeld `fail`;
 * the watchdog renews every third of the TTL, rides out failed renews until the validity passes,
 * and declares the lock lost (signal aborted, event, isHeld false) at the validity or at once when
 * the key is gone; release is idempotent and compare-and-deletes once.
 */
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../../src/observability/logger.ts';
import type { LockEvent } from '../../../src/protocol/lock-event.ts';
import type { TermTimings } from '../../../src/protocol/timings.ts';
import {
  heldTerm,
  holderTransition,
  initialHolder,
  type HolderEvent,
  type HolderState,
  type RenewRequest,
} from '../../../src/runtime/holder.ts';
import { holdLock, storePolicy, type HoldOptions, type StoreHold } from '../../../src/stores/hold.ts';
import type { Attempt, LockBackend, RenewAnswer } from '../../../src/stores/store.ts';
import { storeTimings, validUntil } from '../../../src/stores/redis/timing.ts';
import { FakeClock } from '../../support/fake-clock.ts';

const TTL = 3000; // drift 32 ms, renew every 1000 ms

/** Scripted: grants when `free`, renews as `renewWith` says, records calls. */
class Scripted implements LockBackend {
  free = true;
  renewWith: () => Promise<RenewAnswer> = () => Promise.resolve('renewed');
  readonly calls: string[] = [];
  notify: ((owner: string) => void) | undefined;
  next = 0n;
  readonly clock: FakeClock;
  constructor(clock: FakeClock) {
    this.clock = clock;
  }
  tryAcquire(owner: string, _ttlMs: number): Promise<Attempt> {
    this.calls.push(`acquire ${owner}`);
    if (!this.free)
      return Promise.resolve({ granted: false, held: true, heldForMs: 10_000, reason: 'held by another owner' });
    this.free = false;
    return Promise.resolve({
      granted: true,
      token: ++this.next,
      clockFloored: false,
      counterMissing: this.next === 1n,
    });
  }
  renew(owner: string): Promise<RenewAnswer> {
    this.calls.push(`renew ${owner} at ${this.clock.monotonicMs()}`);
    return this.renewWith();
  }
  release(owner: string): Promise<void> {
    this.calls.push(`release ${owner}`);
    this.free = true;
    return Promise.resolve();
  }
  subscribe(onRelease: (owner: string) => void): Promise<() => void> {
    this.calls.push('subscribe');
    this.notify = onRelease;
    return Promise.resolve(() => {
      this.notify = undefined;
    });
  }
}

function options(clock: FakeClock, o: Partial<HoldOptions> = {}): HoldOptions {
  let n = 0;
  return {
    lock: 'billing',
    ttlMs: TTL,
    clock,
    log: silentLogger,
    ifHeld: 'wait',
    floor: () => 0n,
    random: () => 0.999,
    newOwner: () => `o${++n}`,
    ...o,
  };
}

/** nextTick: the watchdog arms its timers on the next tick after the grant (hold.ts keep). */
const nextTick = (): Promise<void> => new Promise((resolve) => process.nextTick(resolve));

async function held(b: Scripted, clock: FakeClock, o: Partial<HoldOptions> = {}): Promise<StoreHold> {
  const r = await holdLock(b, options(clock, o));
  if (r.kind !== 'held') throw new Error(`not held: ${r.kind}`);
  await nextTick();
  return r.hold;
}

/** flush lets promise continuations run. */
const flush = async (): Promise<void> => {
  for (let i = 0; i < 10; i++) await Promise.resolve();
};

describe('holdLock: waiting', () => {
  it('grants at once when free, with a fresh owner id per attempt', async () => {
    const clock = new FakeClock();
    const b = new Scripted(clock);
    const h = await held(b, clock);
    expect(h.token).toBe(1n);
    expect(h.counterMissing).toBe(true);
    expect(h.isHeld()).toBe(true);
    expect(b.calls).toEqual(['acquire o1']); // one round trip: no subscription for a free lock
  });

  it('a release notification wakes the waiter before its backoff ends', async () => {
    const clock = new FakeClock();
    const b = new Scripted(clock);
    b.free = false;
    const p = holdLock(b, options(clock));
    await flush();
    // Refused: it subscribes, then tries again at once (a release before the subscription is not missed).
    expect(b.calls).toEqual(['acquire o1', 'subscribe', 'acquire o2']);
    b.free = true;
    b.notify?.('another');
    const r = await p;
    expect(r.kind).toBe('held');
    expect(clock.monotonicMs()).toBe(0); // no time passed: woken, not timed out
    expect(b.calls).toEqual(['acquire o1', 'subscribe', 'acquire o2', 'acquire o3']);
  });

  it("a release published with the waiter's own owner id (its own give-back) does not wake it", async () => {
    const clock = new FakeClock();
    const b = new Scripted(clock);
    b.free = false;
    const p = holdLock(b, options(clock, { waitMs: 10_000 }));
    await flush();
    expect(b.calls).toEqual(['acquire o1', 'subscribe', 'acquire o2']);
    b.notify?.('o2');
    b.notify?.('o1');
    await flush();
    expect(b.calls).toEqual(['acquire o1', 'subscribe', 'acquire o2']); // still waiting out its backoff
    b.free = true;
    b.notify?.('someone-else');
    expect((await p).kind).toBe('held');
    expect(clock.monotonicMs()).toBe(0);
  });

  it('without notifications, retries on the jittered backoff until waitMs, then says why', async () => {
    const clock = new FakeClock();
    const b = new Scripted(clock);
    b.free = false;
    const p = holdLock(b, options(clock, { waitMs: 500 }));
    for (let i = 0; i < 20; i++) await clock.advanceAsync(100);
    expect(await p).toEqual({ kind: 'timedOut', reason: 'held by another owner' });
    // refused, subscribed, tried again at once; then backoff ceilings 50, 100, 200, capped by the
    // 500 ms wait: 49 + 99 + 199 + 153 ms
    expect(b.calls).toEqual([
      'acquire o1',
      'subscribe',
      'acquire o2',
      'acquire o3',
      'acquire o4',
      'acquire o5',
      'acquire o6',
    ]);
  });

  it('ifHeld fail: gives up at the first refusal by another owner', async () => {
    const clock = new FakeClock();
    const b = new Scripted(clock);
    b.free = false;
    expect(await holdLock(b, options(clock, { ifHeld: 'fail' }))).toEqual({
      kind: 'heldByAnother',
      reason: 'held by another owner',
    });
  });

  it('an aborted signal ends the wait', async () => {
    const clock = new FakeClock();
    const b = new Scripted(clock);
    b.free = false;
    const ac = new AbortController();
    const p = holdLock(b, options(clock, { signal: ac.signal }));
    await flush();
    ac.abort();
    expect((await p).kind).toBe('aborted');
  });
});

describe('holdLock: a grant that came too late', () => {
  it('is given back and retried when its answer arrived after its validity', async () => {
    const clock = new FakeClock();
    const b = new Scripted(clock);
    const slow = b.tryAcquire.bind(b);
    let first = true;
    b.tryAcquire = async (owner, ttlMs) => {
      const a = await slow(owner, ttlMs);
      if (first) clock.advance(TTL); // the reply took a whole TTL
      first = false;
      return a;
    };
    const p = holdLock(b, options(clock));
    await flush();
    await clock.advanceAsync(50); // the backoff's first step
    const r = await p;
    expect(r.kind).toBe('held');
    expect(b.calls).toEqual(['acquire o1', 'release o1', 'subscribe', 'acquire o2']);
    if (r.kind === 'held') expect(r.hold.token).toBe(2n);
  });

  it('counts a VM pause during the request: a wall jump past the TTL with the monotonic clock frozen gives the grant back', async () => {
    const clock = new FakeClock();
    const b = new Scripted(clock);
    const grant = b.tryAcquire.bind(b);
    b.tryAcquire = async (owner, ttlMs) => {
      // The VM was paused while the request was out: CLOCK_MONOTONIC stood still, the wall clock
      // was set forward on resume.
      clock.setWall(new Date(clock.now().getTime() + 5000));
      return grant(owner, ttlMs);
    };
    const r = await holdLock(b, options(clock, { waitMs: 0 }));
    expect(r).toMatchObject({ kind: 'timedOut', reason: 'granted token 1 too late: its validity had passed' });
    expect(b.calls).toEqual(['acquire o1', 'release o1']);
  });

  it("reports the validity left counted from the request's send: a slow reply shortens it", async () => {
    const clock = new FakeClock();
    const b = new Scripted(clock);
    const grant = b.tryAcquire.bind(b);
    b.tryAcquire = async (owner, ttlMs) => {
      const a = await grant(owner, ttlMs);
      clock.advance(600); // the reply came 600 ms after the request was sent
      return a;
    };
    const h = await held(b, clock);
    expect(h.validForMs()).toBe(validUntil(0, TTL) - 600);
    await clock.advanceAsync(100);
    expect(h.validForMs()).toBe(validUntil(0, TTL) - 700);
    await h.release();
    expect(h.validForMs()).toBe(0);
  });
});

describe('holdLock: the watchdog', () => {
  it('renews every third of the TTL and extends the validity from each send', async () => {
    const clock = new FakeClock();
    const b = new Scripted(clock);
    const h = await held(b, clock);
    const events: LockEvent[] = [];
    h.onEvent((e) => events.push(e));
    await clock.advanceAsync(5000);
    expect(b.calls.filter((c) => c.startsWith('renew'))).toEqual([
      'renew o1 at 1000',
      'renew o1 at 2000',
      'renew o1 at 3000',
      'renew o1 at 4000',
      'renew o1 at 5000',
    ]);
    expect(h.isHeld()).toBe(true);
    expect(events.map((e) => e.type)).toEqual(['renewed', 'renewed', 'renewed', 'renewed', 'renewed']);
    expect(events[0]).toEqual({ type: 'renewed', lock: 'billing', token: '1', expiresInMs: 3000 - 32 });
  });

  it('the key gone (or another owner): lost at once — signal aborted, event, isHeld false', async () => {
    const clock = new FakeClock();
    const b = new Scripted(clock);
    const h = await held(b, clock);
    const events: LockEvent[] = [];
    h.onEvent((e) => events.push(e));
    b.renewWith = () => Promise.resolve('notOwner');
    await clock.advanceAsync(1000);
    expect(h.signal.aborted).toBe(true);
    expect(h.isHeld()).toBe(false);
    expect(events).toEqual([
      { type: 'lost', lock: 'billing', token: '1', reason: 'the key is gone or held by another owner' },
    ]);
  });

  it('failed renews are retried until the validity passes, then lost at the validity, not before', async () => {
    const clock = new FakeClock();
    const b = new Scripted(clock);
    const h = await held(b, clock);
    b.renewWith = () => Promise.reject(new Error('ECONNREFUSED'));
    await clock.advanceAsync(2967);
    expect(h.isHeld()).toBe(true);
    expect(h.signal.aborted).toBe(false);
    expect(b.calls.filter((c) => c.startsWith('renew')).length).toBeGreaterThan(10); // every 100 ms after the first
    await clock.advanceAsync(1);
    expect(h.isHeld()).toBe(false);
    expect(h.signal.aborted).toBe(true);
  });

  it('isHeld() reads the clock when called: a wall-clock jump past the validity (a VM resume) ends it before any timer fires', async () => {
    const clock = new FakeClock();
    const b = new Scripted(clock);
    const h = await held(b, clock);
    b.renewWith = () => new Promise(() => undefined);
    clock.setWall(new Date(clock.now().getTime() + 5000));
    expect(h.isHeld()).toBe(false);
    expect(h.signal.aborted).toBe(false); // the timers have not run yet
    await clock.advanceAsync(250); // the next timer slice notices
    expect(h.signal.aborted).toBe(true);
  });

  it('a renew that never answers does not keep the lock: the lapse timer ends it at the validity', async () => {
    const clock = new FakeClock();
    const b = new Scripted(clock);
    const h = await held(b, clock);
    b.renewWith = () => new Promise(() => undefined);
    await clock.advanceAsync(2968);
    expect(h.signal.aborted).toBe(true);
    expect((h.signal.reason as Error).message).toBe('lock billing lost: the validity passed without a renew');
  });

  it('release is idempotent: one compare-and-delete, a released event, no more renews', async () => {
    const clock = new FakeClock();
    const b = new Scripted(clock);
    const h = await held(b, clock);
    const events: LockEvent[] = [];
    h.onEvent((e) => events.push(e));
    await Promise.all([h.release(), h.release()]);
    await h.release();
    await clock.advanceAsync(5000);
    expect(b.calls).toEqual(['acquire o1', 'release o1']);
    expect(events).toEqual([{ type: 'released', lock: 'billing', token: '1' }]);
    expect(h.signal.aborted).toBe(true);
    expect(h.isHeld()).toBe(false);
  });

  it('arms its two timers on the next tick; a hold released before then sends the release first and arms none', async () => {
    const clock = new FakeClock();
    const b = new Scripted(clock);
    const r = await holdLock(b, options(clock));
    if (r.kind !== 'held') throw new Error(r.kind);
    expect(r.hold.isHeld()).toBe(true); // the clock decides, not the timers
    expect(clock.pendingTimers()).toBe(0);
    const releasing = r.hold.release();
    expect(b.calls).toEqual(['acquire o1', 'release o1']); // sent before release() returned
    await releasing;
    await nextTick();
    expect(clock.pendingTimers()).toBe(0);

    const h = await held(b, clock);
    expect(clock.pendingTimers()).toBe(2); // the renew and the lapse
    await h.release();
    expect(clock.pendingTimers()).toBe(0);
  });
});

describe("a store lock's term on the holder core (storePolicy, pure)", () => {
  const ttl = 3000; // drift 32, period 1000
  const timings = storeTimings(ttl);
  const request = (sentAtMs: number): RenewRequest<TermTimings> => ({ token: 1n, sentAtMs, timings });
  /** granted: a term granted by an acquire sent at 0, with a renewal sent at `renewSentAt` out. */
  function renewing(renewSentAt: number): HolderState<TermTimings> {
    let s = holderTransition(
      initialHolder<TermTimings>(),
      { type: 'Granted', request: request(0) },
      10,
      storePolicy(ttl),
    ).state;
    s = holderTransition(s, { type: 'RenewTimerFired' }, renewSentAt, storePolicy(ttl)).state;
    expect(s.renew).toBe('sending');
    return s;
  }
  const step = (s: HolderState<TermTimings>, e: HolderEvent<TermTimings>, now: number) =>
    holderTransition(s, e, now, storePolicy(ttl));

  it('a renew that succeeded extends trust from its send time and schedules the next a third later', () => {
    const t = step(renewing(1000), { type: 'RenewAnswered', request: request(1000) }, 1010);
    expect(heldTerm(t.state)?.validUntilMs).toBe(1000 + 3000 - 32);
    expect(t.effects).toContainEqual({ type: 'ArmTimers', renewInMs: 1000, deadlineInMs: 3968 - 1010 });
  });

  it('a renew answered after its own validity is worth nothing: lost', () => {
    const t = step(renewing(1000), { type: 'RenewAnswered', request: request(1000) }, 3968);
    expect(t.state.phase.name).toBe('lost');
    expect(t.effects).toContainEqual({
      type: 'Emit',
      event: 'lost',
      token: 1n,
      reason: 'the renew was answered after its validity had passed',
    });
  });

  it('a failure is retried soon while validity is left, never past it', () => {
    const soon = step(
      renewing(1000),
      { type: 'RenewFailed', request: request(1000), failure: 'other', err: 'down' },
      1005,
    );
    expect(soon.effects).toContainEqual({ type: 'ScheduleRetry', inMs: 100 });
    const late = step(
      renewing(2900),
      { type: 'RenewFailed', request: request(2900), failure: 'other', err: 'down' },
      2940,
    );
    expect(late.effects).toContainEqual({ type: 'ScheduleRetry', inMs: 28 });
  });

  it('a failure at or after the validity: lost, with the last error', () => {
    const t = step(
      renewing(2900),
      { type: 'RenewFailed', request: request(2900), failure: 'other', err: 'ECONNREFUSED' },
      2968,
    );
    expect(t.effects).toContainEqual({
      type: 'Emit',
      event: 'lost',
      token: 1n,
      reason: 'renews failed until the validity passed: ECONNREFUSED',
    });
  });
});
