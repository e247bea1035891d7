/**
 * A planned handover of a lock held by `fencepost exec` must stop exec's job before the successor
 * is granted. Real processes (the shipped exec binary, `sh` jobs), the real API server and the
 * lock controller in-process: exec on pod `<lock>-a` runs a job that ignores SIGTERM and appends
 * `A <wall ns>` to one log every 50 ms; a second exec on pod `<lock>-b` waits for the lock and
 * runs a job that appends `B <wall ns>` to the same log. The test asks the controller to hand the
 * lock over to `<lock>-b` (the lock's handover annotation, as `kubectl fencepost handover` does)
 * and checks, from the log both jobs write: the successor's first write comes after the old job's
 * last, and the successor's grant (the Lease's acquireTime) after it too.
 *
 * Variants: a drain period of 5 s; a drain period of 0 (the agent would release at once: exec must
 * hold the handover until its job is dead); exec holding two locks, one of them handed over (the
 * job stops, then both are released).
 *
 * Every process is one the test started (the execs) or a job whose shell recorded its PID (its
 * process group's id, exec starts it with setsid) and whose command line carries MARKER; the test
 * signals only those.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acquire, HandingOverError } from '../../../src/index.ts';
import { EXIT_LOST } from '../../../src/cli/exec.ts';
import { parseLease } from '../../../src/lease/record.ts';
import { agentBinary } from '../../support/agent-binary.ts';
import { eventually, sharedKubeconfigPath } from '../../support/env.ts';
import { askHandover, createLock, createPod, getLease, lockBody, type TestKube } from '../../support/fixtures.ts';
import { useLockController } from '../../support/lock-controller.ts';
import { spawnManaged, type ManagedProcess } from '../../support/testbed/processes.ts';

const MARKER = 'fencepost-exec-handover-test';
const LEASE_SECONDS = 6; // renew deadline 4 s: exec's default grace would be 1 s; the test passes --grace 1s

/** killGroup SIGKILLs the process group a job's shell recorded, only if that shell still carries MARKER. */
function killGroup(pidFile: string): void {
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, 'utf8').trim());
  if (!(pid > 0)) return;
  try {
    if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(MARKER)) process.kill(-pid, 'SIGKILL');
  } catch {
    /* gone */
  }
}

/** Writes is the shared log, split by writer: wall-clock ms of each line. */
interface Writes {
  readonly a: number[];
  readonly b: number[];
}

function readWrites(file: string): Writes {
  const a: number[] = [];
  const b: number[] = [];
  for (const line of existsSync(file) ? readFileSync(file, 'utf8').split('\n') : []) {
    const [who, ns] = line.split(' ');
    if (ns === undefined || !/^\d+$/.test(ns)) continue;
    const ms = Number(BigInt(ns) / 1000n) / 1000;
    (who === 'A' ? a : b).push(ms);
  }
  return { a, b };
}

