/**
 * unsafe-controller.ts — CALIBRATION ONLY: the lock controller with its fencing dispenser
 * replaced by a bare Redis INCR that ignores the etcd high-water mark (the floor). With Redis
 * data loss this controller reissues old tokens; the safety suite must see that (S1). It exists
 * to prove the suite can fail, and is never used outside `--calibrate floor` runs.
 *
 *   node test/safety/unsafe-controller.ts --kubeconfig PATH --redis-url URL --namespace NS
 */
import { Redis } from 'ioredis';
import { fencingBackends, type FencingBackends } from '../../src/fencing/backends.ts';
import type { FenceDispenser } from '../../src/fencing/redis-fence.ts';
import { calibrationArgs, runCalibrationController } from './calibration-controller.ts';

const args = calibrationArgs('unsafe-controller.ts');
const redisUrl = args.redisUrl;

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
await runCalibrationController(args, 'unsafe-controller', 'no etcd floor', { fencing });
