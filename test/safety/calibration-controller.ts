/**
 * calibration-controller.ts — what the CALIBRATION-ONLY controllers (unsafe-, phase-proof- and
 * over-granting-controller.ts) share: their command line, and running the lock controller with one
 * protection removed until SIGTERM. The bed starts them (testbed.ts) in place of `fencepost controller`.
 */
import { parseArgs } from 'node:util';
import { startLockController, type LockControllerOptions } from '../../src/controllers/distributedlock/setup.ts';
import { apiClientFor } from '../../src/kube/api-client.ts';
import { silentLogger } from '../../src/observability/logger.ts';
import { realClock } from '../../src/runtime/clock.ts';

/** CalibrationArgs: the bed's arguments to a calibration controller. */
export interface CalibrationArgs {
  readonly kubeconfig: string | undefined;
  readonly redisUrl: string;
  readonly namespace: string;
}

/** calibrationArgs parses `--kubeconfig PATH --redis-url URL --namespace NS`; exits 2 naming `file` when incomplete. */
export function calibrationArgs(file: string): CalibrationArgs {
  const { values } = parseArgs({
    strict: true,
    options: { kubeconfig: { type: 'string' }, 'redis-url': { type: 'string' }, namespace: { type: 'string' } },
  });
  const redisUrl = values['redis-url'] ?? '';
  const namespace = values.namespace ?? '';
  if (redisUrl === '' || namespace === '') {
    process.stderr.write(`Usage: ${file} --kubeconfig PATH --redis-url URL --namespace NS\n`);
    process.exit(2);
  }
  return { kubeconfig: values.kubeconfig, redisUrl, namespace };
}

/**
 * runCalibrationController starts the lock controller as `identity` with `weakened` (the options
 * that remove a protection), says so on stderr, and stops it on SIGTERM.
 */
export async function runCalibrationController(
  args: CalibrationArgs,
  identity: string,
  what: string,
  weakened: Partial<LockControllerOptions>,
): Promise<void> {
  const controller = await startLockController({
    kc: apiClientFor(args.kubeconfig),
    redisUrl: args.redisUrl,
    namespace: args.namespace,
    identity,
    clock: realClock,
    log: silentLogger,
    ...weakened,
  });
  process.stderr.write(`unsafe controller (${what}) started\n`);
  process.on('SIGTERM', () => {
    void controller.stop().then(() => process.exit(0));
  });
}
