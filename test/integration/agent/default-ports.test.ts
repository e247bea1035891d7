import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentAddresses } from '../../../src/agent/state-file.ts';
import type { LockSnapshot } from '../../../src/agent/session.ts';
import { AGENT_DEFAULT_LISTEN } from '../../../src/config/agent.ts';
import { agentBinary } from '../../support/agent-binary.ts';
import { eventually, sharedKubeconfigPath } from '../../support/env.ts';
import { createLock, createPod, lockBody, type TestKube } from '../../support/fixtures.ts';
import { useLockController } from '../../support/lock-controller.ts';
import { getStatus } from '../../support/testbed/http-probe.ts';
import { spawnManaged, type ManagedProcess } from '../../support/testbed/processes.ts';

/** StartedLine is the agent's "Started agent" log line: where it listens. */
interface StartedLine {
  readonly msg: string;
  readonly listen: string;
  readonly healthProbes: string;
  readonly metrics: string;
}

// Two agents on one host with nothing but their locks on the command line (the default listeners:
// the lock API on 127.0.0.1:7370, probes on :7371, metrics on :7372), as two `fencepost agent`
// on a VM or two agent containers in one pod: the second finds the defaults taken and moves to
// free ports, says where in its log and in <state-dir>/<lock>.agent.json, and both serve their
// API, probes and metrics and hold their lock. An address given explicitly is different: one
// that is taken stops the agent, naming the flag and the address.
describe('two agents with default listeners on one host', () => {
  const fx = useLockController('default-ports-');
  let t: TestKube;
  let dir = '';
  const procs: ManagedProcess[] = [];
  beforeAll(() => {
    t = fx.t;
    dir = mkdtempSync(join(tmpdir(), 'fencepost-default-ports-'));
  });
  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop()));
    rmSync(dir, { recursive: true, force: true });
  });

  /** agent starts `fencepost-agent agent --lock LOCK [flags]` as a pod of its own, labelled app=LOCK. */
  const agent = async (lock: string, flags: readonly string[] = []): Promise<ManagedProcess> => {
    const pod = await createPod(t, `${lock}-0`, { app: lock });
    const p = spawnManaged(lock, agentBinary(), {
      args: ['agent', '--lock', lock, '--kubeconfig', sharedKubeconfigPath(), ...flags],
      logFile: join(dir, `${lock}.log`),
      env: { ...process.env, POD_NAME: `${lock}-0`, POD_NAMESPACE: t.namespace, POD_UID: pod.metadata?.uid ?? '' },
    });
    procs.push(p);
    return p;
  };
  const logLines = (p: ManagedProcess): { msg?: string }[] =>
    readFileSync(p.logFile, 'utf8')
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { msg?: string });
  const started = (p: ManagedProcess): Promise<StartedLine> =>
    eventually(() => {
      const line = logLines(p).find((l) => l.msg === 'Started agent') as StartedLine | undefined;
      expect(line, `${p.logFile}: no "Started agent" line`).toBeDefined();
      return line as StartedLine;
    }, 30_000);
  /** local turns a bound host:port into one this test can reach (0.0.0.0 and [::] listen on loopback too). */
  const local = (address: string): string => address.replace(/^(0\.0\.0\.0|\[::\])(?=:)/, '127.0.0.1');

  it('both start, both serve their API, probes and metrics, and both hold their lock', async () => {
    await createLock(t, lockBody('first', 'first'));
    await createLock(t, lockBody('second', 'second'));
    const first = await agent('first', ['--state-dir', join(dir, 'first')]);
    const a = await started(first);
    const second = await agent('second', ['--state-dir', join(dir, 'second')]);
    const b = await started(second);
    process.stderr.write(`[default-ports] first: ${JSON.stringify(a)}\n[default-ports] second: ${JSON.stringify(b)}\n`);

    // No two listeners share an address, and the second agent says where it went when the first
    // had its default (another process of the machine may hold a default too: then both moved).
    const addresses = [a.listen, a.healthProbes, a.metrics, b.listen, b.healthProbes, b.metrics];
    expect(new Set(addresses.map((x) => x.replace(/^.*:/, ''))).size).toBe(6);
    if (a.listen === AGENT_DEFAULT_LISTEN) {
      expect(b.listen).not.toBe(AGENT_DEFAULT_LISTEN);
      const moved = logLines(second).filter((l) => l.msg?.startsWith('The default --') === true);
      expect(moved.map((l) => l.msg)).toEqual([
        expect.stringContaining('The default --health-probe-bind-address 0.0.0.0:7371 is in use'),
        expect.stringContaining('The default --metrics-bind-address 0.0.0.0:7372 is in use'),
        expect.stringContaining(`The default --listen 127.0.0.1:7370 is in use`),
      ]);
    }

    for (const [lock, line, proc] of [
      ['first', a, first],
      ['second', b, second],
    ] as const) {
      // Where the agent listens, for the application: <state-dir>/<lock>.agent.json.
      const file = JSON.parse(readFileSync(join(dir, lock, `${lock}.agent.json`), 'utf8')) as AgentAddresses;
      expect(file).toEqual({
        api: `http://${line.listen}`,
        healthProbes: line.healthProbes,
        metrics: line.metrics,
        pid: proc.pid,
      });
      await eventually(async () => {
        expect((await getStatus(`http://${local(line.healthProbes)}/readyz`)).status).toBe(200);
        const snap = JSON.parse((await getStatus(`${file.api}/v1/locks/${lock}`)).body) as LockSnapshot;
        expect(snap).toMatchObject({ lock, held: true });
      }, 30_000);
      const metrics = (await getStatus(`http://${local(line.metrics)}/metrics`)).body;
      expect(metrics).toMatch(new RegExp(`^fencepost_agent_lock_held\\{lock="${lock}"\\} 1$`, 'm'));
      // Each agent answers for its own lock only.
      const other = lock === 'first' ? 'second' : 'first';
      expect((await getStatus(`${file.api}/v1/locks/${other}`)).status).toBe(404);
    }
  });

  it('stops, naming the flag and the address, when an address given explicitly is taken', async () => {
    const holder = procs[0];
    if (holder === undefined) throw new Error('the first test starts the agents');
    const taken = (await started(holder)).listen;
    await createLock(t, lockBody('third', 'third'));
    const p = await agent('third', [`--listen=${taken}`]);
    expect(await p.exited).not.toBe(0);
    expect(readFileSync(p.logFile, 'utf8')).toContain(`--listen: listen EADDRINUSE: ${taken}`);
  });
});
