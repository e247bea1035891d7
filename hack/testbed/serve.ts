/**
 * serve.ts — the long-running half of `npm run testbed:up`: starts the control plane and Redis
 * in .testbed/ (with --with-nodes also kube-scheduler, kube-controller-manager, kwok with two fake
 * nodes and the pod runner, test/support/cluster; with --node the same components and one real
 * node instead, test/support/node, with the fencepost image imported; with --with-registry an OCI
 * registry on loopback, test/support/testbed/registry.ts), writes .testbed/state.json for the other
 * commands, and stops everything on SIGTERM or SIGINT. Started detached by up.ts; not meant to be
 * run by hand.
 */
import { writeFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { startCluster } from '../../test/support/cluster/cluster.ts';
import { ensureImageArchive } from '../../test/support/image/archive.ts';
import { startControlPlane, type ControlPlane } from '../../test/support/testbed/control-plane.ts';
import { startRedis } from '../../test/support/testbed/redis.ts';
import { startRegistry } from '../../test/support/testbed/registry.ts';
import { TESTBED_DIR, type TestbedState } from './state.ts';

const withNodes = process.argv.includes('--with-nodes');
const realNode = process.argv.includes('--node');
// With nodes, every fencepost container of every scheduled pod runs as a local process (logs in
// .testbed/pods/), so that `helm install` and the examples work as on a cluster. With a real node
// the kubelet runs them, from the image (fencepost:e2e in the node's store).
const cluster = realNode
  ? await startCluster({
      dir: TESTBED_DIR,
      realNode: {
        images: [{ archive: ensureImageArchive(), names: ['fencepost:e2e', 'ghcr.io/fencepost/fencepost:0.1.0'] }],
      },
    })
  : withNodes
    ? await startCluster({ dir: TESTBED_DIR, nodes: 2, runNamespaces: 'all' })
    : undefined;
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
