/**
 * No status write twice: a reconcile that runs before the lock cache shows our own last status
 * write (the pod mark's or the Lease's event of the same grant, seconds later under load) sends no
 * status, because it reads the lock as our write left it rather than the cache's older copy, whose
 * conditions would be stamped anew with a later second. Real reconciler, in-memory API server.
 */
import { describe, expect, it } from 'vitest';
import type { DistributedLock } from '../../../src/api/v1alpha1/distributedlock.ts';
import type { Cache } from '../../../src/controllers/distributedlock/ports.ts';
import { DistributedLockReconciler } from '../../../src/controllers/distributedlock/reconciler.ts';
import { silentLogger } from '../../../src/observability/logger.ts';
import { LOCK_FINALIZER } from '../../../src/protocol/names.ts';
import { aLock } from '../../support/builders.ts';
import { FakeClock } from '../../support/fake-clock.ts';
import { MemoryCluster, type Operation } from '../../support/memory-cluster.ts';

const LOCK = 'db';

function setup(): {
  cluster: MemoryCluster;
  clock: FakeClock;
  steps: Operation[];
  /** lagging: while true, the lock cache shows the lock as it was before the first reconcile. */
  lag(on: boolean): void;
  reconcile(): Promise<void>;
} {
  const cluster = new MemoryCluster({ firstResourceVersion: 100 });
  const lock = aLock(LOCK);
  cluster.putLock({ ...lock, metadata: { ...lock.metadata, resourceVersion: '1', finalizers: [LOCK_FINALIZER] } });
  cluster.emptyLockLease(LOCK);
  cluster.putPod({
    ref: { name: 'web-0', uid: 'uid-0' },
    labels: { app: 'web' },
    createdAt: new Date(1_000),
    ready: true,
  });
  const clock = new FakeClock();
  const steps: Operation[] = [];
  const deps = cluster.reconcilerDeps({
    gate: (s) => {
      steps.push(s.op);
      return Promise.resolve();
    },
    clock,
    log: silentLogger,
  });
  const before = structuredClone(cluster.lock(LOCK));
  let lagging = false;
  const locks: Cache<DistributedLock> = {
    list: (ns) => (lagging ? (before !== undefined ? [before] : []) : deps.locks.list(ns)),
    get: (ns, name) => (lagging ? before : deps.locks.get(ns, name)),
    hasSynced: () => true,
  };
  const reconciler = new DistributedLockReconciler({ ...deps, locks });
  const logFields = {
    controller: 'distributedlock',
    controllerGroup: 'fencepost.io',
    controllerKind: 'DistributedLock',
    namespace: 'default',
    name: LOCK,
    reconcileID: 'r',
  };
  return {
    cluster,
    clock,
    steps,
    lag: (on) => {
      lagging = on;
    },
    reconcile: () =>
      reconciler
        .reconcile(`default/${LOCK}`, { reconcileId: 'r', logFields, signal: new AbortController().signal })
        .then(() => undefined),
  };
}

describe('status writes per grant', () => {
  it('a reconcile a second later, before the lock cache shows our status write, writes no status again', async () => {
    const s = setup();
    s.lag(true);
    await s.reconcile();
    expect(s.steps.filter((op) => op === 'status.patch')).toHaveLength(1);
    const written = structuredClone(s.cluster.lock(LOCK)?.status);
    s.clock.advance(1_500);
    await s.reconcile();
    expect(s.steps.filter((op) => op === 'status.patch')).toHaveLength(1);
    expect(s.cluster.lock(LOCK)?.status).toEqual(written);
  });

  it('once the cache shows the write, the cache is read again, and an unchanged status is not written', async () => {
    const s = setup();
    s.lag(true);
    await s.reconcile();
    s.lag(false);
    s.clock.advance(1_500);
    await s.reconcile();
    expect(s.steps.filter((op) => op === 'status.patch')).toHaveLength(1);
  });
});
