import { describe, expect, it } from 'vitest';
import { resolveTimings } from '../../../src/api/v1alpha1/distributedlock.ts';
import {
  termTimingsOf,
  tighterTimings,
  timingsContradiction,
  type TermRecord,
  type TermSpec,
  type TermTimings,
} from '../../../src/protocol/timings.ts';

const candidates = { selector: { matchLabels: { app: 'web' } } };
const noRecord: TermRecord = { leaseDurationSeconds: undefined, renewDeadlineMs: undefined, renewPeriodMs: undefined };
const granted = (leaseDurationSeconds: number, renewDeadlineMs: number, renewPeriodMs: number): TermRecord => ({
  leaseDurationSeconds,
  renewDeadlineMs,
  renewPeriodMs,
});

describe('termTimingsOf', () => {
  it.each<{ name: string; record: TermRecord | undefined; spec: TermSpec | undefined; want: TermTimings }>([
    {
      name: 'a Lease granted with all three timings is read as written, whatever the spec says now',
      record: granted(30, 20_000, 7_000),
      spec: { leaseDurationSeconds: 5 },
      want: { leaseDurationMs: 30_000, renewDeadlineMs: 20_000, renewPeriodMs: 7_000 },
    },
    {
      name: 'no Lease and no spec: the defaults (15 s, 10 s, 5 s)',
      record: undefined,
      spec: undefined,
      want: { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, renewPeriodMs: 5_000 },
    },
    {
      name: 'no Lease: the spec, with defaults derived from its lease',
      record: undefined,
      spec: { leaseDurationSeconds: 1 },
      want: { leaseDurationMs: 1_000, renewDeadlineMs: 666, renewPeriodMs: 333 },
    },
    {
      name: 'no Lease: an explicit spec deadline sets the default period',
      record: undefined,
      spec: { leaseDurationSeconds: 15, renewDeadlineSeconds: 4 },
      want: { leaseDurationMs: 15_000, renewDeadlineMs: 4_000, renewPeriodMs: 2_000 },
    },
    {
      name: 'a Lease that records only its duration: deadline and period default from that duration, not the spec lease',
      record: { ...noRecord, leaseDurationSeconds: 3 },
      spec: { leaseDurationSeconds: 60 },
      want: { leaseDurationMs: 3_000, renewDeadlineMs: 2_000, renewPeriodMs: 1_000 },
    },
    {
      name: 'a Lease without a duration (the agent passes no spec): 15 s and its defaults',
      record: noRecord,
      spec: undefined,
      want: { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, renewPeriodMs: 5_000 },
    },
    {
      name: 'a Lease without a duration (the controller passes its spec): the spec lease',
      record: noRecord,
      spec: { leaseDurationSeconds: 2 },
      want: { leaseDurationMs: 2_000, renewDeadlineMs: 1_333, renewPeriodMs: 666 },
    },
    // The agent's own copy used floor(deadline / 2) for a missing period; the controller's rule
    // (resolveTimings) is floor(min(lease / 3, deadline / 2)). They differ only when the Lease
    // records a deadline above two thirds of the lease and no period (grantedLease always writes
    // both): the controller's rule is kept, so the agent now renews every 5 s here, not every 6 s.
    {
      name: 'a Lease with a long deadline and no period: the controller rule, min(lease / 3, deadline / 2)',
      record: { leaseDurationSeconds: 15, renewDeadlineMs: 12_000, renewPeriodMs: undefined },
      spec: undefined,
      want: { leaseDurationMs: 15_000, renewDeadlineMs: 12_000, renewPeriodMs: 5_000 },
    },
  ])('$name', ({ record, spec, want }) => {
    expect(termTimingsOf(record, spec)).toEqual(want);
  });

  it('with no record it is resolveTimings (the timings a grant writes), for every lease length and deadline', () => {
    for (let lease = 1; lease <= 120; lease++) {
      for (const deadline of [undefined, ...Array.from({ length: lease - 1 }, (_, i) => i + 1)]) {
        const spec = {
          leaseDurationSeconds: lease,
          ...(deadline !== undefined ? { renewDeadlineSeconds: deadline } : {}),
          candidates,
        };
        const { lockDelayMs: _d, ...want } = resolveTimings(spec);
        expect(termTimingsOf(undefined, spec)).toEqual(want);
      }
    }
  });

  it('the agent (no spec) reads a granted Lease exactly as the controller wrote it', () => {
    for (let lease = 1; lease <= 120; lease++) {
      const t = resolveTimings({ leaseDurationSeconds: lease, candidates });
      const agent = termTimingsOf(granted(lease, t.renewDeadlineMs, t.renewPeriodMs));
      expect(agent).toEqual({
        leaseDurationMs: t.leaseDurationMs,
        renewDeadlineMs: t.renewDeadlineMs,
        renewPeriodMs: t.renewPeriodMs,
      });
    }
  });

  it("the agent's old defaults (no annotations) are unchanged: deadline floor(2/3 lease), period floor(deadline / 2)", () => {
    for (let lease = 1; lease <= 3600; lease++) {
      const deadline = Math.floor((lease * 1000 * 2) / 3);
      expect(termTimingsOf({ ...noRecord, leaseDurationSeconds: lease })).toEqual({
        leaseDurationMs: lease * 1000,
        renewDeadlineMs: deadline,
        renewPeriodMs: Math.floor(deadline / 2),
      });
    }
  });
});

