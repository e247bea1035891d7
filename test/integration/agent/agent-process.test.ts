import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LockSnapshot } from '../../../src/agent/session.ts';
import { startLockController, type LockController } from '../../../src/controllers/distributedlock/setup.ts';
import { parseLease } from '../../../src/lease/record.ts';
import { silentLogger } from '../../../src/observability/logger.ts';
import { realClock } from '../../../src/runtime/clock.ts';
import { getStatus } from '../../support/testbed/http-probe.ts';
import { freePort } from '../../support/testbed/ports.ts';
import { spawnManaged, tailLog, type ManagedProcess } from '../../support/testbed/processes.ts';
import {
  eventually,
  freshNamespace,
  sharedKubeConfig,
  sharedKubeconfigPath,
  sharedRedisUrl,
} from '../../support/env.ts';
import { createLock, createPod, getLease, lockBody, testKube, type TestKube } from '../../support/fixtures.ts';
import { agentBinary } from '../../support/agent-binary.ts';

interface Agent {
  readonly pod: string;
  readonly proc: ManagedProcess;
  readonly port: number;
  readonly stateDir: string;
}

/** snapshot asks an agent's local API; throws while the agent is not answering (paused, starting). */
async function snapshot(a: Agent, lock: string): Promise<LockSnapshot> {
  const r = await getStatus(`http://127.0.0.1:${a.port}/v1/locks/${lock}`, undefined, 1500);
  return JSON.parse(r.body) as LockSnapshot;
}

/** sseEvents collects the event names an agent streams for a lock until stop() is called. */
function sseEvents(a: Agent, lock: string): { names: string[]; stop: () => void } {
  const names: string[] = [];
  const req = request(`http://127.0.0.1:${a.port}/v1/locks/${lock}/events`, (res) => {
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => {
      for (const m of chunk.matchAll(/^event: (\w+)$/gm)) if (m[1] !== undefined) names.push(m[1]);
    });
  });
  req.on('error', () => undefined);
  req.end();
  return {
    names,
    stop: () => {
      req.destroy();
    },
  };
}

