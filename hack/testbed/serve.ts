/**
 * serve.ts — the long-running half of `npm run testbed:up`: starts the control plane and Redis
 * in .testbed/ (with --with-nodes also kube-scheduler, kube-controller-manager, kwok with two fake
 * nodes and the pod runner, test/support/cluster; with --with-registry an OCI registry on loopback,
 * test/support/testbed/registry.ts), writes .testbed/state.json for the other
 * commands, and stops everything on SIGTERM or SIGINT. Started detached by up.ts; not meant to be
 * run by hand.
 */
import { writeFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { startCluster } from '../../test/support/cluster/cluster.ts';
import { startControlPlane, type ControlPlane } from '../../test/support/testbed/control-plane.ts';
import { startRedis } from '../../test/support/testbed/redis.ts';
import { startRegistry } from '../../test/support/testbed/registry.ts';
import { TESTBED_DIR, type TestbedState } from './state.ts';

const withNodes = process.argv.includes('--with-nodes');
// With nodes, every fencepost container of every scheduled pod runs as a local process (logs in
// .testbed/pods/), so that `helm install` and the examples work as on a cluster.
const cluster = withNodes ? await startCluster({ dir: TESTBED_DIR, nodes: 2, runNamespaces: 'all' }) : undefined;
const plane: ControlPlane = cluster?.plane ?? (await startControlPlane({ dir: TESTBED_DIR }));
const redis = await startRedis({ dir: join(TESTBED_DIR, 'redis') });
const registry = process.argv.includes('--with-registry')
  ? await startRegistry({ dir: join(TESTBED_DIR, 'registry'), pidFile: join(TESTBED_DIR, 'pids') })
  : undefined;
const state: TestbedState = {
  pid: process.pid,
  kubeconfig: plane.kubeconfigPath,
  apiServer: plane.apiServer.url,
  redisUrl: redis.url,
  assets: process.env['KUBEBUILDER_ASSETS'] ?? '',
  nodes: cluster?.nodes ?? [],
  ...(registry !== undefined ? { registry: registry.host } : {}),
  startedAt: new Date().toISOString(),
};
writeFileSync(join(TESTBED_DIR, 'state.json'), JSON.stringify(state, null, 2));

let stopping = false;
const stop = async (): Promise<void> => {
  if (stopping) return;
  stopping = true;
  await registry?.stop();
  if (cluster !== undefined) {
    await Promise.allSettled([cluster.stop(), redis.stop()]);
  } else {
    await Promise.allSettled([plane.apiServer.stop(), redis.stop()]);
    await plane.etcd.stop();
  }
  rmSync(join(TESTBED_DIR, 'state.json'), { force: true });
  process.exit(0);
};
process.on('SIGTERM', () => {
  void stop();
});
process.on('SIGINT', () => {
  void stop();
});
// Keep the event loop alive until a signal arrives.
setInterval(() => undefined, 1 << 30);
