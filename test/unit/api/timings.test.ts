import { describe, expect, it } from 'vitest';
import { resolveTimings } from '../../../src/api/v1alpha1/distributedlock.ts';
import type { DistributedLockSpec, Timings } from '../../../src/api/v1alpha1/distributedlock.ts';

const candidates: DistributedLockSpec['candidates'] = { selector: { matchLabels: { app: 'billing' } } };

describe('resolveTimings', () => {
  it.each<{ name: string; spec: Omit<DistributedLockSpec, 'candidates'>; want: Timings }>([
    {
      name: 'an empty spec gets a 15 s lease, a 10 s deadline, a 5 s period and no lock delay',
      spec: {},
      want: { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, renewPeriodMs: 5_000, lockDelayMs: 0 },
    },
    {
      name: 'a 1 s lease gets a 666 ms deadline and a 333 ms period, not zero',
      spec: { leaseDurationSeconds: 1 },
      want: { leaseDurationMs: 1_000, renewDeadlineMs: 666, renewPeriodMs: 333, lockDelayMs: 0 },
    },
    {
      name: 'a 2 s lease gets a 1333 ms deadline and a 666 ms period',
      spec: { leaseDurationSeconds: 2 },
      want: { leaseDurationMs: 2_000, renewDeadlineMs: 1_333, renewPeriodMs: 666, lockDelayMs: 0 },
    },
    {
      name: 'an explicit deadline is used as given and the period stays a third of the lease when that is shorter than half the deadline',
      spec: { leaseDurationSeconds: 30, renewDeadlineSeconds: 25 },
      want: { leaseDurationMs: 30_000, renewDeadlineMs: 25_000, renewPeriodMs: 10_000, lockDelayMs: 0 },
    },
    {
      name: 'a short explicit deadline halves the default period so that it stays below the deadline',
      spec: { leaseDurationSeconds: 15, renewDeadlineSeconds: 4 },
      want: { leaseDurationMs: 15_000, renewDeadlineMs: 4_000, renewPeriodMs: 2_000, lockDelayMs: 0 },
    },
    {
      name: 'an explicit period is used as given with the default deadline',
      spec: { leaseDurationSeconds: 15, renewPeriodSeconds: 2 },
      want: { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, renewPeriodMs: 2_000, lockDelayMs: 0 },
    },
    {
      name: 'explicit values for every duration are converted to milliseconds',
      spec: { leaseDurationSeconds: 60, renewDeadlineSeconds: 40, renewPeriodSeconds: 10, lockDelaySeconds: 7 },
      want: { leaseDurationMs: 60_000, renewDeadlineMs: 40_000, renewPeriodMs: 10_000, lockDelayMs: 7_000 },
    },
  ])('$name', ({ spec, want }) => {
    expect(resolveTimings({ ...spec, candidates })).toEqual(want);
  });

  it('keeps 0 < period < deadline < lease for every lease duration the CRD allows when defaults apply', () => {
    for (let seconds = 1; seconds <= 3600; seconds++) {
      const t = resolveTimings({ leaseDurationSeconds: seconds, candidates });
      expect(t.renewPeriodMs, `lease ${seconds} s`).toBeGreaterThan(0);
      expect(t.renewPeriodMs, `lease ${seconds} s`).toBeLessThan(t.renewDeadlineMs);
      expect(t.renewDeadlineMs, `lease ${seconds} s`).toBeLessThan(t.leaseDurationMs);
    }
  });

  it('keeps the default period below every explicit deadline the CRD allows', () => {
    for (const lease of [2, 3, 15, 3600]) {
      for (let deadline = 1; deadline < lease; deadline++) {
        const t = resolveTimings({ leaseDurationSeconds: lease, renewDeadlineSeconds: deadline, candidates });
        expect(t.renewPeriodMs, `lease ${lease} s, deadline ${deadline} s`).toBeLessThan(t.renewDeadlineMs);
      }
    }
  });
});
