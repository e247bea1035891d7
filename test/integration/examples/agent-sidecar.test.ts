import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { loadAllYaml, type V1Container, type V1CronJob, type V1Deployment, type V1Pod } from '@kubernetes/client-node';
import { afterAll, describe, expect, it } from 'vitest';
import { parseAgentConfig } from '../../../src/config/agent.ts';
import { findBinary } from '../../support/testbed/assets.ts';

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '../../..');

/** exampleSidecar is the agent init container of examples/singleton-deployment.yaml. */
function exampleSidecar(): V1Container {
  const docs = loadAllYaml(readFileSync(join(ROOT, 'examples/singleton-deployment.yaml'), 'utf8')) as {
    kind: string;
  }[];
  const deployment = docs.find((d) => d.kind === 'Deployment') as V1Deployment;
  const sidecar = deployment.spec?.template.spec?.initContainers?.find((c) => c.name === 'fencepost-agent');
  if (sidecar === undefined)
    throw new Error('examples/singleton-deployment.yaml has no fencepost-agent init container');
  return sidecar;
}

/** cronSidecar is the agent init container of the nightly-export CronJob of examples/cron-fleet.yaml. */
function cronSidecar(): V1Container {
  const docs = loadAllYaml(readFileSync(join(ROOT, 'examples/cron-fleet.yaml'), 'utf8')) as {
    kind: string;
    metadata?: { name?: string };
  }[];
  const cronJob = docs.find((d) => d.kind === 'CronJob' && d.metadata?.name === 'nightly-export') as
    V1CronJob | undefined;
  const sidecar = cronJob?.spec?.jobTemplate.spec?.template.spec?.initContainers?.find(
    (c) => c.name === 'fencepost-agent',
  );
  if (sidecar === undefined)
    throw new Error('examples/cron-fleet.yaml has no nightly-export CronJob with a fencepost-agent init container');
  return sidecar;
}

