import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CoreV1Api } from '@kubernetes/client-node';
import { startLockController, type LockController } from '../../../src/controllers/distributedlock/setup.ts';
import { parseLease, releasedLease } from '../../../src/lease/record.ts';
import { silentLogger } from '../../../src/observability/logger.ts';
import { createControllerMetrics } from '../../../src/observability/metrics.ts';
import { realClock } from '../../../src/runtime/clock.ts';
import { startRedis, type RedisServer } from '../../support/testbed/redis.ts';
import { eventually, freshNamespace, sharedKubeConfig } from '../../support/env.ts';
import {
  createLock,
  createPod,
  deleteLock,
  getLease,
  getLock,
  keepRenewing,
  lockBody,
  releaseLease,
  setPodStatus,
  testKube,
  type TestKube,
} from '../../support/fixtures.ts';
import { TOKEN_ANNOTATION, leaseName, podKeys } from '../../../src/protocol/names.ts';

// Tokens must stay strictly increasing whatever happens to Redis: the etcd high-water mark on the
// Lease re-floors the counter. This file has its own redis-server because it breaks it.
describe('fencing tokens through Redis faults', () => {
  const kc = sharedKubeConfig();
  let t: TestKube;
  let redis: RedisServer;
  let controller: LockController;
  beforeAll(async () => {
    redis = await startRedis();
    t = testKube(kc, await freshNamespace(kc, 'fencing-'));
    controller = await startLockController({
      kc,
      redisUrl: redis.url,
      namespace: t.namespace,
      identity: 'test-controller',
      clock: realClock,
      log: silentLogger,
    });
  });
  afterAll(async () => {
    await controller?.stop();
    await redis?.stop();
  });

  const record = async (lock: string) => {
    const l = await getLease(t, lock);
    return l !== undefined ? parseLease(l) : undefined;
  };
  /** handoff releases the current holder and returns the next grant (another pod). */
  const handoff = async (lock: string) => {
    const before = await record(lock);
    await releaseLease(t, lock);
    return await eventually(async () => {
      const r = await record(lock);
      expect(r?.holder).toBeDefined();
      expect(r?.transitions).toBeGreaterThan(before?.transitions ?? 0);
      return r;
    }, 15_000);
  };
  const events = async (reason: string) =>
    (await kc.makeApiClient(CoreV1Api).listNamespacedEvent({ namespace: t.namespace })).items.filter(
      (e) => e.reason === reason,
    );

  it('issues strictly larger tokens after Redis restarts empty, after the key is deleted, and after someone puts a TTL on it', async () => {
    await createPod(t, 'r-0', { app: 'r' });
    await createPod(t, 'r-1', { app: 'r' });
    await createLock(t, lockBody('r', 'r', { leaseDurationSeconds: 30 }));
    const tokens: bigint[] = [];
    const first = await eventually(async () => {
      const r = await record('r');
      expect(r?.holder).toBeDefined();
      return r;
    });
    tokens.push(first?.token ?? 0n);
    const c = redis.client();
    try {
      await redis.restart({ loseData: true });
      expect(await redis.lostData()).toBe(true);
      await eventually(async () => {
        expect((await getLock(t, 'r')).status?.conditions?.find((x) => x.type === 'Degraded')?.status).toBe('False');
      });
      tokens.push((await handoff('r'))?.token ?? 0n);
      const c2 = redis.client();
      try {
        await c2.del('fencepost:fence:' + t.namespace + '/r');
        tokens.push((await handoff('r'))?.token ?? 0n);
        await c2.expire('fencepost:fence:' + t.namespace + '/r', 3600);
        tokens.push((await handoff('r'))?.token ?? 0n);
        expect(await c2.ttl('fencepost:fence:' + t.namespace + '/r')).toBe(-1); // the TTL was removed
        await c2.flushall();
        tokens.push((await handoff('r'))?.token ?? 0n);
      } finally {
        c2.disconnect();
      }
    } finally {
      c.disconnect();
    }
    for (let i = 1; i < tokens.length; i++) expect(tokens[i]).toBeGreaterThan(tokens[i - 1] ?? 0n);
    await eventually(async () => {
      const refloored = await events('FencingRefloored');
      expect(refloored.length).toBeGreaterThanOrEqual(4);
      expect(refloored.some((e) => e.message?.includes('had a TTL'))).toBe(true);
      expect(refloored.some((e) => e.message?.includes('Redis lost data'))).toBe(true);
    });
  });

  it('makes no grant while Redis is down (Degraded, Event), keeps a renewing holder, and grants once Redis is back', async () => {
    await createPod(t, 'h-0', { app: 'h' });
    await createLock(t, lockBody('h', 'h'));
    const held = await eventually(async () => {
      const r = await record('h');
      expect(r?.holder?.name).toBe('h-0');
      return r;
    });
    const stopRenewing = keepRenewing(t, 'h', 400);
    await redis.stopForOutage();
    try {
      await createPod(t, 'w-0', { app: 'w' });
      await createLock(t, lockBody('w', 'w'));
      await eventually(async () => {
        const lock = await getLock(t, 'w');
        expect(lock.status?.conditions?.find((x) => x.type === 'Degraded')).toMatchObject({
          status: 'True',
          reason: 'RedisUnavailable',
        });
        expect(lock.status?.conditions?.find((x) => x.type === 'Held')).toMatchObject({
          status: 'False',
          reason: 'RedisUnavailable',
        });
        expect(lock.status?.conditions?.find((x) => x.type === 'Ready')).toMatchObject({ status: 'False' });
      }, 15_000);
      await new Promise((r) => setTimeout(r, 3000)); // longer than the 2 s lease
      expect((await record('w'))?.holder).toBeUndefined();
      const h = await record('h');
      expect(h?.holder?.name).toBe('h-0'); // the holder kept renewing: Redis is not on the renew path
      expect(h?.token).toBe(held?.token);
      expect((await events('FencingUnavailable')).length).toBeGreaterThanOrEqual(1);
    } finally {
      await redis.resume();
    }
    await eventually(async () => {
      expect((await record('w'))?.holder?.name).toBe('w-0');
    }, 20_000);
    await stopRenewing();
  });

  it('on deletion releases the Lease, unlabels the holder and removes its finalizer; a re-created lock issues larger tokens even with an empty Redis', async () => {
    await createPod(t, 'x-0', { app: 'x' });
    await createLock(t, lockBody('x', 'x'));
    const before = await eventually(async () => {
      const r = await record('x');
      expect(r?.holder?.name).toBe('x-0');
      return r;
    });
    const keys = podKeys('x');
    await eventually(async () => {
      expect(
        (await t.core.readNamespacedPod({ name: 'x-0', namespace: t.namespace })).metadata?.labels?.[keys.holder],
      ).toBe('true');
    });
    await deleteLock(t, 'x');
    await eventually(async () => {
      await expect(getLock(t, 'x')).rejects.toMatchObject({ code: 404 });
      expect(await getLease(t, 'x')).toBeUndefined();
      const pod = await t.core.readNamespacedPod({ name: 'x-0', namespace: t.namespace });
      expect(pod.metadata?.labels?.[keys.holder]).toBeUndefined();
      expect(pod.metadata?.annotations?.[keys.token]).toBeUndefined();
    });
    await redis.restart({ loseData: true });
    await createLock(t, lockBody('x', 'x'));
    const after = await eventually(async () => {
      const r = await record('x');
      expect(r?.holder?.name).toBe('x-0');
      return r;
    });
    expect(after?.token).toBeGreaterThan(before?.token ?? 0n);
  });
  it("confines spec.fencing.key to the lock namespace: a lock in another namespace naming this one's counter cannot touch it", async () => {
    // The victim: a lock here, granted, its counter at some N.
    await createPod(t, 'v-0', { app: 'v' });
    await createLock(t, lockBody('victim', 'v', { leaseDurationSeconds: 30 }));
    const granted = await eventually(async () => {
      const r = await record('victim');
      expect(r?.holder).toBeDefined();
      return r;
    });
    const c = redis.client();
    const other = testKube(kc, await freshNamespace(kc, 'fencing-b-'));
    const controllerB = await startLockController({
      kc,
      redisUrl: redis.url,
      namespace: other.namespace,
      identity: 'test-controller-b',
      clock: realClock,
      log: silentLogger,
    });
    try {
      const victimKey = `fencepost:fence:${t.namespace}/victim`;
      expect(await c.get(victimKey)).toBe(granted?.token?.toString());
      // The attacker: a lock author in namespace B names A's counter as its key.
      await createPod(other, 'a-0', { app: 'a' });
      await createLock(other, lockBody('attacker', 'a', { leaseDurationSeconds: 30, fencing: { key: victimKey } }));
      const attacker = await eventually(async () => {
        const l = await getLease(other, 'attacker');
        const r = l !== undefined ? parseLease(l) : undefined;
        expect(r?.holder).toBeDefined();
        return r;
      });
      expect(await c.get(victimKey)).toBe(granted?.token?.toString()); // untouched
      // B's counter lives under B's prefix, whatever the key says.
      expect(await c.get(`fencepost:fence:${other.namespace}/${victimKey}`)).toBe(attacker?.token?.toString());
    } finally {
      await controllerB.stop();
      c.disconnect();
    }
  });
});

