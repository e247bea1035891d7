import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
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

// The chart's fencepost.agentSidecar helper, used as a chart that depends on fencepost uses it,
// renders the native sidecar of examples/singleton-deployment.yaml (one source of the 40 lines).
describe("the chart's fencepost.agentSidecar helper", () => {
  const dir = mkdtempSync(join(tmpdir(), 'fencepost-sidecar-helper-'));
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  const render = async (params: string): Promise<V1Container[]> => {
    const chart = join(dir, `app-${Math.random().toString(36).slice(2)}`);
    mkdirSync(join(chart, 'templates'), { recursive: true });
    cpSync(join(ROOT, 'charts/fencepost'), join(chart, 'charts/fencepost'), { recursive: true });
    writeFileSync(
      join(chart, 'Chart.yaml'),
      'apiVersion: v2\nname: app\nversion: 0.0.1\ndependencies:\n  - name: fencepost\n    version: 0.1.0\n',
    );
    writeFileSync(
      join(chart, 'templates/pod.yaml'),
      `apiVersion: v1\nkind: Pod\nmetadata:\n  name: app\nspec:\n  serviceAccountName: fencepost-agent\n  initContainers:\n    {{- include "fencepost.agentSidecar" ${params} | nindent 4 }}\n  containers:\n    - name: app\n      image: registry.example.com/app:1\n`,
    );
    const { stdout } = await run(findBinary('helm'), [
      'template',
      'app',
      chart,
      '--show-only',
      'templates/pod.yaml',
      '--kube-version',
      '1.36.0',
    ]);
    return (loadAllYaml(stdout) as V1Pod[])[0]?.spec?.initContainers ?? [];
  };

  it('renders exactly the sidecar of examples/singleton-deployment.yaml', async () => {
    expect(await render('(dict "locks" (list "singleton"))')).toEqual([exampleSidecar()]);
  });

  it('renders exactly the sidecar of the nightly-export CronJob of examples/cron-fleet.yaml', async () => {
    expect(await render('(dict "locks" (list "nightly-export"))')).toEqual([cronSidecar()]);
  });

  it("is a native sidecar whose probes reach the agent's probe listener and whose lock API stays on loopback", () => {
    const c = exampleSidecar();
    expect(c.restartPolicy).toBe('Always');
    const cfg = parseAgentConfig((c.args ?? []).slice(1), { POD_NAME: 'p', POD_NAMESPACE: 'n', POD_UID: 'u' });
    const probes = c.ports?.find((p) => p.name === 'probes')?.containerPort;
    const metrics = c.ports?.find((p) => p.name === 'metrics')?.containerPort;
    expect(cfg.healthProbeBindAddress).toBe(`:${probes}`);
    expect(cfg.metricsBindAddress).toBe(`:${metrics}`);
    expect(cfg.listen).toBe('127.0.0.1:7370');
    for (const probe of [c.startupProbe, c.readinessProbe])
      expect(probe?.httpGet).toEqual({ path: '/readyz', port: 'probes' });
  });

  it('takes several locks, other ports, an image and extra flags, and refuses to render without locks', async () => {
    const [c] = await render(
      '(dict "locks" (list "a" "b") "image" "registry.example.com/fencepost:9" "probePort" 9081 "metricsPort" 9080 "extraArgs" (list "--state-dir=/run/fp"))',
    );
    expect(c?.image).toBe('registry.example.com/fencepost:9');
    expect(c?.args).toEqual([
      'agent',
      '--lock=a',
      '--lock=b',
      '--listen=127.0.0.1:7370',
      '--health-probe-bind-address=:9081',
      '--metrics-bind-address=:9080',
      '--state-dir=/run/fp',
    ]);
    expect(c?.ports).toEqual([
      { name: 'metrics', containerPort: 9080 },
      { name: 'probes', containerPort: 9081 },
    ]);
    await expect(render('(dict)')).rejects.toThrow(/locks \(a list of lock names\) is required/);
  });
});
