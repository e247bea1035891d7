/**
 * The controller's write budget per grant, counted by the API server itself: the difference of
 * kube-apiserver's `apiserver_request_total` (GET /metrics on a control plane of this test's own,
 * so that no other test's writes are counted) over a cold start and over a round of handoffs.
 *
 * A grant costs three writes: the Lease (created already granted for a new lock, a
 * compare-and-swap afterwards), the holder pod's label and annotations in one patch, and status
 * in one patch, written once even when a reconcile runs before the lock cache shows it; plus the
 * grant's Event (best effort, client-go's recorder), counted apart. A new lock costs one write
 * more, once in its life: the finalizer. A handoff adds the previous holder pod's unmark. Counts,
 * not timings; each is printed (`grant-writes:` lines).
 */
import { request as httpsRequest, type RequestOptions } from 'node:https';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Watch, type V1Lease } from '@kubernetes/client-node';
import { startLockController, type LockController } from '../../../src/controllers/distributedlock/setup.ts';
import { parseLease, releasedLease } from '../../../src/lease/record.ts';
import { leaseName, podKeys } from '../../../src/protocol/names.ts';
import { silentLogger } from '../../../src/observability/logger.ts';
import { realClock } from '../../../src/runtime/clock.ts';
import { eventually, sharedRedisUrl } from '../../support/env.ts';
import { createLock, createPod, getLease, getLock, lockBody, testKube, type TestKube } from '../../support/fixtures.ts';
import { startControlPlane, type ControlPlane } from '../../support/testbed/control-plane.ts';

const LOCKS = 12;
const WRITE_VERBS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * writesByResource: kube-apiserver's own count of write requests, by `VERB resource[/subresource]`
 * (with `byCode`, by `VERB resource[/subresource] CODE`: what a failure message shows, so that an
 * extra write says whether it was a conflict's retry or a write that succeeded).
 */
async function writesByResource(plane: ControlPlane, byCode = false): Promise<Map<string, number>> {
  const kc = plane.kubeConfig();
  const opts: RequestOptions = {};
  await kc.applyToHTTPSOptions(opts);
  const url = new URL(`${kc.getCurrentCluster()?.server ?? ''}/metrics`);
  const text = await new Promise<string>((resolve, reject) => {
    const req = httpsRequest(url, { ...opts, method: 'GET' }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        resolve(Buffer.concat(chunks).toString('utf8'));
      });
    });
    req.on('error', reject);
    req.end();
  });
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line.startsWith('apiserver_request_total{')) continue;
    const labels = Object.fromEntries([...line.matchAll(/([a-z_]+)="([^"]*)"/g)].map((m) => [m[1] ?? '', m[2] ?? '']));
    const verb = labels['verb'] ?? '';
    if (!WRITE_VERBS.has(verb)) continue;
    const sub = labels['subresource'] ?? '';
    const key = `${verb} ${labels['resource'] ?? ''}${sub !== '' ? `/${sub}` : ''}${byCode ? ` ${labels['code'] ?? ''}` : ''}`;
    out.set(key, (out.get(key) ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1)));
  }
  return out;
}

/**
 * foreignLeaseWrites counts, from a watch of every namespace, the Lease writes outside `namespace`
 * from now until stop() — kube-apiserver renews its own identity Lease in kube-system every 10 s,
 * and apiserver_request_total counts those PUTs too.
 */
async function foreignLeaseWrites(
  plane: ControlPlane,
  namespace: string,
): Promise<{ count: () => number; stop: () => void }> {
  let n = 0;
  const req = await new Watch(plane.kubeConfig()).watch(
    '/apis/coordination.k8s.io/v1/leases',
    { resourceVersion: '0', allowWatchBookmarks: false },
    (type: string, obj: V1Lease) => {
      if ((type === 'MODIFIED' || type === 'ADDED') && obj.metadata?.namespace !== namespace) n++;
    },
    () => undefined,
  );
  // The initial ADDED events of existing Leases (resourceVersion 0) are not writes.
  await new Promise((r) => setTimeout(r, 300));
  const start = n;
  return { count: () => n - start, stop: () => req.abort() };
}

