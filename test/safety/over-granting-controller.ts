/**
 * over-granting-controller.ts — CALIBRATION ONLY: the lock controller shown every Semaphore lock
 * with one permit more than its spec says (spec.permits + 1), so that it grants N+1 holders at
 * once. The `semaphore` trials must report S6 (more than N believing holders). It exists to prove
 * the semaphore checker can fail, and is never used outside `--calibrate permits` runs.
 *
 *   node test/safety/over-granting-controller.ts --kubeconfig PATH --redis-url URL --namespace NS
 */
import { parseArgs } from 'node:util';
import type { DistributedLock } from '../../src/api/v1alpha1/distributedlock.ts';
import { startLockController } from '../../src/controllers/distributedlock/setup.ts';
import { loadKubeConfig } from '../../src/kube/kubeconfig.ts';
import { silentLogger } from '../../src/observability/logger.ts';
import { realClock } from '../../src/runtime/clock.ts';

const { values } = parseArgs({
  strict: true,
  options: { kubeconfig: { type: 'string' }, 'redis-url': { type: 'string' }, namespace: { type: 'string' } },
});
const redisUrl = values['redis-url'] ?? '';
const namespace = values.namespace ?? '';
if (redisUrl === '' || namespace === '') {
  process.stderr.write('Usage: over-granting-controller.ts --kubeconfig PATH --redis-url URL --namespace NS\n');
  process.exit(2);
}

/** onePermitMore: a Semaphore as if it had spec.permits + 1. */
function onePermitMore(lock: DistributedLock): DistributedLock {
  if (lock.spec.mode !== 'Semaphore' || lock.spec.permits === undefined) return lock;
  return { ...lock, spec: { ...lock.spec, permits: lock.spec.permits + 1 } };
}

const controller = await startLockController({
  kc: loadKubeConfig(values.kubeconfig),
  redisUrl,
  namespace,
  identity: 'over-granting-controller',
  clock: realClock,
  log: silentLogger,
  lockView: onePermitMore,
});
process.stderr.write('unsafe controller (one permit more than spec.permits) started\n');
process.on('SIGTERM', () => {
  void controller.stop().then(() => process.exit(0));
});
