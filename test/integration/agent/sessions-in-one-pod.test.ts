/**
 * Several sessions of one lock in one pod. The controller grants a lock to a pod (its name and UID
 * on the Lease), so every session in that pod — two overlapping `fencepost exec`s, a sidecar agent
 * and `acquire()` in the application — sees the pod on the Lease. Without a claim of their own,
 * both confirm the grant and run at once with the same token, and a Mutex withdrawal by one erases
 * the other's request (the request is the pod's annotation).
 *
 * Real processes and the real API server: the exec commands record FENCEPOST_TOKEN and wall-clock
 * start and end times in a file; the Mutex case reads the pod's request annotation.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acquire, NotAcquiredError, SessionInUseError } from '../../../src/index.ts';
import { EXIT_NOT_ACQUIRED } from '../../../src/cli/exec.ts';
import { parseLease } from '../../../src/lease/record.ts';
import { podKeys } from '../../../src/protocol/names.ts';
import { startAgent } from '../../support/agent-processes.ts';
import { useLockController } from '../../support/lock-controller.ts';
import { eventually, sharedKubeConfig, sharedKubeconfigPath } from '../../support/env.ts';
import { createLock, createPod, getLease, lockBody, type TestKube } from '../../support/fixtures.ts';
import { agentBinary } from '../../support/agent-binary.ts';

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Interval is one command's run as it recorded it: token and wall-clock start and end (ms). */
interface Interval {
  readonly tag: string;
  readonly token: string;
  readonly start: number;
  readonly end: number | undefined;
}

function intervals(file: string): Interval[] {
  if (!existsSync(file)) return [];
  const byTag = new Map<string, { token: string; start: number; end?: number }>();
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const [tag, what, ns, token] = line.split(' ');
    if (tag === undefined || ns === undefined) continue;
    const ms = Number(ns) / 1e6;
    if (what === 'start') byTag.set(tag, { token: token ?? '', start: ms });
    else if (what === 'end') {
      const i = byTag.get(tag);
      if (i !== undefined) i.end = ms;
    }
  }
  return [...byTag].map(([tag, i]) => ({ tag, token: i.token, start: i.start, end: i.end }));
}

