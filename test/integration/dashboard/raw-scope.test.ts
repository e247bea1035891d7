import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDashboard, type Dashboard } from '../../../src/dashboard/start.ts';
import { silentLogger } from '../../../src/observability/logger.ts';
import { realClock } from '../../../src/runtime/clock.ts';
import { eventually, freshNamespace, sharedKubeConfig } from '../../support/env.ts';
import {
  createLock,
  createPod,
  getLease,
  lockBody,
  testKube,
  type TestKube,
  mergePatch,
} from '../../support/fixtures.ts';
import { useLockController } from '../../support/lock-controller.ts';
import { podKeys } from '../../../src/protocol/names.ts';

const LEASE = { fencing: { backend: 'Lease' as const } };

// The dashboard reads the cluster with its user's (or its ServiceAccount's) credentials, which may
// read every pod. Its raw views exist for the page's links — a lock's holder and candidate pods,
// its Lease, its Events — so they must not become a way to read any other object: a pod that is no
// lock's candidate (its spec, env and annotations), a co-tenant's Lease, Events of no lock.
describe('the dashboard raw views serve only objects that belong to a lock', () => {
  const fx = useLockController('raw-', null);
  let t: TestKube;
  let other: TestKube;
  let dashboard: Dashboard;
  let holder = '';
  const get = async (path: string): Promise<{ status: number; body: string }> => {
    const r = await fetch(new URL(path, dashboard.url));
    return { status: r.status, body: await r.text() };
  };

  beforeAll(async () => {
    t = fx.t;
    const kc = sharedKubeConfig();
    other = testKube(kc, await freshNamespace(kc, 'raw-other-'));
    await createPod(t, 'web-0', { app: 'web' });
    await createPod(t, 'web-1', { app: 'web' });
    await createPod(t, 'vault-0', { app: 'vault' }); // no lock selects it
    await createPod(other, 'web-0', { app: 'web' }); // the same labels, in a namespace without locks
    await t.leases.createNamespacedLease({
      namespace: t.namespace,
      body: { metadata: { name: 'app-leader' }, spec: { holderIdentity: 'someone-else' } },
    });
    // A Mutex: both pods ask (the request annotation their agents write); one is granted, the
    // other waits in the queue — a candidate that does not hold.
    await createLock(t, lockBody('alpha', 'web', { leaseDurationSeconds: 600, mode: 'Mutex', ...LEASE }));
    for (const pod of ['web-0', 'web-1'])
      await t.core.patchNamespacedPod(
        {
          namespace: t.namespace,
          name: pod,
          body: { metadata: { annotations: { [podKeys('alpha').request]: new Date().toISOString() } } },
        },
        mergePatch,
      );
    holder = await eventually(async () => {
      const h = (await getLease(t, 'alpha'))?.spec?.holderIdentity?.split('/')[0];
      expect(h).toBeDefined();
      return h ?? '';
    }, 30_000);
    dashboard = await startDashboard({
      kc,
      namespace: undefined,
      host: '127.0.0.1',
      port: 0,
      clock: realClock,
      log: silentLogger,
    });
    await eventually(async () => {
      const r = await get(`/api/locks/${t.namespace}/alpha`);
      expect(r.status).toBe(200);
      expect((JSON.parse(r.body) as { lock: { holder?: string } }).lock.holder).toBe(holder);
    }, 30_000);
  }, 120_000);
  afterAll(async () => {
    await dashboard?.stop();
  });

  it('answers 404 for a pod no lock selects, a Lease of no lock, and Events of no lock', async () => {
    for (const path of [
      `/api/raw/pods/${t.namespace}/vault-0`,
      `/api/raw/pods/${other.namespace}/web-0`,
      `/api/raw/leases/${t.namespace}/app-leader`,
      `/api/raw/leases/${other.namespace}/dlock-alpha`,
      `/api/raw/events/${t.namespace}/no-such-lock`,
      `/api/raw/events/${other.namespace}/alpha`,
    ]) {
      const r = await get(path);
      expect(r.status, `${path}: ${r.body.slice(0, 200)}`).toBe(404);
      expect(r.body).not.toContain('example.invalid'); // nothing of the object's spec
    }
  });

  it('serves the holder pod, a candidate waiting in the queue, the Lease and the Events (positive controls)', async () => {
    const candidate = holder === 'web-0' ? 'web-1' : 'web-0';
    for (const [path, name] of [
      [`/api/raw/pods/${t.namespace}/${holder}`, holder],
      [`/api/raw/pods/${t.namespace}/${candidate}`, candidate],
      [`/api/raw/leases/${t.namespace}/dlock-alpha`, 'dlock-alpha'],
    ] as const) {
      const r = await get(path);
      expect(r.status, `${path}: ${r.body.slice(0, 200)}`).toBe(200);
      expect((JSON.parse(r.body) as { metadata: { name: string } }).metadata.name).toBe(name);
    }
    const events = await get(`/api/raw/events/${t.namespace}/alpha`);
    expect(events.status).toBe(200);
    expect((JSON.parse(events.body) as { items: unknown[] }).items.length).toBeGreaterThan(0);
  });
});
