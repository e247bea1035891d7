/**
 * The safety suite in CI: every fault type, SAFETY_TRIALS trials each (default 20), on the shared
 * control plane, each trial on its own lock, SAFETY_CONCURRENCY at a time (the calibration runs
 * are in calibration.test.ts). The seed is printed, and every failed trial with its replay
 * command (`npm run soak -- --fault F --trials 1 --seed S`).
 *
 * Time limits here only catch hangs: the trial count is what matters.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sharedKubeconfigPath } from '../support/env.ts';
import { formatTable } from './report.ts';
import { formatFailures, runTrials, type FaultSummary } from './runner.ts';
import { startSafetyBed, type SafetyBed } from './testbed.ts';
import { FAULT_TYPES } from './trial.ts';

const TRIALS = Number(process.env['SAFETY_TRIALS'] ?? '20');
const CONCURRENCY = Number(process.env['SAFETY_CONCURRENCY'] ?? '10');
const LEASE_SECONDS = 1;
const SEED = process.env['SAFETY_SEED'] !== undefined ? Number(process.env['SAFETY_SEED']) : Math.floor(Math.random() * 2 ** 31);

function print(title: string, summaries: readonly FaultSummary[]): void {
  const failures = formatFailures(summaries);
  process.stdout.write(`\n${title} (seed ${SEED}; replay the run with SAFETY_SEED=${SEED})\n${formatTable(summaries)}\n${failures !== '' ? `${failures}\n` : ''}`);
}

describe('the safety suite', () => {
  let bed: SafetyBed;
  beforeAll(async () => { bed = await startSafetyBed({ kubeconfigPath: sharedKubeconfigPath() }); });
  afterAll(async () => { await bed?.close(); });

  it(`holds S1–S5 in ${TRIALS} trials of every fault type`, async () => {
    const faults = FAULT_TYPES.filter((f) => f !== 'none');
    const summaries = await runTrials({ bed, faults, trialsPerFault: TRIALS, concurrency: CONCURRENCY, baseSeed: SEED, leaseSeconds: LEASE_SECONDS, fenced: true });
    print('safety suite', summaries);
    expect(bed.storeLog.broken, 'the store command log broke off: histories incomplete').toBe(false);
    for (const s of summaries) {
      expect.soft(s.notRun, `${s.fault}: trials that failed before the fault`).toBe(0);
      expect.soft(s.failed.map((f) => `${f.id} seed ${f.seed}: ${f.violations.join('; ')}`), `${s.fault}: trials with violations`).toEqual([]);
      expect.soft(s.survived, `${s.fault}: survived`).toBe(TRIALS);
    }
  }, 900_000);
});