describe('several sessions of one lock in one pod', () => {
  const kc = sharedKubeConfig();
  const fx = useLockController('sessions-');
  let t: TestKube;
  let dir: string;
  beforeAll(() => {
    t = fx.t;
    dir = mkdtempSync(join(tmpdir(), 'fencepost-sessions-'));
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  const execAs = (pod: { name: string; uid: string }, args: string[]): Promise<Run> =>
    new Promise((res) => {
      execFile(
        agentBinary(),
        ['exec', '--kubeconfig', sharedKubeconfigPath(), ...args],
        {
          env: { ...process.env, POD_NAME: pod.name, POD_NAMESPACE: t.namespace, POD_UID: pod.uid },
          timeout: 60_000,
        },
        (err, stdout, stderr) => {
          res({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : null, stdout, stderr });
        },
      );
    });
  const podRef = async (name: string, app: string) => {
    const p = await createPod(t, name, { app });
    return { name, uid: p.metadata?.uid ?? '' };
  };
  /** recorder: a shell command that records its token and start time, runs `seconds`, and records its end. */
  const recorder = (file: string, tag: string, seconds: number): string[] => [
    'sh',
    '-c',
    `echo "${tag} start $(date +%s%N) $FENCEPOST_TOKEN" >> ${file}; sleep ${seconds}; echo "${tag} end $(date +%s%N)" >> ${file}`,
  ];

  it(`two overlapping fencepost execs in one pod: the second does not run, and exits ${EXIT_NOT_ACQUIRED} naming the first`, async () => {
    const pod = await podRef('twice-0', 'twice');
    await createLock(t, lockBody('twice', 'twice', { leaseDurationSeconds: 6 }));
    const file = join(dir, 'twice.runs');
    const first = execAs(pod, ['--lock', 'twice', '--wait', '20s', '--', ...recorder(file, 'A', 4)]);
    await eventually(() => {
      expect(intervals(file).map((i) => i.tag)).toContain('A');
    }, 30_000);
    const second = await execAs(pod, ['--lock', 'twice', '--wait', '8s', '--', ...recorder(file, 'B', 1)]);
    const a = await first;
    const runs = intervals(file);
    // At most one command runs at a time: no two recorded intervals overlap.
    for (const x of runs)
      for (const y of runs)
        if (x !== y)
          expect(
            (x.end ?? Infinity) <= y.start || (y.end ?? Infinity) <= x.start,
            `${x.tag} [${x.start}, ${x.end}] token ${x.token} overlaps ${y.tag} [${y.start}, ${y.end}] token ${y.token}`,
          ).toBe(true);
    expect(a.code, a.stderr).toBe(0);
    expect(second.code, second.stderr).toBe(EXIT_NOT_ACQUIRED);
    expect(second.stderr).toMatch(/another session in this pod holds lock twice \(fencepost exec, pid \d+/);
    expect(runs.map((r) => r.tag)).toEqual(['A']);
  });

  it('Mutex: a second session in the pod is refused at once and does not withdraw the first session’s request', async () => {
    const holder = await podRef('mq-0', 'mq');
    const waiter = await podRef('mq-1', 'mq');
    await createLock(t, lockBody('mq', 'mq', { mode: 'Mutex', leaseDurationSeconds: 10 }));
    const held = await acquire('mq', { kubeconfig: kc, namespace: t.namespace, pod: holder, waitMs: 20_000 });
    const firstSession = acquire('mq', { kubeconfig: kc, namespace: t.namespace, pod: waiter, waitMs: 30_000 });
    firstSession.catch(() => undefined);
    const requestKey = podKeys('mq').request;
    const requestOf = async (): Promise<string | undefined> =>
      (await t.core.readNamespacedPod({ namespace: t.namespace, name: waiter.name })).metadata?.annotations?.[
        requestKey
      ];
    await eventually(async () => {
      expect(await requestOf()).toBeDefined();
    });
    // A second session of the same pod gives up (its wait is short) and withdraws on its way out.
    const started = performance.now();
    const second = acquire('mq', { kubeconfig: kc, namespace: t.namespace, pod: waiter, waitMs: 1500 });
    await expect(second).rejects.toBeInstanceOf(NotAcquiredError);
    const refusedAfterMs = performance.now() - started;
    // The first session's request is still there: the pod is next in line when the holder releases.
    expect(await requestOf(), 'the first session’s request annotation').toBeDefined();
    await expect(second).rejects.toBeInstanceOf(SessionInUseError);
    expect(refusedAfterMs).toBeLessThan(1500); // refused, not timed out
    await held.release();
    const lock = await firstSession;
    expect(parseLease((await getLease(t, 'mq')) ?? {}).holder?.name).toBe(waiter.name);
    await lock.release();
  });

  it('a sidecar agent and acquire() in the same pod: acquire() is refused while the agent runs, and succeeds after it stopped', async () => {
    const pod = await podRef('side-0', 'side');
    await createLock(t, lockBody('side', 'side', { leaseDurationSeconds: 4 }));
    const agent = await startAgent({
      lock: 'side',
      pod: pod.name,
      uid: pod.uid,
      namespace: t.namespace,
      kubeconfig: sharedKubeconfigPath(),
      logDir: dir,
    });
    try {
      await eventually(async () => {
        expect((await agent.snapshot()).held).toBe(true);
      }, 20_000);
      const refused = acquire('side', { kubeconfig: kc, namespace: t.namespace, pod, waitMs: 5000 });
      await expect(refused).rejects.toThrow(/another session in this pod holds lock side \(fencepost agent, pid \d+/);
      expect((await agent.snapshot()).held).toBe(true);
    } finally {
      await agent.process.stop();
    }
    // SIGTERM: the agent released the lock and its claim; the pod is granted again, to this session.
    await using lock = await acquire('side', { kubeconfig: kc, namespace: t.namespace, pod, waitMs: 20_000 });
    expect(lock.isHeld()).toBe(true);
  });

  it('a session that crashed leaves no claim behind', async () => {
    const pod = await podRef('crash-0', 'crash');
    await createLock(t, lockBody('crash', 'crash', { leaseDurationSeconds: 4 }));
    const agent = await startAgent({
      lock: 'crash',
      pod: pod.name,
      uid: pod.uid,
      namespace: t.namespace,
      kubeconfig: sharedKubeconfigPath(),
      logDir: dir,
    });
    await eventually(async () => {
      expect((await agent.snapshot()).held).toBe(true);
    }, 20_000);
    agent.process.signal('SIGKILL');
    await agent.process.exited;
    // The pod still holds the term on the Lease; the next session of the pod takes it up.
    await using lock = await acquire('crash', { kubeconfig: kc, namespace: t.namespace, pod, waitMs: 20_000 });
    expect(lock.isHeld()).toBe(true);
  });
});
