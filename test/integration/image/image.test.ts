import { execFile } from 'node:child_process';
import { chmodSync, copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildLocally } from '../../support/image/dockerfile.ts';
import { getStatus } from '../../support/testbed/http-probe.ts';
import { freePort } from '../../support/testbed/ports.ts';
import { spawnManaged, tailLog } from '../../support/testbed/processes.ts';
import { parseLease } from '../../../src/lease/record.ts';
import { eventually, freshNamespace, sharedKubeConfig } from '../../support/env.ts';
import { createLock, createPod, getLease, lockBody, testKube } from '../../support/fixtures.ts';

const run = promisify(execFile);
const root = resolve(import.meta.dirname, '../../..');
const MiB = 1024 * 1024;

// The image without Docker: the Dockerfile's own COPY and RUN steps, run locally in a folder per
// stage, give the tree the image's /app holds. It must be small, run both entrypoints, and work as
// the image runs it: as uid 65532, from a tree it cannot write to.
describe("the container image, built from the Dockerfile's own steps", () => {
  let dir = '';
  let app = '';
  let node = '';
  const asImageUser = ['--reuid=65532', '--regid=65532', '--clear-groups'];

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'fencepost-image-'));
    chmodSync(dir, 0o755);
    app = join(
      buildLocally(join(root, 'Dockerfile'), {
        context: root,
        dir: join(dir, 'stages'),
        env: { ...process.env, npm_config_prefer_offline: 'true', npm_config_loglevel: 'error' },
      }),
      'app',
    );
    // The base image's node, where uid 65532 can run it (this machine's lives under /root, mode 700).
    node = join(dir, 'node');
    copyFileSync(process.execPath, node);
    chmodSync(node, 0o755);
  }, 300_000);
  afterAll(() => {
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
  });

  it('holds production dependencies only, and is small', async () => {
    const kib = async (p: string): Promise<number> =>
      Number((await run('du', ['-sk', p])).stdout.split('\t')[0]) * 1024;
    // The agent executable carries its runtime (Bun); the controller's tree (everything else under
    // /app) runs on the base image's Node.
    const agentBytes = await kib(join(app, 'bin/fencepost-agent'));
    const size = (await kib(app)) - agentBytes;
    process.stderr.write(
      `[image] /app without bin/ ${(size / MiB).toFixed(1)} MiB (node_modules ${((await kib(join(app, 'node_modules'))) / MiB).toFixed(1)} MiB); bin/fencepost-agent ${(agentBytes / MiB).toFixed(1)} MiB; node binary ${(process.execPath.length > 0 ? (await kib(process.execPath)) / MiB : 0).toFixed(1)} MiB\n`,
    );
    expect(size).toBeLessThan(64 * MiB);
    expect(agentBytes).toBeLessThan(160 * MiB);
    for (const dev of ['typescript', 'eslint', 'vitest', 'pg', '@types/pg']) {
      await expect(run('test', ['-e', join(app, 'node_modules', dev)])).rejects.toBeDefined();
    }
    await run('test', ['-e', join(app, 'node_modules/@kubernetes/client-node/package.json')]);
  });

  it('runs both entrypoints (the controller on Node, the agent executable) as uid 65532 from a tree it cannot write to', async () => {
    await expect(run('setpriv', [...asImageUser, 'touch', join(app, 'probe')])).rejects.toBeDefined();
    const main = join(app, 'dist/src/cli/main.js');
    expect((await run('setpriv', [...asImageUser, node, main, 'version'])).stdout).toBe('fencepost 0.1.0\n');
    expect((await run('setpriv', [...asImageUser, node, main, 'controller', '--help'])).stdout).toContain(
      '--leader-elect',
    );
    expect((await run('setpriv', [...asImageUser, node, main, 'agent', '--help'])).stdout).toContain('--lock');
    // The sidecar's command: the agent executable, with no Node and no node_modules beside it.
    const agent = join(app, 'bin/fencepost-agent');
    expect(
      (await run('setpriv', [...asImageUser, agent, 'version'], { cwd: '/', env: { PATH: '/usr/bin:/bin' } })).stdout,
    ).toBe('fencepost-agent 0.1.0\n');
    expect((await run('setpriv', [...asImageUser, agent, 'agent', '--help'], { cwd: '/' })).stdout).toContain('--lock');
    expect((await run('setpriv', [...asImageUser, agent, 'exec', '--help'], { cwd: '/' })).stdout).toContain(
      '--run-id',
    );
  });

  it('the controller from the image tree grants a lock on the API server and counts it in its metrics', async () => {
    const kc = sharedKubeConfig();
    const ns = await freshNamespace(kc, 'image-');
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(kubeconfig, kc.exportConfig());
    chmodSync(kubeconfig, 0o644);
    // The admin's client certificate must be readable by the image user too.
    const user = kc.getCurrentUser();
    const cluster = kc.getCurrentCluster();
    for (const f of [user?.certFile, user?.keyFile, cluster?.caFile])
      if (f !== undefined) copyFileSync(f, join(dir, f.split('/').pop() ?? ''));
    for (const f of [user?.certFile, user?.keyFile, cluster?.caFile])
      if (f !== undefined) chmodSync(join(dir, f.split('/').pop() ?? ''), 0o644);
    writeFileSync(
      kubeconfig,
      kc
        .exportConfig()
        .replaceAll(
          /(["']?)(\/[^"'\s]+\/)([^/"'\s]+\.(crt|key|pem))\1/g,
          (_m, q: string, _d, file: string) => `${q}${join(dir, file)}${q}`,
        ),
    );
    const [metrics, probes] = [await freePort(), await freePort()];
    const proc = spawnManaged('image-controller', 'setpriv', {
      args: [
        ...asImageUser,
        node,
        join(app, 'dist/src/cli/main.js'),
        'controller',
        '--leader-elect=false',
        `--namespace=${ns}`,
        `--metrics-bind-address=127.0.0.1:${metrics}`,
        `--health-probe-bind-address=127.0.0.1:${probes}`,
        '--kubeconfig',
        kubeconfig,
      ],
      logFile: join(dir, 'controller.log'),
      env: { PATH: '/usr/bin:/bin', NODE_ENV: 'production' },
      cwd: '/',
    });
    try {
      await eventually(
        async () => {
          expect((await getStatus(`http://127.0.0.1:${probes}/readyz`)).status).toBe(200);
        },
        30_000,
        200,
      ).catch((err: unknown) => {
        throw new Error(`${String(err)}\n${tailLog(proc.logFile)}`);
      });
      const t = testKube(kc, ns);
      await createPod(t, 'img-0', { app: 'img' });
      await createLock(t, lockBody('img', 'img'));
      await eventually(
        async () => {
          expect(parseLease((await getLease(t, 'img')) ?? {}).holder?.name).toBe('img-0');
        },
        30_000,
        200,
      ).catch((err: unknown) => {
        throw new Error(`${String(err)}\n${tailLog(proc.logFile)}`);
      });
      const body = (await getStatus(`http://127.0.0.1:${metrics}/metrics`)).body;
      expect(body).toMatch(/^fencepost_grants_total\{cause="Vacant",backend="[A-Za-z]+"\} 1$/m);
      expect(body).toMatch(/^fencepost_locks\{state="held"\} 1$/m);
    } finally {
      await proc.stop();
    }
  });
});