describe('fencepost exec under a planned handover', () => {
  const fx = useLockController('exec-handover-');
  let t: TestKube;
  let dir: string;
  const procs: ManagedProcess[] = [];
  const groups: string[] = [];
  beforeAll(() => {
    t = fx.t;
    dir = mkdtempSync(join(tmpdir(), 'fencepost-exec-handover-'));
  });
  afterAll(async () => {
    for (const g of groups) killGroup(g);
    await Promise.all(procs.map((p) => p.stop(3000)));
    rmSync(dir, { recursive: true, force: true });
  });

  /** startExec runs exec as `pod` on `locks`; its job appends `who <ns>` to `log` every 50 ms. */
  const startExec = async (o: {
    pod: string;
    app: string;
    locks: readonly string[];
    who: 'A' | 'B';
    log: string;
    ignoreTerm: boolean;
  }) => {
    const p = await createPod(t, o.pod, { app: o.app });
    const pidFile = join(dir, `${o.pod}.pid`);
    groups.push(pidFile);
    const job = `: ${MARKER}; ${o.ignoreTerm ? "trap '' TERM;" : ''} echo $$ > ${pidFile}; i=0; while [ $i -lt 2000 ]; do echo ${o.who} $(date +%s%N) >> ${o.log}; sleep 0.05; i=$((i+1)); done`;
    const exec = spawnManaged(`exec-${o.pod}`, agentBinary(), {
      args: [
        'exec',
        '--kubeconfig',
        sharedKubeconfigPath(),
        '--log-level',
        'info',
        '--grace',
        '1s',
        '--wait',
        '60s',
        ...o.locks.flatMap((l) => ['--lock', l]),
        '--',
        'sh',
        '-c',
        job,
      ],
      logFile: join(dir, `${o.pod}-exec.log`),
      env: { ...process.env, POD_NAME: o.pod, POD_NAMESPACE: t.namespace, POD_UID: p.metadata?.uid ?? '' },
    });
    procs.push(exec);
    return { exec, pidFile };
  };

  /**
   * runHandover: exec A holds `locks`, exec B waits for `handed` alone; the handover of `handed`
   * to B's pod with `drainSeconds`; resolves with the figures once B's job has written.
   */
  const runHandover = async (name: string, o: { locks: string[]; handed: string; drainSeconds: number }) => {
    const log = join(dir, `${name}.log`);
    for (const l of o.locks) await createLock(t, lockBody(l, name, { leaseDurationSeconds: LEASE_SECONDS }));
    const a = await startExec({ pod: `${name}-a`, app: name, locks: o.locks, who: 'A', log, ignoreTerm: true });
    const tokenA = await eventually(async () => {
      expect(readWrites(log).a.length).toBeGreaterThan(2);
      const lease = parseLease((await getLease(t, o.handed)) ?? {});
      expect(lease.holder?.name).toBe(`${name}-a`);
      return lease.token ?? 0n;
    }, 30_000);
    const b = await startExec({ pod: `${name}-b`, app: name, locks: [o.handed], who: 'B', log, ignoreTerm: false });
    await new Promise((r) => setTimeout(r, 1000)); // B's exec is up and waiting for its grant
    expect(readWrites(log).b).toEqual([]);
    const askedAt = Date.now();
    await askHandover(t, o.handed, `${name}-b`, tokenA, { drainSeconds: o.drainSeconds, by: 'exec-handover.test.ts' });
    await eventually(() => expect(readWrites(log).b.length).toBeGreaterThan(2), 30_000);
    const aExit = await Promise.race([a.exec.exited, new Promise<string>((r) => setTimeout(() => r('none'), 10_000))]);
    await new Promise((r) => setTimeout(r, 500)); // an old job still alive would write again by then
    const w = readWrites(log);
    const lease = parseLease((await getLease(t, o.handed)) ?? {});
    const grantedAt = lease.acquireTime?.getTime() ?? 0;
    const lastA = Math.max(...w.a);
    const firstB = Math.min(...w.b);
    const others = [];
    for (const l of o.locks.filter((x) => x !== o.handed)) others.push(parseLease((await getLease(t, l)) ?? {}));
    process.stdout.write(
      `exec handover (${name}, drain ${o.drainSeconds}s, locks ${o.locks.join('+')}): asked at ${new Date(askedAt).toISOString()}; ` +
        `old job's last write ${new Date(lastA).toISOString()} (asked+${(lastA - askedAt).toFixed(1)} ms); ` +
        `successor granted ${lease.acquireTime?.toISOString() ?? '?'}; ` +
        `successor's first write ${new Date(firstB).toISOString()} (asked+${(firstB - askedAt).toFixed(1)} ms); ` +
        `first B − last A = ${(firstB - lastA).toFixed(1)} ms; grant − last A = ${(grantedAt - lastA).toFixed(1)} ms; ` +
        `old exec exit ${String(aExit)}\n`,
    );
    // exec's own account (its log's wall-clock times): the drain seen, the group gone, the release.
    for (const line of readFileSync(a.exec.logFile, 'utf8').split('\n')) {
      if (!/Draining|Handing lock over|Command stopped|Released|Lost lock/.test(line)) continue;
      try {
        const o = JSON.parse(line) as { ts?: string; msg?: string; lock?: string };
        process.stdout.write(`  old exec ${o.ts ?? '?'} ${o.lock ?? ''} ${o.msg ?? ''}\n`);
      } catch {
        /* not a log line */
      }
    }
    await b.exec.stop(3000);
    return { w, lastA, firstB, grantedAt, lease, aExit, others, tokenA };
  };

  it('drain 5 s: the old job (ignoring SIGTERM) is gone before the successor is granted and writes', async () => {
    const r = await runHandover('hd', { locks: ['hd'], handed: 'hd', drainSeconds: 5 });
    expect(r.lease.holder?.name).toBe('hd-b');
    expect(r.lease.token).toBeGreaterThan(r.tokenA);
    expect(r.firstB, "the successor's first write came before the old job's last").toBeGreaterThan(r.lastA);
    expect(r.grantedAt, "the successor was granted before the old job's last write").toBeGreaterThan(r.lastA);
    expect(r.aExit).toBe(EXIT_LOST);
  }, 90_000);

  it('drain 0: exec holds the handover until its job is dead', async () => {
    const r = await runHandover('hz', { locks: ['hz'], handed: 'hz', drainSeconds: 0 });
    expect(r.lease.holder?.name).toBe('hz-b');
    expect(r.firstB, "the successor's first write came before the old job's last").toBeGreaterThan(r.lastA);
    expect(r.grantedAt, "the successor was granted before the old job's last write").toBeGreaterThan(r.lastA);
    expect(r.aExit).toBe(EXIT_LOST);
  }, 90_000);

  it('two locks, one handed over: the job stops, then both locks are released', async () => {
    const r = await runHandover('hm', { locks: ['hm-1', 'hm-2'], handed: 'hm-1', drainSeconds: 5 });
    expect(r.lease.holder?.name).toBe('hm-b');
    expect(r.firstB, "the successor's first write came before the old job's last").toBeGreaterThan(r.lastA);
    expect(r.grantedAt, "the successor was granted before the old job's last write").toBeGreaterThan(r.lastA);
    expect(r.aExit).toBe(EXIT_LOST);
    // The other lock is released too (Election mode: its only other candidate may hold it by now).
    for (const other of r.others) expect(other.holder?.name).not.toBe('hm-a');
  }, 90_000);
});

