import { describe, expect, it } from 'vitest';
import type { TrialReport } from '../../../test/safety/checker.ts';
import { formatFailures, replayCommand, summarize } from '../../../test/safety/runner.ts';
import { formatTable } from '../../../test/safety/report.ts';
import type { TrialResult } from '../../../test/safety/trial.ts';

const clean: TrialReport = {
  ok: true,
  violations: [],
  dualBelief: [{ holders: ['a/1', 'b/2'], tokens: [1n, 2n], fromMs: 0, toMs: 300, ms: 300 }],
  counts: {
    terms: 2,
    grants: 2,
    renews: 5,
    attempts: 10,
    accepted: 9,
    staleRejected: 1,
    errors: 0,
    attemptsAfterValidUntil: 1,
    storeApplies: 9,
  },
};
const broken: TrialReport = {
  ...clean,
  ok: false,
  violations: [{ invariant: 'S3', message: 'store applied write w with token 1 after token 2' }],
};

function result(i: number, report: TrialReport, over: Partial<TrialResult> = {}): TrialResult {
  return {
    spec: { id: `pause-${i}`, seed: 100 + i, fault: 'pause', leaseSeconds: 1, fenced: true },
    variant: 'check-write',
    report,
    injected: true,
    faultMs: 1500,
    failoverMs: 1000 + i,
    stepDownMs: undefined,
    stuck: undefined,
    wallMs: 4000,
    ...over,
  };
}

describe('summarize', () => {
  it('counts a trial as survived only when its fault was injected and its history held', () => {
    const s = summarize(
      'pause',
      [result(0, clean), result(1, broken), result(2, clean, { injected: false, stuck: 'no first grant' })],
      9000,
      { leaseSeconds: 1 },
    );
    expect(s).toMatchObject({
      trials: 2,
      notRun: 1,
      survived: 1,
      stuck: 1,
      staleRejected: 3,
      attemptsAfterValidUntil: 3,
    });
    expect(s.violations).toEqual({ S1: 0, S2: 0, S3: 1, S4: 0, S5: 0, S6: 0, H: 0 });
    expect(s.dualBelief).toEqual({ n: 3, p50: 300, p99: 300, max: 300 });
  });

  it("sums the trials' fault-specific counters", () => {
    const s = summarize(
      'controller-split',
      [
        result(0, clean, { counters: { grants: 3, grantsByNonLeader: 1 } }),
        result(1, clean, { counters: { grants: 2, grantsUnattributed: 1 } }),
        result(2, clean),
      ],
      1,
      { leaseSeconds: 1 },
    );
    expect(s.counters).toEqual({ grants: 5, grantsByNonLeader: 1, grantsUnattributed: 1 });
    expect(formatTable([s])).toContain('controller-split: grants 5, grantsByNonLeader 1, grantsUnattributed 1');
  });

  it('names each failed trial with its seed and the command that replays it', () => {
    const s = summarize('pause', [result(1, broken)], 1, { leaseSeconds: 1, calibrate: 'guard' });
    expect(s.failed).toEqual([
      {
        id: 'pause-1',
        seed: 101,
        variant: 'check-write',
        violations: ['S3: store applied write w with token 1 after token 2'],
        replay: 'npm run soak -- --fault pause --trials 1 --seed 101 --lease 1 --calibrate guard',
      },
    ]);
    expect(formatFailures([s])).toContain('replay: npm run soak -- --fault pause --trials 1 --seed 101');
    expect(replayCommand('redis', 7, { leaseSeconds: 2 })).toBe(
      'npm run soak -- --fault redis --trials 1 --seed 7 --lease 2',
    );
  });
});
