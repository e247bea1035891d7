import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { loadAllYaml, type V1Container, type V1Pod } from '@kubernetes/client-node';
import { afterAll, describe, expect, it } from 'vitest';
import type { LockSnapshot } from '../../src/agent/session.ts';
import { eventually } from '../support/env.ts';
import { createLock, lockBody, testKube } from '../support/fixtures.ts';
import { findBinary } from '../support/testbed/assets.ts';
import { IMAGE, ROOT, RUNTIME, dumpDiagnostics, useSharedE2eCluster } from './e2e-cluster.ts';

const run = promisify(execFile);
const NS = 'e2e-sidecar-ports';
const LOCK = 'beside-app';
const POD = 'beside-app-0';

/**
 * APP is the application container: an HTTP server on 0.0.0.0:8080 — the port applications use
 * most, which the agent used to take for its metrics — that answers every request with what the
 * agent beside it (http://127.0.0.1:7370, the pod's loopback) says of the lock.
 */
const APP = `
const http = require('node:http');
http.createServer(async (req, res) => {
  let lock;
  try { const r = await fetch('http://127.0.0.1:7370/v1/locks/${LOCK}'); lock = r.status === 200 ? await r.json() : r.status; } catch (e) { lock = String(e); }
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ app: 'listening on 8080', lock }));
}).listen(8080, '0.0.0.0', () => console.log('app listening on 8080'));
`;

/** librarySidecar renders the agent sidecar with the fencepost-sidecar library chart, as an app chart does. */
async function librarySidecar(dir: string): Promise<V1Container> {
  const chart = join(dir, 'app');
  mkdirSync(join(chart, 'templates'), { recursive: true });
  writeFileSync(
    join(chart, 'Chart.yaml'),
    `apiVersion: v2\nname: app\nversion: 0.0.1\ndependencies:\n  - name: fencepost-sidecar\n    version: 0.1.0\n    repository: file://${join(ROOT, 'charts/fencepost-sidecar')}\n`,
  );
  writeFileSync(join(chart, 'values.yaml'), `fencepostSidecar:\n  locks: [${LOCK}]\n  image: ${IMAGE}\n`);
  writeFileSync(
    join(chart, 'templates/pod.yaml'),
    'apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\nspec:\n  initContainers:\n    {{- include "fencepost-sidecar.container" .Values.fencepostSidecar | nindent 4 }}\n  containers: []\n',
  );
  const env = { ...process.env, HELM_CACHE_HOME: join(dir, 'cache') };
  await run(findBinary('helm'), ['dependency', 'build', chart], { env });
  const { stdout } = await run(findBinary('helm'), ['template', 'app', chart, '--kube-version', '1.36.0'], { env });
  const sidecar = (loadAllYaml(stdout) as V1Pod[])[0]?.spec?.initContainers?.[0];
  if (sidecar === undefined) throw new Error('the library chart rendered no sidecar');
  return sidecar;
}

// An application listening on 8080 beside the agent sidecar of the fencepost-sidecar library
// chart (native sidecar, its probes on 7371, metrics on 7372, the lock API on loopback 7370), in
// one pod: both start, the kubelet's probes of both pass, the app answers on 8080 and the agent
// on its ports, and the app reaches the agent over the pod's loopback and finds its pod holding
// the lock. Under crun (a sandbox per pod, the containers sharing its network namespace) and on
// the real node (kubelet, containerd, runc); the process runner moves ports, so it proves
// nothing about them and is skipped.
describe.skipIf(RUNTIME === 'process')('an app on port 8080 beside the agent sidecar of the library chart', () => {
  const e = useSharedE2eCluster(NS);
  const dir = mkdtempSync(join(tmpdir(), 'fencepost-sidecar-ports-'));
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('both work: the app answers on 8080, the agent on 7370-7372, and the pod holds the lock', async () => {
    const sidecar = await librarySidecar(dir);
    expect(sidecar.ports?.map((p) => p.containerPort)).toEqual([7372, 7371]);
    await createLock(testKube(e.kc, NS), lockBody(LOCK, LOCK, { leaseDurationSeconds: 15, mode: 'Election' }));
    await e.core.createNamespacedPod({
      namespace: NS,
      body: {
        metadata: { name: POD, labels: { app: LOCK } },
        spec: {
          serviceAccountName: 'fencepost-agent',
          terminationGracePeriodSeconds: 10,
          initContainers: [sidecar],
          containers: [
            {
              name: 'app',
              image: IMAGE,
              command: ['node', '-e', APP],
              ports: [{ name: 'http', containerPort: 8080 }],
              readinessProbe: { httpGet: { path: '/', port: 'http' }, periodSeconds: 1 },
            },
          ],
        },
      },
    });

    const answers = await eventually(
      async () => {
        const p = await e.core.readNamespacedPod({ namespace: NS, name: POD });
        expect(p.status?.conditions?.find((c) => c.type === 'Ready')?.status, 'pod Ready').toBe('True');
        const app = await e.podGet(NS, POD, 'app', 8080, '/');
        expect(app.status, app.body).toBe(200);
        const fromApp = JSON.parse(app.body) as { app: string; lock: LockSnapshot | number | string };
        expect(fromApp.lock).toMatchObject({ lock: LOCK, held: true });
        const api = await e.podGet(NS, POD, 'fencepost-agent', 7370, `/v1/locks/${LOCK}`);
        expect(api.status, api.body).toBe(200);
        const readyz = await e.podGet(NS, POD, 'fencepost-agent', 7371, '/readyz');
        expect(readyz.status, readyz.body).toBe(200);
        const metrics = await e.podGet(NS, POD, 'fencepost-agent', 7372, '/metrics');
        expect(metrics.body).toMatch(new RegExp(`^fencepost_agent_lock_held\\{lock="${LOCK}"\\} 1$`, 'm'));
        return { app: fromApp, agent: JSON.parse(api.body) as LockSnapshot };
      },
      120_000,
      500,
    ).catch(async (err: unknown) => {
      throw new Error(`${String(err)}\n${await dumpDiagnostics(e, NS)}`);
    });
    // The app and the agent speak of one term: the token the app was told is the agent's.
    expect((answers.app.lock as LockSnapshot).token).toBe(answers.agent.token);
    // Neither container was restarted (a port clash would have made one exit): the kubelet's
    // count on the real node, the pod runner's own under crun (kwok writes the status there).
    if (RUNTIME === 'kubelet') {
      const p = await e.core.readNamespacedPod({ namespace: NS, name: POD });
      expect(p.status?.initContainerStatuses?.find((c) => c.name === 'fencepost-agent')?.restartCount).toBe(0);
      expect(p.status?.containerStatuses?.find((c) => c.name === 'app')?.restartCount).toBe(0);
    } else {
      const mine = e.runner.containers().filter((c) => c.namespace === NS && c.pod === POD);
      expect(mine.map((c) => [c.container, c.restarts, c.proc.isRunning()]).sort()).toEqual([
        ['app', 0, true],
        ['fencepost-agent', 0, true],
      ]);
    }
    process.stderr.write(
      `[e2e] ${RUNTIME}: app on 8080 answered ${JSON.stringify(answers.app)}; agent held ${LOCK} with token ${answers.agent.token ?? '?'}\n`,
    );
    await e.kubectl(['delete', 'pod', '-n', NS, POD, '--wait=false']);
  });
});
