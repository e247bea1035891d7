import { describe, expect, it } from 'vitest';
import type { TrialReport } from '../../../test/safety/checker.ts';
import type { ClientEvent } from '../../../test/safety/history.ts';
import { summarize } from '../../../test/safety/runner.ts';
import { resumedAfterLoss, type TrialResult } from '../../../test/safety/trial.ts';

const clean: TrialReport = {
  ok: true,
  violations: [],
  dualBelief: [],
  counts: {
    terms: 1,
    grants: 1,
    renews: 3,
    attempts: 4,
    accepted: 4,
    staleRejected: 0,
    errors: 0,
    attemptsAfterValidUntil: 0,
    storeApplies: 4,
  },
};

function result(i: number, variant: string, over: Partial<TrialResult>): TrialResult {
  return {
    spec: { id: `api-errors-${i}`, seed: i, fault: 'api-errors', leaseSeconds: 1, fenced: true },
    variant,
    report: clean,
    injected: true,
    faultMs: 1000,
    failoverMs: 1500,
    stepDownMs: undefined,
    stuck: undefined,
    wallMs: 3000,
    ...over,
  };
}

describe('resumedAfterLoss', () => {
  it('counts a grant of a term its holder had reported lost, and not a new token or another holder', () => {
    const events: ClientEvent[] = [
      { kind: 'granted', at: 0, holder: 'a/1', token: 1n },
      { kind: 'lost', at: 10, holder: 'a/1', token: 1n },
      { kind: 'granted', at: 20, holder: 'b/2', token: 1n },
      { kind: 'granted', at: 30, holder: 'a/1', token: 2n },
      { kind: 'granted', at: 40, holder: 'a/1', token: 1n },
    ];
    expect(resumedAfterLoss(events)).toBe(1);
    expect(resumedAfterLoss(events.slice(0, 4))).toBe(0);
  });
});

describe('summarize, for faults that report step-downs', () => {
  it('gives step-down latency per variant and counts missed step-downs', () => {
    const s = summarize(
      'api-errors',
      [
        result(0, 'hung-renew', { stepDownMs: 300, missedStepDown: false }),
        result(1, 'hung-renew', { stepDownMs: 500, missedStepDown: false }),
        result(2, '503', { missedStepDown: true, resumedAfterLoss: 2 }),
      ],
      1,
      { leaseSeconds: 1 },
    );
    expect(s.stepDownByVariant).toEqual({
      'hung-renew': { n: 2, p50: 300, p99: 500, max: 500 },
      '503': { n: 0, p50: null, p99: null, max: null },
    });
    expect(s.missedStepDowns).toBe(1);
    expect(s.resumedAfterLoss).toBe(2);
  });

  it('leaves them out for fault types that do not report them', () => {
    const s = summarize('api-errors', [result(0, 'x', {})], 1, { leaseSeconds: 1 });
    expect(s.stepDownByVariant).toBeUndefined();
    expect(s.missedStepDowns).toBeUndefined();
  });
});