describe('timingsContradiction', () => {
  const t = (leaseDurationMs: number, renewDeadlineMs: number, renewPeriodMs: number): TermTimings => ({
    leaseDurationMs,
    renewDeadlineMs,
    renewPeriodMs,
  });
  it.each([
    { name: 'the defaults of a 15 s lease', timings: t(15_000, 10_000, 5000), want: undefined },
    { name: 'the defaults of a 1 s lease', timings: t(1000, 666, 333), want: undefined },
    {
      name: 'a renew deadline equal to the lease duration',
      timings: t(3000, 3000, 1000),
      want: 'renew deadline 3000 ms is not below the lease duration 3000 ms',
    },
    {
      name: 'a renew deadline above the lease duration',
      timings: t(1000, 2000, 500),
      want: 'renew deadline 2000 ms is not below the lease duration 1000 ms',
    },
    {
      name: 'a renew period equal to the renew deadline',
      timings: t(3000, 2000, 2000),
      want: 'renew period 2000 ms is not below the renew deadline 2000 ms',
    },
    { name: 'a zero lease duration', timings: t(0, 2000, 1000), want: 'the lease duration 0 ms is not positive' },
    { name: 'a negative renew period', timings: t(3000, 2000, -1), want: 'the renew period -1 ms is not positive' },
    { name: 'a NaN renew deadline', timings: t(3000, NaN, 1000), want: 'the renew deadline NaN ms is not positive' },
    {
      name: 'an infinite lease duration',
      timings: t(Infinity, 2000, 1000),
      want: 'the lease duration Infinity ms is not positive',
    },
  ])('$name', ({ timings, want }) => {
    expect(timingsContradiction(timings)).toBe(want);
  });
});

describe('tighterTimings', () => {
  it('takes the shorter of each field', () => {
    expect(
      tighterTimings(
        { leaseDurationMs: 15_000, renewDeadlineMs: 4000, renewPeriodMs: 5000 },
        { leaseDurationMs: 3000, renewDeadlineMs: 10_000, renewPeriodMs: 1000 },
      ),
    ).toEqual({ leaseDurationMs: 3000, renewDeadlineMs: 4000, renewPeriodMs: 1000 });
  });
  it('keeps a NaN reading, so that it is reported', () => {
    const r = tighterTimings(
      { leaseDurationMs: NaN, renewDeadlineMs: 2000, renewPeriodMs: 1000 },
      { leaseDurationMs: 3000, renewDeadlineMs: 2000, renewPeriodMs: 1000 },
    );
    expect(timingsContradiction(r)).toBe('the lease duration NaN ms is not positive');
  });
});
