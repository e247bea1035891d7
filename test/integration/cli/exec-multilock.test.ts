/**
 * What exec does when the lock is already held (`--if-held`) and with several locks at once,
 * against the real API server, a real controller and the shipped `fencepost-agent exec`
 * executable:
 *
 * - `--if-held skip|fail|wait`: skip exits EXIT_SKIPPED without running the command and leaves no
 *   Mutex request on the pod — also when the lock was free when exec looked and was granted to
 *   another pod while exec waited (exec had made a request, and withdraws it); fail exits
 *   EXIT_NOT_ACQUIRED; wait queues and runs once the holder releases.
 * - several `--lock`: two execs taking {a, b} in opposite argument orders, three rounds at once,
 *   all complete (no deadlock) and never run at the same time; the command gets every token
 *   (FENCEPOST_TOKEN_<LOCK>, FENCEPOST_LOCKS, no FENCEPOST_TOKEN); losing one lock (its lock
 *   deleted, so the controller deletes its Lease) stops the command, exits EXIT_LOST and releases
 *   the other; the library's acquire(['b', 'a']) takes both in order, and when the second is not
 *   granted within waitMs, releases the first and leaves no request.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acquire, LockHeldError, NotAcquiredError } from '../../../src/index.ts';
import { EXIT_LOST, EXIT_NOT_ACQUIRED, EXIT_SKIPPED } from '../../../src/cli/exec.ts';
import type { LockController } from '../../../src/controllers/distributedlock/setup.ts';
import { parseLease } from '../../../src/lease/record.ts';
import { podKeys } from '../../../src/protocol/names.ts';
import { startTestController, useLockController } from '../../support/lock-controller.ts';
import { eventually, freshNamespace, sharedKubeConfig, sharedKubeconfigPath } from '../../support/env.ts';
import {
  createLock,
  createPod,
  deleteLock,
  getLease,
  getLock,
  lockBody,
  testKube,
  type TestKube,
} from '../../support/fixtures.ts';
import { runExec, type ExecPod, type ExecRun } from '../../support/exec-runner.ts';
import { kubeconfigVia, proxyTargetOf, startHttpFaultProxy } from '../../support/testbed/http-fault-proxy.ts';

/** execAs runs `fencepost exec` as `pod` in `t`'s namespace (the shipped binary). */
const execAs = (t: TestKube, pod: ExecPod, args: string[], o: { kubeconfig?: string } = {}): Promise<ExecRun> =>
  runExec({ namespace: t.namespace, pod, args, ...o });

const podRef = async (t: TestKube, name: string, app: string): Promise<ExecPod> => {
  const p = await createPod(t, name, { app });
  return { name, uid: p.metadata?.uid ?? '' };
};

/** requestOf is the pod's Mutex request annotation for `lock` (undefined: none). */
const requestOf = async (t: TestKube, pod: string, lock: string): Promise<string | undefined> =>
  (await t.core.readNamespacedPod({ name: pod, namespace: t.namespace })).metadata?.annotations?.[
    podKeys(lock).request
  ];

/** startRaceController starts the lock controller for `t`'s namespace late, in the middle of a race. */
const startRaceController = (t: TestKube): Promise<LockController> =>
  startTestController({ namespace: t.namespace, identity: 'skip-race-controller' });

const leaseOf = async (t: TestKube, lock: string) => parseLease((await getLease(t, lock)) ?? {});

