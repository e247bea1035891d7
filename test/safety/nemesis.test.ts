/**
 * The combined nemesis in CI (docs/safety.md, "The combined nemesis"): 30 seconds of overlapping
 * faults (pauses, kills, partitions, store delays, clock steps, counter Redis data loss, controller
 * kills) on 4 candidate processes contending for 3 locks, on the shared control plane (no fault
 * stops the shared API server), then a healing final phase. Every lock's history must hold S1–S5
 * and H.
 *
 * NEMESIS_SECONDS (default 30; 60 in the long tier, `hack/npm run test:long`) and SAFETY_SEED
 * (random and printed when unset) replay or stretch it; the soak form is
 * `node hack/soak.ts --nemesis-minutes M --seed S --lease 1`. The recovery bound below only
 * catches hangs: liveness is reported, not asserted.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sharedKubeconfigPath } from '../support/env.ts';
import { LEASE_SECONDS, SEED } from './ci-settings.ts';
import { runNemesis } from './nemesis.ts';
import { formatNemesis } from './nemesis-report.ts';
import { startSafetyBed, type SafetyBed } from './testbed.ts';
import { tierSize } from '../support/tier.ts';

// 30 s start about ten overlapping faults (one every U[1.5, 4] s) on each CI run; the long tier's
// 60 s and the 15-minute soak are the lengths that find rare interleavings.
const SECONDS = tierSize('NEMESIS_SECONDS', 30, 60);
/** RECOVERY_BOUND_MS: a hang catcher, far above L + R + P + reconcile on a loaded machine. */
const RECOVERY_BOUND_MS = 90_000;

describe('the combined nemesis', () => {
  let bed: SafetyBed;
  beforeAll(async () => {
    bed = await startSafetyBed({ kubeconfigPath: sharedKubeconfigPath() });
  });
  afterAll(async () => {
    await bed?.close();
  });

  it(
    `holds S1–S5 on 3 locks through ${SECONDS} s of combined faults, and every lock recovers after the heal`,
    async () => {
      const r = await runNemesis({
        bed,
        seed: SEED,
        durationMs: SECONDS * 1000,
        intervalMs: [1500, 4000],
        leaseSeconds: LEASE_SECONDS,
        recoveryTimeoutMs: RECOVERY_BOUND_MS,
        log: (l) => {
          process.stdout.write(`${l}\n`);
        },
      });
      process.stdout.write(`\ncombined nemesis (seed ${SEED}; replay with SAFETY_SEED=${SEED})\n${formatNemesis(r)}\n`);
      for (const l of r.perLock)
        if (!l.ok) process.stdout.write(`FAILED ${l.lock}:\n  ${l.violations.slice(0, 10).join('\n  ')}\n`);
      expect(r.setupError, 'set-up').toBeUndefined();
      expect(bed.storeLog.broken, 'the store command log broke off: histories incomplete').toBe(false);
      expect(r.faults.length, 'faults injected').toBeGreaterThan(0);
      expect(
        r.perLock.flatMap((l) => l.violations.map((v) => `${l.lock} ${v}`)),
        'violations',
      ).toEqual([]);
      expect(
        r.recoveryMs,
        `every lock had an accepted write within ${RECOVERY_BOUND_MS} ms of the final heal`,
      ).not.toBeNull();
    },
    (SECONDS + 300) * 1000,
  );
});
