import { execFile } from 'node:child_process';
import { beforeAll, describe, expect, it } from 'vitest';
import { acquire, type HeldLock } from '../../../src/index.ts';
import { EXIT_ALREADY_DONE } from '../../../src/cli/exec.ts';
import { parseLease } from '../../../src/lease/record.ts';
import { useLockController } from '../../support/lock-controller.ts';
import { eventually, sharedKubeConfig, sharedKubeconfigPath } from '../../support/env.ts';
import { createLock, createPod, getLease, getLock, lockBody, type TestKube } from '../../support/fixtures.ts';
import { agentBinary } from '../../support/agent-binary.ts';

// Mutex mode: nobody holds the lock until a candidate asks (its request annotation); requests are
// granted first come, first served; a release hands over to the next in line at once.
describe('the lock controller in Mutex mode', () => {
  const kc = sharedKubeConfig();
  const fx = useLockController('mutex-');
  let t: TestKube;
  beforeAll(() => {
    t = fx.t;
  });

  const pod = async (name: string, app: string) => ({
    name,
    uid: (await createPod(t, name, { app })).metadata?.uid ?? '',
  });

  it('grants nobody until asked, then grants in the order of asking, each release handing over to the next', async () => {
    const pods = [await pod('q-0', 'q'), await pod('q-1', 'q'), await pod('q-2', 'q')];
    await createLock(t, lockBody('q', 'q', { mode: 'Mutex', leaseDurationSeconds: 10 }));
    await new Promise((r) => setTimeout(r, 1500));
    expect(parseLease((await getLease(t, 'q')) ?? {}).holder).toBeUndefined();
    await eventually(async () => {
      expect((await getLock(t, 'q')).status?.conditions?.find((c) => c.type === 'Held')?.status).toBe('False');
    });

    // Ask in the order q-2, q-0, q-1 (not the pods' age order).
    const order = [pods[2], pods[0], pods[1]];
    const granted: { name: string; token: bigint }[] = [];
    const attempts: Promise<HeldLock>[] = [];
    for (const p of order) {
      if (p === undefined) continue;
      attempts.push(acquire('q', { kubeconfig: kc, namespace: t.namespace, pod: p, waitMs: 30_000 }));
      await new Promise((r) => setTimeout(r, 400)); // distinct request times
    }
    await eventually(async () => {
      expect((await getLock(t, 'q')).status?.queueLength).toBe(2);
    });
    for (const attempt of attempts) {
      const lock = await attempt;
      granted.push({ name: parseLease((await getLease(t, 'q')) ?? {}).holder?.name ?? '', token: lock.token });
      await lock.release();
    }
    expect(granted.map((g) => g.name)).toEqual(['q-2', 'q-0', 'q-1']);
    for (let i = 1; i < granted.length; i++) expect(granted[i]?.token).toBeGreaterThan(granted[i - 1]?.token ?? 0n);
  });

  it('runs a run id once: the second exec with the same --run-id exits without running', async () => {
    const a = await pod('cron-a', 'cron');
    const b = await pod('cron-b', 'cron');
    await createLock(t, lockBody('cron', 'cron', { mode: 'Mutex', leaseDurationSeconds: 10 }));
    const run = (p: { name: string; uid: string }) =>
      new Promise<{ code: number; stdout: string }>((res) => {
        execFile(
          agentBinary(),
          [
            'exec',
            '--lock',
            'cron',
            '--run-id',
            'slot-2026-12-02T10:00',
            '--wait',
            '20s',
            '--kubeconfig',
            sharedKubeconfigPath(),
            '--',
            'echo',
            `ran on ${p.name}`,
          ],
          {
            env: { ...process.env, POD_NAME: p.name, POD_NAMESPACE: t.namespace, POD_UID: p.uid },
            timeout: 60_000,
          },
          (err, stdout) => {
            res({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, stdout });
          },
        );
      });
    const first = await run(a);
    expect(first).toEqual({ code: 0, stdout: 'ran on cron-a\n' });
    await eventually(async () => {
      expect((await getLock(t, 'cron')).status?.completedRuns).toEqual([
        expect.objectContaining({ runId: 'slot-2026-12-02T10:00', holder: 'cron-a' }),
      ]);
    });
    const second = await run(b);
    expect(second.code).toBe(EXIT_ALREADY_DONE);
    expect(second.stdout).toBe('');
  });

  it('two workers racing one run id: exactly one runs it, the other reports it already done', async () => {
    const a = await pod('race-a', 'race');
    const b = await pod('race-b', 'race');
    await createLock(t, lockBody('race', 'race', { mode: 'Mutex', leaseDurationSeconds: 10 }));
    const run = (p: { name: string; uid: string }) =>
      new Promise<{ code: number; stdout: string }>((res) => {
        execFile(
          agentBinary(),
          [
            'exec',
            '--lock',
            'race',
            '--run-id',
            'nightly-2026-12-02',
            '--wait',
            '30s',
            '--kubeconfig',
            sharedKubeconfigPath(),
            '--',
            process.execPath,
            '-e',
            `setTimeout(() => console.log('ran on ${p.name}'), 300)`,
          ],
          {
            env: { ...process.env, POD_NAME: p.name, POD_NAMESPACE: t.namespace, POD_UID: p.uid },
            timeout: 60_000,
          },
          (err, stdout) => {
            res({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, stdout });
          },
        );
      });
    const results = await Promise.all([run(a), run(b)]);
    const ran = results.filter((r) => r.code === 0);
    const skipped = results.filter((r) => r.code === EXIT_ALREADY_DONE);
    expect(ran).toHaveLength(1);
    expect(skipped).toHaveLength(1);
    expect(ran[0]?.stdout).toMatch(/^ran on race-[ab]\n$/);
    expect(skipped[0]?.stdout).toBe('');
  });

  it('5 contenders, 50 acquisitions: first come first served, never two holders at once, tokens strictly increasing', async () => {
    const contenders = await Promise.all([0, 1, 2, 3, 4].map((i) => pod(`m-${i}`, 'm')));
    await createLock(t, lockBody('m', 'm', { mode: 'Mutex', leaseDurationSeconds: 10 }));
    interface Term {
      pod: string;
      token: bigint;
      askedAt: number;
      heldAt: number;
      releasedAt: number;
    }
    const terms: Term[] = [];
    const worker = async (p: { name: string; uid: string }): Promise<void> => {
      for (let i = 0; i < 10; i++) {
        const askedAt = performance.now();
        const lock = await acquire('m', { kubeconfig: kc, namespace: t.namespace, pod: p, waitMs: 60_000 });
        const heldAt = performance.now();
        await new Promise((r) => setTimeout(r, 20)); // the critical section
        const releasedAt = performance.now();
        terms.push({ pod: p.name, token: lock.token, askedAt, heldAt, releasedAt });
        await lock.release();
      }
    };
    await Promise.all(contenders.map((p) => worker(p)));
    expect(terms).toHaveLength(50);
    const byGrant = [...terms].sort((x, y) => x.heldAt - y.heldAt);
    for (let i = 1; i < byGrant.length; i++) {
      const prev = byGrant[i - 1];
      const cur = byGrant[i];
      if (prev === undefined || cur === undefined) continue;
      expect(cur.token).toBeGreaterThan(prev.token); // strictly increasing, in grant order
      expect(cur.heldAt).toBeGreaterThanOrEqual(prev.releasedAt); // never two holders at once
    }
    // FIFO: of two requests that were both waiting, the one asked clearly earlier (by > 100 ms,
    // to stay clear of the request-time resolution) was granted first.
    for (const x of terms) {
      for (const y of terms) {
        if (x.askedAt + 100 < y.askedAt && y.askedAt < x.heldAt) expect(x.heldAt).toBeLessThan(y.heldAt);
      }
    }
  }, 180_000);
});