describe('the embedded Lease fencing backend (no Redis)', () => {
  const kc = sharedKubeConfig();
  let t: TestKube;
  let controller: LockController;
  const metrics = createControllerMetrics();
  beforeAll(async () => {
    t = testKube(kc, await freshNamespace(kc, 'leasefence-'));
    controller = await startLockController({
      kc,
      redisUrl: undefined,
      namespace: t.namespace,
      identity: 'test-controller',
      clock: realClock,
      log: silentLogger,
      metrics,
    });
  });
  afterAll(async () => {
    await controller?.stop();
  });

  it('reports a lock asking for Redis as Ready False InvalidSpec, grants nothing, and counts a terminal error', async () => {
    const terminal = async (): Promise<number> =>
      (await metrics.terminalReconcileErrors.get()).values.reduce((n, v) => n + v.value, 0);
    await createPod(t, 'r-0', { app: 'r' });
    await createLock(t, lockBody('r', 'r', { leaseDurationSeconds: 30, fencing: { backend: 'Redis' } }));
    await eventually(async () => {
      const ready = (await getLock(t, 'r')).status?.conditions?.find((c) => c.type === 'Ready');
      expect(ready).toMatchObject({
        status: 'False',
        reason: 'InvalidSpec',
        message: expect.stringContaining('--redis-url') as string,
      });
      expect(await terminal()).toBeGreaterThanOrEqual(1);
    });
    const lease = await getLease(t, 'r');
    expect(lease !== undefined ? parseLease(lease).holder : undefined).toBeUndefined();
    await deleteLock(t, 'r');
  });

  it('issues increasing tokens from the etcd high-water mark alone, also across delete and re-create', async () => {
    await createPod(t, 'l-0', { app: 'l' });
    await createPod(t, 'l-1', { app: 'l' });
    await createLock(t, lockBody('l', 'l', { leaseDurationSeconds: 30 }));
    const seen: bigint[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await eventually(async () => {
        const x = await getLease(t, 'l');
        const rec = x !== undefined ? parseLease(x) : undefined;
        expect(rec?.holder).toBeDefined();
        expect(rec?.transitions).toBe(i + 1);
        return rec;
      }, 15_000);
      seen.push(r?.token ?? 0n);
      // Before the last release both pods leave the candidates, so that the lock is vacant (released)
      // when it is deleted: a held lock's deletion waits a full lease for its holder to step down.
      if (i === 3) for (const p of ['l-0', 'l-1']) await setPodStatus(t, p, 'unready');
      await releaseLease(t, 'l');
    }
    await deleteLock(t, 'l');
    await eventually(async () => {
      expect(await getLease(t, 'l')).toBeUndefined();
      await expect(getLock(t, 'l')).rejects.toMatchObject({ code: 404 }); // the finalizer let it go
    });
    for (const p of ['l-0', 'l-1']) await setPodStatus(t, p, 'ready');
    await createLock(t, lockBody('l', 'l', { leaseDurationSeconds: 30 }));
    const again = await eventually(async () => {
      const x = await getLease(t, 'l');
      const rec = x !== undefined ? parseLease(x) : undefined;
      expect(rec?.holder).toBeDefined();
      return rec;
    });
    seen.push(again?.token ?? 0n);
    for (let i = 1; i < seen.length; i++) expect(seen[i]).toBeGreaterThan(seen[i - 1] ?? 0n);
    await eventually(async () => {
      const lock = await getLock(t, 'l');
      expect(lock.status?.fencingToken).toBe(again?.token?.toString());
      expect(lock.status?.conditions?.find((c) => c.type === 'Degraded')?.message).toContain('Fencing backend Lease');
    });
  });

  it(
    'never repeats a token when someone lowers the Lease token with no policy to stop them: LeaseTampered, and the next grant above every token issued, no repair needed',
    { timeout: 60_000 },
    async () => {
      await createPod(t, 't-0', { app: 't' });
      await createPod(t, 't-1', { app: 't' });
      await createLock(t, lockBody('t', 't', { leaseDurationSeconds: 6 }));
      const held = await eventually(async () => {
        const x = await getLease(t, 't');
        const rec = x !== undefined ? parseLease(x) : undefined;
        expect(rec?.holder).toBeDefined();
        expect((await getLock(t, 't')).status?.fencingToken).toBe(rec?.token?.toString());
        return rec;
      });
      const issued = held?.token ?? 0n;
      // A co-tenant (here: the admin, no policy in this namespace) lowers the token and releases the Lease.
      const lowered = await getLease(t, 't');
      if (lowered === undefined) throw new Error('no Lease');
      await t.leases.replaceNamespacedLease({
        namespace: t.namespace,
        name: leaseName('t'),
        body: releasedLease(
          {
            ...lowered,
            metadata: {
              ...lowered.metadata,
              annotations: { ...lowered.metadata?.annotations, [TOKEN_ANNOTATION]: (issued - 1n).toString() },
            },
          },
          'Released',
        ),
      });
      // Before: no grant (Held LeaseTampered) until a person restored the annotation. Now a grant
      // above every token issued, after the last holder's lease duration (it may still believe).
      const again = await eventually(async () => {
        const rec = parseLease((await getLease(t, 't')) ?? {});
        expect(rec.holder).toBeDefined();
        expect(rec.transitions).toBeGreaterThan(held?.transitions ?? 0);
        return rec;
      }, 30_000);
      expect(again.token).toBeGreaterThan(issued);
      await eventually(async () => {
        const lock = await getLock(t, 't');
        expect(lock.status?.fencingToken).toBe(again.token?.toString());
        const events = await t.core.listNamespacedEvent({
          namespace: t.namespace,
          fieldSelector: 'involvedObject.name=t,reason=LeaseTampered',
        });
        expect(events.items.map((e) => e.type)).toEqual(['Warning']);
      });
    },
  );
});
