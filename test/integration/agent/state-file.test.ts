import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseLease } from '../../../src/lease/record.ts';
import { startAgent, type AgentProcess } from '../../support/agent-processes.ts';
import { eventually, sharedKubeconfigPath } from '../../support/env.ts';
import { createLock, createPod, getLease, lockBody, setPodStatus, type TestKube } from '../../support/fixtures.ts';
import { useLockController } from '../../support/lock-controller.ts';
import type { ManagedProcess } from '../../support/testbed/processes.ts';

interface StateFile {
  readonly held: boolean;
  readonly token: string;
  readonly validUntil?: string;
}

// The agent's state file (`--state-dir`) is for applications that read a file instead of calling
// HTTP. An agent that is SIGKILLed while it holds the lock cannot remove its file; the file must
// not say "held" to anyone once the term is over — not while the agent is gone (the file carries
// its own wall-clock deadline), and not after the agent restarts (it clears its files before it
// does anything else).
describe("the agent's state file after the agent was killed", () => {
  const fx = useLockController('statefile-');
  let t: TestKube;
  let dir: string;
  const procs: ManagedProcess[] = [];
  beforeAll(() => {
    t = fx.t;
    dir = mkdtempSync(join(tmpdir(), 'fencepost-statefile-'));
  });
  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop()));
    rmSync(dir, { recursive: true, force: true });
  });

  it('does not say held once the term is over, and a restarted agent clears it before anything else', async () => {
    const stateDir = join(dir, 'state');
    const file = join(stateDir, 'sf.json');
    const pod = await createPod(t, 'sf-0', { app: 'sf' });
    const start = async (): Promise<AgentProcess> => {
      const agent = await startAgent({
        lock: 'sf',
        pod: 'sf-0',
        uid: pod.metadata?.uid ?? '',
        namespace: t.namespace,
        kubeconfig: sharedKubeconfigPath(),
        logDir: dir,
        args: ['--state-dir', stateDir],
      });
      procs.push(agent.process);
      return agent;
    };
    const first = await start();
    await createLock(t, lockBody('sf', 'sf', { leaseDurationSeconds: 3 })); // renew deadline 2 s
    await eventually(async () => {
      expect((await first.snapshot()).held).toBe(true);
      expect(existsSync(file)).toBe(true);
    }, 20_000);
    const read = (): StateFile => JSON.parse(readFileSync(file, 'utf8')) as StateFile;
    expect(read().held).toBe(true);

    first.process.signal('SIGKILL');
    await first.process.exited;
    // The pod leaves the candidates (as a crash-looping pod would), so the lock expires and stays vacant.
    await setPodStatus(t, 'sf-0', 'unready');
    await eventually(async () => {
      const l = await getLease(t, 'sf');
      expect(l !== undefined ? parseLease(l).holder : 'none').toBeUndefined();
    }, 20_000);
    // The file the dead agent left says by itself that it is over.
    const left = read();
    expect(left.validUntil, 'the state file carries its wall-clock deadline').toBeDefined();
    expect(Date.parse(left.validUntil ?? '')).toBeLessThan(Date.now());

    // A restarted agent (same pod) clears the file before it syncs, and writes nothing while not granted.
    await start();
    expect(existsSync(file), 'the restarted agent left the old state file saying held').toBe(false);
  });
});
