/**
 * `kubectl fencepost handover` and `release --force` against the real API server, with the real
 * lock controller and, for the handover, the pods' agents as real processes: the plugin writes the
 * lock's request annotation, the controller acts on it, and --wait prints its answer.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseLease } from '../../../src/lease/record.ts';
import { FORCE_RELEASE_RESULT_ANNOTATION } from '../../../src/protocol/handover.ts';
import { startAgent, type AgentProcess } from '../../support/agent-processes.ts';
import { eventually, sharedKubeconfigPath } from '../../support/env.ts';
import { createLock, createPod, getLease, getLock, lockBody, type TestKube } from '../../support/fixtures.ts';
import { useLockController } from '../../support/lock-controller.ts';

const entry = resolve(import.meta.dirname, '../../../src/cli/kubectl-fencepost.ts');

interface Run {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

function exec(args: readonly string[]): Promise<Run> {
  return new Promise((res) => {
    // stdin is not a terminal here (execFile pipes it), as in a CI job.
    execFile(process.execPath, [entry, ...args], { timeout: 90_000 }, (err, stdout, stderr) => {
      res({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, stdout, stderr });
    });
  });
}

describe('kubectl fencepost handover and release --force', () => {
  const fx = useLockController('plugin-write-', null);
  let t: TestKube;
  let dir: string;
  const agents: AgentProcess[] = [];
  beforeAll(() => {
    t = fx.t;
    dir = mkdtempSync(join(tmpdir(), 'fencepost-plugin-write-'));
  });
  afterAll(async () => {
    await Promise.all(agents.map((a) => a.process.stop()));
    rmSync(dir, { recursive: true, force: true });
  });
  const plugin = (...args: string[]): Promise<Run> =>
    exec([...args, '--kubeconfig', sharedKubeconfigPath(), '-n', t.namespace]);
  const record = async (lock: string) => {
    const l = await getLease(t, lock);
    return l !== undefined ? parseLease(l) : undefined;
  };

  it('handover --to POD --drain 1s --wait: the holder agent drains and releases, the pod is granted with a larger token', async () => {
    const p0 = await createPod(t, 'w-0', { app: 'w' });
    const p1 = await createPod(t, 'w-1', { app: 'w' });
    for (const [pod, uid] of [
      ['w-0', p0.metadata?.uid ?? ''],
      ['w-1', p1.metadata?.uid ?? ''],
    ] as const)
      agents.push(
        await startAgent({
          lock: 'w',
          pod,
          uid,
          namespace: t.namespace,
          kubeconfig: sharedKubeconfigPath(),
          logDir: dir,
        }),
      );
    await createLock(t, lockBody('w', 'w', { leaseDurationSeconds: 6 }));
    const before = await eventually(async () => {
      const r = await record('w');
      expect(r?.holder?.name).toBe('w-0');
      expect((await agents[0]?.snapshot())?.held).toBe(true);
      return r;
    });
    const r = await plugin('handover', 'w', '--to', 'w-1', '--drain', '1s', '--wait=60s');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('Asked to hand lock w over from pod w-0');
    expect(r.stdout).toMatch(/^Completed: pod w-1 holds the lock with token \d+/m);
    const after = await record('w');
    expect(after?.holder?.name).toBe('w-1');
    expect(after?.token ?? 0n).toBeGreaterThan(before?.token ?? 0n);
    await eventually(async () => expect((await agents[1]?.snapshot())?.held).toBe(true));

    // To a pod that is not a candidate: refused, naming why; exit 1.
    const bad = await plugin('handover', 'w', '--to', 'nope', '--wait=30s');
    expect(bad.code).toBe(1);
    expect(bad.stdout).toContain('Refused: pod nope is not a candidate');
    // Usage errors name the flag.
    expect((await plugin('handover', 'w')).stderr).toContain('--to');
    expect((await plugin('handover', 'w', '--to', 'w-0', '--drain', '1.5s')).stderr).toContain('--drain');
  }, 120_000);

  it('release --force asks for confirmation (refused when stdin is no terminal), warns, and with --yes ends the grant; the next pod gets a larger token and the Event names who asked', async () => {
    await createPod(t, 'f-0', { app: 'f' });
    await createPod(t, 'f-1', { app: 'f' });
    await createLock(t, lockBody('f', 'f', { leaseDurationSeconds: 600 })); // nobody renews: only the release ends it
    const before = await eventually(async () => {
      const r = await record('f');
      expect(r?.holder?.name).toBe('f-0');
      return r;
    });
    const unconfirmed = await plugin('release', 'f', '--force');
    expect(unconfirmed.code).toBe(1);
    expect(unconfirmed.stderr).toContain('only the fencing guards');
    expect(unconfirmed.stderr).toContain('--yes');
    expect((await record('f'))?.holder?.name).toBe('f-0'); // nothing done
    expect((await plugin('release', 'f')).stderr).toContain('--force');

    const r = await plugin('release', 'f', '--force', '--yes', '--wait=60s');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain('WARNING');
    expect(r.stdout).toMatch(/^Completed: released pod f-0/m);
    const after = await eventually(async () => {
      const a = await record('f');
      expect(a?.holder?.name).toBe('f-1');
      return a;
    });
    expect(after?.token ?? 0n).toBeGreaterThan(before?.token ?? 0n);
    expect((await getLock(t, 'f')).metadata.annotations?.[FORCE_RELEASE_RESULT_ANNOTATION]).toContain('Completed');
    await eventually(async () => {
      const events = await t.core.listNamespacedEvent({ namespace: t.namespace });
      const e = events.items.find((x) => x.reason === 'ForceReleased' && x.involvedObject.name === 'f');
      expect(e?.type).toBe('Warning');
      expect(e?.message).toMatch(/forced the release of pod f-0's grant/);
      expect(e?.message).not.toMatch(/^A user/); // the plugin named who asked
    });

    // A second run names nobody to release... the new holder f-1 is held: a stale token is refused.
    const again = await plugin('release', 'nope-lock', '--force', '--yes');
    expect(again.code).toBe(1);
  }, 120_000);
});
