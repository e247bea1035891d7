/**
 * Calibration: the safety suite must FAIL when a protection is removed, or it tests nothing.
 * - guard removed: the workers write with plain SETs (the store accepts any token);
 * - floor removed: the controller's dispenser is a bare INCR that ignores the etcd high-water mark;
 * - Lost marker removed: a deleted Lease is re-created at once without the `Lost` marker (what the
 *   controller did before issue 15's finding 7), so early grants must be counted.
 * - exec signalling its direct child only (before issue 15's finding 1): the exec-tree trials must
 *   count tree writes after the successor's grant, or tree processes left alive;
 * - a pod's phase taken as proof that its containers stopped (before finding 3): the node-loss
 *   trials must count grants before the cut-off holder's lease (+ lock delay) ended.
 * Same faults, same checker, same seeds as the real suite (SAFETY_SEED).
 */
import { describe, expect, it } from 'vitest';
import { sharedKubeconfigPath } from '../support/env.ts';
import { CONCURRENCY, LEASE_SECONDS, printSummaries as print, SEED, SETUP_RETRIES } from './ci-settings.ts';
import { runTrials } from './runner.ts';
import { startSafetyBed } from './testbed.ts';

const TRIALS = Number(process.env['SAFETY_CALIBRATION_TRIALS'] ?? '3');

describe('calibration: the suite fails when a protection is removed', () => {
  it('reports S2/S3 violations when the store accepts any token (guard removed)', async () => {
    const bed = await startSafetyBed({ kubeconfigPath: sharedKubeconfigPath() });
    try {
      const summaries = await runTrials({
        bed,
        faults: ['store-delay', 'identity-reuse'],
        trialsPerFault: TRIALS,
        concurrency: CONCURRENCY,
        baseSeed: SEED,
        leaseSeconds: LEASE_SECONDS,
        fenced: false,
        calibrate: 'guard',
        setupRetries: SETUP_RETRIES,
      });
      print('calibration: guard removed', summaries);
      for (const s of summaries) {
        expect(s.trials, `${s.fault}: trials with the fault injected`).toBe(TRIALS);
        expect(
          s.violations.S2 + s.violations.S3,
          `${s.fault}: trials with out-of-order accepted writes`,
        ).toBeGreaterThan(0);
      }
    } finally {
      await bed.close();
    }
  }, 600_000);

  it('reports S1 violations when tokens ignore the etcd high-water mark (floor removed)', async () => {
    const bed = await startSafetyBed({ kubeconfigPath: sharedKubeconfigPath(), noFloor: true });
    try {
      const summaries = await runTrials({
        bed,
        faults: ['redis'],
        trialsPerFault: TRIALS,
        concurrency: CONCURRENCY,
        baseSeed: SEED,
        leaseSeconds: LEASE_SECONDS,
        fenced: true,
        calibrate: 'floor',
        setupRetries: SETUP_RETRIES,
      });
      print('calibration: floor removed', summaries);
      const [s] = summaries;
      expect(s?.trials, 'trials with the fault injected').toBe(TRIALS);
      expect(s?.violations.S1, 'trials with reissued or regressed tokens').toBeGreaterThan(0);
    } finally {
      await bed.close();
    }
  }, 600_000);

  it('counts grants before the cut-off holder stepped down when a deleted Lease comes back without the Lost marker', async () => {
    const bed = await startSafetyBed({ kubeconfigPath: sharedKubeconfigPath() });
    try {
      const summaries = await runTrials({
        bed,
        faults: ['lease-delete'],
        // An early grant needs the successor confirmed inside the cut-off holder's remaining renew
        // deadline (a few hundred ms): most trials show one, so take a few more than the others.
        trialsPerFault: TRIALS * 3,
        concurrency: CONCURRENCY,
        baseSeed: SEED,
        leaseSeconds: LEASE_SECONDS,
        fenced: true,
        calibrate: 'lost-marker',
        setupRetries: SETUP_RETRIES,
      });
      print('calibration: Lost marker removed', summaries);
      const [s] = summaries;
      expect(s?.trials, 'trials with the fault injected').toBe(TRIALS * 3);
      expect(s?.counters['grantedBeforeStepDown'] ?? 0, 'grants before the holder stepped down').toBeGreaterThan(0);
    } finally {
      await bed.close();
    }
  }, 600_000);

  it('counts tree writes after the grant or processes left when exec signals only its direct child', async () => {
    const bed = await startSafetyBed({ kubeconfigPath: sharedKubeconfigPath() });
    try {
      const summaries = await runTrials({
        bed,
        faults: ['exec-tree'],
        // A tree of depth 1 is the direct child itself: take a few more trials than the others.
        trialsPerFault: TRIALS * 3,
        concurrency: CONCURRENCY,
        baseSeed: SEED,
        leaseSeconds: LEASE_SECONDS,
        fenced: true,
        calibrate: 'child-only',
        setupRetries: SETUP_RETRIES,
      });
      print('calibration: exec signals its direct child only', summaries);
      const [s] = summaries;
      expect(s?.trials, 'trials with the fault injected').toBe(TRIALS * 3);
      expect(
        (s?.counters['treeAttemptsAfterGrant'] ?? 0) + (s?.counters['treeProcessesLeft'] ?? 0),
        'tree writes after the grant and tree processes left',
      ).toBeGreaterThan(0);
    } finally {
      await bed.close();
    }
  }, 600_000);

  it("counts grants before the cut-off holder's lease ended when the controller takes phase Failed as proof", async () => {
    const bed = await startSafetyBed({ kubeconfigPath: sharedKubeconfigPath(), phaseProof: true });
    try {
      const summaries = await runTrials({
        bed,
        faults: ['node-loss'],
        trialsPerFault: TRIALS,
        concurrency: CONCURRENCY,
        baseSeed: SEED,
        leaseSeconds: LEASE_SECONDS,
        fenced: true,
        calibrate: 'phase-proof',
        setupRetries: SETUP_RETRIES,
      });
      print('calibration: pod phase taken as proof', summaries);
      const [s] = summaries;
      expect(s?.trials, 'trials with the fault injected').toBe(TRIALS);
      expect(s?.counters['grantedBeforeLeaseEnd'] ?? 0, 'grants before the lease (+ lock delay) ended').toBeGreaterThan(
        0,
      );
    } finally {
      await bed.close();
    }
  }, 600_000);
});
