// The controller observing locks held in a Redis or Redlock store (spec.store): real redis-servers,
// the real API server, the controller in-process with --redis-store-url and --redlock-store-url,
// and the holders' side through the library (acquire({ store })) exactly as an app or the agent
// takes them. The controller never grants these locks; it must show them as it shows Lease locks —
// status, the holder pod's label and annotations, Events — and tell a release from an expiry. Owner
// ids are writable by anyone with access to the store, so a forged owner naming a pod that is no
// candidate (or a candidate's name with another uid) labels nothing.
import { Redis } from 'ioredis';
import { useStoreController } from '../../support/lock-controller.ts';
import { afterAll, beforeAll, expect, it, describe } from 'vitest';
import { podKeys } from '../../../src/protocol/names.ts';
import { lockKeys } from '../../../src/stores/redis/keys.ts';
import { acquire } from '../../../src/index.ts';
import { eventually } from '../../support/env.ts';
import { createLock, createPod, getLock, lockBody, type TestKube } from '../../support/fixtures.ts';

describe('store locks in a cluster: observed, never granted', () => {
  const fx = useStoreController('store-locks-');
  let t: TestKube;
  let single = '';
  let redlockUrl = '';
  let redis: Redis;

  beforeAll(() => {
    ({ t, redisUrl: single, redlockUrl } = fx);
    redis = new Redis(single);
  });
  afterAll(() => {
    redis.disconnect();
  });

  const reasons = async (lock: string): Promise<string[]> =>
    (
      await t.core.listNamespacedEvent({ namespace: t.namespace, fieldSelector: `involvedObject.name=${lock}` })
    ).items.map((e) => e.reason ?? '');
  const podMeta = async (name: string) => (await t.core.readNamespacedPod({ namespace: t.namespace, name })).metadata;

  it('Redis: a library holder in a candidate pod shows in status and on its pod; its release is told from an expiry', async () => {
    await createLock(t, lockBody('sr', 'sr', { store: 'Redis', mode: 'Mutex' }));
    const pod = await createPod(t, 'sr-a', { app: 'sr' });
    const held = await acquire('sr', {
      store: single,
      namespace: t.namespace,
      ttlMs: 2000,
      pod: { name: 'sr-a', uid: pod.metadata?.uid ?? '' },
    });
    const keys = podKeys('sr');
    await eventually(async () => {
      const l = await getLock(t, 'sr');
      expect(l.status?.holder?.name).toBe('sr-a');
      expect(l.status?.fencingToken).toBe(held.token.toString());
      expect(l.status?.conditions?.find((c) => c.type === 'Held')?.status).toBe('True');
      const m = await podMeta('sr-a');
      expect(m?.labels?.[keys.holder]).toBe('true');
      expect(m?.annotations?.[keys.token]).toBe(held.token.toString());
    }, 5000);
    // Held past several TTLs: the holder's watchdog renews; the controller keeps the same holder.
    await new Promise((r) => setTimeout(r, 2500));
    expect((await getLock(t, 'sr')).status?.holder?.name).toBe('sr-a');
    await held.release();
    await eventually(async () => {
      const l = await getLock(t, 'sr');
      expect(l.status?.holder).toBeUndefined();
      expect(l.status?.conditions?.find((c) => c.type === 'Held')?.reason).toBe('Released');
      expect((await podMeta('sr-a'))?.labels?.[keys.holder]).toBeUndefined();
      expect(await reasons('sr')).toEqual(expect.arrayContaining(['StoreGranted', 'StoreReleased']));
    }, 5000);
    expect(await reasons('sr')).not.toContain('HolderExpired');
    // Status keeps the last token, as for a Lease lock.
    expect((await getLock(t, 'sr')).status?.fencingToken).toBe(held.token.toString());
  });

  it('Redis: a holder that stops renewing is reported as expired (a Warning), not released', async () => {
    await createLock(t, lockBody('sx', 'sx', { store: 'Redis' }));
    const pod = await createPod(t, 'sx-a', { app: 'sx' });
    // A holder that took the lock and then stopped (crashed, paused): its key, and no renew, no release.
    const k = lockKeys(t.namespace, 'sx');
    await redis.set(k.counter, '41');
    await redis.set(k.holder, `00000000-0000-4000-8000-000000000001/sx-a/${pod.metadata?.uid ?? ''}`, 'PX', 1500);
    await redis.incr(k.counter);
    await eventually(async () => {
      expect((await getLock(t, 'sx')).status?.holder?.name).toBe('sx-a');
      expect((await getLock(t, 'sx')).status?.fencingToken).toBe('42');
    }, 5000);
    await eventually(async () => {
      const l = await getLock(t, 'sx');
      expect(l.status?.holder).toBeUndefined();
      expect(l.status?.conditions?.find((c) => c.type === 'Held')?.reason).toBe('HolderExpired');
      expect(await reasons('sx')).toContain('HolderExpired');
      expect((await podMeta('sx-a'))?.labels?.[podKeys('sx').holder]).toBeUndefined();
    }, 6000);
    expect(await reasons('sx')).not.toContain('StoreReleased');
  });

  it('Redis: an owner id naming a pod that is no candidate, or a candidate with another uid, labels nothing', async () => {
    await createLock(t, lockBody('sf', 'sf', { store: 'Redis' }));
    const candidate = await createPod(t, 'sf-a', { app: 'sf' });
    const victim = await createPod(t, 'sf-victim', { app: 'other' });
    const k = lockKeys(t.namespace, 'sf');
    await redis.set(
      k.holder,
      `00000000-0000-4000-8000-000000000002/sf-victim/${victim.metadata?.uid ?? ''}`,
      'PX',
      60_000,
    );
    await eventually(async () => {
      const l = await getLock(t, 'sf');
      expect(l.status?.conditions?.find((c) => c.type === 'Held')?.status).toBe('True');
      expect(l.status?.holder).toBeUndefined();
    }, 5000);
    await redis.set(k.holder, '00000000-0000-4000-8000-000000000003/sf-a/not-its-uid', 'PX', 60_000);
    await new Promise((r) => setTimeout(r, 1500));
    expect((await getLock(t, 'sf')).status?.holder).toBeUndefined();
    for (const name of ['sf-a', 'sf-victim'])
      expect((await podMeta(name))?.labels?.[podKeys('sf').holder], name).toBeUndefined();
    expect(candidate.metadata?.uid).toBeDefined();
    await redis.del(k.holder);
  });

  it('Redlock, five masters: a library holder on a majority shows with its token', async () => {
    await createLock(t, lockBody('sl', 'sl', { store: 'Redlock' }));
    const pod = await createPod(t, 'sl-a', { app: 'sl' });
    // A 10 s TTL: what is checked is that a release is told from an expiry, so the holder must
    // still hold at its release; with 2 s, five masters' renewals on a loaded 2-core CI machine
    // were sometimes late, the key expired, and the controller rightly reported an expiry.
    const held = await acquire('sl', {
      store: redlockUrl,
      namespace: t.namespace,
      ttlMs: 10_000,
      pod: { name: 'sl-a', uid: pod.metadata?.uid ?? '' },
    });
    await eventually(async () => {
      const l = await getLock(t, 'sl');
      expect(l.status?.holder?.name).toBe('sl-a');
      expect(l.status?.fencingToken).toBe(held.token.toString());
    }, 5000);
    expect(held.isHeld(), 'the holder still holds when it releases').toBe(true);
    await held.release();
    await eventually(async () => {
      expect((await getLock(t, 'sl')).status?.holder).toBeUndefined();
      expect(await reasons('sl')).toEqual(expect.arrayContaining(['StoreGranted', 'StoreReleased']));
    }, 5000);
  });
});
