/**
 * The reconciler's crash-safe grant order, on the real DistributedLockReconciler over an in-memory
 * API server (test/support/memory-cluster.ts): (1) a token from the fencing backend, (2) the Lease
 * compare-and-swap, (3) the holder pod's label and annotations, (4) status. For a crash after each
 * step: what is left behind is safe (no pod marked with a token the Lease does not hold, no
 * status naming a holder the Lease does not), and a restarted controller finishes the grant.
 */
import { describe, expect, it } from 'vitest';
import { DistributedLockReconciler } from '../../../src/controllers/distributedlock/reconciler.ts';
import { parseLease } from '../../../src/lease/record.ts';
import { silentLogger } from '../../../src/observability/logger.ts';
import { leaseName, LOCK_FINALIZER, podKeys } from '../../../src/protocol/names.ts';
import { aLock } from '../../support/builders.ts';
import { FakeClock } from '../../support/fake-clock.ts';
import { MemoryCluster, type Operation, type Step } from '../../support/memory-cluster.ts';

const LOCK = 'db';
const KEY = `default/${LOCK}`;
const keys = podKeys(LOCK);

/** world: a lock (finalizer in place), its never-granted Lease at resourceVersion 101, one Ready candidate pod. */
function world(): MemoryCluster {
  const cluster = new MemoryCluster({ firstResourceVersion: 100 });
  const lock = aLock(LOCK);
  cluster.putLock({
    ...lock,
    metadata: { ...lock.metadata, resourceVersion: '1', finalizers: [LOCK_FINALIZER] },
  });
  cluster.emptyLockLease(LOCK);
  cluster.putPod({
    ref: { name: 'web-0', uid: 'uid-0' },
    labels: { app: 'web' },
    createdAt: new Date(1_000),
    ready: true,
  });
  return cluster;
}

/** Run is one controller process: a reconciler whose gate records each step and can crash. */
interface Run {
  readonly steps: Operation[];
  reconcile(): Promise<void>;
  /** remembered: how many locks the reconciler keeps a memory record of. */
  remembered(): number;
}

function controller(
  cluster: MemoryCluster,
  crashAfter?: Operation,
  abortAt?: Operation,
  clock: FakeClock = new FakeClock(),
): Run {
  const steps: Operation[] = [];
  const abort = new AbortController();
  let crashed = false;
  const gate = (step: Step): Promise<void> => {
    if (crashed) return Promise.reject(new Error(`crashed before ${step.op}`));
    if (step.op === abortAt) abort.abort(new Error('shutdown'));
    steps.push(step.op);
    if (step.op === crashAfter) crashed = true; // this step takes effect; the next one never does
    return Promise.resolve();
  };
  const reconciler = new DistributedLockReconciler(cluster.reconcilerDeps({ gate, clock, log: silentLogger }));
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
      await reconciler.reconcile(KEY, { reconcileId: 'r', logFields, signal: abort.signal });
    },
    remembered: () => reconciler.rememberedLocks,
  };
}

/** rootCause: the innermost `cause` of an error (a failed pod patch wraps the crash). */
function rootCause(err: unknown): unknown {
  let e = err;
  while (e instanceof Error && e.cause !== undefined) e = e.cause;
  return e;
}

/** leftBehind is what a crash leaves: the Lease's holder and token, the pod's marks, the status's holder. */
function leftBehind(cluster: MemoryCluster): {
  lease: string;
  pod: string;
  status: string;
} {
  const lease = cluster.lease(leaseName(LOCK));
  const record = lease !== undefined ? parseLease(lease) : undefined;
  const pod = cluster.pod('web-0')?.metadata;
  const status = cluster.lock(LOCK)?.status;
  return {
    lease: record?.holder !== undefined ? `${record.holder.name} ${String(record.token)}` : 'vacant',
    pod: pod?.labels?.[keys.holder] !== undefined ? `marked ${pod.annotations?.[keys.token] ?? '?'}` : 'unmarked',
    status: status?.holder !== undefined ? `${status.holder.name} ${status.fencingToken ?? '?'}` : 'no holder',
  };
}

