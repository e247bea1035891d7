/**
 * phase-proof-controller.ts — CALIBRATION ONLY: the lock controller reading pods the way it did
 * before issue 15's finding 3: a pod in phase `Failed` or `Succeeded` counts as one whose every
 * container stopped (its container statuses are shown to the reconciler as terminated), so a pod
 * the pod garbage collector marked Failed — its processes possibly still running on a lost node —
 * is handed over at once. The `node-loss` trials must count the early grants this makes. Never
 * used outside `--calibrate phase-proof` runs.
 *
 *   node test/safety/phase-proof-controller.ts --kubeconfig PATH --redis-url URL --namespace NS
 */
import { parseArgs } from 'node:util';
import type { V1ContainerStatus, V1Pod } from '@kubernetes/client-node';
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
  process.stderr.write('Usage: phase-proof-controller.ts --kubeconfig PATH --redis-url URL --namespace NS\n');
  process.exit(2);
}

const stopped = (names: readonly { name: string }[], now: Date): V1ContainerStatus[] =>
  names.map((c) => ({
    name: c.name,
    image: '',
    imageID: '',
    ready: false,
    restartCount: 0,
    state: { terminated: { exitCode: 137, startedAt: now, finishedAt: now } },
  }));

/** phaseAsProof: a Failed or Succeeded pod is shown with every container terminated (the old summarizePod). */
function phaseAsProof(pod: V1Pod): V1Pod {
  const phase = pod.status?.phase;
  if ((phase !== 'Failed' && phase !== 'Succeeded') || pod.spec === undefined) return pod;
  const now = new Date();
  return {
    ...pod,
    status: {
      ...pod.status,
      containerStatuses: stopped(pod.spec.containers, now),
      initContainerStatuses: stopped(pod.spec.initContainers ?? [], now),
      ephemeralContainerStatuses: stopped(pod.spec.ephemeralContainers ?? [], now),
    },
  };
}

const controller = await startLockController({
  kc: loadKubeConfig(values.kubeconfig),
  redisUrl,
  namespace,
  identity: 'phase-proof-controller',
  clock: realClock,
  log: silentLogger,
  podView: phaseAsProof,
});
process.stderr.write('unsafe controller (pod phase as proof) started\n');
process.on('SIGTERM', () => {
  void controller.stop().then(() => process.exit(0));
});
