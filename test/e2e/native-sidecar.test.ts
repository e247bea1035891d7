import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  RbacAuthorizationV1Api,
  loadAllYaml,
  type V1Container,
  type V1Deployment,
  type V1Pod,
} from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { LockSnapshot } from '../../src/agent/session.ts';
import { findBinary } from '../support/testbed/assets.ts';
import { getStatus } from '../support/testbed/http-probe.ts';
import { eventually } from '../support/env.ts';
import { createLock, lockBody, testKube } from '../support/fixtures.ts';
import type { NodeEvent } from '../support/node/node.ts';
import { IMAGE, ON_KUBELET, ROOT, dumpDiagnostics, useSharedE2eCluster } from './e2e-cluster.ts';

const NS = 'e2e-sidecar';
const LOCK = 'ordered';
const POD = 'ordered-0';

/**
 * APP is the application container's program: when it starts it asks the agent (over the pod's
 * loopback) whether it is ready and what it knows of the lock, and it asks again when it gets
 * SIGTERM and once more just before it exits, a second later; each answer is one JSON line of its
 * output.
 */
const APP = `
const agent = process.env.AGENT_URL;
const ask = async (path) => { try { const r = await fetch(agent + path); return { status: r.status, body: await r.text() }; } catch (e) { return { status: 'unreachable', body: String(e) }; } };
const report = async (at) => { const readyz = await ask('/readyz'); const lock = await ask('/v1/locks/${LOCK}'); console.log(JSON.stringify({ at, readyz: readyz.status, lock: lock.status === 200 ? JSON.parse(lock.body) : lock.status })); };
process.on('SIGTERM', () => { void report('sigterm').then(() => setTimeout(() => void report('exit').then(() => process.exit(0)), 1000)); });
void report('start');
setInterval(() => {}, 1000);
`;

interface AppLine {
  readonly at: 'start' | 'sigterm' | 'exit';
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
  return {
    ...sidecar,
    image: IMAGE,
    args: (sidecar.args ?? []).map((a) => (a.startsWith('--lock=') ? `--lock=${lock}` : a)),
  };
}

