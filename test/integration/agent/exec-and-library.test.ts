import { beforeAll, describe, expect, it } from 'vitest';
import { acquire, NotAcquiredError } from '../../../src/index.ts';
import { EXIT_LOST, EXIT_NOT_ACQUIRED, graceFor } from '../../../src/cli/exec.ts';
import { parseLease } from '../../../src/lease/record.ts';
import { useLockController } from '../../support/lock-controller.ts';
import { eventually, sharedKubeConfig } from '../../support/env.ts';
import { createLock, createPod, deleteLock, getLease, lockBody, type TestKube } from '../../support/fixtures.ts';
import { runExec, type ExecPod, type ExecRun } from '../../support/exec-runner.ts';

describe('the acquire() library and fencepost exec', () => {
  const kc = sharedKubeConfig();
  const fx = useLockController('exec-');
  let t: TestKube;
  beforeAll(() => {
    t = fx.t;
  });

  const execAs = (pod: ExecPod, args: string[]): Promise<ExecRun> =>
    runExec({ namespace: t.namespace, pod, args, timeoutMs: 60_000 });
  const podRef = async (name: string, app: string) => {
    const p = await createPod(t, name, { app });
    return { name, uid: p.metadata?.uid ?? '' };
  };

  it('acquire() returns the granted lock with the Lease token, and release() hands it back', async () => {
    const pod = await podRef('lib-0', 'lib');
    await createLock(t, lockBody('lib', 'lib', { leaseDurationSeconds: 3 }));
    {
      await using lock = await acquire('lib', { kubeconfig: kc, namespace: t.namespace, pod, waitMs: 20_000 });
      const lease = parseLease((await getLease(t, 'lib')) ?? {});
      expect(lock.token).toBe(lease.token);
      expect(lock.isHeld()).toBe(true);
      expect(lock.signal.aborted).toBe(false);
      expect(lock.timings).toEqual({ leaseDurationMs: 3000, renewDeadlineMs: 2000, renewPeriodMs: 1000 });
      await new Promise((r) => setTimeout(r, 4000)); // renews by itself past a lease duration
      expect(lock.isHeld()).toBe(true);
      expect(parseLease((await getLease(t, 'lib')) ?? {}).transitions).toBe(lease.transitions);
    } // await using → release
    const after = parseLease((await getLease(t, 'lib')) ?? {});
    expect(after.released === 'Released' || after.transitions > 1).toBe(true);
  });

  it('acquire() gives up with NotAcquiredError when another pod holds the lock', async () => {
    const holder = await podRef('busy-0', 'busy');
    await createLock(t, lockBody('busy', 'busy', { leaseDurationSeconds: 30 }));
    await using held = await acquire('busy', { kubeconfig: kc, namespace: t.namespace, pod: holder, waitMs: 20_000 });
    const late = await podRef('busy-1', 'busy');
    await expect(
      acquire('busy', { kubeconfig: kc, namespace: t.namespace, pod: late, waitMs: 1500 }),
    ).rejects.toBeInstanceOf(NotAcquiredError);
    expect(held.isHeld()).toBe(true);
  });

  it('exec runs the command with FENCEPOST_LOCK and FENCEPOST_TOKEN, exits with its status, and releases', async () => {
    const pod = await podRef('job-0', 'job');
    await createLock(t, lockBody('job', 'job', { leaseDurationSeconds: 30 }));
    const r = await execAs(pod, [
      '--lock',
      'job',
      '--wait',
      '20s',
      '--',
      process.execPath,
      '-e',
      'const e = process.env; process.stdout.write([e.FENCEPOST_LOCK, e.FENCEPOST_TOKEN, e.BUN_JSC_useJIT, e.FENCEPOST_AGENT_INTERPRETER_ONLY].join(" ")); process.exit(7)',
    ]);
    expect(r.code, r.stderr).toBe(7);
    const [lockName, printed, ...rest] = r.stdout.split(' ');
    expect(lockName).toBe('job');
    // The agent ran without its JIT (src/cli/interpreter-only.ts); the command gets the environment exec was given.
    expect(rest).toEqual(['', '']);
    // Released when the command exited; in Election mode the only candidate is then granted
    // again, with a new term and a larger token.
    const lease = parseLease((await getLease(t, 'job')) ?? {});
    expect(
      lease.released === 'Released' || (lease.transitions >= 2 && (lease.token ?? 0n) > BigInt(printed ?? '0')),
    ).toBe(true);
  });

  it(`exec exits ${EXIT_NOT_ACQUIRED} when the lock is not granted within --wait`, async () => {
    const holder = await podRef('cron-0', 'cron');
    await createLock(t, lockBody('cron', 'cron', { leaseDurationSeconds: 30 }));
    await using _held = await acquire('cron', { kubeconfig: kc, namespace: t.namespace, pod: holder, waitMs: 20_000 });
    const other = await podRef('cron-1', 'cron');
    const r = await execAs(other, ['--lock', 'cron', '--wait', '1s', '--', 'true']);
    expect(r.code).toBe(EXIT_NOT_ACQUIRED);
    expect(r.stderr).toContain('not granted within 1000 ms');
  });

  it(`exec stops the command and exits ${EXIT_LOST} when the lock is lost while it runs`, async () => {
    const pod = await podRef('lose-0', 'lose');
    await createLock(t, lockBody('lose', 'lose', { leaseDurationSeconds: 30 }));
    const running = execAs(pod, ['--lock', 'lose', '--wait', '20s', '--', 'sleep', '60']);
    // exec has confirmed the grant (and started the command) once its first renew moved renewTime past acquireTime.
    await eventually(async () => {
      const r = parseLease((await getLease(t, 'lose')) ?? {});
      expect(r.holder?.name).toBe('lose-0');
      expect(r.renewTime?.getTime()).toBeGreaterThan(r.acquireTime?.getTime() ?? Infinity);
    }, 20_000);
    await deleteLock(t, 'lose'); // the controller deletes the Lease: the holder has lost it
    const r = await running;
    expect(r.code, r.stderr).toBe(EXIT_LOST);
  });

  it('exec usage errors exit 2 and name the flag', async () => {
    const r = await execAs({ name: 'x', uid: 'y' }, ['--wait', 'soon', '--lock', 'l', '--', 'true']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--wait: invalid duration "soon"');
  });

  it('the kill grace never outlasts the window before the server could re-grant', () => {
    const t15 = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, renewPeriodMs: 5000 };
    expect(graceFor(t15, undefined)).toBe(2500);
    expect(graceFor(t15, 1000)).toBe(1000);
    expect(graceFor(t15, 60_000)).toBe(5000);
  });
});
