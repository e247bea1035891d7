/**
 * Steady state costs the controller no API write, so that its load does not grow with the renewals
 * of the locks it serves: a held lock whose holder renews normally changes nothing the controller
 * records — status records transitions, not renewals — so the controller's own write requests
 * (POST, PUT, PATCH, DELETE, counted on its KubeConfig as `rest_client_requests_total` counts them)
 * stay at 0 however many renewals it watches.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import { startLockController, type LockController } from '../../../src/controllers/distributedlock/setup.ts';
import { apiClientFor } from '../../../src/kube/api-client.ts';
import { parseLease } from '../../../src/lease/record.ts';
import { silentLogger } from '../../../src/observability/logger.ts';
import { realClock } from '../../../src/runtime/clock.ts';
import {
  eventually,
  freshNamespace,
  sharedKubeConfig,
  sharedKubeconfigPath,
  sharedRedisUrl,
} from '../../support/env.ts';
import {
  createLock,
  createPod,
  getLease,
  getLock,
  lockBody,
  renewLease,
  testKube,
  type TestKube,
} from '../../support/fixtures.ts';

const WRITES = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
/** RENEWALS: how many renewals the controller watches; each one is a Lease update it reconciles. */
const RENEWALS = 9;
const LEASE_SECONDS = 3;

describe('the lock controller at steady state', () => {
  const writes: string[] = [];
  let counting = false;
  let t: TestKube;
  let controller: LockController | undefined;

  beforeAll(async () => {
    t = testKube(sharedKubeConfig(), await freshNamespace(sharedKubeConfig(), 'steady-'));
    const kc = apiClientFor(sharedKubeconfigPath(), {
      onRequest: (r) => {
        if (counting && WRITES.has(r.method)) writes.push(`${r.method} ${r.code}`);
      },
    });
    controller = await startLockController({
      kc,
      redisUrl: sharedRedisUrl(),
      namespace: t.namespace,
      identity: 'steady-controller',
      clock: realClock,
      log: silentLogger,
    });
  });
  afterAll(async () => {
    await controller?.stop();
  });

  it(`writes nothing while the holder of a held lock renews ${RENEWALS} times (lease ${LEASE_SECONDS} s, renewed every second)`, async () => {
    await createPod(t, 'w-0', { app: 'w' });
    await createLock(t, lockBody('w', 'w', { leaseDurationSeconds: LEASE_SECONDS }));
    await eventually(async () => {
      const lease = await getLease(t, 'w');
      expect(lease !== undefined ? parseLease(lease).holder?.name : undefined).toBe('w-0');
      expect((await getLock(t, 'w')).status?.holder?.name).toBe('w-0');
    });
    // Let the grant's own writes (pod marks, status, Event) land and their watch events pass.
    await sleep(1000);
    counting = true;
    for (let i = 0; i < RENEWALS; i++) {
      await renewLease(t, 'w');
      await sleep(1000);
    }
    counting = false;
    const lease = await getLease(t, 'w');
    expect(lease !== undefined ? parseLease(lease).holder?.name : undefined).toBe('w-0'); // still held throughout
    expect(writes, `the controller's writes during ${RENEWALS} renewals`).toEqual([]);
  });
});