/**
 * settledWrites reads the write counts and the foreign Lease writes behind them: two reads 500 ms
 * apart that agree on the Lease PUTs, the foreign count taken between them. A kube-apiserver
 * renewal that the first read counted has had 500 ms to reach the foreign watch; one made in
 * between changes the second read, and the reads are taken again.
 */
async function settledWrites(
  plane: ControlPlane,
  foreign: { count: () => number },
): Promise<{ all: Map<string, number>; foreign: number }> {
  for (let i = 0; i < 20; i++) {
    const first = await writesByResource(plane);
    await new Promise((r) => setTimeout(r, 500));
    const n = foreign.count();
    const second = await writesByResource(plane);
    if ((first.get('PUT leases') ?? 0) === (second.get('PUT leases') ?? 0)) return { all: first, foreign: n };
  }
  throw new Error('Lease writes did not pause for 500 ms in 20 tries');
}

/** report prints the writes counted and what they come to per grant, for docs/benchmarks.md. */
function report(what: string, writes: Readonly<Record<string, number>>): void {
  const total = Object.values(writes).reduce((a, b) => a + b, 0);
  const grant = total - (writes['POST events'] ?? 0) - (writes['PATCH distributedlocks'] ?? 0);
  console.info(
    `grant-writes: ${LOCKS} ${what}: ${JSON.stringify(writes)}; per grant ${(total / LOCKS).toFixed(2)} in all, ${(grant / LOCKS).toFixed(2)} without the Event and the finalizer`,
  );
}

function diff(after: Map<string, number>, before: Map<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of after) if (v - (before.get(k) ?? 0) > 0) out[k] = v - (before.get(k) ?? 0);
  return out;
}

