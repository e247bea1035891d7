import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubeConfig } from '@kubernetes/client-node';
import type { LockSnapshot } from '../../../src/agent/session.ts';
import { getStatus } from '../../support/testbed/http-probe.ts';
import type { ManagedProcess } from '../../support/testbed/processes.ts';
import { firstEvent, startAgent as startAgentProcess, type AgentProcess } from '../../support/agent-processes.ts';
import { startTcpProxy, type TcpProxy } from '../../support/testbed/tcp-proxy.ts';
import { useLockController } from '../../support/lock-controller.ts';
import { eventually, sharedKubeconfigPath } from '../../support/env.ts';
import { createLock, createPod, lockBody, type TestKube } from '../../support/fixtures.ts';

// The holder's agent is cut off from the API server (a blackhole in a TCP proxy that only its
// traffic crosses) while the controller and the other agent still reach it. The cut-off agent must
// declare the lock lost before the controller can grant it to anyone else.
describe('an agent cut off from the API server', () => {
  const fx = useLockController('partition-');
  let t: TestKube;
  let dir: string;
  let proxy: TcpProxy;
  const procs: ManagedProcess[] = [];
  beforeAll(() => {
    t = fx.t;
    dir = mkdtempSync(join(tmpdir(), 'fencepost-partition-'));
  });
  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop()));
    await proxy?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const agents = new Map<number, AgentProcess>(); // API port → agent
  const startAgent = async (pod: string, uid: string, kubeconfig: string): Promise<number> => {
    const agent = await startAgentProcess({ lock: 'cut', pod, uid, namespace: t.namespace, kubeconfig, logDir: dir });
    procs.push(agent.process);
    agents.set(agent.port, agent);
    return agent.port;
  };
  const snapshot = async (port: number): Promise<LockSnapshot> => {
    const agent = agents.get(port);
    if (agent === undefined) throw new Error(`no agent on port ${port}`);
    return agent.snapshot();
  };
  let aPort = 0;
  let tokenA = '';

  it('declares the lock lost before the successor is granted, by about lease − renew deadline', async () => {
    // Agent a talks to the API server through the proxy; agent b directly.
    const admin = new KubeConfig();
    admin.loadFromFile(sharedKubeconfigPath());
    const server = new URL(admin.getCurrentCluster()?.server ?? '');
    proxy = await startTcpProxy({ targetPort: Number(server.port) });
    const viaProxy = join(dir, 'kubeconfig-proxied');
    writeFileSync(viaProxy, admin.exportConfig().replace(server.origin, `https://127.0.0.1:${proxy.port}`));

    const a = await createPod(t, 'cut-a', { app: 'cut' });
    aPort = await startAgent('cut-a', a.metadata?.uid ?? '', viaProxy);
    await createLock(t, lockBody('cut', 'cut', { leaseDurationSeconds: 3 })); // renew deadline 2 s, period 1 s
    await eventually(async () => {
      expect((await snapshot(aPort)).held).toBe(true);
    }, 20_000);
    const b = await createPod(t, 'cut-b', { app: 'cut' });
    const bPort = await startAgent('cut-b', b.metadata?.uid ?? '', sharedKubeconfigPath());

    tokenA = (await snapshot(aPort)).token ?? '';
    const lost = firstEvent(aPort, 'cut', 'lost');
    const granted = firstEvent(bPort, 'cut', 'granted');
    const cutAt = performance.now();
    proxy.blackhole();
    try {
      const [lostAt, grantedAt] = await Promise.all([lost.at, granted.at]);
      const margin = grantedAt - lostAt;
      process.stdout.write(
        `partition: cut→lost ${Math.round(lostAt - cutAt)} ms, cut→successor granted ${Math.round(grantedAt - cutAt)} ms, margin ${Math.round(margin)} ms (lease 3000, renew deadline 2000)\n`,
      );
      expect(lostAt).toBeLessThan(grantedAt);
      expect(lostAt - cutAt).toBeLessThan(2000 + 500); // at the renew deadline, not at a timeout of its own
      expect((await snapshot(aPort)).held).toBe(false);
    } finally {
      lost.stop();
      granted.stop();
      proxy.heal();
    }
  });

  // The step-down is observable, so that an operator learns that a holder lost its lock — a metric,
  // and an Event that gets through once the agent reaches the API server again (the step-down
  // itself happened while it could not).
  it('records the step-down as a LockLost Event on the pod and in the agent metric, after the partition heals', async () => {
    expect(aPort).toBeGreaterThan(0);
    expect(tokenA).toMatch(/^[0-9]+$/);
    await eventually(async () => {
      const events = await t.core.listNamespacedEvent({
        namespace: t.namespace,
        fieldSelector: 'involvedObject.name=cut-a,reason=LockLost',
      });
      expect(events.items.map((e) => `${e.type ?? ''} ${e.message ?? ''}`)).toEqual([
        `Warning Stepped down from lock cut (fencing token ${tokenA}): renew deadline passed`,
      ]);
    }, 60_000);
    const metrics = (await getStatus(`http://127.0.0.1:${agents.get(aPort)?.metricsPort ?? 0}/metrics`)).body;
    expect(metrics).toMatch(/^fencepost_agent_lock_events_total\{lock="cut",type="lost"\} 1$/m);
  });
});
