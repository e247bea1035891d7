/**
 * up.ts — `npm run testbed:up`: a real etcd + kube-apiserver (CRDs installed) and a redis-server
 * on loopback for a person to use, the way `kind create cluster` is used. Prints the exports to
 * paste. Stop it with `npm run testbed:down`. Binaries: KUBEBUILDER_ASSETS, else the
 * hack/testbed/build.sh cache (built on first use).
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, openSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { readState, TESTBED_DIR } from './state.ts';

const root = resolve(import.meta.dirname, '../..');

function printExports(kubeconfig: string, redisUrl: string, assets: string): void {
  process.stdout.write(
    `export KUBECONFIG=${kubeconfig}\n` +
    `export FENCEPOST_REDIS_URL=${redisUrl}\n` +
    `export PATH=${assets}:$PATH   # kubectl ${'v1.36.3'} and helm from the testbed build\n`,
  );
}

const running = readState();
if (running !== undefined) {
  process.stderr.write(`Testbed already running (pid ${running.pid}, API server ${running.apiServer})\n`);
  printExports(running.kubeconfig, running.redisUrl, running.assets);
  process.exit(0);
}

const assets = process.env['KUBEBUILDER_ASSETS'] ??
  execFileSync(join(root, 'hack/testbed/build.sh'), { stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' }).trim().split('\n').pop() ?? '';

// A fresh cluster each time, as `kind create cluster` gives.
rmSync(TESTBED_DIR, { recursive: true, force: true });
mkdirSync(TESTBED_DIR, { recursive: true });
const log = openSync(join(TESTBED_DIR, 'serve.log'), 'a');
const child = spawn(process.execPath, [join(root, 'hack/testbed/serve.ts')], {
  detached: true, stdio: ['ignore', log, log], env: { ...process.env, KUBEBUILDER_ASSETS: assets },
});
child.unref();

const deadline = performance.now() + 120_000;
for (;;) {
  const state = readState();
  if (state !== undefined) {
    process.stderr.write(`Testbed up: API server ${state.apiServer}, Redis ${state.redisUrl}, logs in ${TESTBED_DIR}\n`);
    printExports(state.kubeconfig, state.redisUrl, state.assets);
    break;
  }
  if (child.exitCode !== null || performance.now() > deadline || !existsSync(TESTBED_DIR)) {
    process.stderr.write(`Testbed failed to start; see ${join(TESTBED_DIR, 'serve.log')}\n`);
    process.exit(1);
  }
  await sleep(200);
}
