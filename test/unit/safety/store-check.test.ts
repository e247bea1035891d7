import { describe, expect, it } from 'vitest';
import { checkStoreTrial, parseWorkerLine, type WorkerEvent } from '../../safety/stores/store-check.ts';

const ev = (worker: number, kind: WorkerEvent['kind'], token: bigint, at?: number): WorkerEvent => ({
  worker,
  kind,
  token,
  ...(at !== undefined ? { at } : {}),
});

describe('store trial checker', () => {
  it('S3: a token below an earlier applied one, in the store order, is a violation; equal and rising tokens are not', () => {
    expect(checkStoreTrial([1n, 1n, 2n, 5n], [], 0).s3).toEqual([]);
    expect(checkStoreTrial([1n, 3n, 2n, 4n], [], 0).s3).toEqual(['write #2 with token 2 applied after token 3']);
  });

  it('counts the windows in which two workers believed, and none for one worker alone', () => {
    const events = [
      ev(0, 'granted', 1n, 100),
      ev(1, 'granted', 2n, 300),
      ev(0, 'lost', 1n, 450),
      ev(1, 'released', 2n, 500),
    ];
    expect(checkStoreTrial([], events, 1000).overlaps).toEqual([{ workers: [0, 1], ms: 150 }]);
    expect(
      checkStoreTrial([], [ev(0, 'granted', 1n, 0), ev(0, 'released', 1n, 10), ev(0, 'granted', 2n, 20)], 30).overlaps,
    ).toEqual([]);
  });

  it('a belief never ended runs to the end of the trial', () => {
    const v = checkStoreTrial([], [ev(0, 'granted', 1n, 0), ev(1, 'granted', 2n, 600)], 1000);
    expect(v.overlaps).toEqual([{ workers: [0, 1], ms: 400 }]);
  });

  it('a token granted twice counts as a grant regression, even when the second was asked before the first was granted', () => {
    const asked = (e: WorkerEvent, askedAt: number): WorkerEvent => ({ ...e, askedAt });
    const twice = [asked(ev(0, 'granted', 7n, 100), 90), asked(ev(1, 'granted', 7n, 300), 50)];
    expect(checkStoreTrial([], twice, 1000).grantRegressions).toBe(1);
    const rising = [asked(ev(0, 'granted', 7n, 100), 90), asked(ev(1, 'granted', 8n, 300), 50)];
    expect(checkStoreTrial([], rising, 1000).grantRegressions).toBe(0);
  });

  it('reads the worker lines', () => {
    expect(parseWorkerLine(1, 'granted 7 1234')).toEqual({ worker: 1, kind: 'granted', token: 7n, at: 1234 });
    expect(parseWorkerLine(0, 'write 7 false')).toEqual({ worker: 0, kind: 'write', token: 7n, applied: false });
    expect(parseWorkerLine(0, 'something else')).toBeUndefined();
    expect(parseWorkerLine(0, 'granted x 1')).toBeUndefined();
  });
});
