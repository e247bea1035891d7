import { beforeAll, describe, expect, it } from 'vitest';
import { CoreV1Api } from '@kubernetes/client-node';
import { parseLease } from '../../../src/lease/record.ts';
import { useLockController } from '../../support/lock-controller.ts';
import { eventually, sharedKubeConfig } from '../../support/env.ts';
import {
  createLock,
  createPod,
  getLease,
  getLock,
  keepRenewing,
  lockBody,
  releaseLease,
  setPodStatus,
  type TestKube,
} from '../../support/fixtures.ts';
import { LOCK_FINALIZER, podKeys, leaseName } from '../../../src/protocol/names.ts';

// The controller in-process, against the real API server and Redis, in Election mode. Pods are
// made Ready through the status subresource; the holder's renewals are done by the test (no
// agent runs here), so each test decides whether the holder is alive.
describe('the lock controller in Election mode', () => {
  const kc = sharedKubeConfig();
  const fx = useLockController('election-');
  let t: TestKube;
  beforeAll(() => {
    t = fx.t;
  });

  const holderOf = async (lock: string) => {
    const lease = await getLease(t, lock);
    return lease !== undefined ? parseLease(lease) : undefined;
  };

  it('grants exactly one of three Ready candidates with a token from Redis; Lease, status, annotations and label agree', async () => {
    const pod = await createPod(t, 'a-0', { app: 'a' });
    await createPod(t, 'a-1', { app: 'a' });
    await createPod(t, 'a-2', { app: 'a' });
    await createLock(t, lockBody('a', 'a', { leaseDurationSeconds: 30 }));
    const record = await eventually(async () => {
      const r = await holderOf('a');
      expect(r?.holder).toEqual({ name: 'a-0', uid: pod.metadata?.uid });
      return r;
    });
    expect(record?.token).toBeGreaterThan(0n);
    expect(record?.transitions).toBe(1);
    const keys = podKeys('a');
    await eventually(async () => {
      const p = await t.core.readNamespacedPod({ name: 'a-0', namespace: t.namespace });
      expect(p.metadata?.labels?.[keys.holder]).toBe('true');
      expect(p.metadata?.annotations?.[keys.token]).toBe(record?.token?.toString());
      expect(p.metadata?.annotations?.[keys.lease]).toBe(leaseName('a'));
      const all = await t.core.listNamespacedPod({ namespace: t.namespace, labelSelector: `${keys.holder}=true` });
      expect(all.items.map((x) => x.metadata?.name)).toEqual(['a-0']); // exactly one holder label
    });
    await eventually(async () => {
      const lock = await getLock(t, 'a');
      expect(lock.status?.holder).toEqual({ name: 'a-0', uid: pod.metadata?.uid });
      expect(lock.status?.fencingToken).toBe(record?.token?.toString());
      expect(lock.status?.conditions?.find((c) => c.type === 'Held')).toMatchObject({
        status: 'True',
        reason: 'Granted',
      });
      expect(lock.status?.conditions?.find((c) => c.type === 'Ready')).toMatchObject({ status: 'True' });
      expect(lock.status?.observedGeneration).toBe(lock.metadata.generation);
      expect(lock.status?.candidates).toBe(3);
      expect(lock.metadata.finalizers).toContain(LOCK_FINALIZER);
    });
    const lease = await getLease(t, 'a');
    expect(lease?.metadata?.ownerReferences?.[0]).toMatchObject({
      kind: 'DistributedLock',
      name: 'a',
      controller: true,
    });
    const events = await kc.makeApiClient(CoreV1Api).listNamespacedEvent({ namespace: t.namespace });
    expect(
      events.items.some(
        (e) => e.reason === 'LeaseGranted' && e.involvedObject.name === 'a' && e.message?.includes('a-0'),
      ),
    ).toBe(true);
  });

  it('waits for a Ready candidate: an unready pod is never granted', async () => {
    await createPod(t, 'b-0', { app: 'b' }, false);
    await createLock(t, lockBody('b', 'b'));
    await eventually(async () => {
      const lock = await getLock(t, 'b');
      expect(lock.status?.conditions?.find((c) => c.type === 'Held')).toMatchObject({
        status: 'False',
        reason: 'WaitingForCandidate',
      });
    });
    expect((await holderOf('b'))?.holder).toBeUndefined();
    await setPodStatus(t, 'b-0', 'ready');
    await eventually(async () => {
      expect((await holderOf('b'))?.holder?.name).toBe('b-0');
    });
  });

  it('keeps a holder that renews past several lease durations, with no new token', async () => {
    await createPod(t, 'c-0', { app: 'c' });
    await createPod(t, 'c-1', { app: 'c' });
    await createLock(t, lockBody('c', 'c'));
    const first = await eventually(async () => {
      const r = await holderOf('c');
      expect(r?.holder).toBeDefined();
      return r;
    });
    const stop = keepRenewing(t, 'c', 500);
    await new Promise((r) => setTimeout(r, 5000)); // 2.5 lease durations
    await stop();
    const now = await holderOf('c');
    expect(now?.holder).toEqual(first?.holder);
    expect(now?.token).toBe(first?.token);
    expect(now?.transitions).toBe(1);
  });

  it('expires a silent holder only after a full lease duration, then grants another candidate a larger token', async () => {
    await createPod(t, 'd-0', { app: 'd' });
    await createPod(t, 'd-1', { app: 'd' });
    await createLock(t, lockBody('d', 'd'));
    const first = await eventually(async () => {
      const r = await holderOf('d');
      expect(r?.holder).toBeDefined();
      return r;
    });
    // The grant is the last renewal: the in-process controller stamped its renewTime (wall clock,
    // this process's) just before writing it, and counts the lease from when the write returned.
    // (Counting from when this test's polling first saw the grant would be up to a poll late.)
    const lastRenew = first?.renewTime?.getTime() ?? Number.NaN;
    await setPodStatus(t, first?.holder?.name ?? '', 'ready'); // a status update must not count as a renewal
    const second = await eventually(async () => {
      const r = await holderOf('d');
      expect(r?.holder?.name).not.toBe(first?.holder?.name);
      return r;
    }, 20_000);
    const elapsed = Date.now() - lastRenew;
    expect(elapsed).toBeGreaterThanOrEqual(2000);
    expect(second?.token).toBeGreaterThan(first?.token ?? 0n);
    expect(second?.transitions).toBe(2);
    const keys = podKeys('d');
    await eventually(async () => {
      const old = await t.core.readNamespacedPod({ name: first?.holder?.name ?? '', namespace: t.namespace });
      expect(old.metadata?.labels?.[keys.holder]).toBeUndefined();
      expect(old.metadata?.annotations?.[keys.token]).toBeUndefined();
    });
  });

  it('hands a released lock to the next candidate without waiting for expiry', async () => {
    await createPod(t, 'e-0', { app: 'e' });
    await createPod(t, 'e-1', { app: 'e' });
    await createLock(t, lockBody('e', 'e', { leaseDurationSeconds: 30 }));
    const first = await eventually(async () => {
      const r = await holderOf('e');
      expect(r?.holder).toBeDefined();
      return r;
    });
    const released = performance.now();
    await releaseLease(t, 'e');
    const second = await eventually(async () => {
      const r = await holderOf('e');
      expect(r?.holder).toBeDefined();
      expect(r?.holder?.name).not.toBe(first?.holder?.name);
      return r;
    }, 10_000);
    expect(performance.now() - released).toBeLessThan(30_000); // far below the 30 s lease: a handoff, not an expiry
    expect(second?.token).toBeGreaterThan(first?.token ?? 0n);
  });

  it('hands over at once when the kubelet reports the holder pod terminated', async () => {
    await createPod(t, 'f-0', { app: 'f' });
    await createPod(t, 'f-1', { app: 'f' });
    await createLock(t, lockBody('f', 'f', { leaseDurationSeconds: 30 }));
    const first = await eventually(async () => {
      const r = await holderOf('f');
      expect(r?.holder).toBeDefined();
      return r;
    });
    await setPodStatus(t, first?.holder?.name ?? '', 'terminated');
    const second = await eventually(async () => {
      const r = await holderOf('f');
      expect(r?.holder?.name).not.toBe(first?.holder?.name);
      expect(r?.holder).toBeDefined();
      return r;
    }, 10_000);
    expect(second?.token).toBeGreaterThan(first?.token ?? 0n);
  });

  it('waits for expiry when the holder pod vanished without a terminated status (force deletion)', async () => {
    await createPod(t, 'g-0', { app: 'g' });
    await createLock(t, lockBody('g', 'g', { leaseDurationSeconds: 3 }));
    const first = await eventually(async () => {
      const r = await holderOf('g');
      expect(r?.holder?.name).toBe('g-0');
      return r;
    });
    await createPod(t, 'g-1', { app: 'g' });
    await t.core.deleteNamespacedPod({ name: 'g-0', namespace: t.namespace, gracePeriodSeconds: 0 });
    const second = await eventually(async () => {
      const r = await holderOf('g');
      expect(r?.holder?.name).toBe('g-1');
      return r;
    }, 20_000);
    // Measured on the controller's own clock (it wrote both acquireTimes), not from when this test saw
    // the first grant: on a loaded machine the test can notice that grant late. Nobody renewed g-0, so
    // the second grant comes a full 3 s lease after the first (10 ms allows for NTP slewing).
    const gapMs = (second?.acquireTime?.getTime() ?? 0) - (first?.acquireTime?.getTime() ?? Infinity);
    expect(gapMs).toBeGreaterThanOrEqual(3000 - 10);
    expect(second?.token).toBeGreaterThan(first?.token ?? 0n);
  });
});