describe('acquire() under a planned handover', () => {
  const fx = useLockController('acquire-handover-');
  let t: TestKube;
  beforeAll(() => {
    t = fx.t;
  });

  it('aborts the signal when the drain starts (a HandingOverError, the lock still held); drained() hands it over', async () => {
    const a = await createPod(t, 'ah-a', { app: 'ah' });
    const b = await createPod(t, 'ah-b', { app: 'ah' });
    await createLock(t, lockBody('ah', 'ah', { leaseDurationSeconds: LEASE_SECONDS }));
    const kc = sharedKubeconfigPath();
    await using held = await acquire('ah', {
      kubeconfig: kc,
      namespace: t.namespace,
      pod: { name: 'ah-a', uid: a.metadata?.uid ?? '' },
      waitMs: 30_000,
    });
    const successor = acquire('ah', {
      kubeconfig: kc,
      namespace: t.namespace,
      pod: { name: 'ah-b', uid: b.metadata?.uid ?? '' },
      waitMs: 60_000,
    });
    await askHandover(t, 'ah', 'ah-b', held.token, { drainSeconds: 30, by: 'exec-handover.test.ts' });
    await eventually(() => expect(held.signal.aborted, 'the signal did not abort when the drain started').toBe(true));
    expect(held.signal.reason).toBeInstanceOf(HandingOverError);
    expect((held.signal.reason as HandingOverError).to).toBe('ah-b');
    expect(held.isHeld(), 'the lock is still held while it drains').toBe(true);
    expect(held.draining()?.to).toBe('ah-b');
    expect(parseLease((await getLease(t, 'ah')) ?? {}).holder?.name).toBe('ah-a');
    expect(await held.drained()).toBe(true);
    expect(held.isHeld()).toBe(false);
    await using next = await successor;
    expect(next.token).toBeGreaterThan(held.token);
    expect(await next.drained(), 'no handover of the new term').toBe(false);
  }, 90_000);
});
