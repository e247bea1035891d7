import { describe, expect, it } from 'vitest';
import { resolveTimings } from '../../../src/api/v1alpha1/distributedlock.ts';
import { termTimingsOf, type TermRecord, type TermSpec, type TermTimings } from '../../../src/protocol/timings.ts';

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
