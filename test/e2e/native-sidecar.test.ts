import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { RbacAuthorizationV1Api, loadAllYaml, type V1Container, type V1Deployment } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { LockSnapshot } from '../../src/agent/session.ts';
import { getStatus } from '../support/testbed/http-probe.ts';
import { eventually } from '../support/env.ts';
import type { LifecycleEvent } from '../support/cluster/pod-runner.ts';
import { ROOT, dumpDiagnostics, useE2eCluster } from './e2e-cluster.ts';

const NS = 'e2e-sidecar';
const LOCK = 'ordered';
const POD = 'ordered-0';

/**
 * APP is the application container's program: when it starts it asks the agent (over the pod's
 * loopback) whether it is ready and what it knows of the lock, and it asks again when it gets
 * SIGTERM; each answer is one JSON line of its output.
 */
const APP = `
const agent = process.env.AGENT_URL;
const ask = async (path) => { try { const r = await fetch(agent + path); return { status: r.status, body: await r.text() }; } catch (e) { return { status: 'unreachable', body: String(e) }; } };
const report = async (at) => { const readyz = await ask('/readyz'); const lock = await ask('/v1/locks/${LOCK}'); console.log(JSON.stringify({ at, readyz: readyz.status, lock: lock.status === 200 ? JSON.parse(lock.body) : lock.status })); };
process.on('SIGTERM', () => { void report('sigterm').then(() => process.exit(0)); });
void report('start');
setInterval(() => {}, 1000);
`;

interface AppLine {
  readonly at: 'start' | 'sigterm';
  readonly readyz: number | string;
  readonly lock: LockSnapshot | number | string;
}

/** exampleSidecar is the agent init container of examples/singleton-deployment.yaml, for lock. */
function exampleSidecar(lock: string): V1Container {
  const docs = loadAllYaml(readFileSync(join(ROOT, 'examples/singleton-deployment.yaml'), 'utf8')) as {
    kind: string;
  }[];
  const sidecar = (docs.find((d) => d.kind === 'Deployment') as V1Deployment).spec?.template.spec?.initContainers?.find(
    (c) => c.name === 'fencepost-agent',
  );
  if (sidecar === undefined)
    throw new Error('examples/singleton-deployment.yaml has no fencepost-agent init container');
  return { ...sidecar, args: (sidecar.args ?? []).map((a) => (a.startsWith('--lock=') ? `--lock=${lock}` : a)) };
}