// Agents are real processes with the pods' identities (POD_NAME/POD_UID), against the real API
// server, with the controller in-process: the holder renews by itself, and pausing, stopping or
// terminating it behaves as in a pod.
describe('fencepost agent processes', () => {
  const kc = sharedKubeConfig();
  let t: TestKube;
  let dir: string;
  let controller: LockController;
  const agents: Agent[] = [];
  const startAgent = async (pod: string, uid: string, lock: string): Promise<Agent> => {
    const port = await freePort();
    const stateDir = join(dir, pod);
    const proc = spawnManaged(`agent-${pod}`, agentBinary(), {
      args: [
        'agent',
        '--lock',
        lock,
        '--listen',
        `127.0.0.1:${port}`,
        '--state-dir',
        stateDir,
        '--kubeconfig',
        sharedKubeconfigPath(),
        '--health-probe-bind-address=0',
        '--metrics-bind-address=0',
      ],
      logFile: join(dir, `agent-${pod}.log`),
      env: { ...process.env, POD_NAME: pod, POD_NAMESPACE: t.namespace, POD_UID: uid },
    });
    const a = { pod, proc, port, stateDir };
    agents.push(a);
    await eventually(async () => {
      expect((await getStatus(`http://127.0.0.1:${port}/readyz`)).status).toBe(200);
    }, 30_000);
    return a;
  };
  const twoAgents = async (lock: string, leaseSeconds: number): Promise<[Agent, Agent]> => {
    const p0 = await createPod(t, `${lock}-0`, { app: lock });
    const p1 = await createPod(t, `${lock}-1`, { app: lock });
    const a0 = await startAgent(`${lock}-0`, p0.metadata?.uid ?? '', lock);
    const a1 = await startAgent(`${lock}-1`, p1.metadata?.uid ?? '', lock);
    await createLock(t, lockBody(lock, lock, { leaseDurationSeconds: leaseSeconds }));
    return [a0, a1];
  };
  /** holderAgent waits until exactly one agent reports held, and returns it and the other. */
  const holderAgent = async (lock: string, pair: readonly [Agent, Agent]) =>
    eventually(async () => {
      const [s0, s1] = await Promise.all(pair.map((a) => snapshot(a, lock)));
      expect([s0?.held, s1?.held].filter(Boolean)).toHaveLength(1);
      return s0?.held === true
        ? { holder: pair[0], other: pair[1], snap: s0 }
        : { holder: pair[1], other: pair[0], snap: s1 as LockSnapshot };
    }, 20_000);

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fencepost-agents-'));
    t = testKube(kc, await freshNamespace(kc, 'agents-'));
    controller = await startLockController({
      kc,
      redisUrl: sharedRedisUrl(),
      namespace: t.namespace,
      identity: 'test-controller',
      clock: realClock,
      log: silentLogger,
    });
  });
  afterAll(async () => {
    await Promise.all(agents.map((a) => a.proc.stop()));
    await controller?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('one agent holds the lock and keeps it by renewing; its API, event stream and state file agree with the Lease', async () => {
    const pair = await twoAgents('keep', 2);
    const { holder, other, snap } = await holderAgent('keep', pair);
    const lease = parseLease((await getLease(t, 'keep')) ?? {});
    expect(snap.token).toBe(lease.token?.toString());
    expect(snap.holder).toBe(holder.pod);
    expect(snap.state).toBe('held');
    expect(await snapshot(other, 'keep')).toMatchObject({ held: false, holder: holder.pod, state: 'waiting' });
    const events = sseEvents(holder, 'keep');
    await new Promise((r) => setTimeout(r, 5000)); // 2.5 lease durations, renewing every ~666 ms
    events.stop();
    const after = parseLease((await getLease(t, 'keep')) ?? {});
    expect(after.holder?.name).toBe(holder.pod);
    expect(after.token).toBe(lease.token);
    expect(after.transitions).toBe(lease.transitions);
    expect(events.names[0]).toBe('state');
    expect(events.names.filter((n) => n === 'renewed').length).toBeGreaterThanOrEqual(4);
    const file = join(holder.stateDir, 'keep.json');
    expect(existsSync(file)).toBe(true);
    expect(JSON.parse(readFileSync(file, 'utf8'))).toMatchObject({
      lock: 'keep',
      held: true,
      token: lease.token?.toString(),
    });
    expect(existsSync(join(other.stateDir, 'keep.json'))).toBe(false);
  });

  it('SIGTERM releases the lock: the other agent holds it with a larger token long before the lease could expire', async () => {
    const pair = await twoAgents('term', 30);
    const { holder, other, snap } = await holderAgent('term', pair);
    const stoppedAt = performance.now();
    await holder.proc.stop();
    expect(await holder.proc.exited, tailLog(holder.proc.logFile)).toBe(0);
    const next = await eventually(async () => {
      const s = await snapshot(other, 'term');
      expect(s.held).toBe(true);
      return s;
    }, 20_000);
    expect(performance.now() - stoppedAt).toBeLessThan(30_000);
    expect(BigInt(next.token ?? '0')).toBeGreaterThan(BigInt(snap.token ?? '0'));
    expect(existsSync(join(holder.stateDir, 'term.json'))).toBe(false);
  });

  it('a holder paused past its lease (SIGSTOP) is replaced with a larger token, and reports the loss as soon as it resumes', async () => {
    const pair = await twoAgents('pause', 2);
    const { holder, other, snap } = await holderAgent('pause', pair);
    holder.proc.signal('SIGSTOP');
    try {
      const next = await eventually(async () => {
        const s = await snapshot(other, 'pause');
        expect(s.held).toBe(true);
        return s;
      }, 20_000);
      expect(BigInt(next.token ?? '0')).toBeGreaterThan(BigInt(snap.token ?? '0'));
    } finally {
      holder.proc.signal('SIGCONT');
    }
    const resumed = await eventually(() => snapshot(holder, 'pause'), 10_000);
    expect(resumed.held).toBe(false);
    expect(resumed.token).toBeUndefined();
    expect(resumed.state).toBe('lost');
  });

  it('SIGKILL of the holder agent: the successor is granted only after the lease duration, with a larger token', async () => {
    const pair = await twoAgents('kill', 2);
    const { holder, other, snap } = await holderAgent('kill', pair);
    const before = parseLease((await getLease(t, 'kill')) ?? {});
    holder.proc.signal('SIGKILL');
    await holder.proc.exited;
    const killedAt = performance.now();
    const next = await eventually(async () => {
      const s = await snapshot(other, 'kill');
      expect(s.held).toBe(true);
      return s;
    }, 20_000);
    // The last renew was at most one renew period (~666 ms) before the kill, and the controller
    // waits a full 2 s lease from when it saw it: at least 2000 - 666 ms after the kill.
    expect(performance.now() - killedAt).toBeGreaterThanOrEqual(2000 - 700);
    expect(BigInt(next.token ?? '0')).toBeGreaterThan(BigInt(snap.token ?? '0'));
    const after = parseLease((await getLease(t, 'kill')) ?? {});
    expect(after.transitions).toBe(before.transitions + 1);
  });
});
