import { describe, expect, it } from 'vitest';
import type { ClientEvent } from '../../../test/safety/history.ts';
import { NEMESIS_FAULTS } from '../../../test/safety/nemesis-faults.ts';
import { livenessBoundMs, lockLiveness, tallyFaults } from '../../../test/safety/nemesis-liveness.ts';
import { nemesisSchedule, type FaultKindPlan } from '../../../test/safety/nemesis-schedule.ts';
import { maxOverlap } from '../../../test/safety/nemesis.ts';

const opts = {
  seed: 42,
  durationMs: 15 * 60_000,
  intervalMs: [5000, 15_000] as const,
  candidates: 4,
  leaseMs: 1000,
  kinds: NEMESIS_FAULTS,
};

describe('nemesisSchedule', () => {
  it('is a pure function of its seed', () => {
    expect(nemesisSchedule(opts)).toEqual(nemesisSchedule(opts));
    expect(nemesisSchedule({ ...opts, seed: 43 })).not.toEqual(nemesisSchedule(opts));
  });

  it('spaces faults by the interval and starts none after the duration', () => {
    const s = nemesisSchedule(opts);
    expect(s.length).toBeGreaterThan(900 / 15 - 1);
    expect(s.length).toBeLessThan(900 / 5 + 1);
    let previous = 0;
    for (const f of s) {
      expect(f.atMs - previous).toBeGreaterThanOrEqual(4999);
      expect(f.atMs - previous).toBeLessThanOrEqual(15_001);
      expect(f.atMs).toBeLessThan(opts.durationMs);
      previous = f.atMs;
    }
    expect(s.map((f) => f.index)).toEqual(s.map((_, i) => i));
  });

  it('targets a candidate exactly for candidate-scoped kinds, and draws durations from each kind', () => {
    const s = nemesisSchedule({ ...opts, durationMs: 600_000, intervalMs: [100, 200] });
    const kinds = new Map(NEMESIS_FAULTS.map((k) => [k.kind, k]));
    for (const f of s) {
      const k = kinds.get(f.kind);
      expect(k).toBeDefined();
      if (k?.scope === 'candidate') expect(f.candidate).toBeGreaterThanOrEqual(0);
      if (k?.scope === 'candidate') expect(f.candidate).toBeLessThan(4);
      if (k?.scope === 'global') expect(f.candidate).toBeUndefined();
    }
    const pauses = s.filter((f) => f.kind === 'pause').map((f) => f.durationMs);
    expect(Math.min(...pauses)).toBeGreaterThanOrEqual(500);
    expect(Math.max(...pauses)).toBeLessThanOrEqual(3000);
    // Every kind and every clock variant comes up in a long schedule.
    expect(new Set(s.map((f) => f.kind))).toEqual(new Set(NEMESIS_FAULTS.map((k) => k.kind)));
    expect(new Set(s.filter((f) => f.kind === 'clock').map((f) => f.variant)).size).toBe(6);
  });

  it('follows the weights, and a new kind is one more entry', () => {
    const extra: FaultKindPlan = {
      kind: 'apiserver-outage',
      weight: 6,
      scope: 'global',
      plan: (d, L) => ({ variant: 'stop', durationMs: d.uniform(1, 2) * L }),
    };
    const only: FaultKindPlan = {
      kind: 'pause',
      weight: 2,
      scope: 'candidate',
      plan: () => ({ variant: 'x', durationMs: 1 }),
    };
    const s = nemesisSchedule({ ...opts, durationMs: 1_000_000, intervalMs: [100, 100], kinds: [only, extra] });
    const share = s.filter((f) => f.kind === 'apiserver-outage').length / s.length;
    expect(share).toBeGreaterThan(0.7);
    expect(share).toBeLessThan(0.8);
  });

  it('refuses a schedule it cannot draw', () => {
    expect(() => nemesisSchedule({ ...opts, kinds: [] })).toThrow(/no fault kind/);
    expect(() => nemesisSchedule({ ...opts, intervalMs: [0, 10] })).toThrow(/bad interval/);
  });
});

const ok = (at: number, token: bigint): ClientEvent => ({
  kind: 'outcome',
  at,
  holder: `p${token}/u`,
  token,
  writeId: `w${at}`,
  result: 'accepted',
});

describe('lockLiveness', () => {
  it('measures the recovery after the heal, the longest gap and each failover', () => {
    const events: ClientEvent[] = [
      ok(100, 1n),
      ok(200, 1n),
      { kind: 'outcome', at: 250, holder: 'p1/u', token: 1n, writeId: 'x', result: 'stale' },
      ok(3200, 2n),
      ok(3300, 2n),
      ok(3400, 5n),
      ok(9000, 5n),
      ok(9100, 7n),
    ];
    const l = lockLiveness(events, 0, 8000, 10_000);
    expect(l.recoveryMs).toBe(1000);
    expect(l.maxGapMs).toBe(5600);
    expect(l.maxGapFromMs).toBe(3400);
    expect(l.failoversMs).toEqual([3000, 100, 100]);
    expect(l.accepted).toBe(7);
  });

  it('counts the tail after the last accepted write as a gap, and no recovery when none came', () => {
    const l = lockLiveness([ok(100, 1n)], 0, 500, 20_000);
    expect(l.recoveryMs).toBeUndefined();
    expect(l.maxGapMs).toBe(19_900);
    expect(lockLiveness([], 0, 5, 1000)).toMatchObject({ recoveryMs: undefined, maxGapMs: 1000, accepted: 0 });
  });
});

describe('fault tallies', () => {
  it('counts faults and their cumulative duration by kind', () => {
    expect(
      tallyFaults([
        { kind: 'pause', variant: 'sigstop', startAt: 0, endAt: 1500 },
        { kind: 'pause', variant: 'sigstop', startAt: 1000, endAt: 1600 },
        { kind: 'redis', variant: 'crash', startAt: 2000, endAt: 2050 },
      ]),
    ).toEqual({
      pause: { count: 2, totalMs: 2100, variants: { sigstop: 2 } },
      redis: { count: 1, totalMs: 50, variants: { crash: 1 } },
    });
  });

  it('finds the most faults in effect at once', () => {
    expect(
      maxOverlap([
        { startMs: 0, endMs: 100 },
        { startMs: 50, endMs: 60 },
        { startMs: 100, endMs: 200 },
        { startMs: 55, endMs: 55 },
      ]),
    ).toBe(3);
    expect(maxOverlap([])).toBe(0);
  });

  it('states the liveness bound L + R + P + reconcile', () => {
    expect(livenessBoundMs(1000, 1000)).toBe(3000);
  });
});

describe('holder targeting', () => {
  it('aims about half the candidate faults at a lock holder, never a global one', () => {
    const s = nemesisSchedule({ ...opts, locks: 3, durationMs: 600_000, intervalMs: [100, 200] });
    const candidateFaults = s.filter((f) => f.candidate !== undefined);
    const aimed = candidateFaults.filter((f) => f.holderOf !== undefined);
    expect(aimed.length / candidateFaults.length).toBeGreaterThan(0.4);
    expect(aimed.length / candidateFaults.length).toBeLessThan(0.6);
    expect(new Set(aimed.map((f) => f.holderOf))).toEqual(new Set([0, 1, 2]));
    expect(s.filter((f) => f.candidate === undefined && f.holderOf !== undefined)).toEqual([]);
    expect(nemesisSchedule(opts).every((f) => f.holderOf === undefined)).toBe(true);
  });
});
