/**
 * The reconciler's Semaphore path on the real DistributedLockReconciler over an in-memory API
 * server (test/support/memory-cluster.ts): the anchor Lease, one Lease per permit, each grant
 * raising the anchor (the lock-wide high-water mark) before it writes the permit, FIFO waiters.
 */
import { describe, expect, it } from 'vitest';
import { DistributedLockReconciler } from '../../../src/controllers/distributedlock/reconciler.ts';
import { parseLease, releasedLease } from '../../../src/lease/record.ts';
import { silentLogger } from '../../../src/observability/logger.ts';
import { leaseName, LOCK_FINALIZER, permitLeaseName, podKeys } from '../../../src/protocol/names.ts';
import { aLock } from '../../support/builders.ts';
import { FakeClock } from '../../support/fake-clock.ts';
import { MemoryCluster, type Operation } from '../../support/memory-cluster.ts';

const LOCK = 'pool';
const keys = podKeys(LOCK);

function world(permits: number, pods: readonly string[]): MemoryCluster {
  const cluster = new MemoryCluster({ firstResourceVersion: 100 });
  const lock = aLock(LOCK);
  cluster.putLock({
    ...lock,
    spec: { ...lock.spec, mode: 'Semaphore', permits },
    metadata: { ...lock.metadata, resourceVersion: '1', finalizers: [LOCK_FINALIZER] },
    status: {},
  });
  pods.forEach((name, i) => {
    cluster.putPod({
      ref: { name, uid: `${name}-uid` },
      labels: { app: 'web' },
      createdAt: new Date(1_000 * (i + 1)),
      ready: true,
    });
    cluster.patchPodMetadata(
      { name, uid: `${name}-uid` },
      { annotations: { [keys.request]: '2026-01-01T00:00:00.000Z' } },
    );
  });
  return cluster;
}

function controller(
  cluster: MemoryCluster,
  clock = new FakeClock(),
): { steps: Operation[]; reconcile(): Promise<number | undefined> } {
  const steps: Operation[] = [];
  const reconciler = new DistributedLockReconciler(
    cluster.reconcilerDeps({
      gate: (step) => {
        steps.push(step.op);
        return Promise.resolve();
      },
      clock,
      log: silentLogger,
    }),
  );
  return {
    steps,
    reconcile: async () => {
      const logFields = {
        controller: 'distributedlock',
        controllerGroup: 'fencepost.io',
        controllerKind: 'DistributedLock',
        namespace: 'default',
        name: LOCK,
        reconcileID: 'r',
      };
      const r = await reconciler.reconcile(`default/${LOCK}`, {
        reconcileId: 'r',
        logFields,
        signal: new AbortController().signal,
      });
      return r.requeueAfterMs;
    },
  };
}

/** held: permit → "pod token" of every permit Lease, and the anchor's token. */
function held(cluster: MemoryCluster, permits: number): { permits: string[]; anchor: string } {
  const out: string[] = [];
  for (let i = 0; i < permits; i++) {
    const l = cluster.lease(permitLeaseName(LOCK, i));
    const r = l !== undefined ? parseLease(l) : undefined;
    out.push(r === undefined ? 'none' : r.holder !== undefined ? `${r.holder.name} ${String(r.token)}` : 'vacant');
  }
  const anchor = cluster.lease(leaseName(LOCK));
  return { permits: out, anchor: String(anchor !== undefined ? parseLease(anchor).token : 'none') };
}

