import { describe, expect, it } from 'vitest';
import { CONSERVATIVE_TIMER_SLICE_MS, conservativeClock } from '../../../src/runtime/clock.ts';
import { FakeClock } from '../../support/fake-clock.ts';

const at = (clock: FakeClock, ms: number): Date => new Date(clock.now().getTime() + ms);

describe('conservativeClock', () => {
  it('advances with the monotonic clock when both clocks run together', () => {
    const base = new FakeClock({ monotonicMs: 1000 });
    const c = conservativeClock(base);
    const t0 = c.monotonicMs();
    base.advance(700);
    expect(c.monotonicMs() - t0).toBe(700);
  });

  it('advances with the wall clock while the monotonic clock stands still (a VM pause)', () => {
    const base = new FakeClock();
    const c = conservativeClock(base);
    const t0 = c.monotonicMs();
    base.setWall(at(base, 30_000)); // paused 30 s: CLOCK_MONOTONIC lost it, the wall clock was set after resume
    expect(c.monotonicMs() - t0).toBe(30_000);
    base.advance(100);
    expect(c.monotonicMs() - t0).toBe(30_100);
  });

  it('ignores a wall step back: the monotonic progress wins and readings never decrease', () => {
    const base = new FakeClock();
    const c = conservativeClock(base);
    const t0 = c.monotonicMs();
    base.setWall(at(base, -600_000));
    expect(c.monotonicMs()).toBe(t0);
    base.advance(250);
    expect(c.monotonicMs() - t0).toBe(250);
  });

  it('takes a wall step forward at once (the term ends early, which is safe)', () => {
    const base = new FakeClock();
    const c = conservativeClock(base);
    const t0 = c.monotonicMs();
    base.setWall(at(base, 600_000));
    expect(c.monotonicMs() - t0).toBe(600_000);
  });

  it('takes the larger progress between every two readings, so more readings never give less time', () => {
    const base = new FakeClock();
    const c = conservativeClock(base);
    const t0 = c.monotonicMs();
    base.setWall(at(base, -1000)); // back 1 s, then 1 s of both clocks: wall shows 0, monotonic 1 s
    base.advance(1000);
    expect(c.monotonicMs() - t0).toBe(1000);
    base.setWall(at(base, 5000)); // forward 5 s
    expect(c.monotonicMs() - t0).toBe(6000);
  });

  it('fires a timer when the wall clock says its time passed, within a slice, though the monotonic clock lost a pause', () => {
    const base = new FakeClock();
    const c = conservativeClock(base);
    let fired = false;
    c.setTimeout(() => {
      fired = true;
    }, 10_000);
    base.advance(1000);
    base.setWall(at(base, 20_000)); // a 20 s pause the monotonic clock did not see
    expect(fired).toBe(false);
    base.advance(CONSERVATIVE_TIMER_SLICE_MS);
    expect(fired).toBe(true);
  });

  it('never fires a timer early and fires it once', () => {
    const base = new FakeClock();
    const c = conservativeClock(base);
    let fired = 0;
    c.setTimeout(() => {
      fired++;
    }, 1000);
    base.advance(999);
    expect(fired).toBe(0);
    base.advance(1);
    expect(fired).toBe(1);
    base.advance(5000);
    expect(fired).toBe(1);
    expect(base.pendingTimers()).toBe(0);
  });

  it('cancels a sliced timer', () => {
    const base = new FakeClock();
    const c = conservativeClock(base);
    let fired = false;
    const t = c.setTimeout(() => {
      fired = true;
    }, 2000);
    base.advance(600);
    t.cancel();
    base.advance(5000);
    expect(fired).toBe(false);
    expect(base.pendingTimers()).toBe(0);
  });

  it('runs a zero or negative delay on the next turn of the wrapped clock', () => {
    const base = new FakeClock();
    const c = conservativeClock(base);
    let fired = 0;
    c.setTimeout(() => fired++, 0);
    c.setTimeout(() => fired++, -5);
    expect(fired).toBe(0);
    base.advance(0);
    expect(fired).toBe(2);
  });

  it('keeps the wrapped wall clock for timestamps', () => {
    const base = new FakeClock();
    const c = conservativeClock(base);
    base.setWall(new Date('2030-01-01T00:00:00Z'));
    expect(c.now().toISOString()).toBe('2030-01-01T00:00:00.000Z');
  });
});
