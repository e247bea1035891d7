/**
 * The recorder's own kube-apiserver, for trials that stop or pause the control plane's.
 *
 * The Lease recorder must see every version of every lock Lease. A watch resumed after the
 * kube-apiserver restarted is refused with 410 Gone ("too old resource version"): the new
 * process's watch cache starts at the current revision, and the versions written in between are
 * lost to the recorder. This second kube-apiserver on the same etcd runs without the watch cache
 * (`--watch-cache=false`), so every watch it serves is an etcd watch and resumes from any revision
 * etcd still holds; and it is never paused or restarted, so the recorder keeps watching through an
 * outage of the first one. The processes under test (workers, controller) keep using the first
 * server, with its watch cache, as in production.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { startApiServer, type ApiServer } from '../../support/testbed/apiserver.ts';
import type { ControlPlane } from '../../support/testbed/control-plane.ts';

/** Witness is a second API server on the plane's etcd, for recorders only. */
export interface Witness {
  readonly server: ApiServer;
  /** kubeconfigPath: the plane's admin kubeconfig pointed at the witness. */
  readonly kubeconfigPath: string;
  kubeConfig(): KubeConfig;
  stop(): Promise<void>;
}

/** startWitness starts the witness kube-apiserver next to the plane's and waits for /readyz. */
export async function startWitness(plane: ControlPlane): Promise<Witness> {
  const dir = join(plane.dir, 'witness');
  mkdirSync(dir, { recursive: true });
  const server = await startApiServer(dir, plane.pki, plane.etcd.clientUrl, join(plane.dir, 'pids'), {
    name: 'witness-apiserver',
    extraArgs: ['--watch-cache=false'],
  });
  const kubeconfigPath = join(dir, 'kubeconfig');
  const admin = plane.kubeConfig();
  writeFileSync(kubeconfigPath, admin.exportConfig().replace(plane.apiServer.url, server.url), { mode: 0o600 });
  return {
    server,
    kubeconfigPath,
    kubeConfig() {
      const kc = new KubeConfig();
      kc.loadFromFile(kubeconfigPath);
      return kc;
    },
    stop: () => server.stop(),
  };
}
