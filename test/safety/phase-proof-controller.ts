/**
 * phase-proof-controller.ts — CALIBRATION ONLY: the lock controller reading pods the way it did
 * before pod phase stopped counting as proof that a pod's processes ended: a pod in phase `Failed`
 * or `Succeeded` counts as one whose every container stopped (its container statuses are shown to
 * the reconciler as terminated), so a pod the pod garbage collector marked Failed — its processes
 * possibly still running on a lost node — is handed over at once. The `node-loss` trials must count
 * the early grants this makes. Never used outside `--calibrate phase-proof` runs.
 *
 *   node test/safety/phase-proof-controller.ts --kubeconfig PATH --redis-url URL --namespace NS
 */
import type { V1ContainerStatus, V1Pod } from '@kubernetes/client-node';
import { calibrationArgs, runCalibrationController } from './calibration-controller.ts';

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

await runCalibrationController(
  calibrationArgs('phase-proof-controller.ts'),
  'phase-proof-controller',
  'pod phase as proof',
  { podView: phaseAsProof },
);