describe('fencepost exec --if-held and several --lock', () => {
  const kc = sharedKubeConfig();
  const fx = useLockController('exec-multi-');
  let t: TestKube;
  let dir: string;
  beforeAll(() => {
    t = fx.t;
    dir = mkdtempSync(join(tmpdir(), 'fencepost-exec-multi-'));
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it(`--if-held skip exits ${EXIT_SKIPPED} at once without running the command, and leaves no request`, async () => {
    const holder = await podRef(t, 'skip-a', 'skip');
    const other = await podRef(t, 'skip-b', 'skip');
    await createLock(t, lockBody('skip', 'skip', { mode: 'Mutex', leaseDurationSeconds: 30 }));
    await using _held = await acquire('skip', { kubeconfig: kc, namespace: t.namespace, pod: holder, waitMs: 20_000 });
    const marker = join(dir, 'skip-ran');
    const started = performance.now();
    const r = await execAs(t, other, ['--lock', 'skip', '--if-held', 'skip', '--wait', '60s', '--', 'touch', marker]);
    expect(r.code, r.stderr).toBe(EXIT_SKIPPED);
    expect(r.stderr).toContain('skipped: acquire(skip): held by pod skip-a');
    // At once: not after --wait (a generous bound; the 60 s wait would be the failure).
    expect(performance.now() - started).toBeLessThan(30_000);
    expect(() => readFileSync(marker)).toThrow();
    expect(await requestOf(t, 'skip-b', 'skip')).toBeUndefined();
    expect((await getLock(t, 'skip')).status?.queue ?? []).toEqual([]);
  });

  it(`--if-held skip with a Semaphore: runs while a permit is free, exits ${EXIT_SKIPPED} once every permit is taken`, async () => {
    const pods = [];
    for (const n of ['sem-0', 'sem-1', 'sem-2']) pods.push(await podRef(t, n, 'sem'));
    const [p0, p1, p2] = pods as [ExecPod, ExecPod, ExecPod];
    await createLock(t, lockBody('sem', 'sem', { mode: 'Semaphore', permits: 2, leaseDurationSeconds: 30 }));
    await using _first = await acquire('sem', { kubeconfig: kc, namespace: t.namespace, pod: p1, waitMs: 30_000 });
    // One of two permits taken: the Semaphore is not held, the command runs.
    const ranFree = join(dir, 'sem-free-ran');
    const free = await execAs(t, p0, ['--lock', 'sem', '--if-held', 'skip', '--wait', '30s', '--', 'touch', ranFree]);
    expect(free.code, free.stderr).toBe(0);
    expect(existsSync(ranFree), 'the command did not run while a permit was free').toBe(true);
    // Both permits taken by other pods: held; skip at once, nothing run, no request left.
    await using _second = await acquire('sem', { kubeconfig: kc, namespace: t.namespace, pod: p2, waitMs: 30_000 });
    const ranFull = join(dir, 'sem-full-ran');
    const started = performance.now();
    const full = await execAs(t, p0, ['--lock', 'sem', '--if-held', 'skip', '--wait', '15s', '--', 'touch', ranFull]);
    process.stdout.write(
      `semaphore --if-held skip, all permits taken: exit ${String(full.code)} after ${Math.round(performance.now() - started)} ms; ${full.stderr.trim()}\n`,
    );
    expect(full.code, full.stderr).toBe(EXIT_SKIPPED);
    expect(full.stderr).toContain('all 2 permits');
    expect(existsSync(ranFull)).toBe(false);
    expect(performance.now() - started).toBeLessThan(14_000); // at once, not after --wait
    expect(await requestOf(t, 'sem-0', 'sem')).toBeUndefined();
  }, 90_000);

  it(`--if-held skip in Election mode: the elected pod holds the lock, another exits ${EXIT_SKIPPED}`, async () => {
    const elected = await podRef(t, 'elect-a', 'elect');
    const other = await podRef(t, 'elect-b', 'elect');
    await createLock(t, lockBody('elect', 'elect', { leaseDurationSeconds: 30 }));
    // The oldest Ready candidate is elected; its session confirms and renews the grant.
    await using _held = await acquire('elect', {
      kubeconfig: kc,
      namespace: t.namespace,
      pod: elected,
      waitMs: 20_000,
    });
    const marker = join(dir, 'elect-ran');
    const r = await execAs(t, other, ['--lock', 'elect', '--if-held', 'skip', '--', 'touch', marker]);
    expect(r.code, r.stderr).toBe(EXIT_SKIPPED);
    expect(r.stderr).toContain('skipped: acquire(elect): held by pod elect-a');
    expect(() => readFileSync(marker)).toThrow();
    expect(await requestOf(t, 'elect-b', 'elect')).toBeUndefined();
  });

  it(`--if-held fail exits ${EXIT_NOT_ACQUIRED} at once without running the command`, async () => {
    const holder = await podRef(t, 'fail-a', 'fail');
    const other = await podRef(t, 'fail-b', 'fail');
    await createLock(t, lockBody('fail', 'fail', { mode: 'Mutex', leaseDurationSeconds: 30 }));
    await using _held = await acquire('fail', { kubeconfig: kc, namespace: t.namespace, pod: holder, waitMs: 20_000 });
    const marker = join(dir, 'fail-ran');
    const r = await execAs(t, other, ['--lock', 'fail', '--if-held', 'fail', '--', 'touch', marker]);
    expect(r.code, r.stderr).toBe(EXIT_NOT_ACQUIRED);
    expect(r.stderr).toContain('acquire(fail): held by pod fail-a');
    expect(() => readFileSync(marker)).toThrow();
    expect(await requestOf(t, 'fail-b', 'fail')).toBeUndefined();
  });

  it('--if-held wait queues behind the holder and runs the command once it releases', async () => {
    const holder = await podRef(t, 'wait-a', 'wait');
    const other = await podRef(t, 'wait-b', 'wait');
    await createLock(t, lockBody('wait', 'wait', { mode: 'Mutex', leaseDurationSeconds: 30 }));
    const held = await acquire('wait', { kubeconfig: kc, namespace: t.namespace, pod: holder, waitMs: 20_000 });
    const running = execAs(t, other, [
      '--lock',
      'wait',
      '--if-held',
      'wait',
      '--wait',
      '60s',
      '--',
      'sh',
      '-c',
      'echo "$FENCEPOST_TOKEN"',
    ]);
    await eventually(async () => {
      expect(await requestOf(t, 'wait-b', 'wait')).toBeDefined();
    }, 30_000);
    await held.release();
    const r = await running;
    expect(r.code, r.stderr).toBe(0);
    expect(BigInt(r.stdout.trim())).toBeGreaterThan(held.token);
  });

  it('two execs taking {a, b} in opposite orders, three rounds at once, all complete and never overlap', async () => {
    const p = await podRef(t, 'dl-p', 'dl');
    const q = await podRef(t, 'dl-q', 'dl');
    await createLock(t, lockBody('dl-a', 'dl', { mode: 'Mutex', leaseDurationSeconds: 10 }));
    await createLock(t, lockBody('dl-b', 'dl', { mode: 'Mutex', leaseDurationSeconds: 10 }));
    const log = join(dir, 'dl.log');
    // Each run logs its start and end (ms) and both tokens; 300 ms of "work" in between.
    const script = `s=$(date +%s%3N); sleep 0.3; echo "$s $(date +%s%3N) $FENCEPOST_TOKEN_DL_A $FENCEPOST_TOKEN_DL_B" >> ${log}`;
    const round = (pod: ExecPod, order: string[]): Promise<ExecRun[]> =>
      (async () => {
        const runs: ExecRun[] = [];
        for (let i = 0; i < 3; i++)
          runs.push(
            await execAs(t, pod, [...order.flatMap((l) => ['--lock', l]), '--wait', '60s', '--', 'sh', '-c', script]),
          );
        return runs;
      })();
    const [pr, qr] = await Promise.all([round(p, ['dl-a', 'dl-b']), round(q, ['dl-b', 'dl-a'])]);
    for (const r of [...pr, ...qr]) expect(r.code, r.stderr).toBe(0);
    const lines = readFileSync(log, 'utf8')
      .trim()
      .split('\n')
      .map((l) => l.split(' '));
    expect(lines).toHaveLength(6);
    const spans = lines.map(([s, e]) => [Number(s), Number(e)] as const).sort((x, y) => x[0] - y[0]);
    for (let i = 1; i < spans.length; i++) expect(spans[i]?.[0]).toBeGreaterThanOrEqual(spans[i - 1]?.[1] ?? 0);
    // Every run had both tokens, and each lock's tokens only grew from run to run.
    for (const col of [2, 3]) {
      const tokens = lines.map((l) => BigInt(l[col] ?? 'x'));
      for (let i = 1; i < tokens.length; i++) expect(tokens[i]).toBeGreaterThan(tokens[i - 1] ?? 0n);
    }
  }, 180_000);

  it(`losing one of two locks stops the command, exits ${EXIT_LOST} and releases the other; the command had both tokens`, async () => {
    const pod = await podRef(t, 'two-0', 'two');
    await createLock(t, lockBody('two-a', 'two', { mode: 'Mutex', leaseDurationSeconds: 30 }));
    await createLock(t, lockBody('two-b', 'two', { mode: 'Mutex', leaseDurationSeconds: 30 }));
    const envFile = join(dir, 'two.env');
    const running = execAs(t, pod, [
      '--lock',
      'two-b',
      '--lock',
      'two-a',
      '--wait',
      '30s',
      '--',
      'sh',
      '-c',
      `echo "$FENCEPOST_LOCKS|$FENCEPOST_TOKEN_TWO_A|$FENCEPOST_TOKEN_TWO_B|\${FENCEPOST_TOKEN-unset}|\${FENCEPOST_LOCK-unset}" > ${envFile}; sleep 60`,
    ]);
    const printed = await eventually(() => readFileSync(envFile, 'utf8').trim().split('|'), 30_000);
    const a = await leaseOf(t, 'two-a');
    const b = await leaseOf(t, 'two-b');
    expect(a.holder?.name).toBe('two-0');
    expect(b.holder?.name).toBe('two-0');
    expect(printed).toEqual(['two-a two-b', String(a.token), String(b.token), 'unset', 'unset']);
    const started = performance.now();
    await deleteLock(t, 'two-b'); // the controller deletes its Lease: exec has lost two-b
    const r = await running;
    expect(r.code, r.stderr).toBe(EXIT_LOST);
    expect(performance.now() - started).toBeLessThan(40_000); // stopped, not run to its 60 s end
    const after = await leaseOf(t, 'two-a');
    expect(after.holder).toBeUndefined();
    expect(after.released).toBe('Released');
    expect(await requestOf(t, 'two-0', 'two-a')).toBeUndefined();
  }, 90_000);

  it(`a lock lost while waiting for the next: the command never starts, exit ${EXIT_NOT_ACQUIRED}, the rest released`, async () => {
    const pod = await podRef(t, 'gap-0', 'gap');
    const other = await podRef(t, 'gap-1', 'gap');
    await createLock(t, lockBody('gap-a', 'gap', { mode: 'Mutex', leaseDurationSeconds: 30 }));
    await createLock(t, lockBody('gap-b', 'gap', { mode: 'Mutex', leaseDurationSeconds: 30 }));
    // Another pod holds gap-b, so exec holds gap-a (first in the global order) and waits for gap-b.
    const blocker = await acquire('gap-b', { kubeconfig: kc, namespace: t.namespace, pod: other, waitMs: 30_000 });
    const ranFile = join(dir, 'gap.ran');
    const running = execAs(t, pod, [
      '--lock',
      'gap-a',
      '--lock',
      'gap-b',
      '--wait',
      '60s',
      '--log-level',
      'info',
      '--',
      'sh',
      '-c',
      `echo ran >> ${ranFile}`,
    ]);
    await eventually(async () => expect((await leaseOf(t, 'gap-a')).holder?.name).toBe('gap-0'), 30_000);
    await eventually(async () => expect(await requestOf(t, 'gap-0', 'gap-b')).toBeDefined(), 30_000);
    // gap-a is lost while exec waits for gap-b: deleting the lock, the controller revokes its Lease.
    await deleteLock(t, 'gap-a');
    await eventually(async () => expect((await leaseOf(t, 'gap-a')).holder).toBeUndefined(), 30_000);
    await new Promise((r) => setTimeout(r, 1000)); // exec's session has seen the Lease go
    await blocker.release();
    const r = await running;
    const ran = existsSync(ranFile);
    process.stdout.write(`lost-before-start: exec exit ${String(r.code)}, command ran: ${String(ran)}\n`);
    expect(ran, 'the command ran although gap-a was lost before it started').toBe(false);
    expect(r.code, r.stderr).toBe(EXIT_NOT_ACQUIRED);
    expect(r.stderr).toContain('gap-a');
    expect((await leaseOf(t, 'gap-b')).holder?.name).not.toBe('gap-0');
  }, 90_000);

  it('calibration: one lock at a time in opposite orders deadlocks; the same sets through acquire([...]) do not', async () => {
    const p = await podRef(t, 'cal-p', 'cal');
    const q = await podRef(t, 'cal-q', 'cal');
    // A 5 s lease: a freed Mutex lock has been seen to wait out a whole lease before its next
    // grant (a CI run here timed out the set's 30 s bound with 30 s leases; suspected: decide.ts
    // pickNext granting it back to the pod whose withdrawn request is still in the cache). This
    // test is about deadlock, not latency: keep such a stall well inside the set's bound.
    await createLock(t, lockBody('cal-a', 'cal', { mode: 'Mutex', leaseDurationSeconds: 5 }));
    await createLock(t, lockBody('cal-b', 'cal', { mode: 'Mutex', leaseDurationSeconds: 5 }));
    const base = { kubeconfig: kc, namespace: t.namespace };
    // Without an order: P takes a, Q takes b, then each waits for the other's: neither is granted.
    const pa = await acquire('cal-a', { ...base, pod: p, waitMs: 20_000 });
    const qb = await acquire('cal-b', { ...base, pod: q, waitMs: 20_000 });
    const [pb, qa] = await Promise.allSettled([
      acquire('cal-b', { ...base, pod: p, waitMs: 3000 }),
      acquire('cal-a', { ...base, pod: q, waitMs: 3000 }),
    ]);
    expect(pb.status === 'rejected' && pb.reason instanceof NotAcquiredError).toBe(true);
    expect(qa.status === 'rejected' && qa.reason instanceof NotAcquiredError).toBe(true);
    await pa.release();
    await qb.release();
    // The same two sets, named in opposite orders, through the set: both are granted, in turn.
    const take = async (pod: ExecPod, locks: string[]): Promise<bigint[]> => {
      const set = await acquire(locks, { ...base, pod, waitMs: 30_000 });
      const tokens = set.locks.map((l) => l.token);
      await new Promise((r) => setTimeout(r, 300));
      await set.release();
      return tokens;
    };
    const [pt, qt] = await Promise.all([take(p, ['cal-a', 'cal-b']), take(q, ['cal-b', 'cal-a'])]);
    expect(pt).toHaveLength(2);
    expect(qt).toHaveLength(2);
  }, 90_000);

  it("acquire(['b', 'a']) takes both in order with their Lease tokens, and release gives both up", async () => {
    const pod = await podRef(t, 'lib2-0', 'lib2');
    await createLock(t, lockBody('lib2-a', 'lib2', { mode: 'Mutex', leaseDurationSeconds: 30 }));
    await createLock(t, lockBody('lib2-b', 'lib2', { mode: 'Mutex', leaseDurationSeconds: 30 }));
    const set = await acquire(['lib2-b', 'lib2-a'], { kubeconfig: kc, namespace: t.namespace, pod, waitMs: 30_000 });
    expect(set.locks.map((l) => l.lock)).toEqual(['lib2-a', 'lib2-b']);
    expect(set.token('lib2-a')).toBe((await leaseOf(t, 'lib2-a')).token);
    expect(set.token('lib2-b')).toBe((await leaseOf(t, 'lib2-b')).token);
    expect(set.isHeld()).toBe(true);
    await set.release();
    expect(set.signal.aborted).toBe(true);
    for (const l of ['lib2-a', 'lib2-b']) expect((await leaseOf(t, l)).released).toBe('Released');
  });

  it("acquire(['a', 'b']): losing b aborts the set's signal; a stays held until the set is released", async () => {
    const pod = await podRef(t, 'lose2-0', 'lose2');
    await createLock(t, lockBody('lose2-a', 'lose2', { mode: 'Mutex', leaseDurationSeconds: 30 }));
    await createLock(t, lockBody('lose2-b', 'lose2', { mode: 'Mutex', leaseDurationSeconds: 30 }));
    const set = await acquire(['lose2-a', 'lose2-b'], { kubeconfig: kc, namespace: t.namespace, pod, waitMs: 30_000 });
    const aborted = new Promise<unknown>((r) => {
      set.signal.addEventListener('abort', () => r(set.signal.reason), { once: true });
    });
    await deleteLock(t, 'lose2-b'); // the controller deletes its Lease: the set has lost lose2-b
    expect(String(await aborted)).toContain('lock lose2-b lost');
    expect(set.isHeld()).toBe(false);
    expect(set.locks[0]?.isHeld()).toBe(true);
    expect((await leaseOf(t, 'lose2-a')).holder?.name).toBe('lose2-0');
    await set.release();
    expect((await leaseOf(t, 'lose2-a')).released).toBe('Released');
  });

  it("acquire(['a', 'b']) releases a when b is not granted within waitMs, and leaves no request", async () => {
    const holder = await podRef(t, 'part-h', 'part');
    const pod = await podRef(t, 'part-0', 'part');
    await createLock(t, lockBody('part-a', 'part', { mode: 'Mutex', leaseDurationSeconds: 30 }));
    await createLock(t, lockBody('part-b', 'part', { mode: 'Mutex', leaseDurationSeconds: 30 }));
    await using _held = await acquire('part-b', {
      kubeconfig: kc,
      namespace: t.namespace,
      pod: holder,
      waitMs: 20_000,
    });
    const err = await acquire(['part-b', 'part-a'], {
      kubeconfig: kc,
      namespace: t.namespace,
      pod,
      waitMs: 3000,
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NotAcquiredError);
    expect((err as Error).message).toBe(
      'acquire([part-b, part-a]): lock part-b not granted within 3000 ms (the bound of the whole set); released part-a',
    );
    const a = await leaseOf(t, 'part-a');
    expect(a.holder).toBeUndefined();
    expect(a.released).toBe('Released');
    for (const l of ['part-a', 'part-b']) expect(await requestOf(t, 'part-0', l)).toBeUndefined();
    // With ifHeld fail the same set gives up at once, naming the holder of part-b.
    const held = await acquire(['part-a', 'part-b'], {
      kubeconfig: kc,
      namespace: t.namespace,
      pod,
      ifHeld: 'fail',
    }).catch((e: unknown) => e);
    expect(held).toBeInstanceOf(LockHeldError);
    expect((held as LockHeldError).holder.name).toBe('part-h');
    expect((await leaseOf(t, 'part-a')).holder).toBeUndefined();
  });
});

describe('fencepost exec --if-held skip when the lock is granted to another pod while exec waits', () => {
  // Each test starts the controller only once both requests wait (and stops the previous test's).
  const kc = sharedKubeConfig();
  let t: TestKube;
  let controller: LockController | undefined;
  beforeAll(async () => {
    t = testKube(kc, await freshNamespace(kc, 'exec-skip-race-'));
  });
  afterAll(async () => {
    await controller?.stop();
  });

  it(`withdraws the request it made and exits ${EXIT_SKIPPED}`, async () => {
    // No controller yet: nobody is granted, the lock is free when exec looks, and both requests wait.
    const first = await podRef(t, 'race-a', 'race');
    const second = await podRef(t, 'race-b', 'race');
    await createLock(t, lockBody('race', 'race', { mode: 'Mutex', leaseDurationSeconds: 30 }));
    const firstHeld = acquire('race', { kubeconfig: kc, namespace: t.namespace, pod: first, waitMs: 60_000 });
    await eventually(async () => {
      expect(await requestOf(t, 'race-a', 'race')).toBeDefined();
    });
    const running = execAs(t, second, ['--lock', 'race', '--if-held', 'skip', '--wait', '60s', '--', 'true']);
    await eventually(async () => {
      expect(await requestOf(t, 'race-b', 'race')).toBeDefined(); // exec asked: it found the lock free
    }, 30_000);
    // The controller grants the first requester; exec sees the lock granted to another pod.
    controller = await startRaceController(t);
    const r = await running;
    expect(r.code, r.stderr).toBe(EXIT_SKIPPED);
    expect(r.stderr).toContain('skipped: acquire(race): held by pod race-a');
    expect(await requestOf(t, 'race-b', 'race')).toBeUndefined();
    const held = await firstHeld;
    expect(held.isHeld()).toBe(true);
    await held.release();
    // Nobody else asked: the released lock stays free, race-b is not granted it.
    await eventually(async () => {
      expect((await getLock(t, 'race')).status?.queue ?? []).toEqual([]);
    });
    const lease = await leaseOf(t, 'race');
    expect(lease.holder).toBeUndefined();
  }, 120_000);

  it('does not claim a skip when it cannot withdraw its request: exits 1, and says the request may be left', async () => {
    // The same race as above, with exec's pod PATCHes failing once it has asked (a fault proxy
    // between exec and the API server answers them 500): the withdrawal fails, and exec must not
    // report "skipped, nothing left behind".
    const first = await podRef(t, 'nowd-a', 'nowd');
    const second = await podRef(t, 'nowd-b', 'nowd');
    await controller?.stop();
    controller = undefined;
    await createLock(t, lockBody('nowd', 'nowd', { mode: 'Mutex', leaseDurationSeconds: 30 }));
    const proxy = await startHttpFaultProxy(proxyTargetOf(sharedKubeconfigPath()));
    const dir = mkdtempSync(join(tmpdir(), 'fencepost-exec-nowd-'));
    try {
      const viaProxy = join(dir, 'kubeconfig');
      writeFileSync(viaProxy, kubeconfigVia(sharedKubeconfigPath(), proxy.url));
      const firstHeld = acquire('nowd', { kubeconfig: kc, namespace: t.namespace, pod: first, waitMs: 60_000 });
      await eventually(async () => {
        expect(await requestOf(t, 'nowd-a', 'nowd')).toBeDefined();
      });
      const running = execAs(t, second, ['--lock', 'nowd', '--if-held', 'skip', '--wait', '60s', '--', 'true'], {
        kubeconfig: viaProxy,
      });
      await eventually(async () => {
        expect(await requestOf(t, 'nowd-b', 'nowd')).toBeDefined();
      }, 30_000);
      proxy.errors({ status: 500, match: (r) => r.method === 'PATCH' && r.path.endsWith('/pods/nowd-b') });
      controller = await startRaceController(t);
      const r = await running;
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toContain("acquire(nowd): held by pod nowd-a, but withdrawing this pod's request failed");
      expect(r.stderr).not.toContain('skipped');
      expect(proxy.counts.errors).toBeGreaterThan(0);
      // What exec said: its request is still there.
      expect(await requestOf(t, 'nowd-b', 'nowd')).toBeDefined();
      await (await firstHeld).release();
    } finally {
      await proxy.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