// The recommended form, the agent as a native sidecar (the init container of
// examples/singleton-deployment.yaml: restartPolicy Always, startupProbe on /readyz), in a pod on
// the kwok cluster whose pod runner keeps the kubelet's order (test/support/cluster/pod-runner.ts).
// The agent's ServiceAccount has no RBAC at first, so its Lease watch cannot sync and it is not
// ready: the application container must not run. Once a RoleBinding lets the agent list Leases,
// it becomes ready, and only then does the application start — and find the agent answering. On
// deletion the application is stopped first, while the agent still answers; the agent last.
describe('the agent as a native sidecar (examples/singleton-deployment.yaml)', () => {
  const e = useE2eCluster([NS]);
  const history = (): LifecycleEvent[] => e.runner.history().filter((h) => h.namespace === NS && h.pod === POD);
  const step = (container: string, what: LifecycleEvent['what']): number =>
    history().findIndex((h) => h.container === container && h.what === what);
  const appLines = (): AppLine[] => {
    const app = e.runner.containers().find((c) => c.namespace === NS && c.pod === POD && c.container === 'app');
    if (app === undefined) return [];
    return readFileSync(app.logFile, 'utf8')
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as AppLine);
  };

  it('starts the application only after the agent is ready, and stops the agent only after the application', async () => {
    await e.core.createNamespacedServiceAccount({ namespace: NS, body: { metadata: { name: 'late-agent' } } });
    await e.custom.createNamespacedCustomObject({
      group: 'fencepost.io',
      version: 'v1alpha1',
      namespace: NS,
      plural: 'distributedlocks',
      body: {
        apiVersion: 'fencepost.io/v1alpha1',
        kind: 'DistributedLock',
        metadata: { name: LOCK },
        spec: { leaseDurationSeconds: 15, mode: 'Election', candidates: { selector: { matchLabels: { app: LOCK } } } },
      },
    });
    await e.core.createNamespacedPod({
      namespace: NS,
      body: {
        metadata: { name: POD, labels: { app: LOCK } },
        spec: {
          serviceAccountName: 'late-agent',
          terminationGracePeriodSeconds: 10,
          initContainers: [exampleSidecar(LOCK)],
          containers: [
            {
              name: 'app',
              image: 'node:24-slim',
              command: ['node', '-e', APP],
              env: [{ name: 'AGENT_URL', value: 'http://127.0.0.1:7370' }],
            },
          ],
        },
      },
    });

    // 1. The agent runs but cannot sync (no RBAC yet): it is not ready, and the app never runs.
    const agent = await eventually(
      () => {
        const c = e.runner
          .running()
          .find((x) => x.namespace === NS && x.pod === POD && x.container === 'fencepost-agent');
        expect(c).toBeDefined();
        return c as NonNullable<typeof c>;
      },
      60_000,
      100,
    );
    const probePort = agent.ports.get(8081) ?? 0;
    let unreadyAnswers = 0;
    for (let i = 0; i < 30; i++) {
      const readyz = await getStatus(`http://127.0.0.1:${probePort}/readyz`).catch(() => ({ status: 0, body: '' }));
      if (readyz.status === 503) unreadyAnswers++;
      expect(readyz.status, 'the agent cannot be ready without RBAC').not.toBe(200);
      expect(step('app', 'started'), 'the app started while the agent was not ready').toBe(-1);
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(unreadyAnswers).toBeGreaterThan(0);

    // 2. RBAC arrives: the agent's watch syncs, its startupProbe passes, and then the app starts.
    await e.kc.makeApiClient(RbacAuthorizationV1Api).createNamespacedRoleBinding({
      namespace: NS,
      body: {
        metadata: { name: 'late-agent' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'fencepost-agent' },
        subjects: [{ kind: 'ServiceAccount', name: 'late-agent', namespace: NS }],
      },
    });
    const started = await eventually(
      () => {
        const [first] = appLines();
        expect(first?.at).toBe('start');
        return first as AppLine;
      },
      90_000,
      200,
    ).catch(async (err: unknown) => {
      throw new Error(`${String(err)}\n${JSON.stringify(history())}\n${await dumpDiagnostics(e, NS)}`);
    });
    expect(step('fencepost-agent', 'probed')).toBeGreaterThanOrEqual(0);
    expect(step('fencepost-agent', 'probed')).toBeLessThan(step('app', 'started'));
    expect(started.readyz).toBe(200);
    expect(started.lock).toMatchObject({ lock: LOCK });

    // 3. Deletion: the app gets SIGTERM first and still finds the agent answering; the agent is
    //    stopped only after the app has exited, and then releases the lock.
    await e.kubectl(['delete', 'pod', '-n', NS, POD, '--wait=false']);
    await eventually(
      () => {
        expect(step('app', 'exited')).toBeGreaterThanOrEqual(0);
        expect(step('fencepost-agent', 'exited')).toBeGreaterThanOrEqual(0);
      },
      60_000,
      200,
    );
    expect(appLines().map((l) => [l.at, l.readyz])).toEqual([
      ['start', 200],
      ['sigterm', 200],
    ]);
    expect(step('app', 'sigterm')).toBeLessThan(step('app', 'exited'));
    expect(step('app', 'exited')).toBeLessThan(step('fencepost-agent', 'sigterm'));
    expect(step('fencepost-agent', 'sigterm')).toBeLessThan(step('fencepost-agent', 'exited'));
    process.stderr.write(
      `[e2e] native sidecar: ${history()
        .map((h) => `${h.container}:${h.what}`)
        .join(' → ')}\n`,
    );
  });
});