describe('DistributedLockReconciler grant order (real reconciler, in-memory API server)', () => {
  it('grants in the order token → Lease CAS → mark the holder pod → status, reading nothing but the caches', async () => {
    const cluster = world();
    const c = controller(cluster);
    await c.reconcile();
    // No GET: the grant is decided from the cache (the CAS on its resourceVersion guards against a
    // stale one), and after the CAS the loop goes on from the server's answer.
    expect(c.steps).toEqual(['fencing.next', 'lease.replace', 'pod.patch', 'status.patch']);
    // The first token is above the floor: the never-granted Lease's resourceVersion (101).
    expect(leftBehind(cluster)).toEqual({ lease: 'web-0 102', pod: 'marked 102', status: 'web-0 102' });
  });

  // A crash after each step: what is left, and what a restarted controller makes of it.
  const rows: readonly {
    after: Operation;
    left: ReturnType<typeof leftBehind>;
    restartedSteps: Operation[];
    finished: ReturnType<typeof leftBehind>;
  }[] = [
    {
      // The token is burnt (a gap: 102 is never used); nothing else changed, so a restart grants anew.
      after: 'fencing.next',
      left: { lease: 'vacant', pod: 'unmarked', status: 'no holder' },
      restartedSteps: ['fencing.next', 'lease.replace', 'pod.patch', 'status.patch'],
      finished: { lease: 'web-0 103', pod: 'marked 103', status: 'web-0 103' },
    },
    {
      // The grant is committed; the pod and the status lag and are caught up without a new token.
      after: 'lease.replace',
      left: { lease: 'web-0 102', pod: 'unmarked', status: 'no holder' },
      restartedSteps: ['pod.patch', 'status.patch'],
      finished: { lease: 'web-0 102', pod: 'marked 102', status: 'web-0 102' },
    },
    {
      after: 'pod.patch',
      left: { lease: 'web-0 102', pod: 'marked 102', status: 'no holder' },
      restartedSteps: ['status.patch'],
      finished: { lease: 'web-0 102', pod: 'marked 102', status: 'web-0 102' },
    },
    {
      // The last step: the reconcile is over, and the restarted controller writes nothing at all.
      after: 'status.patch',
      left: { lease: 'web-0 102', pod: 'marked 102', status: 'web-0 102' },
      restartedSteps: [],
      finished: { lease: 'web-0 102', pod: 'marked 102', status: 'web-0 102' },
    },
  ];
  for (const row of rows) {
    it(`a crash after ${row.after} leaves ${JSON.stringify(row.left)}; a restarted controller finishes the grant`, async () => {
      const cluster = world();
      const crashing = controller(cluster, row.after).reconcile();
      if (row.after === 'status.patch') await crashing;
      else
        await expect(
          crashing.then(
            () => 'resolved',
            (err: unknown) => String(rootCause(err)),
          ),
        ).resolves.toMatch(/crashed before/);
      expect(leftBehind(cluster)).toEqual(row.left);
      const restarted = controller(cluster);
      await restarted.reconcile();
      expect(restarted.steps).toEqual(row.restartedSteps);
      expect(leftBehind(cluster)).toEqual(row.finished);
    });
  }

  it('a Lease changed after it was read costs one 409 and one re-read, then the grant, in the same reconcile', async () => {
    const cluster = world();
    const steps: Operation[] = [];
    let bumped = false;
    const gate = (step: Step): Promise<void> => {
      steps.push(step.op);
      if (step.op === 'fencing.next' && !bumped) {
        // Someone writes the Lease between the controller's read and its CAS (as a cache that is
        // behind looks to the API server).
        bumped = true;
        const l = cluster.lease(leaseName(LOCK));
        if (l !== undefined)
          cluster.replaceLease(leaseName(LOCK), {
            ...l,
            metadata: { ...l.metadata, labels: { ...l.metadata?.labels, touched: 'yes' } },
          });
      }
      return Promise.resolve();
    };
    const reconciler = new DistributedLockReconciler(
      cluster.reconcilerDeps({ gate, clock: new FakeClock(), log: silentLogger }),
    );
    const logFields = {
      controller: 'distributedlock',
      controllerGroup: 'fencepost.io',
      controllerKind: 'DistributedLock',
      namespace: 'default',
      name: LOCK,
      reconcileID: 'r',
    };
    await reconciler.reconcile(KEY, { reconcileId: 'r', logFields, signal: new AbortController().signal });
    expect(steps).toEqual([
      'fencing.next',
      'lease.replace', // 409: the token 102 is a harmless gap
      'lease.get',
      'fencing.next',
      'lease.replace',
      'pod.patch',
      'status.patch',
    ]);
    expect(leftBehind(cluster)).toEqual({ lease: 'web-0 103', pod: 'marked 103', status: 'web-0 103' });
  });

  it('a reconcile that runs before the cache shows its own grant decides from that grant: no second token, no write', async () => {
    const cluster = world();
    const steps: Operation[] = [];
    const gate = (step: Step): Promise<void> => {
      steps.push(step.op);
      return Promise.resolve();
    };
    const deps = cluster.reconcilerDeps({ gate, clock: new FakeClock(), log: silentLogger });
    // The Lease cache lags: it keeps showing the Lease as it was before the grant until told.
    let cached = cluster.lease(leaseName(LOCK));
    const reconciler = new DistributedLockReconciler({
      ...deps,
      leases: { ...deps.leases, get: () => cached, list: () => (cached !== undefined ? [cached] : []) },
    });
    const logFields = {
      controller: 'distributedlock',
      controllerGroup: 'fencepost.io',
      controllerKind: 'DistributedLock',
      namespace: 'default',
      name: LOCK,
      reconcileID: 'r',
    };
    const run = () => reconciler.reconcile(KEY, { reconcileId: 'r', logFields, signal: new AbortController().signal });
    await run();
    expect(steps.splice(0)).toEqual(['fencing.next', 'lease.replace', 'pod.patch', 'status.patch']);
    await run(); // the cache still shows the vacant Lease
    expect(steps.splice(0)).toEqual([]);
    const granted = cluster.lease(leaseName(LOCK));
    if (granted === undefined) throw new Error('no Lease');
    cached = granted;
    reconciler.leaseDelivered(KEY, granted, false); // the informer caught up
    await run();
    expect(steps).toEqual([]);
    expect(leftBehind(cluster)).toEqual({ lease: 'web-0 102', pod: 'marked 102', status: 'web-0 102' });
  });

  it('a shutdown after the token is taken does not make the grant', async () => {
    const cluster = world();
    const c = controller(cluster, undefined, 'fencing.next');
    await expect(c.reconcile()).rejects.toThrow(/shutdown/);
    expect(c.steps).toEqual(['fencing.next']);
    expect(leftBehind(cluster)).toEqual({ lease: 'vacant', pod: 'unmarked', status: 'no holder' });
  });

  it('deleting a held lock ends the term at once (Lost) and keeps the Lease and the finalizer for a full lease duration', async () => {
    const cluster = world();
    await controller(cluster).reconcile();
    expect(leftBehind(cluster).lease).toBe('web-0 102');
    const lock = cluster.lock(LOCK);
    if (lock === undefined) throw new Error('no lock');
    cluster.putLock({ ...lock, metadata: { ...lock.metadata, deletionTimestamp: new Date() } });
    const clock = new FakeClock();
    const c = controller(cluster, undefined, undefined, clock);
    await c.reconcile();
    expect(c.steps).toEqual(['pod.patch', 'lease.get', 'lease.replace']); // unmark, read, end the term
    const ended = cluster.lease(leaseName(LOCK));
    expect(ended !== undefined ? parseLease(ended).released : undefined).toBe('Lost');
    expect(cluster.lock(LOCK)?.metadata.finalizers).toEqual([LOCK_FINALIZER]);
    clock.advance(10_000 - 1); // the lock's lease is 10 s: not yet
    await c.reconcile();
    expect(cluster.lease(leaseName(LOCK))).toBeDefined();
    expect(cluster.lock(LOCK)?.metadata.finalizers).toEqual([LOCK_FINALIZER]);
    clock.advance(2);
    await c.reconcile();
    expect(cluster.lease(leaseName(LOCK))).toBeUndefined();
    expect(cluster.lock(LOCK)?.metadata.finalizers).toEqual([]);
    expect(c.remembered()).toBe(0); // the finished cleanup forgets the lock's whole record
  });

  it('a lock gone from the cache leaves no memory record behind, whatever was remembered of it', async () => {
    const cluster = world();
    const c = controller(cluster);
    await c.reconcile();
    expect(leftBehind(cluster).lease).toBe('web-0 102');
    expect(c.remembered()).toBe(1);
    cluster.deleteLock(LOCK);
    await c.reconcile();
    expect(c.remembered()).toBe(0);
  });
});
