import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runtimeDefaultSeccomp, spawnCrunContainer } from '../../support/cluster/crun-container.ts';
import { HOST_LOOPBACK, startSandbox, type Sandbox } from '../../support/cluster/sandbox.ts';
import { ensureImageRootfs, type ImageRootfs } from '../../support/image/archive.ts';
import { ociConfig, type OciMount } from '../../support/image/oci-config.ts';
import { getStatus } from '../../support/testbed/http-probe.ts';
import { reapStale, type ManagedProcess } from '../../support/testbed/processes.ts';
import { parseLease } from '../../../src/lease/record.ts';
import { eventually, freshNamespace, sharedKubeConfig } from '../../support/env.ts';
import { createLock, createPod, getLease, lockBody, testKube } from '../../support/fixtures.ts';

// The image as users run it: the archive hack/build-image.sh writes (FENCEPOST_IMAGE_ARCHIVE, or
// built here, cached), unpacked, and run by crun in a rootless pod sandbox with the chart's
// securityContext (uid 65532, read-only root, no capabilities, RuntimeDefault seccomp) and its own
// network namespace, where the host's loopback (the test API server) is 10.0.2.2.
const MiB = 1024 * 1024;
const mib = (n: number): string => (n / MiB).toFixed(1);

describe('the image archive, run by crun as the chart runs it', () => {
  let image: ImageRootfs | undefined;
  let dir = '';
  let sandbox: Sandbox | undefined;
  let rootfs = '';
  let n = 0;
  const pidFile = (): string => join(dir, 'pids');
  const logOf = (p: ManagedProcess): string => readFileSync(p.logFile, 'utf8');

  /** container runs one container of the image in the sandbox: Kubernetes' command/args rules. */
  const container = (o: { command?: string[]; args?: string[]; mounts?: OciMount[] } = {}): ManagedProcess => {
    if (sandbox === undefined || image === undefined) throw new Error('no sandbox');
    const id = `image-crun-${process.pid}-${++n}`;
    return spawnCrunContainer(id, {
      id,
      sandbox,
      stateRoot: join(dir, 'crun'),
      bundle: join(dir, id),
      logFile: join(dir, `${id}.log`),
      pidFile: pidFile(),
      config: ociConfig(image.config, {
        rootfs,
        ...(o.command !== undefined ? { command: o.command } : {}),
        ...(o.args !== undefined ? { args: o.args } : {}),
        ...(o.mounts !== undefined ? { mounts: o.mounts } : {}),
        netns: sandbox.netns,
        userns: sandbox.userns(65532, 65532),
        seccomp: runtimeDefaultSeccomp(),
        hostname: id,
      }),
    });
  };

  /** kubeconfigDir writes the test cluster's admin kubeconfig for the pod: server at 10.0.2.2, files readable by 65532. */
  const kubeconfigDir = (): string => {
    const kc = sharedKubeConfig();
    const out = join(dir, 'kube');
    mkdirSync(out, { recursive: true, mode: 0o755 });
    let text = kc.exportConfig();
    const user = kc.getCurrentUser();
    const cluster = kc.getCurrentCluster();
    for (const f of [user?.certFile, user?.keyFile, cluster?.caFile]) {
      if (f === undefined) continue;
      copyFileSync(f, join(out, basename(f)));
      chmodSync(join(out, basename(f)), 0o644);
      text = text.replaceAll(f, `/run/fencepost/${basename(f)}`);
    }
    const server = cluster?.server ?? '';
    // The certificate names localhost; the pod dials the host's loopback through slirp's gateway.
    const port = new URL(server).port;
    text = text.replaceAll(server, `https://${HOST_LOOPBACK}:${port}`);
    writeFileSync(
      join(out, 'kubeconfig'),
      text.replace(/(\n\s+server: [^\n]+)/, '$1\n    tls-server-name: localhost'),
      {
        mode: 0o644,
      },
    );
    return out;
  };

  beforeAll(async () => {
    image = await ensureImageRootfs();
    dir = mkdtempSync(join(tmpdir(), 'fencepost-image-crun-'));
    chmodSync(dir, 0o755);
    sandbox = await startSandbox({ name: 'image-crun', dir: join(dir, 'pod'), pidFile: pidFile() });
    rootfs = image.rootfs;
    if (process.getuid?.() === 0) {
      // The unpacked image lives under /root: bind it where the sandbox's uid can reach it.
      rootfs = join(sandbox.dir, 'rootfs');
      await sandbox.bind(image.rootfs, rootfs);
    }
  }, 600_000);

  afterAll(async () => {
    await sandbox?.stop();
    if (dir !== '') {
      reapStale(pidFile());
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('is the image the archive names: one digest, labels, production dependencies only, no shell or package manager, and small', () => {
    if (image === undefined) throw new Error('no image');
    expect(image.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(image.config.User).toBe('65532:65532');
    expect(image.config.Entrypoint).toEqual([
      '/usr/local/bin/node',
      '--max-semi-space-size=4',
      '--heap-growing-percent=50',
      '/app/dist/src/cli/main.js',
    ]);
    for (const label of ['title', 'version', 'revision', 'created', 'source', 'licenses'])
      expect(image.config.Labels?.[`org.opencontainers.image.${label}`], label).toBeTruthy();
    const files = new Set(image.files);
    for (const f of ['usr/local/bin/node', 'app/bin/fencepost-agent', 'app/dist/src/cli/main.js'])
      expect(files.has(f), f).toBe(true);
    for (const f of [
      'bin/sh',
      'usr/bin/sh',
      'usr/bin/dash',
      'usr/bin/bash',
      'usr/bin/dpkg',
      'usr/bin/apt',
      'usr/local/bin/npm',
    ])
      expect(files.has(f), f).toBe(false);
    // Production dependencies only (what `npm ci --omit=dev` installs), and small.
    for (const dev of ['typescript', 'eslint', 'vitest', 'pg', '@types/pg', 'bun'])
      expect(files.has(`app/node_modules/${dev}`), dev).toBe(false);
    expect(files.has('app/node_modules/@kubernetes/client-node/package.json')).toBe(true);
    const bytes = (path: string): number =>
      Number(execFileSync('du', ['-sb', path], { encoding: 'utf8' }).split('\t')[0]);
    const agent = bytes(join(image.rootfs, 'app/bin/fencepost-agent'));
    const app = bytes(join(image.rootfs, 'app')) - agent;
    const total = bytes(image.rootfs);
    const archive = statSync(image.archive).size;
    process.stderr.write(
      `[image] ${image.archive}: ${image.digest}, archive ${mib(archive)} MiB, unpacked ${mib(total)} MiB in ${image.files.length} files (/app without the agent ${mib(app)} MiB, agent ${mib(agent)} MiB)\n`,
    );
    expect(app).toBeLessThan(64 * MiB);
    expect(agent).toBeLessThan(160 * MiB);
    expect(archive).toBeLessThan(160 * MiB);
  });

  it('runs both entrypoints as the chart does: the controller (ENTRYPOINT) and the agent executable (the sidecar command)', async () => {
    const controller = container({ args: ['version'] });
    expect(await controller.exited, logOf(controller)).toBe(0);
    expect(logOf(controller)).toContain('fencepost 0.1.0');
    const help = container({ args: ['controller', '--help'] });
    expect(await help.exited, logOf(help)).toBe(0);
    expect(logOf(help)).toContain('--leader-elect');
    const agent = container({ command: ['/app/bin/fencepost-agent'], args: ['version'] });
    expect(await agent.exited, logOf(agent)).toBe(0);
    expect(logOf(agent)).toContain('fencepost-agent 0.1.0');
    const agentHelp = container({ command: ['/app/bin/fencepost-agent'], args: ['agent', '--help'] });
    expect(await agentHelp.exited, logOf(agentHelp)).toBe(0);
    expect(logOf(agentHelp)).toContain('--lock');
  });

  /** runController starts the controller container against the test cluster; the caller stops it. */
  const runController = (ns: string, mounts: OciMount[] = []): ManagedProcess =>
    container({
      args: [
        'controller',
        '--leader-elect=false',
        `--namespace=${ns}`,
        '--kubeconfig=/run/fencepost/kubeconfig',
        '--metrics-secure=false', // plain HTTP: metrics-auth.test.ts covers the secure listener
        '--metrics-bind-address=127.0.0.1:8080',
        '--health-probe-bind-address=127.0.0.1:8081',
      ],
      // A rootless runtime cannot create a mount point in the root-owned, read-only image: the
      // kubeconfig goes under a tmpfs at /run, as the kubelet's ServiceAccount volume does.
      mounts: [
        { destination: '/run', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'nodev', 'mode=755', 'size=1m'] },
        { destination: '/run/fencepost', type: 'bind', source: kubeconfigDir(), options: ['rbind', 'ro'] },
        ...mounts,
      ],
    });

  it("grants a lock on the API server through the container's own network namespace, and counts it", async () => {
    if (sandbox === undefined) throw new Error('no sandbox');
    const kc = sharedKubeConfig();
    const ns = await freshNamespace(kc, 'image-crun-');
    const proc = runController(ns);
    try {
      const probes = await sandbox.forward(8081);
      const metrics = await sandbox.forward(8080);
      const withLog = (err: unknown): never => {
        throw new Error(`${String(err)}\n${logOf(proc).slice(-4000)}`);
      };
      // A controller that cannot start (a file missing from the image) exits: say so at once.
      const exitedEarly = proc.exited.then((code) => {
        throw new Error(`the controller container exited (${String(code)}) before it was ready`);
      });
      await Promise.race([
        eventually(
          async () => {
            expect((await getStatus(`http://127.0.0.1:${probes}/readyz`)).status).toBe(200);
          },
          60_000,
          200,
        ),
        exitedEarly,
      ]).catch(withLog);
      const t = testKube(kc, ns);
      await createPod(t, 'img-0', { app: 'img' });
      await createLock(t, lockBody('img', 'img'));
      await eventually(
        async () => {
          expect(parseLease((await getLease(t, 'img')) ?? {}).holder?.name).toBe('img-0');
        },
        30_000,
        200,
      ).catch(withLog);
      await eventually(async () => {
        const body = (await getStatus(`http://127.0.0.1:${metrics}/metrics`)).body;
        expect(body).toMatch(/^fencepost_grants_total\{cause="Vacant",backend="[A-Za-z]+"\} 1$/m);
      }, 10_000).catch(withLog);
      // JSON logs, as the chart's log pipeline expects, from inside the container.
      expect(logOf(proc)).toMatch(/"msg":"[^"]*"/);
    } finally {
      await proc.stop();
    }
  }, 120_000);

  it('fails when the image lacks a file the controller needs (here: ioredis, hidden by an empty mount)', async () => {
    const ns = await freshNamespace(sharedKubeConfig(), 'image-crun-missing-');
    const proc = runController(ns, [
      {
        destination: '/app/node_modules/ioredis',
        type: 'tmpfs',
        source: 'tmpfs',
        options: ['ro', 'nosuid', 'nodev', 'size=1k'],
      },
    ]);
    try {
      const code = await Promise.race([
        proc.exited,
        new Promise<'running'>((r) => setTimeout(() => r('running'), 30_000)),
      ]);
      expect(code, logOf(proc)).not.toBe(0);
      expect(code).not.toBe('running');
      expect(logOf(proc)).toMatch(/ioredis/);
    } finally {
      await proc.stop();
    }
  }, 60_000);
});
