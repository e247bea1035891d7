/**
 * `kubectl fencepost` against the real API server, with the real lock controller granting real
 * locks: status shows the holder, its token and the expiry countdown; explain names the reason
 * (no candidates, candidates not Ready, a Mutex nobody asked for, the fencing backend down, a
 * held lock, a given pod's place); history shows a grant and a handoff with both tokens; and the
 * real kubectl binary finds the plugin on PATH as krew installs it: the Bun-compiled executable
 * from its archive (hack/build-agent.ts --kubectl-plugin), checked against the krew manifest.
 *
 * The controller is given a Redis URL where nothing listens, so that a lock on the default
 * (Redis) backend cannot be granted (Degraded); every other lock here asks for the Lease backend.
 */
import { execFile, execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, delimiter, dirname, join, resolve } from 'node:path';
import { load } from 'js-yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubeConfig, RbacAuthorizationV1Api, type V1Lease } from '@kubernetes/client-node';
import type { Explanation } from '../../../src/cli/plugin/explain.ts';
import type { HistoryView } from '../../../src/cli/plugin/history-view.ts';
import type { LockStatusView } from '../../../src/cli/plugin/status-view.ts';
import { apiClientFor } from '../../../src/kube/api-client.ts';
import { leaseRequests } from '../../../src/transport/resources.ts';
import { parseLease } from '../../../src/lease/record.ts';
import { podKeys } from '../../../src/protocol/names.ts';
import { realClock } from '../../../src/runtime/clock.ts';
import { LeaderElector } from '../../../src/runtime/leaderelection.ts';
import { eventually, freshNamespace, sharedKubeconfigPath } from '../../support/env.ts';
import {
  createLock,
  createPod,
  getLease,
  lockBody,
  releaseLease,
  serviceAccountKubeConfig,
  type TestKube,
  mergePatch,
} from '../../support/fixtures.ts';
import { useLockController } from '../../support/lock-controller.ts';
import { findBinary } from '../../support/testbed/assets.ts';
import { packKrew } from '../../../hack/build-agent.ts';

/** KrewManifest: the fields of krew's Plugin manifest (v1alpha2) that the test reads. */
interface KrewManifest {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: { readonly name: string };
  readonly spec: {
    readonly version: string;
    readonly homepage: string;
    readonly shortDescription: string;
    readonly platforms: readonly {
      readonly selector: { readonly matchLabels: Readonly<Record<string, string>> };
      readonly uri: string;
      readonly sha256: string;
      readonly bin: string;
      readonly files: readonly { readonly from: string; readonly to: string }[];
    }[];
  };
}

const entry = resolve(import.meta.dirname, '../../../src/cli/kubectl-fencepost.ts');
const LEASE = { fencing: { backend: 'Lease' as const } };