describe("the controller's writes per grant, as the API server counts them", () => {
  let plane: ControlPlane;
  let t: TestKube;
  let controller: LockController | undefined;

  beforeAll(async () => {
    plane = await startControlPlane();
    t = testKube(plane.kubeConfig(), await plane.createNamespace('grant-writes-'));
  }, 120_000);
  afterAll(async () => {
    await controller?.stop();
    await plane.stop();
  });

  /** allGranted waits until every lock's Lease names a holder other than `not`, and its status and pod show it. */
  const allGranted = (not: ReadonlyMap<string, string> = new Map()): Promise<Map<string, string>> =>
    eventually(async () => {
      const holders = new Map<string, string>();
      for (let i = 0; i < LOCKS; i++) {
        const lock = `l-${i}`;
        const lease = await getLease(t, lock);
        const holder = lease !== undefined ? parseLease(lease).holder?.name : undefined;
        expect(holder).toBeDefined();
        expect(holder).not.toBe(not.get(lock));
        expect((await getLock(t, lock)).status?.holder?.name).toBe(holder);
        const pod = await t.core.readNamespacedPod({ namespace: t.namespace, name: holder ?? '' });
        expect(pod.metadata?.labels?.[podKeys(lock).holder]).toBeDefined();
        holders.set(lock, holder ?? '');
      }
      return holders;
    }, 60_000);

  it(`a cold start of ${LOCKS} new locks: per lock one Lease create, one pod patch, one status patch, one Event, and the finalizer`, async () => {
    for (let i = 0; i < LOCKS; i++) {
      await createPod(t, `p-${i}-a`, { app: `l-${i}` });
      await createPod(t, `p-${i}-b`, { app: `l-${i}` });
      await createLock(t, lockBody(`l-${i}`, `l-${i}`, { leaseDurationSeconds: 300 }));
    }
    const foreign = await foreignLeaseWrites(plane, t.namespace);
    const before = await writesByResource(plane);
    const beforeByCode = await writesByResource(plane, true);
    controller = await startLockController({
      kc: plane.kubeConfig(),
      redisUrl: sharedRedisUrl(),
      namespace: t.namespace,
      identity: 'grant-writes',
      clock: realClock,
      log: silentLogger,
    });
    const holders = await allGranted();
    // Let trailing writes (Events go out one at a time, after the reconcile) land before counting.
    await eventually(async () => {
      expect((await writesByResource(plane)).get('POST events') ?? 0).toBeGreaterThanOrEqual(
        (before.get('POST events') ?? 0) + LOCKS,
      );
    });
    await new Promise((r) => setTimeout(r, 1500));
    const settled = await settledWrites(plane, foreign);
    foreign.stop();
    const all = diff(settled.all, before);
    const byCode = diff(await writesByResource(plane, true), beforeByCode);
    const apiServerOwn = settled.foreign;
    const writes: Record<string, number> = { ...all, 'PUT leases': (all['PUT leases'] ?? 0) - apiServerOwn };
    if (writes['PUT leases'] === 0) delete writes['PUT leases'];
    // The budget: three writes per grant. Apart from it, counted exactly too: the finalizer (once
    // in a lock's life, the record that a Lease may exist) and the grant's Event (best effort).
    const { 'PATCH distributedlocks': finalizers, 'POST events': events, ...grant } = writes;
    report('first grants', writes);
    expect(grant, `by response code: ${JSON.stringify(byCode)}`).toEqual({
      'POST leases': LOCKS, // created already granted
      'PATCH pods': LOCKS, // the holder's label and annotations, one patch
      'PATCH distributedlocks/status': LOCKS, // status, once, though the lock cache may lag behind it
    });
    expect(finalizers, "the finalizer, once in a lock's life").toBe(LOCKS);
    expect(events, 'LeaseGranted Events').toBe(LOCKS);
    expect(holders.size).toBe(LOCKS);
  });

  it(`a handoff of each of the ${LOCKS} locks: one Lease write, the new holder's pod, the old holder's pod, status, one Event`, async () => {
    const holders = await allGranted();
    const foreign = await foreignLeaseWrites(plane, t.namespace);
    const before = await writesByResource(plane);
    // The holders release, as agents do (a compare-and-swap; a 409 is read again and retried).
    let releaseWrites = 0;
    for (const lock of holders.keys()) {
      for (;;) {
        const lease = await getLease(t, lock);
        if (lease === undefined) throw new Error(`no Lease for ${lock}`);
        releaseWrites++;
        try {
          await t.leases.replaceNamespacedLease({
            namespace: t.namespace,
            name: leaseName(lock),
            body: releasedLease(lease, 'Released'),
          });
          break;
        } catch (err) {
          if ((err as { code?: number }).code !== 409) throw err;
        }
      }
    }
    await allGranted(holders);
    await eventually(async () => {
      expect((await writesByResource(plane)).get('POST events') ?? 0).toBeGreaterThanOrEqual(
        (before.get('POST events') ?? 0) + LOCKS,
      );
    });
    await new Promise((r) => setTimeout(r, 1500));
    const settled = await settledWrites(plane, foreign);
    foreign.stop();
    const writes = diff(settled.all, before);
    const leaseWrites = (writes['PUT leases'] ?? 0) - releaseWrites - settled.foreign;
    const counted: Record<string, number> = { ...writes, 'PUT leases': leaseWrites };
    report('handoffs', counted);
    const { 'POST events': events, 'PATCH pods': podPatches, ...grant } = counted;
    expect(grant).toEqual({
      'PUT leases': LOCKS, // the grant's compare-and-swap
      'PATCH distributedlocks/status': LOCKS,
    });
    expect(podPatches, 'the new holder marked, the old one unmarked').toBe(2 * LOCKS);
    expect(events, 'LeaseGranted Events').toBe(LOCKS);
  });
});
