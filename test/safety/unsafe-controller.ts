/**
 * unsafe-controller.ts — CALIBRATION ONLY: the lock controller with its fencing dispenser
 * replaced by a bare Redis INCR that ignores the etcd high-water mark (the floor). With Redis
 * data loss this controller reissues old tokens; the safety suite must see that (S1). It exists
 * to prove the suite can fail, and is never used outside `--calibrate floor` runs.
 *
 *   node test/safety/unsafe-controller.ts --kubeconfig PATH --redis-url URL --namespace NS
 */
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { startLockController } from '../../src/controllers/distributedlock/setup.ts';
import { fencingBackends, type FencingBackends } from '../../src/fencing/backends.ts';
import type { FenceDispenser } from '../../src/fencing/redis-fence.ts';
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
  process.stderr.write('Usage: unsafe-controller.ts --kubeconfig PATH --redis-url URL --namespace NS\n');
  process.exit(2);
}

const client = new Redis(redisUrl, { enableOfflineQueue: false, maxRetriesPerRequest: 1 });
client.on('error', () => undefined);
/** noFloor: INCR alone — what a dispenser without the etcd floor would do. */
const noFloor: FenceDispenser = {
  async next(key) {
    return { token: BigInt(await client.incr(key)), refloored: false, existed: true, hadTtl: false };
  },
};
const real = fencingBackends(redisUrl);
const fencing: FencingBackends = {
  forLock(lock) {
    const f = real.forLock(lock);
    return f.backend === 'Redis' ? { ...f, dispenser: noFloor } : f;
  },
  async close() {
    client.disconnect();
    await real.close();
  },
};
const controller = await startLockController({
  kc: loadKubeConfig(values.kubeconfig),
  redisUrl,
  namespace,
  identity: 'unsafe-controller',
  clock: realClock,
  log: silentLogger,
  fencing,
});
process.stderr.write('unsafe controller (no etcd floor) started\n');
process.on('SIGTERM', () => {
  void controller.stop().then(() => process.exit(0));
});
