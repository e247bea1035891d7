/**
 * The safety suite in CI: every fault type, SAFETY_TRIALS trials each (default 4; 12 in the long
 * tier, `hack/npm run test:long`; the soak, hack/soak.ts, runs the thousands), on the shared
 * control plane, each trial on its own lock, SAFETY_CONCURRENCY at a time (the calibration runs
 * are in calibration.test.ts). The seed is printed, and every failed trial with its replay
 * command (`npm run soak -- --fault F --trials 1 --seed S`).
 *
 * Time limits here only catch hangs: the trial count is what matters.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sharedKubeconfigPath } from '../support/env.ts';
import { startControlPlane, type ControlPlane } from '../support/testbed/control-plane.ts';
import { CONCURRENCY, LEASE_SECONDS, printSummaries as print, SEED, SETUP_RETRIES } from './ci-settings.ts';
import { runTrials } from './runner.ts';
import { startSafetyBed, type SafetyBed } from './testbed.ts';
import { FAULT_TYPES } from './trial.ts';
import { tierSize } from '../support/tier.ts';

// 4 per fault type injects every fault and checks every counter on each CI run within its budget;
// the long tier's 12 and the soak's thousands are what measure rates.
const TRIALS = tierSize('SAFETY_TRIALS', 4, 12);

/** OWN_PLANE: fault types that stop or pause the control plane, run on a plane of their own (never the shared one). */
const OWN_PLANE = new Set<string>(['apiserver']);

describe('the safety suite', () => {
  let bed: SafetyBed;
  beforeAll(async () => {
    bed = await startSafetyBed({ kubeconfigPath: sharedKubeconfigPath() });
  });
  afterAll(async () => {
    await bed?.close();
  });

  it(`holds S1–S6 in ${TRIALS} trials of every fault type`, async () => {
    const faults = FAULT_TYPES.filter((f) => f !== 'none' && !OWN_PLANE.has(f));
    const summaries = await runTrials({
      bed,
      faults,
      trialsPerFault: TRIALS,
      concurrency: CONCURRENCY,
      baseSeed: SEED,
      leaseSeconds: LEASE_SECONDS,
      fenced: true,
      setupRetries: SETUP_RETRIES,
    });
    print('safety suite', summaries);
    expect(bed.storeLog.broken, 'the store command log broke off: histories incomplete').toBe(false);
    for (const s of summaries) {
      expect
        .soft(s.trials, `${s.fault}: trials with the fault injected (${s.notRun} set-up failures retried)`)
        .toBe(TRIALS);
      expect
        .soft(
          s.failed.map((f) => `${f.id} seed ${f.seed}: ${f.violations.join('; ')}`),
          `${s.fault}: trials with violations`,
        )
        .toEqual([]);
      expect.soft(s.survived, `${s.fault}: survived`).toBe(TRIALS);
      expect
        .soft(
          s.resumedAfterLoss ?? 0,
          `${s.fault}: terms taken up again after their holder reported them lost (a new term needs a new token: the successor may have written above the old one)`,
        )
        .toBe(0);
      expect
        .soft(
          s.counters['grantedBeforeStepDown'] ?? 0,
          `${s.fault}: grants before the cut-off holder stepped down (a deleted Lease must come back marked Lost)`,
        )
        .toBe(0);
      expect
        .soft(
          s.counters['runIdViolations'] ?? 0,
          `${s.fault}: run ids run again after their completion (the gate must look again after its grant)`,
        )
        .toBe(0);
      expect
        .soft(
          s.counters['policyBypassed'] ?? 0,
          `${s.fault}: co-tenant Lease or status writes the lease-protection policy let through (a lowered token must not reach the Lease)`,
        )
        .toBe(0);
      // exec-tree (a grandchild outliving the term) and node-loss (a pod's phase taken as proof that
      // its containers stopped): see faults/exec-tree.ts and faults/node-loss.ts.
      for (const k of [
        'treeWritesAfterGrant',
        'treeAttemptsAfterGrant',
        'treeWritesAfterResume',
        'treeProcessesLeft',
        'grantedBeforeLeaseEnd',
        // A planned handover never makes two believers; a stale request moves nothing.
        'handoverOverlap',
        'staleHandedOver',
        // co-tenant: a lock granted no more after the attacks (a lowered token needs no repair).
        'wedged',
      ])
        expect.soft(s.counters[k] ?? 0, `${s.fault}: ${k}`).toBe(0);
    }
  }, 900_000);
});

describe('the safety suite, control-plane outages (on a control plane of its own)', () => {
  let plane: ControlPlane | undefined;
  let bed: SafetyBed | undefined;
  beforeAll(async () => {
    plane = await startControlPlane();
    bed = await startSafetyBed({ kubeconfigPath: plane.kubeconfigPath, plane });
  }, 300_000);
  afterAll(async () => {
    await bed?.close();
    await plane?.stop();
  });

  it(`holds S1–S5 in ${TRIALS} trials of every fault type that stops the API server or etcd`, async () => {
    if (bed === undefined) throw new Error('no bed');
    const faults = FAULT_TYPES.filter((f) => OWN_PLANE.has(f));
    const summaries = await runTrials({
      bed,
      faults,
      trialsPerFault: TRIALS,
      concurrency: CONCURRENCY,
      baseSeed: SEED,
      leaseSeconds: LEASE_SECONDS,
      fenced: true,
      setupRetries: SETUP_RETRIES,
    });
    print('safety suite, control-plane outages', summaries);
    expect(bed.storeLog.broken, 'the store command log broke off: histories incomplete').toBe(false);
    expect(bed.leases.expired, 'the Lease watch could not resume (410 Gone): histories incomplete').toBe(0);
    for (const s of summaries) {
      expect
        .soft(s.trials, `${s.fault}: trials with the fault injected (${s.notRun} set-up failures retried)`)
        .toBe(TRIALS);
      expect
        .soft(
          s.failed.map((f) => `${f.id} seed ${f.seed}: ${f.violations.join('; ')}`),
          `${s.fault}: trials with violations`,
        )
        .toEqual([]);
      expect.soft(s.survived, `${s.fault}: survived`).toBe(TRIALS);
      expect
        .soft(
          s.resumedAfterLoss ?? 0,
          `${s.fault}: terms taken up again after their holder reported them lost (a new term needs a new token: the successor may have written above the old one)`,
        )
        .toBe(0);
    }
  }, 900_000);
});