describe('DistributedLockReconciler, Semaphore (real reconciler, in-memory API server)', () => {
  it('grants two permits to the first two waiters, each token raising the anchor first, and the third waits', async () => {
    const cluster = world(2, ['web-0', 'web-1', 'web-2']);
    const c = controller(cluster);
    await c.reconcile();
    const firstGrant = c.steps.indexOf('fencing.next');
    // Anchor created, recorded in status, then per permit: create, token, anchor CAS, permit CAS.
    expect(c.steps.slice(firstGrant, firstGrant + 3)).toEqual(['fencing.next', 'lease.replace', 'lease.replace']);
    // The counter's floor is the anchor's resourceVersion (101): tokens 102 and 103.
    expect(held(cluster, 2)).toEqual({ permits: ['web-0 102', 'web-1 103'], anchor: '103' });
    expect(cluster.pod('web-0')?.metadata?.annotations?.[keys.token]).toBe('102');
    expect(cluster.pod('web-0')?.metadata?.annotations?.[keys.lease]).toBe('dlock.pool.0');
    expect(cluster.pod('web-1')?.metadata?.labels?.[keys.holder]).toBe('true');
    expect(cluster.pod('web-2')?.metadata?.labels?.[keys.holder]).toBeUndefined();
    const status = cluster.lock(LOCK)?.status;
    expect(status).toMatchObject({ leaseName: 'dlock-pool', fencingToken: '103', queueLength: 1 });
    expect(status?.queue?.map((q) => q.pod)).toEqual(['web-2']);
    expect(status?.heldPermits).toBe(2);
    expect(status?.conditions?.map((x) => [x.type, x.status, x.reason])).toEqual([
      ['Degraded', 'False', 'AsExpected'],
      ['Held', 'True', 'Granted'],
      ['Ready', 'True', 'AsExpected'],
    ]);
    expect(status?.conditions?.find((x) => x.type === 'Held')?.message).toBe(
      '2 of 2 permits held, by pods web-0, web-1',
    );
    expect(status?.holders?.map((h) => [h.permit, h.name, h.token])).toEqual([
      [0, 'web-0', '102'],
      [1, 'web-1', '103'],
    ]);
  });

  it('a permit Lease deleted while held is created again as Lost, and granted only a lease duration later', async () => {
    const cluster = world(1, ['web-0', 'web-1']);
    const clock = new FakeClock();
    const c = controller(cluster, clock);
    await c.reconcile();
    expect(held(cluster, 1).permits).toEqual(['web-0 102']);
    cluster.deleteLease(permitLeaseName(LOCK, 0)); // web-0 may still believe: it cannot see this while cut off
    cluster.patchPodMetadata({ name: 'web-0', uid: 'web-0-uid' }, { annotations: { [keys.request]: null } });
    await c.reconcile();
    const recreated = cluster.lease(permitLeaseName(LOCK, 0));
    expect(recreated !== undefined ? parseLease(recreated).released : 'missing').toBe('Lost');
    expect(held(cluster, 1).permits).toEqual(['vacant']);
    clock.advance(5_000);
    await c.reconcile();
    expect(held(cluster, 1).permits).toEqual(['vacant']);
    clock.advance(5_100);
    await c.reconcile();
    expect(held(cluster, 1)).toEqual({ permits: ['web-1 103'], anchor: '103' });
  });

  it('grants a released permit to the third waiter with a token above every earlier one', async () => {
    const cluster = world(2, ['web-0', 'web-1', 'web-2']);
    const c = controller(cluster);
    await c.reconcile();
    const p0 = cluster.lease(permitLeaseName(LOCK, 0));
    if (p0 === undefined) throw new Error('permit 0 missing');
    cluster.replaceLease(permitLeaseName(LOCK, 0), releasedLease(p0, 'Released'));
    cluster.patchPodMetadata({ name: 'web-0', uid: 'web-0-uid' }, { annotations: { [keys.request]: null } });
    await c.reconcile();
    expect(held(cluster, 2)).toEqual({ permits: ['web-2 104', 'web-1 103'], anchor: '104' });
    expect(cluster.pod('web-0')?.metadata?.labels?.[keys.holder]).toBeUndefined();
    expect(cluster.lock(LOCK)?.status).toMatchObject({ fencingToken: '104', queueLength: 0 });
  });

  it('shrinking permits revokes nobody; the permit left by a holder is not granted while permits pods hold it', async () => {
    const cluster = world(3, ['web-0', 'web-1', 'web-2', 'web-3']);
    const c = controller(cluster);
    await c.reconcile();
    expect(held(cluster, 3).permits).toEqual(['web-0 102', 'web-1 103', 'web-2 104']);
    const lock = cluster.lock(LOCK);
    if (lock === undefined) throw new Error('lock missing');
    cluster.putLock({ ...lock, spec: { ...lock.spec, permits: 2 } });
    await c.reconcile();
    expect(held(cluster, 3).permits).toEqual(['web-0 102', 'web-1 103', 'web-2 104']);
    const p1 = cluster.lease(permitLeaseName(LOCK, 1));
    if (p1 === undefined) throw new Error('permit 1 missing');
    cluster.replaceLease(permitLeaseName(LOCK, 1), releasedLease(p1, 'Released'));
    await c.reconcile();
    // Two still hold (permits 0 and 2): web-3 waits.
    expect(held(cluster, 3).permits).toEqual(['web-0 102', 'vacant', 'web-2 104']);
    const p2 = cluster.lease(permitLeaseName(LOCK, 2));
    if (p2 === undefined) throw new Error('permit 2 missing');
    cluster.replaceLease(permitLeaseName(LOCK, 2), releasedLease(p2, 'Released'));
    await c.reconcile();
    // One holds: web-3 gets permit 1 (below permits), never permit 2, whose vacant Lease is deleted.
    expect(held(cluster, 3).permits).toEqual(['web-0 102', 'web-3 105', 'none']);
  });

  it('on deletion ends every held permit term, waits a lease duration for the holders, then deletes the Leases', async () => {
    const cluster = world(2, ['web-0', 'web-1']);
    const clock = new FakeClock();
    const c = controller(cluster, clock);
    await c.reconcile();
    const lock = cluster.lock(LOCK);
    if (lock === undefined) throw new Error('lock missing');
    cluster.putLock({ ...lock, metadata: { ...lock.metadata, deletionTimestamp: new Date() } });
    await c.reconcile();
    const ended = cluster.lease(permitLeaseName(LOCK, 0));
    expect(ended !== undefined ? parseLease(ended).released : 'gone').toBe('Lost');
    expect(cluster.lease(permitLeaseName(LOCK, 1))).toBeDefined();
    expect(cluster.lock(LOCK)?.metadata.finalizers).toEqual([LOCK_FINALIZER]);
    clock.advance(10_000 + 20);
    await c.reconcile();
    expect(cluster.lease(permitLeaseName(LOCK, 0))).toBeUndefined();
    expect(cluster.lease(permitLeaseName(LOCK, 1))).toBeUndefined();
    expect(cluster.lease(leaseName(LOCK))).toBeUndefined();
    expect(cluster.lock(LOCK)?.metadata.finalizers ?? []).toEqual([]);
  });
});
