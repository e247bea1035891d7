/**
 * A Mutex lock released by its holder is not granted back to it on the request it just withdrew
 * (found in review): the holder withdraws its request (a pod PATCH) and then releases the Lease,
 * but the controller's pod watch can deliver the withdrawal after the Lease watch delivers the
 * release. Seen with the request still in the cache, the releasing pod looked like the only
 * candidate, and the controller granted it a new term nobody wanted — which then held the lock
 * until it expired, while the next requester waited.
 *
 * Here the controller talks to the real API server through a fault proxy that delays its pod
 * watch by 1.5 s; the Lease watch is not delayed.
 */
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acquire } from '../../../src/index.ts';
import type { LockController } from '../../../src/controllers/distributedlock/setup.ts';
import { parseLease } from '../../../src/lease/record.ts';
import { eventually, freshNamespace, sharedKubeConfig, sharedKubeconfigPath } from '../../support/env.ts';
import { startTestController } from '../../support/lock-controller.ts';
import { createLock, createPod, getLease, lockBody, testKube, type TestKube } from '../../support/fixtures.ts';
import {
  kubeconfigVia,
  proxyTargetOf,
  startHttpFaultProxy,
  type HttpFaultProxy,
} from '../../support/testbed/http-fault-proxy.ts';

describe('Mutex: a released lock is not granted back on the withdrawn request', () => {
  const adminKc = sharedKubeConfig();
  let t: TestKube;
  let proxy: HttpFaultProxy;
  let controller: LockController | undefined;

  beforeAll(async () => {
    t = testKube(adminKc, await freshNamespace(adminKc, 'mutex-regrant-'));
    proxy = await startHttpFaultProxy(proxyTargetOf(sharedKubeconfigPath()));
    const kc = new KubeConfig();
    kc.loadFromString(kubeconfigVia(sharedKubeconfigPath(), proxy.url));
    controller = await startTestController({ kc, namespace: t.namespace, identity: 'mutex-regrant-controller' });
  });
  afterAll(async () => {
    await controller?.stop();
    await proxy.close();
  });

  it('after the holder releases, the Lease stays free (no new term for the releasing pod) until another pod asks, which is granted next', async () => {
    const a = await createPod(t, 'rg-a', { app: 'rg' });
    const b = await createPod(t, 'rg-b', { app: 'rg' });
    await createLock(t, lockBody('rg', 'rg', { mode: 'Mutex', leaseDurationSeconds: 20 }));
    const opts = { kubeconfig: adminKc, namespace: t.namespace, waitMs: 30_000 };
    for (let round = 0; round < 3; round++) {
      const held = await acquire('rg', { ...opts, pod: { name: 'rg-a', uid: a.metadata?.uid ?? '' } });
      // From now on the controller sees pod changes 1.5 s late, Lease changes at once.
      proxy.watchDelay(
        () => 1500,
        (r) => r.path.endsWith('/pods'),
      );
      await held.release();
      // Past the delayed withdrawal: whatever the controller decided on the release, it has acted.
      await new Promise((r) => setTimeout(r, 2500));
      const lease = await getLease(t, 'rg');
      const rec = parseLease(lease ?? {});
      expect(rec.holder?.name, `round ${round}: the Lease after rg-a's release`).toBeUndefined();
      proxy.heal();
      // Another pod asks: granted now (the Lease is free), not after a stray term's 20 s.
      const next = await acquire('rg', { ...opts, pod: { name: 'rg-b', uid: b.metadata?.uid ?? '' } });
      expect(next.token).toBeGreaterThan(held.token);
      await next.release();
      await eventually(async () => expect(parseLease((await getLease(t, 'rg')) ?? {}).holder).toBeUndefined());
    }
  }, 120_000);
});