interface Run {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

function exec(file: string, args: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<Run> {
  return new Promise((res) => {
    execFile(file, [...args], { env, timeout: 30_000 }, (err, stdout, stderr) => {
      res({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, stdout, stderr });
    });
  });
}

describe('kubectl fencepost', () => {
  const fx = useLockController('plugin-', () => 'redis://127.0.0.1:2');
  let t: TestKube;
  beforeAll(() => {
    t = fx.t;
  });
  /** plugin runs the plugin as node runs it, with the test's kubeconfig and namespace. */
  const plugin = (...args: string[]): Promise<Run> =>
    exec(process.execPath, [entry, ...args, '--kubeconfig', sharedKubeconfigPath(), '-n', t.namespace]);
  const json = async <T>(...args: string[]): Promise<T> => {
    const r = await plugin(...args, '-o', 'json');
    expect(r.code, r.stderr).toBe(0);
    return JSON.parse(r.stdout) as T;
  };
  const held = async (lock: string) =>
    await eventually(async () => {
      const l = await getLease(t, lock);
      const r = l !== undefined ? parseLease(l) : undefined;
      expect(r?.holder).toBeDefined();
      return r;
    });
  /** explained waits until explain's first reason is `code` (the controller writes status asynchronously). */
  const explained = async (code: string, ...args: string[]): Promise<Explanation> =>
    await eventually(async () => {
      const e = await json<Explanation>('explain', ...args);
      expect(e.reasons.map((r) => r.code)).toEqual([code]);
      return e;
    });

  it('status shows the holder, its token and the expiry countdown, in JSON and as a table', async () => {
    await createPod(t, 's-0', { app: 's' });
    await createPod(t, 's-1', { app: 's' });
    // Nobody renews here, and later tests read 's' again: a lease long enough to outlast the file.
    await createLock(t, lockBody('s', 's', { leaseDurationSeconds: 600, ...LEASE }));
    const record = await held('s');
    const v = await json<LockStatusView>('status', 's');
    expect(v.holder?.name).toBe(record?.holder?.name);
    expect(v.token).toBe(record?.token?.toString());
    expect(v.leaseDurationSeconds).toBe(600);
    expect(v.expiresInSeconds).toBeGreaterThan(0);
    expect(v.expiresInSeconds).toBeLessThanOrEqual(600);
    expect(v.expireTime).toBe(new Date((record?.renewTime?.getTime() ?? 0) + 600_000).toISOString());

    const table = await plugin('status');
    expect(table.code, table.stderr).toBe(0);
    const [header, ...rows] = table.stdout.trimEnd().split('\n');
    expect(header).toMatch(/^NAME\s+MODE\s+HOLDER\s+TOKEN\s+EXPIRES\s+QUEUE\s+STATE\s+LAST TRANSITION$/);
    const row = rows.find((r) => r.startsWith('s '));
    expect(row).toMatch(
      new RegExp(
        `^s\\s+Election\\s+${record?.holder?.name ?? ''}\\s+${record?.token?.toString() ?? ''}\\s+in \\d+m(\\d+s)?\\s+0\\s+Granted\\s+LeaseGranted`,
      ),
    );

    const detail = await plugin('status', 's');
    expect(detail.stdout).toContain(`Holder:`);
    expect(detail.stdout).toMatch(/Expires:\s+in \d+m(\d+s)? \(renewTime \+ 600s by this machine's clock/);
    expect(detail.stdout).toMatch(/LeaseGranted\s+Granted to pod s-\d with fencing token \d+/);

    const all = await exec(process.execPath, [entry, 'status', '-A', '--kubeconfig', sharedKubeconfigPath()]);
    expect(all.stdout.split('\n')[0]).toMatch(/^NAMESPACE\s+NAME\s+MODE/);
    expect(all.stdout).toMatch(new RegExp(`^${t.namespace}\\s+s\\s+Election`, 'm'));
  });

  it('status lists the Mutex queue in grant order, and explain gives a waiting pod its place', async () => {
    for (const name of ['q-0', 'q-1', 'q-2']) await createPod(t, name, { app: 'q' });
    await createLock(t, lockBody('mq', 'q', { mode: 'Mutex', leaseDurationSeconds: 600, ...LEASE }));
    const keys = podKeys('mq');
    // What each pod's agent does when its app asks: the request annotation on its own pod.
    const ask = async (name: string, queued: number): Promise<void> => {
      await t.core.patchNamespacedPod(
        {
          namespace: t.namespace,
          name,
          body: { metadata: { annotations: { [keys.request]: new Date().toISOString() } } },
        },
        mergePatch,
      );
      await eventually(async () => {
        const v = await json<LockStatusView>('status', 'mq');
        expect(v.holder).not.toBeNull();
        expect(v.queue).toHaveLength(queued);
      });
    };
    await ask('q-1', 0);
    await ask('q-0', 1);
    await ask('q-2', 2);
    const v = await json<LockStatusView>('status', 'mq');
    expect([v.holder?.name, v.queue.map((q) => q.pod)]).toEqual(['q-1', ['q-0', 'q-2']]);
    const detail = await plugin('status', 'mq');
    expect(detail.stdout).toMatch(/Queue:\n\s+#\s+POD\s+WAITING\n\s+1\s+q-0\s+\d+s\n\s+2\s+q-2\s+\d+s\n/);
    const e = await json<Explanation>('explain', 'mq', '--pod', 'q-2');
    expect(e.pod?.reasons.map((r) => r.message)).toEqual([
      'Pod q-2 is an eligible candidate, but pod q-1 holds the lock: it is #2 in the queue, behind q-0 (granted in the order the controller first saw each request).',
    ]);
  });

  it('explain says who holds a held lock, and where another pod stands', async () => {
    const record = await held('s');
    const holder = record?.holder?.name ?? '';
    const other = holder === 's-0' ? 's-1' : 's-0';
    // The controller here runs without leader election, so its namespace has no leader Lease. (Not
    // "any namespace": other test files run controllers with leader election on this API server.)
    const e = await json<Explanation>(
      'explain',
      's',
      '--pod',
      other,
      '--controller-lease',
      `${t.namespace}/fencepost-controller`,
    );
    expect(e.holder).toBe(holder);
    expect(e.reasons.map((r) => r.code)).toEqual(['Held']);
    expect(e.reasons[0]?.message).toContain(`Pod ${holder} holds the lock with fencing token ${record?.token ?? ''}`);
    expect(e.pod?.reasons.map((r) => r.code)).toEqual(['PodWaiting']);
    expect((await json<Explanation>('explain', 's', '--pod', holder)).pod?.reasons.map((r) => r.code)).toEqual([
      'PodIsHolder',
    ]);
    expect(e.controller).toEqual({
      code: 'ControllerLeaseAbsent',
      message: `No leader-election Lease of the controller found in namespace ${t.namespace}: the controller is not running, or runs with --leader-elect=false or another --leader-election-id (pass --controller-lease NAMESPACE/NAME).`,
    });
    const text = await plugin('explain', 's', '--pod', other);
    expect(text.stdout).toMatch(/^Holder:\s+s-\d$/m);
    expect(text.stdout).toContain(
      `  PodWaiting: Pod ${other} is an eligible candidate, but pod ${holder} holds the lock`,
    );
  });

  it("explain reports the controller's own leader election: leading, then released (no replica leading)", async () => {
    // The controller's elector, on a Lease of the test's namespace (the chart's would be in its own).
    const cancel = new AbortController();
    const elector = new LeaderElector({
      leases: leaseRequests<V1Lease>(apiClientFor(t.kc)),
      namespace: t.namespace,
      name: 'fencepost-controller',
      identity: 'controller-0_abc',
      leaseDurationMs: 15_000,
      renewDeadlineMs: 10_000,
      retryPeriodMs: 2_000,
      clock: realClock,
      releaseOnCancel: true,
      callbacks: { onStartedLeading: () => undefined, onStoppedLeading: () => undefined },
    });
    const running = elector.run(cancel.signal);
    try {
      await eventually(() => expect(elector.isLeader()).toBe(true));
      const lease = `${t.namespace}/fencepost-controller`;
      const leading = await json<Explanation>('explain', 's', '--controller-lease', lease);
      expect(leading.controller.code).toBe('ControllerLeading');
      expect(leading.controller.message).toMatch(
        new RegExp(`^The controller's leader is controller-0_abc \\(Lease ${lease}, renewed \\d+s ago\\)\\.$`),
      );
      // Found by name in any namespace too, without --controller-lease (the newest renewed, should
      // another test file's controller lead on this API server at the same time).
      expect((await json<Explanation>('explain', 's')).controller.code).toBe('ControllerLeading');
      cancel.abort();
      await running;
      const released = await json<Explanation>('explain', 's', '--controller-lease', lease);
      expect(released.controller.code).toBe('ControllerNotLeading');
    } finally {
      cancel.abort();
      await running;
    }
  });

  it('explain names the reason nobody holds a lock: no pod matches the selector', async () => {
    await createLock(t, lockBody('nobody', 'nobody', LEASE));
    const e = await explained('NoCandidatesSelected', 'nobody');
    expect(e.reasons[0]?.message).toBe(
      `No pod in namespace ${t.namespace} matches spec.candidates.selector (app=nobody).`,
    );
    expect(e.holder).toBeNull();
  });

  it('explain names the reason nobody holds a lock: its candidates are not Ready', async () => {
    await createPod(t, 'u-0', { app: 'u' }, false);
    await createLock(t, lockBody('unready', 'u', LEASE));
    const e = await explained('CandidatesNotReady', 'unready', '--pod', 'u-0');
    expect(e.reasons[0]?.message).toContain('u-0 (not Ready)');
    expect(e.pod?.reasons.map((r) => r.code)).toEqual(['PodNotReady']);
  });

  it('explain names the reason nobody holds a Mutex lock: nobody asked', async () => {
    await createPod(t, 'm-0', { app: 'm' });
    await createLock(t, lockBody('mx', 'm', { mode: 'Mutex', ...LEASE }));
    const e = await explained('NoRequests', 'mx', '--pod', 'm-0');
    expect(e.reasons[0]?.message).toContain('annotation mx.lock.fencepost.io/request');
    expect(e.pod?.reasons.map((r) => r.code)).toEqual(['PodNotRequested']);
  });

  it('explain names the reason nobody holds a lock: its fencing backend cannot issue tokens', async () => {
    await createPod(t, 'r-0', { app: 'r' });
    await createLock(t, lockBody('redis', 'r')); // the default backend: the controller's dead Redis
    const e = await explained('FencingUnavailable', 'redis');
    expect(e.reasons[0]?.message).toContain('Fencing backend Redis unavailable');
    const s = await plugin('status');
    expect(s.stdout).toMatch(/^redis\s+Election\s+<none>\s+<none>\s+<none>\s+0\s+RedisUnavailable/m);
  });

  it('explain says a holder whose pod vanished keeps the lock until its lease runs out', async () => {
    await createPod(t, 'g-0', { app: 'g' });
    await createPod(t, 'g-1', { app: 'g' });
    await createLock(t, lockBody('gone', 'g', { leaseDurationSeconds: 60, ...LEASE }));
    const record = await held('gone');
    await t.core.deleteNamespacedPod({
      namespace: t.namespace,
      name: record?.holder?.name ?? '',
      gracePeriodSeconds: 0,
    });
    const e = await eventually(async () => {
      const now = await json<Explanation>('explain', 'gone');
      expect(now.reasons.map((r) => r.code)).toEqual(['Held', 'HolderPodGone']);
      return now;
    });
    expect(e.holder).toBe(record?.holder?.name);
    expect(e.reasons[1]?.message).toContain('a vanished pod is no proof that it stopped');
  });

  it('explain names the lock delay after a holder stopped renewing', async () => {
    await createPod(t, 'd-0', { app: 'd' });
    await createPod(t, 'd-1', { app: 'd' });
    await createLock(t, lockBody('delay', 'd', { leaseDurationSeconds: 1, lockDelaySeconds: 600, ...LEASE })); // nobody renews
    const e = await explained('LockDelay', 'delay');
    expect(e.reasons[0]?.message).toMatch(
      /spec\.lockDelaySeconds \(600s\) holds the next grant back, about \d+m(\d+s)? more/,
    );
  });

  it('history shows a grant and then the handoff, each with its holder and token', async () => {
    await createPod(t, 'h-0', { app: 'h' });
    await createPod(t, 'h-1', { app: 'h' });
    await createLock(t, lockBody('h', 'h', { leaseDurationSeconds: 600, ...LEASE }));
    const first = await held('h');
    await releaseLease(t, 'h');
    const second = await eventually(async () => {
      const r = parseLease((await getLease(t, 'h')) ?? {});
      expect(r.holder).toBeDefined();
      expect(r.token).not.toBe(first?.token);
      return r;
    });
    expect(second.holder?.name).not.toBe(first?.holder?.name);
    const v = await eventually(async () => {
      const h = await json<HistoryView>('history', 'h');
      expect(h.entries.filter((e) => e.reason === 'LeaseGranted')).toHaveLength(2);
      return h;
    });
    const grants = v.entries.filter((e) => e.reason === 'LeaseGranted');
    expect(grants.map((g) => [g.holder, g.token])).toEqual([
      [first?.holder?.name, first?.token?.toString()],
      [second.holder?.name, second.token?.toString()],
    ]);
    expect(BigInt(grants[1]?.token ?? '0')).toBeGreaterThan(BigInt(grants[0]?.token ?? '0'));
    expect(grants[1]?.message).toContain('the previous holder released it');
    expect(v.grants).toBe(2);
    expect(v.retained.join(' ')).toContain('--event-ttl');

    const text = await plugin('history', 'h');
    expect(text.stdout).toMatch(/^TIME\s+AGE\s+REASON\s+HOLDER\s+TOKEN\s+SOURCE\s+MESSAGE$/m);
    expect(text.stdout).toMatch(
      new RegExp(`LeaseGranted\\s+${second.holder?.name ?? ''}\\s+${second.token ?? ''}\\s+Event`),
    );
    expect(text.stdout).toContain('What the cluster keeps:');
  });

  it('fails with exit status 1 naming a lock that does not exist', async () => {
    const r = await plugin('explain', 'no-such-lock');
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toBe(
      `kubectl fencepost: distributedlock "no-such-lock" not found in namespace "${t.namespace}"`,
    );
  });

  it("prints kubectl's words for a namespace without locks, and an empty list as JSON", async () => {
    const empty = await freshNamespace(t.kc, 'plugin-empty-');
    const args = ['status', '--kubeconfig', sharedKubeconfigPath(), '-n', empty];
    const table = await exec(process.execPath, [entry, ...args]);
    expect([table.code, table.stdout, table.stderr]).toEqual([0, '', `No resources found in ${empty} namespace.\n`]);
    const asJson = await exec(process.execPath, [entry, ...args, '-o', 'json']);
    expect(JSON.parse(asJson.stdout)).toEqual({ items: [] });
  });

  describe('connecting', () => {
    const dir = mkdtempSync(join(tmpdir(), 'fencepost-plugin-kc-'));
    afterAll(() => {
      rmSync(dir, { recursive: true, force: true });
    });

    it("uses --context and that context's namespace, and names a context that does not exist", async () => {
      // Two contexts: the current one points nowhere; "good" is the test's API server and namespace.
      const admin = new KubeConfig();
      admin.loadFromFile(sharedKubeconfigPath());
      const cluster = admin.getCurrentCluster();
      const user = admin.getCurrentUser();
      if (cluster === null || user === null) throw new Error('no cluster or user');
      const kc = new KubeConfig();
      kc.loadFromOptions({
        clusters: [cluster, { name: 'nowhere', server: 'https://127.0.0.1:2', skipTLSVerify: true }],
        users: [user],
        contexts: [
          { name: 'bad', cluster: 'nowhere', user: user.name },
          { name: 'good', cluster: cluster.name, user: user.name, namespace: t.namespace },
        ],
        currentContext: 'bad',
      });
      const file = join(dir, 'kubeconfig');
      writeFileSync(file, kc.exportConfig());
      const record = await held('s');
      const good = await exec(process.execPath, [
        entry,
        'status',
        's',
        '--kubeconfig',
        file,
        '--context',
        'good',
        '-o',
        'json',
      ]);
      expect(good.code, good.stderr).toBe(0);
      expect((JSON.parse(good.stdout) as LockStatusView).holder?.name).toBe(record?.holder?.name);

      const bad = await exec(process.execPath, [entry, 'status', '--kubeconfig', file]);
      expect(bad.code).toBe(1);
      expect(bad.stderr.trim()).toBe(
        'kubectl fencepost: GET /apis/fencepost.io/v1alpha1/namespaces/default/distributedlocks on https://127.0.0.1:2: connect ECONNREFUSED 127.0.0.1:2',
      );
      const missing = await exec(process.execPath, [entry, 'status', '--kubeconfig', file, '--context', 'nope']);
      expect(missing.code).toBe(2);
      expect(missing.stderr.trim()).toBe(
        'kubectl fencepost: --context: no context "nope" in the kubeconfig (it has: bad, good)',
      );
    });

    it('works with only the namespaced read rights the docs list, reporting the controller as unknown', async () => {
      const rbac = fx.t.kc.makeApiClient(RbacAuthorizationV1Api);
      await t.core.createNamespacedServiceAccount({ namespace: t.namespace, body: { metadata: { name: 'viewer' } } });
      await rbac.createNamespacedRole({
        namespace: t.namespace,
        body: {
          metadata: { name: 'fencepost-viewer' },
          rules: [
            { apiGroups: ['fencepost.io'], resources: ['distributedlocks'], verbs: ['get', 'list'] },
            { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'list'] },
            { apiGroups: [''], resources: ['pods', 'events'], verbs: ['get', 'list'] },
          ],
        },
      });
      await rbac.createNamespacedRoleBinding({
        namespace: t.namespace,
        body: {
          metadata: { name: 'fencepost-viewer' },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'fencepost-viewer' },
          subjects: [{ kind: 'ServiceAccount', name: 'viewer', namespace: t.namespace }],
        },
      });
      const viewer = await serviceAccountKubeConfig(fx.t.kc, t.namespace, 'viewer');
      const file = join(dir, 'viewer');
      writeFileSync(file, viewer.exportConfig());
      const e = await eventually(async () => {
        const r = await exec(process.execPath, [entry, 'explain', 's', '--kubeconfig', file, '-o', 'json']); // the context's namespace
        expect(r.code, r.stderr).toBe(0);
        return JSON.parse(r.stdout) as Explanation;
      });
      expect(e.reasons.map((r) => r.code)).toEqual(['Held']);
      expect(e.controller.code).toBe('ControllerUnknown');
      expect(e.controller.message).toContain('not allowed to read Leases (all namespaces)');
    });
  });

  describe('through the real kubectl', () => {
    const bin = mkdtempSync(join(tmpdir(), 'fencepost-plugin-'));
    afterAll(() => {
      rmSync(bin, { recursive: true, force: true });
    });
    // What npm's bin link does for an installed package: an executable named kubectl-fencepost on PATH.
    const shim = join(bin, 'kubectl-fencepost');
    writeFileSync(shim, `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(entry)} "$@"\n`);
    chmodSync(shim, 0o755);
    const env = (): NodeJS.ProcessEnv => ({
      ...process.env,
      PATH: `${bin}${delimiter}${process.env['PATH'] ?? ''}`,
      KUBECONFIG: sharedKubeconfigPath(), // the plugin finds the cluster as kubectl does
    });

    it('kubectl plugin list finds it, and kubectl fencepost status runs it', async () => {
      const kubectl = findBinary('kubectl');
      const list = await exec(kubectl, ['plugin', 'list'], env());
      expect(list.stdout).toContain(shim);
      const record = await held('s');
      const r = await exec(kubectl, ['fencepost', 'status', 's', '-n', t.namespace, '-o', 'json'], env());
      expect(r.code, r.stderr).toBe(0);
      const v = JSON.parse(r.stdout) as LockStatusView;
      expect([v.holder?.name, v.token]).toEqual([record?.holder?.name, record?.token?.toString()]);
      const help = await exec(kubectl, ['fencepost', '--help'], env());
      expect(help.stdout).toContain('Usage: kubectl fencepost <command>');
    });
  });

  describe('through the real kubectl, installed from its krew archive (the Bun-compiled executable, no Node)', () => {
    const home = mkdtempSync(join(tmpdir(), 'fencepost-krew-'));
    afterAll(() => {
      rmSync(home, { recursive: true, force: true });
    });
    // What `kubectl krew install --manifest=… --archive=…` does: check the archive's SHA-256 against
    // the manifest, unpack it into the store, and link the manifest's `bin` into krew's bin folder.
    const krew = packKrew();
    const manifest = load(readFileSync(krew.manifest, 'utf8')) as KrewManifest;
    const platform = manifest.spec.platforms[0];
    const store = join(home, 'store/fencepost', manifest.spec.version);
    const bin = join(home, 'bin');
    mkdirSync(store, { recursive: true });
    mkdirSync(bin);
    execFileSync('tar', ['-xzf', krew.archive, '-C', store]);
    const shim = join(bin, 'kubectl-fencepost');
    symlinkSync(join(store, platform?.bin ?? ''), shim);
    // Only krew's bin folder and kubectl's: the plugin must run without Node on PATH.
    const env = (): NodeJS.ProcessEnv => ({
      PATH: `${bin}${delimiter}${dirname(findBinary('kubectl'))}`,
      HOME: home,
      KUBECONFIG: sharedKubeconfigPath(), // the plugin finds the cluster as kubectl does
    });

    it('has a krew manifest whose one platform names the archive by its SHA-256, with the executable and LICENSE', () => {
      expect([manifest.apiVersion, manifest.kind, manifest.metadata.name]).toEqual([
        'krew.googlecontainertools.github.com/v1alpha2',
        'Plugin',
        'fencepost',
      ]);
      expect(manifest.spec.version).toMatch(/^v\d+\.\d+\.\d+$/);
      expect(manifest.spec.shortDescription.length).toBeLessThanOrEqual(60);
      expect(manifest.spec.homepage).toMatch(/^https:\/\//);
      expect(platform?.sha256).toBe(createHash('sha256').update(readFileSync(krew.archive)).digest('hex'));
      expect(platform?.uri.endsWith(basename(krew.archive))).toBe(true);
      expect(platform?.selector.matchLabels).toEqual({
        os: process.platform,
        arch: process.arch === 'x64' ? 'amd64' : process.arch,
      });
      expect(readdirSync(store).toSorted()).toEqual(['LICENSE', 'kubectl-fencepost']);
      expect(platform?.files.map((f) => f.from).toSorted()).toEqual(['LICENSE', 'kubectl-fencepost']);
    });

    it('kubectl plugin list finds it, and kubectl fencepost --help runs it with no Node on PATH', async () => {
      const kubectl = findBinary('kubectl');
      const list = await exec(kubectl, ['plugin', 'list'], env());
      expect(list.stdout).toContain(shim);
      const help = await exec(kubectl, ['fencepost', '--help'], env());
      expect(help.code, help.stderr).toBe(0);
      expect(help.stdout).toContain('Usage: kubectl fencepost <command>');
    });

    // On Bun, `import 'undici'` is Bun's stand-in (no Dispatcher.request; fetch ignores a
    // dispatcher's TLS options), so the executable reads through Bun's fetch and its `tls` option
    // (kube/json-client.ts): status, explain and history, and a write (release --force), over the
    // API server's TLS with the kubeconfig kubectl uses.
    const kubectlPlugin = (...args: string[]): Promise<Run> =>
      exec(findBinary('kubectl'), ['fencepost', ...args, '-n', t.namespace], env());

    it('kubectl fencepost status reads a held lock, in JSON and as a table', async () => {
      const record = await held('s');
      const r = await kubectlPlugin('status', 's', '-o', 'json');
      expect(r.code, r.stderr).toBe(0);
      const v = JSON.parse(r.stdout) as LockStatusView;
      expect([v.holder?.name, v.token]).toEqual([record?.holder?.name, record?.token?.toString()]);
      const table = await kubectlPlugin('status');
      expect(table.code, table.stderr).toBe(0);
      expect(table.stdout).toMatch(
        new RegExp(`^s\\s+Election\\s+${record?.holder?.name ?? ''}\\s+${record?.token ?? ''}\\s`, 'm'),
      );
    });

    it('kubectl fencepost explain and history answer as under Node, and a missing lock exits 1', async () => {
      const record = await held('s');
      const e = await kubectlPlugin('explain', 's', '-o', 'json');
      expect(e.code, e.stderr).toBe(0);
      const explanation = JSON.parse(e.stdout) as Explanation;
      expect([explanation.holder, explanation.reasons.map((x) => x.code)]).toEqual([record?.holder?.name, ['Held']]);
      // The history test above left lock h with two grants.
      const h = await kubectlPlugin('history', 'h', '-o', 'json');
      expect(h.code, h.stderr).toBe(0);
      expect(JSON.parse(h.stdout) as HistoryView).toEqual(await json<HistoryView>('history', 'h'));
      const missing = await kubectlPlugin('explain', 'no-such-lock');
      expect([missing.code, missing.stderr.trim()]).toEqual([
        1,
        `kubectl fencepost: distributedlock "no-such-lock" not found in namespace "${t.namespace}"`,
      ]);
    });

    it('kubectl fencepost release --force --yes writes through it: the next pod is granted a larger token', async () => {
      await createPod(t, 'b-0', { app: 'b' });
      await createPod(t, 'b-1', { app: 'b' });
      await createLock(t, lockBody('b', 'b', { leaseDurationSeconds: 600, ...LEASE }));
      const before = await held('b');
      const r = await kubectlPlugin('release', 'b', '--force', '--yes', '--wait=60s');
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(new RegExp(`^Completed: released pod ${before?.holder?.name ?? ''}`, 'm'));
      const after = await eventually(async () => {
        const a = parseLease((await getLease(t, 'b')) ?? {});
        expect(a.holder?.name).toBeDefined();
        expect(a.holder?.name).not.toBe(before?.holder?.name);
        return a;
      });
      expect(after.token ?? 0n).toBeGreaterThan(before?.token ?? 0n);
    }, 90_000);
  });
});
