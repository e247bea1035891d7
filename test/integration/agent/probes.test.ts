import { createServer, type Server } from 'node:net';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getStatus } from '../../support/testbed/http-probe.ts';
import { freePort } from '../../support/testbed/ports.ts';
import { spawnManaged, type ManagedProcess } from '../../support/testbed/processes.ts';
import { eventually, freshNamespace, sharedKubeConfig, sharedKubeconfigPath } from '../../support/env.ts';
import { createPod, testKube, type TestKube } from '../../support/fixtures.ts';
import { agentBinary } from '../../support/agent-binary.ts';

// The agent as a sidecar the kubelet and Prometheus can reach: /healthz and /readyz on
// --health-probe-bind-address, /metrics on --metrics-bind-address (all interfaces, as a `:PORT`
// address binds), the lock API on loopback only; `0` turns a listener off. Real agent processes.
describe("the agent's probe and metrics listeners", () => {
  let t: TestKube;
  let dir = '';
  const procs: ManagedProcess[] = [];
  /** agent runs an agent process as a pod of its own: one session per lock per pod (docs/agent.md). */
  const agent = async (name: string, flags: readonly string[]): Promise<ManagedProcess> => {
    const podUid = (await createPod(t, name, { app: 'probed' })).metadata?.uid ?? '';
    const p = spawnManaged(name, agentBinary(), {
      args: ['agent', '--lock', 'probed', '--kubeconfig', sharedKubeconfigPath(), ...flags],
      logFile: join(dir, `${name}.log`),
      env: { ...process.env, POD_NAME: name, POD_NAMESPACE: t.namespace, POD_UID: podUid },
    });
    procs.push(p);
    return p;
  };
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fencepost-probes-'));
    t = testKube(sharedKubeConfig(), await freshNamespace(sharedKubeConfig(), 'probes-'));
  });
  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop()));
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves the probes and the metrics on their own ports, with process_* and nodejs_* unprefixed', async () => {
    const [api, probes, metrics] = [await freePort(), await freePort(), await freePort()];
    await agent('agent-ports', [
      `--listen=127.0.0.1:${api}`,
      `--health-probe-bind-address=:${probes}`,
      `--metrics-bind-address=:${metrics}`,
    ]);
    await eventually(
      async () => {
        expect((await getStatus(`http://127.0.0.1:${probes}/readyz`)).status).toBe(200);
      },
      30_000,
      100,
    );
    expect((await getStatus(`http://127.0.0.1:${probes}/healthz`)).status).toBe(200);
    const text = (await getStatus(`http://127.0.0.1:${metrics}/metrics`)).body;
    for (const name of [
      'process_cpu_user_seconds_total',
      'process_resident_memory_bytes',
      'nodejs_eventloop_lag_seconds',
      'nodejs_heap_size_used_bytes',
      'fencepost_agent_lock_held',
      'fencepost_agent_lock_events_total',
    ]) {
      expect(text, name).toMatch(new RegExp(`^# TYPE ${name} `, 'm'));
    }
    expect(text).not.toMatch(/^fencepost_agent_(process|nodejs)_/m);
    // client-go's request counter: the agent's Lease GET/watch have been answered 200 by now.
    expect(text).toMatch(/^rest_client_requests_total\{code="200",method="GET",host="127\.0\.0\.1:\d+"\} [1-9]/m);
    // Each listener serves its own paths only: no metrics on the lock API, no lock API on the probe port.
    expect((await getStatus(`http://127.0.0.1:${api}/metrics`)).status).toBe(404);
    expect((await getStatus(`http://127.0.0.1:${probes}/v1/locks/probed`)).status).toBe(404);
    expect((await getStatus(`http://127.0.0.1:${api}/v1/locks/probed`)).status).toBe(200);
  });

  it('turns a listener off with 0', async () => {
    const api = await freePort();
    const p = await agent('agent-off', [
      `--listen=127.0.0.1:${api}`,
      '--health-probe-bind-address=0',
      '--metrics-bind-address=0',
    ]);
    await eventually(
      async () => {
        expect((await getStatus(`http://127.0.0.1:${api}/readyz`)).status).toBe(200);
      },
      30_000,
      100,
    );
    expect(readFileSync(p.logFile, 'utf8')).toMatch(/"healthProbes":"off","metrics":"off"/);
  });

  it('exits naming the flag when its port is taken, instead of serving without it', async () => {
    const taken: Server = createServer();
    const port = await new Promise<number>((r) => {
      taken.listen(0, '127.0.0.1', () => {
        r((taken.address() as { port: number }).port);
      });
    });
    try {
      const p = await agent('agent-clash', [
        `--listen=127.0.0.1:${await freePort()}`,
        '--health-probe-bind-address=0',
        `--metrics-bind-address=127.0.0.1:${port}`,
      ]);
      expect(await p.exited).not.toBe(0);
      expect(readFileSync(p.logFile, 'utf8')).toMatch(/--metrics-bind-address: listen EADDRINUSE/);
    } finally {
      taken.close();
    }
  });

  it('refuses an address that is not host:port with exit 2, naming the flag', async () => {
    const p = await agent('agent-bad', ['--health-probe-bind-address=8081']);
    expect(await p.exited).toBe(2);
    expect(readFileSync(p.logFile, 'utf8')).toMatch(/--health-probe-bind-address: expected host:port/);
  });
});
