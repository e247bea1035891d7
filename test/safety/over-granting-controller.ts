/**
 * over-granting-controller.ts — CALIBRATION ONLY: the lock controller shown every Semaphore lock
 * with one permit more than its spec says (spec.permits + 1), so that it grants N+1 holders at
 * once. The `semaphore` trials must report S6 (more than N believing holders). It exists to prove
 * the semaphore checker can fail, and is never used outside `--calibrate permits` runs.
 *
 *   node test/safety/over-granting-controller.ts --kubeconfig PATH --redis-url URL --namespace NS
 */
import type { DistributedLock } from '../../src/api/v1alpha1/distributedlock.ts';
import { calibrationArgs, runCalibrationController } from './calibration-controller.ts';

/** onePermitMore: a Semaphore as if it had spec.permits + 1. */
function onePermitMore(lock: DistributedLock): DistributedLock {
  if (lock.spec.mode !== 'Semaphore' || lock.spec.permits === undefined) return lock;
  return { ...lock, spec: { ...lock.spec, permits: lock.spec.permits + 1 } };
}

await runCalibrationController(
  calibrationArgs('over-granting-controller.ts'),
  'over-granting-controller',
  'one permit more than spec.permits',
  { lockView: onePermitMore },
);
