import { beforeAll, describe, expect, it } from 'vitest';
import { acquire, type HeldLock } from '../../../src/index.ts';
import { parseLease } from '../../../src/lease/record.ts';
import { leaseName, permitLeaseName } from '../../../src/protocol/names.ts';
import { runExec } from '../../support/exec-runner.ts';
import { eventually, sharedKubeConfig } from '../../support/env.ts';
import { createLock, createPod, getLock, lockBody, type TestKube } from '../../support/fixtures.ts';
import { useLockController } from '../../support/lock-controller.ts';

// Semaphore mode: up to spec.permits pods hold the lock at once, each on its own permit Lease
// (dlock.<lock>.<permit>) with its own token; waiters are granted first come first served; tokens
// are strictly increasing across permits, and the anchor Lease (dlock-<lock>) carries the largest.
describe('the lock controller in Semaphore mode', () => {
  const kc = sharedKubeConfig();
  const fx = useLockController('semaphore-');
  let t: TestKube;
  beforeAll(() => {
    t = fx.t;
  });

  const pod = async (name: string, app: string) => ({
    name,
    uid: (await createPod(t, name, { app })).metadata?.uid ?? '',
  });
  const readLease = async (name: string) => {
    try {
      return parseLease(await t.leases.readNamespacedLease({ namespace: t.namespace, name }));
    } catch (err) {
      if ((err as { code?: number }).code === 404) return undefined;
      throw err;
    }
  };

  it('two of three hold at once, the third waits, and gets a released permit with a larger token', async () => {
    const pods = [await pod('s-0', 's'), await pod('s-1', 's'), await pod('s-2', 's')];
    await createLock(t, lockBody('pool', 's', { mode: 'Semaphore', permits: 2, leaseDurationSeconds: 10 }));
    const take = (i: number): Promise<HeldLock> => {
      const p = pods[i];
      if (p === undefined) throw new Error(`no pod ${i}`);
      return acquire('pool', { kubeconfig: kc, namespace: t.namespace, pod: p, waitMs: 30_000 });
    };
    const first = await take(0);
    const second = await take(1);
    expect(second.token).toBeGreaterThan(first.token);
    expect([first.permit, second.permit].sort()).toEqual([0, 1]); // lock.permit: the guard's fence key part
    const holders = await Promise.all([0, 1].map((i) => readLease(permitLeaseName('pool', i))));
    expect(holders.map((r) => r?.holder?.name).sort()).toEqual(['s-0', 's-1']);
    expect((await readLease(leaseName('pool')))?.holder).toBeUndefined(); // the anchor names nobody

    let thirdHeld = false;
    const third = take(2).then((l) => {
      thirdHeld = true;
      return l;
    });
    await eventually(async () => {
      const status = (await getLock(t, 'pool')).status;
      expect(status?.queueLength).toBe(1);
      expect(status?.heldPermits).toBe(2);
      expect(status?.holders?.map((h) => h.name).sort()).toEqual(['s-0', 's-1']);
    });
    await new Promise((r) => setTimeout(r, 1_000));
    expect(thirdHeld).toBe(false);

    await first.release();
    const granted = await third;
    expect(granted.token).toBeGreaterThan(second.token);
    expect(granted.permit).toBe(first.permit); // the permit the first holder released
    const after = await Promise.all([0, 1].map((i) => readLease(permitLeaseName('pool', i))));
    expect(after.map((r) => r?.holder?.name).sort()).toEqual(['s-1', 's-2']);
    expect((await readLease(leaseName('pool')))?.token).toBe(granted.token); // the lock-wide high-water mark
    await eventually(async () => {
      expect((await getLock(t, 'pool')).status).toMatchObject({
        fencingToken: granted.token.toString(),
        queueLength: 0,
      });
    });
    await second.release();
    await granted.release();
  });

  it('fencepost exec (the shipped agent): three runs on two permits, never more than two at once, tokens distinct', async () => {
    const pods = [await pod('x-0', 'x'), await pod('x-1', 'x'), await pod('x-2', 'x')];
    await createLock(t, lockBody('slots', 'x', { mode: 'Semaphore', permits: 2, leaseDurationSeconds: 10 }));
    const script =
      'const s=Date.now();setTimeout(()=>{const v=process.env;console.log(JSON.stringify({s,e:Date.now(),t:v.FENCEPOST_TOKEN,p:v.FENCEPOST_PERMIT,q:v.FENCEPOST_PERMIT_SLOTS}))},1500)';
    const run = (pod: { name: string; uid: string }) =>
      runExec({
        namespace: t.namespace,
        pod,
        args: ['--lock', 'slots', '--wait', '30s', '--', process.execPath, '-e', script],
        timeoutMs: 60_000,
      });
    const results = await Promise.all(pods.map(run));
    expect(results.map((r) => r.code)).toEqual([0, 0, 0]);
    const runs = results.map((r) => JSON.parse(r.stdout) as { s: number; e: number; t: string; p: string; q: string });
    const tokens = runs.map((r) => BigInt(r.t));
    expect(new Set(tokens).size).toBe(3);
    // Each run is told its permit (FENCEPOST_PERMIT, and FENCEPOST_PERMIT_<LOCK>): 0 or 1.
    for (const r of runs) {
      expect(['0', '1']).toContain(r.p);
      expect(r.q).toBe(r.p);
    }
    // Two runs at once hold different permits.
    for (const r of runs) for (const o of runs) if (o !== r && o.s <= r.s && o.e > r.s) expect(o.p).not.toBe(r.p);
    // At no start were two other runs still running.
    for (const r of runs) {
      const overlapping = runs.filter((o) => o !== r && o.s <= r.s && o.e > r.s);
      expect(overlapping.length).toBeLessThanOrEqual(1);
    }
  });
});
