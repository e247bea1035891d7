/**
 * up.ts — `npm run testbed:up`: a real etcd + kube-apiserver (CRDs installed) and a redis-server
 * on loopback for a person to use, the way `kind create cluster` is used. Prints the exports to
 * paste. Stop it with `npm run testbed:down`. Binaries: KUBEBUILDER_ASSETS, else the
 * hack/testbed/build.sh cache (built on first use).
 *
 * `npm run testbed:up -- --with-nodes` adds kube-scheduler, kube-controller-manager and kwok with
 * two fake nodes, and runs every fencepost container of a scheduled pod as a local process (the
 * first run builds the three extra binaries, about 10 minutes on 2 cores).
 *
 * `npm run testbed:up -- --node` adds kube-scheduler, kube-controller-manager and one real node
 * instead: containerd, runc, the CNI plugins and a kubelet (test/support/node), with the
 * fencepost image imported as fencepost:e2e. As root only: the node changes the host (a bridge,
 * iptables rules, sysctls, cgroups, mounts), and `npm run testbed:down` undoes every change.
 *
 * `npm run testbed:up -- --with-registry` adds an OCI registry (the CNCF distribution registry,
 * plain HTTP on 127.0.0.1) that `hack/release.sh VERSION $FENCEPOST_REGISTRY` publishes to and
 * `helm install oci://$FENCEPOST_REGISTRY/fencepost/charts/fencepost` installs from.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, openSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { readState, TESTBED_DIR } from './state.ts';

const root = resolve(import.meta.dirname, '../..');

function printExports(kubeconfig: string, redisUrl: string, assets: string, registry?: string): void {
  process.stdout.write(
    `export KUBECONFIG=${kubeconfig}\n` +
      `export FENCEPOST_REDIS_URL=${redisUrl}\n` +
      (registry !== undefined ? `export FENCEPOST_REGISTRY=${registry}\n` : '') +
      `export PATH=${assets}:$PATH   # kubectl ${'v1.36.3'} and helm from the testbed build\n`,
  );
}

const running = readState();
if (running !== undefined) {
  process.stderr.write(`Testbed already running (pid ${running.pid}, API server ${running.apiServer})\n`);
  printExports(running.kubeconfig, running.redisUrl, running.assets, running.registry);
  process.exit(0);
}

const withNodes = process.argv.includes('--with-nodes');
const realNode = process.argv.includes('--node');
const withRegistry = process.argv.includes('--with-registry');
if (withNodes && realNode) {
  process.stderr.write(
    'testbed:up: --with-nodes (kwok) and --node (a real kubelet) are two kinds of cluster: pick one\n',
  );
  process.exit(2);
}
if (realNode && process.getuid?.() !== 0) {
  process.stderr.write('testbed:up --node: a real node needs root (bridge, iptables, cgroups, mounts)\n');
  process.exit(2);
}
const components = [
  ...(withNodes || realNode || withRegistry ? ['kube-apiserver', 'kubectl', 'etcd', 'helm'] : []),
  ...(withNodes ? ['kube-scheduler', 'kube-controller-manager', 'kwok'] : []),
  ...(realNode ? ['kube-scheduler', 'kube-controller-manager', 'node'] : []),
  ...(withRegistry ? ['registry', 'oras', 'syft', 'cosign'] : []),
];
const assets =
  (components.length > 0 ? undefined : process.env['KUBEBUILDER_ASSETS']) ??
  execFileSync(join(root, 'hack/testbed/build.sh'), components, {
    stdio: ['ignore', 'pipe', 'inherit'],
    encoding: 'utf8',
  })
    .trim()
    .split('\n')
    .pop() ??
  '';

// A fresh cluster each time, as `kind create cluster` gives.
rmSync(TESTBED_DIR, { recursive: true, force: true });
mkdirSync(TESTBED_DIR, { recursive: true });
const log = openSync(join(TESTBED_DIR, 'serve.log'), 'a');
const child = spawn(process.execPath, [join(root, 'hack/testbed/serve.ts'), ...process.argv.slice(2)], {
  detached: true,
  stdio: ['ignore', log, log],
  env: { ...process.env, KUBEBUILDER_ASSETS: assets },
});
child.unref();

const deadline = performance.now() + (realNode ? 300_000 : 180_000);
for (;;) {
  const state = readState();
  if (state !== undefined) {
    process.stderr.write(
      `Testbed up: API server ${state.apiServer}, Redis ${state.redisUrl}${(state.nodes ?? []).length > 0 ? `, nodes ${(state.nodes ?? []).join(', ')}` : ''}${state.registry !== undefined ? `, registry http://${state.registry}` : ''}, logs in ${TESTBED_DIR}\n`,
    );
    printExports(state.kubeconfig, state.redisUrl, state.assets, state.registry);
    break;
  }
  if (child.exitCode !== null || performance.now() > deadline || !existsSync(TESTBED_DIR)) {
    process.stderr.write(`Testbed failed to start; see ${join(TESTBED_DIR, 'serve.log')}\n`);
    process.exit(1);
  }
  await sleep(200);
}