// The recommended form, the agent as a native sidecar (the init container of
// examples/singleton-deployment.yaml: restartPolicy Always, startupProbe on /readyz), in a pod on
// the real node: the kubelet decides the order and probes the agent on the pod IP, containerd
// and runc run both containers from the image. The agent's ServiceAccount has no RBAC at first,
// so its Lease watch cannot sync and it is not ready: the application container must not run.
// Once a RoleBinding lets the agent list Leases, it becomes ready, and only then does the
// application start — and find the agent answering. On deletion the application is stopped
// first, while the agent still answers; the agent last. The order is containerd's own record of
// the task starts and exits (`ctr events`), the readiness is what the agent tells the app.
describe.skipIf(!ON_KUBELET)('the agent as a native sidecar on a kubelet (examples/singleton-deployment.yaml)', () => {
  const e = useSharedE2eCluster(NS);
  const appLines = async (): Promise<AppLine[]> =>
    (await e.kubectl(['logs', '-n', NS, POD, '-c', 'app']).catch(() => ''))
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as AppLine);
  const pod = (): Promise<V1Pod> => e.core.readNamespacedPod({ namespace: NS, name: POD });

  it('starts the application only after the agent is ready, and stops the agent only after the application', async () => {
    const events = e.node.events();
    const mine = (): NodeEvent[] => events.list().filter((x) => x.namespace === NS && x.pod === POD);
    const step = (container: string, what: NodeEvent['what']): number =>
      mine().findIndex((x) => x.container === container && x.what === what);
    try {
      await e.core.createNamespacedServiceAccount({ namespace: NS, body: { metadata: { name: 'late-agent' } } });
      await createLock(testKube(e.kc, NS), lockBody(LOCK, LOCK, { leaseDurationSeconds: 15, mode: 'Election' }));
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
                image: IMAGE,
                command: ['node', '-e', APP],
                env: [{ name: 'AGENT_URL', value: 'http://127.0.0.1:7370' }],
              },
            ],
          },
        },
      });

      // 1. The agent runs but cannot sync (no RBAC yet): the kubelet's startupProbe on the pod IP
      //    fails (503), and the kubelet does not start the app.
      const podIp = await eventually(
        async () => {
          const p = await pod();
          expect(p.status?.initContainerStatuses?.[0]?.state?.running).toBeDefined();
          expect(p.status?.podIP).toBeTruthy();
          return p.status?.podIP ?? '';
        },
        90_000,
        200,
      ).catch(async (err: unknown) => {
        throw new Error(`${String(err)}\n${await dumpDiagnostics(e, NS)}`);
      });
      let unreadyAnswers = 0;
      for (let i = 0; i < 30; i++) {
        const readyz = await getStatus(`http://${podIp}:7371/readyz`).catch(() => ({ status: 0, body: '' }));
        if (readyz.status === 503) unreadyAnswers++;
        expect(readyz.status, 'the agent cannot be ready without RBAC').not.toBe(200);
        const p = await pod();
        expect(p.status?.initContainerStatuses?.[0]?.started, 'the kubelet saw the startupProbe pass').not.toBe(true);
        expect(
          p.status?.containerStatuses?.[0]?.state?.running,
          'the app runs while the agent is not ready',
        ).toBeUndefined();
        expect(step('app', 'start'), 'the app started while the agent was not ready').toBe(-1);
        await new Promise((r) => setTimeout(r, 200));
      }
      expect(unreadyAnswers).toBeGreaterThan(0);
      expect(step('fencepost-agent', 'start')).toBeGreaterThanOrEqual(0);

      // 2. RBAC arrives: the agent's watch syncs, the kubelet's startupProbe passes, and then the
      //    kubelet starts the app — which finds the agent ready.
      await e.kc.makeApiClient(RbacAuthorizationV1Api).createNamespacedRoleBinding({
        namespace: NS,
        body: {
          metadata: { name: 'late-agent' },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'fencepost-agent' },
          subjects: [{ kind: 'ServiceAccount', name: 'late-agent', namespace: NS }],
        },
      });
      const started = await eventually(
        async () => {
          const [first] = await appLines();
          expect(first?.at).toBe('start');
          return first as AppLine;
        },
        90_000,
        250,
      ).catch(async (err: unknown) => {
        throw new Error(`${String(err)}\n${JSON.stringify(mine())}\n${await dumpDiagnostics(e, NS)}`);
      });
      expect(started.readyz, 'the agent was ready when the kubelet started the app').toBe(200);
      expect(started.lock).toMatchObject({ lock: LOCK });
      expect(step('fencepost-agent', 'start')).toBeLessThan(step('app', 'start'));
      const running = await pod();
      expect(running.status?.initContainerStatuses?.[0]?.started).toBe(true);
      // The app's later lines come after its pod is deleted: follow its log through the kubelet.
      const follow = spawn(
        findBinary('kubectl'),
        ['--kubeconfig', e.facts.kubeconfigPath, 'logs', '-f', '-n', NS, POD, '-c', 'app'],
        { stdio: ['ignore', 'pipe', 'ignore'] },
      );
      let followed = '';
      follow.stdout.setEncoding('utf8');
      follow.stdout.on('data', (d: string) => {
        followed += d;
      });
      await eventually(() => expect(followed).toContain('"at":"start"'), 30_000, 100);

      // 3. Deletion: the kubelet sends the app SIGTERM first; the app still finds the agent
      //    answering then and a second later, as it exits; the agent is stopped only after.
      await e.kubectl(['delete', 'pod', '-n', NS, POD, '--wait=false']);
      await eventually(
        () => {
          expect(step('app', 'exit')).toBeGreaterThanOrEqual(0);
          expect(step('fencepost-agent', 'exit')).toBeGreaterThanOrEqual(0);
        },
        60_000,
        200,
      );
      expect(step('app', 'exit'), JSON.stringify(mine())).toBeLessThan(step('fencepost-agent', 'exit'));
      const exits = mine().filter((x) => x.what === 'exit');
      expect(exits.find((x) => x.container === 'app')?.exitStatus).toBe(0);
      await eventually(() => expect(followed).toContain('"at":"exit"'), 10_000, 100).finally(() => follow.kill());
      const lines = followed
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as AppLine);
      expect(lines.map((l) => [l.at, l.readyz])).toEqual([
        ['start', 200],
        ['sigterm', 200],
        ['exit', 200],
      ]);
      process.stderr.write(
        `[e2e] native sidecar on the kubelet: ${mine()
          .map((x) => `${x.container}:${x.what}${x.exitStatus !== undefined ? `(${x.exitStatus})` : ''}`)
          .join(' → ')}\n`,
      );
    } finally {
      await events.stop();
    }
  });
});
