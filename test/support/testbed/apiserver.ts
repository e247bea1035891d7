/**
 * A kube-apiserver for the test control plane: TLS on a free loopback port, client-certificate
 * authentication against the testbed CA, RBAC authorization, and service-account token issuance
 * (TokenRequest). It can be stopped and started again on the same port, for fault tests.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { findBinary } from './assets.ts';
import type { Pki } from './certs.ts';
import { waitHealthy } from './http-probe.ts';
import { freePort } from './ports.ts';
import { spawnManaged, tailLog, type ManagedProcess } from './processes.ts';

/** ApiServer is a running kube-apiserver. */
export interface ApiServer {
  readonly url: string;
  readonly port: number;
  process(): ManagedProcess;
  /** stop ends the server (SIGTERM); its port and certificates stay reserved for start(). */
  stop(): Promise<void>;
  /** start brings it back on the same port and waits for /readyz. */
  start(): Promise<void>;
}

/** ApiServerOptions: for a second server on the same etcd (e.g. a recorder's own, without the watch cache). */
export interface ApiServerOptions {
  /** name names its log file and cert folder (default kube-apiserver, apiserver-certs). */
  readonly name?: string;
  /**
   * serviceAccountAdmission turns the ServiceAccount admission plugin on (off by default, as in
   * envtest): a real kubelet mounts a pod's token only where the plugin added the volume.
   */
  readonly serviceAccountAdmission?: boolean;
  /** extraArgs are appended to the command line. */
  readonly extraArgs?: readonly string[];
}

/** startApiServer starts kube-apiserver against etcdUrl and waits until /readyz answers 200. */
export async function startApiServer(
  dir: string,
  pki: Pki,
  etcdUrl: string,
  pidFile?: string,
  opts: ApiServerOptions = {},
): Promise<ApiServer> {
  const bin = findBinary('kube-apiserver');
  const port = await freePort();
  const url = `https://127.0.0.1:${port}`;
  const name = opts.name ?? 'kube-apiserver';
  const certDir = join(dir, opts.name !== undefined ? `${name}-certs` : 'apiserver-certs');
  mkdirSync(certDir, { recursive: true });
  const args = [
    `--etcd-servers=${etcdUrl}`,
    '--bind-address=127.0.0.1',
    '--advertise-address=127.0.0.1',
    `--secure-port=${port}`,
    `--cert-dir=${certDir}`,
    `--tls-cert-file=${pki.serverCert}`,
    `--tls-private-key-file=${pki.serverKey}`,
    `--client-ca-file=${pki.caCert}`,
    '--authorization-mode=RBAC',
    // What the API server shows a kubelet (logs, exec) on a real node: the admin's certificate.
    `--kubelet-client-certificate=${pki.adminCert}`,
    `--kubelet-client-key=${pki.adminKey}`,
    // by its address: a test node's name is no host name the resolver knows
    '--kubelet-preferred-address-types=InternalIP,Hostname',
    '--service-cluster-ip-range=10.0.0.0/24',
    '--allow-privileged=true',
    `--service-account-issuer=${url}/`,
    `--service-account-key-file=${pki.saPub}`,
    `--service-account-signing-key-file=${pki.saKey}`,
    // As envtest does: no ServiceAccount admission (no token controller runs here), and no
    // endpoint reconciler (as kwok does: there is no real node behind the advertise address).
    ...(opts.serviceAccountAdmission === true ? [] : ['--disable-admission-plugins=ServiceAccount']),
    '--endpoint-reconciler-type=none',
    // Coordinated Leader Election (KEP-4355, beta and off by default in 1.36): without the gate the
    // API server drops Lease.spec.strategy and spec.preferredHolder, which fencepost honours.
    '--feature-gates=CoordinatedLeaderElection=true',
    '--runtime-config=coordination.k8s.io/v1beta1=true',
    '--v=0',
    ...(opts.extraArgs ?? []),
  ];
  let proc: ManagedProcess | undefined;
  const start = async (): Promise<void> => {
    // The port may still be in TIME_WAIT or taken briefly after a restart: retry a few times.
    for (let attempt = 1; ; attempt++) {
      const p = spawnManaged('kube-apiserver', bin, {
        args,
        logFile: join(dir, `${name}.log`),
        ...(pidFile !== undefined ? { pidFile } : {}),
      });
      proc = p;
      try {
        await waitHealthy(`${url}/readyz`, {
          tls: { ca: pki.caCert, cert: pki.adminCert, key: pki.adminKey },
          timeoutMs: 90_000,
          alive: () => p.isRunning(),
          what: 'kube-apiserver',
        });
        return;
      } catch (err) {
        await p.stop();
        const log = tailLog(p.logFile);
        if (attempt < 5 && /address already in use/.test(log)) {
          await sleep(500 * attempt);
          continue;
        }
        throw new Error(`${(err as Error).message}\n--- ${name}.log ---\n${log}`, { cause: err });
      }
    }
  };
  await start();
  return {
    url,
    port,
    process: () => {
      if (proc === undefined) throw new Error('kube-apiserver not started');
      return proc;
    },
    stop: async () => {
      await proc?.stop(10_000);
    },
    start,
  };
}