// The library chart charts/fencepost-sidecar, used as an application chart uses it (a
// `dependencies:` entry, vendored by `helm dependency build`), renders the native sidecar of
// examples/singleton-deployment.yaml (one source of the 40 lines).
describe('the fencepost-sidecar library chart', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fencepost-sidecar-library-'));
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const helm = (args: readonly string[]): Promise<{ stdout: string; stderr: string }> =>
    run(findBinary('helm'), args, { env: { ...process.env, HELM_CACHE_HOME: join(dir, 'cache') } });

  /** appChart writes an application chart that depends on the library, with this pod template and values. */
  const appChart = async (pod: string, values = ''): Promise<string> => {
    const chart = join(dir, `app-${Math.random().toString(36).slice(2)}`);
    mkdirSync(join(chart, 'templates'), { recursive: true });
    writeFileSync(
      join(chart, 'Chart.yaml'),
      `apiVersion: v2\nname: app\nversion: 0.0.1\ndependencies:\n  - name: fencepost-sidecar\n    version: 0.1.0\n    repository: file://${join(ROOT, 'charts/fencepost-sidecar')}\n`,
    );
    writeFileSync(join(chart, 'values.yaml'), values);
    writeFileSync(join(chart, 'templates/pod.yaml'), pod);
    await helm(['dependency', 'build', chart]);
    return chart;
  };
  const template = async (chart: string): Promise<V1Pod> => {
    const { stdout } = await helm([
      'template',
      'app',
      chart,
      '--show-only',
      'templates/pod.yaml',
      '--kube-version',
      '1.36.0',
    ]);
    return (loadAllYaml(stdout) as V1Pod[])[0] ?? {};
  };
  const render = async (params: string): Promise<V1Container[]> =>
    (
      await template(
        await appChart(
          `apiVersion: v1\nkind: Pod\nmetadata:\n  name: app\nspec:\n  serviceAccountName: fencepost-agent\n  initContainers:\n    {{- include "fencepost-sidecar.container" ${params} | nindent 4 }}\n  containers:\n    - name: app\n      image: registry.example.com/app:1\n`,
        ),
      )
    ).spec?.initContainers ?? [];

  it('renders exactly the sidecar of examples/singleton-deployment.yaml', async () => {
    expect(await render('(dict "locks" (list "singleton"))')).toEqual([exampleSidecar()]);
  });

  it('renders exactly the sidecar of the nightly-export CronJob of examples/cron-fleet.yaml', async () => {
    expect(await render('(dict "locks" (list "nightly-export"))')).toEqual([cronSidecar()]);
  });

  it("is a native sidecar whose probes reach the agent's probe listener, away from the app's ports, locked down", () => {
    const c = exampleSidecar();
    expect(c.restartPolicy).toBe('Always');
    const cfg = parseAgentConfig((c.args ?? []).slice(1), { POD_NAME: 'p', POD_NAMESPACE: 'n', POD_UID: 'u' });
    const probes = c.ports?.find((p) => p.name === 'probes')?.containerPort;
    const metrics = c.ports?.find((p) => p.name === 'metrics')?.containerPort;
    expect([probes, metrics]).toEqual([7371, 7372]);
    // Every listener is given explicitly: the probes find the agent, or the agent does not start.
    expect(cfg.healthProbeBindAddress).toBe(`:${probes}`);
    expect(cfg.metricsBindAddress).toBe(`:${metrics}`);
    expect(cfg.listen).toBe('127.0.0.1:7370');
    expect(cfg.defaultedListeners).toEqual([]);
    for (const probe of [c.startupProbe, c.readinessProbe])
      expect(probe?.httpGet).toEqual({ path: '/readyz', port: 'probes' });
    expect(c.securityContext).toEqual({
      runAsNonRoot: true,
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(c.env?.map((e) => [e.name, e.valueFrom?.fieldRef?.fieldPath])).toEqual([
      ['POD_NAME', 'metadata.name'],
      ['POD_NAMESPACE', 'metadata.namespace'],
      ['POD_UID', 'metadata.uid'],
    ]);
  });

  it("takes a block of the app chart's values: locks, image, ports, a state directory on a volume the app mounts", async () => {
    const chart = await appChart(
      [
        'apiVersion: v1',
        'kind: Pod',
        'metadata:',
        '  name: app',
        'spec:',
        '  serviceAccountName: fencepost-agent',
        '  initContainers:',
        '    {{- include "fencepost-sidecar.container" .Values.fencepostSidecar | nindent 4 }}',
        '  containers:',
        '    - name: app',
        '      image: registry.example.com/app:1',
        '      ports:',
        '        - containerPort: 8080',
        '      volumeMounts:',
        '        {{- include "fencepost-sidecar.stateMount" .Values.fencepostSidecar | nindent 8 }}',
        '  volumes:',
        '    {{- include "fencepost-sidecar.volume" .Values.fencepostSidecar | nindent 4 }}',
        '',
      ].join('\n'),
      [
        'fencepostSidecar:',
        '  locks: [a, b]',
        '  image: registry.example.com/fencepost:9',
        '  probePort: 9081',
        '  metricsPort: 9080',
        '  stateDir: /var/run/fencepost',
        '  extraArgs: [--log-level=debug]',
        '',
      ].join('\n'),
    );
    const { stdout: lint } = await helm(['lint', chart, '--strict']);
    expect(lint).toContain('0 chart(s) failed');
    const pod = await template(chart);
    const [c] = pod.spec?.initContainers ?? [];
    expect(c?.image).toBe('registry.example.com/fencepost:9');
    expect(c?.args).toEqual([
      'agent',
      '--lock=a',
      '--lock=b',
      '--listen=127.0.0.1:7370',
      '--health-probe-bind-address=:9081',
      '--metrics-bind-address=:9080',
      '--state-dir=/var/run/fencepost',
      '--log-level=debug',
    ]);
    expect(c?.ports).toEqual([
      { name: 'metrics', containerPort: 9080 },
      { name: 'probes', containerPort: 9081 },
    ]);
    expect(c?.volumeMounts).toEqual([{ name: 'fencepost-state', mountPath: '/var/run/fencepost' }]);
    expect(pod.spec?.containers[0]?.volumeMounts).toEqual([
      { name: 'fencepost-state', mountPath: '/var/run/fencepost', readOnly: true },
    ]);
    expect(pod.spec?.volumes).toEqual([{ name: 'fencepost-state', emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } }]);
    await expect(render('(dict)')).rejects.toThrow(/locks \(a list of lock names\) is required/);
  });

  it('is a library chart that installs nothing and lints clean', async () => {
    const library = join(ROOT, 'charts/fencepost-sidecar');
    expect(readFileSync(join(library, 'Chart.yaml'), 'utf8')).toMatch(/^type: library$/m);
    const { stdout } = await helm(['lint', library, '--strict']);
    expect(stdout).toContain('0 chart(s) failed');
    await expect(helm(['template', 'x', library])).rejects.toThrow(/library charts are not installable/);
  });
});
