/**
 * The parts of a cluster that make Deployments run on a test control plane: kube-scheduler (binds
 * pods to nodes), kube-controller-manager (Deployments → ReplicaSets → Pods, Jobs, CronJobs,
 * garbage collection, node lifecycle) and kwok (fake nodes that report Ready, and pods on them that
 * become Running and Ready). Each runs as a managed process with the admin kubeconfig, without
 * leader election and without a serving port.
 */
import { join, resolve } from 'node:path';
import { findBinary } from '../testbed/assets.ts';
import { spawnManaged, type ManagedProcess } from '../testbed/processes.ts';
import type { ControlPlane } from '../testbed/control-plane.ts';

/** KWOK_STAGES is the stage set kwok runs with (hack/testbed/kwok/stages.yaml says which and why). */
export const KWOK_STAGES = resolve(import.meta.dirname, '../../../hack/testbed/kwok/stages.yaml');

/**
 * KCM_CONTROLLERS are the kube-controller-manager controllers the e2e cluster needs. The token
 * controllers are left out: there is no legacy token issuance here (tests use TokenRequest), and
 * the ServiceAccount admission plugin is off, as in envtest.
 */
export const KCM_CONTROLLERS =
  '*,-serviceaccount-token,-bootstrapsigner,-tokencleaner,-csrsigning,-csrapproving,-csrcleaner';

/** startScheduler runs kube-scheduler against the plane. */
export function startScheduler(plane: ControlPlane, pidFile?: string): ManagedProcess {
  return spawnManaged('kube-scheduler', findBinary('kube-scheduler'), {
    args: [`--kubeconfig=${plane.kubeconfigPath}`, '--leader-elect=false', '--secure-port=0', '--v=1'],
    logFile: join(plane.dir, 'kube-scheduler.log'),
    ...(pidFile !== undefined ? { pidFile } : {}),
  });
}

/** startControllerManager runs kube-controller-manager against the plane. */
export function startControllerManager(
  plane: ControlPlane,
  pidFile?: string,
  nodeMonitorGracePeriod = '5m',
): ManagedProcess {
  return spawnManaged('kube-controller-manager', findBinary('kube-controller-manager'), {
    args: [
      `--kubeconfig=${plane.kubeconfigPath}`,
      '--leader-elect=false',
      '--secure-port=0',
      `--controllers=${KCM_CONTROLLERS}`,
      '--use-service-account-credentials=false',
      `--root-ca-file=${plane.pki.caCert}`,
      `--service-account-private-key-file=${plane.pki.saKey}`,
      // kwok renews the fake nodes' heartbeat Leases; on a loaded 2-core machine a renewal can be
      // late, and a node marked NotReady would mark its pods unready. The node-loss test with a
      // real node shortens it, to see its kubelet's silence turn the Node NotReady.
      `--node-monitor-grace-period=${nodeMonitorGracePeriod}`,
      '--v=1',
    ],
    logFile: join(plane.dir, 'kube-controller-manager.log'),
    ...(pidFile !== undefined ? { pidFile } : {}),
  });
}

/** startKwok runs kwok managing every node, with the stages of hack/testbed/kwok/stages.yaml. */
export function startKwok(plane: ControlPlane, pidFile?: string): ManagedProcess {
  return spawnManaged('kwok', findBinary('kwok'), {
    args: [
      `--kubeconfig=${plane.kubeconfigPath}`,
      `--config=${KWOK_STAGES}`,
      '--manage-all-nodes=true',
      '--node-ip=127.0.0.1',
      '--cidr=10.244.0.1/16',
      '--server-address=',
    ],
    logFile: join(plane.dir, 'kwok.log'),
    ...(pidFile !== undefined ? { pidFile } : {}),
  });
}
