/**
 * The library's acquire() with `store: redis://…` against a real redis-server of its own, no
 * Kubernetes: no pod identity, no kubeconfig (the environment has neither POD_* variable set for
 * these calls).
 *
 * - two holders contend: exactly one inside at a time, tokens strictly increasing in grant order;
 * - a release wakes a waiter through the release channel, long before its backoff would;
 * - a holder paused (SIGSTOP) past its TTL: the successor is granted a larger token, the paused
 *   holder, resumed, sees its signal abort with isHeld() false, and the Redis guard refuses the
 *   write it makes anyway;
 * - a set is all or nothing; the counter lost (FLUSHALL) is reported and re-floored from `floor`;
 * - the store and the controller's FENCE_NEXT share one counter per lock, each re-flooring it;
 * - bad input is refused naming the option and the value.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { join, resolve } from 'node:path';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  acquire,
  connectStore,
  NotAcquiredError,
  redisGuard,
  StoreLockHeldError,
  StoreUrlError,
} from '../../../src/index.ts';
import { redisFence } from '../../../src/fencing/redis-fence.ts';
import { silentLogger } from '../../../src/observability/logger.ts';
import { realClock } from '../../../src/runtime/clock.ts';
import { holdLock } from '../../../src/stores/hold.ts';
import { openStore } from '../../../src/stores/open.ts';
import { startRedis, type RedisServer } from '../../support/testbed/redis.ts';
import { freePort } from '../../support/testbed/ports.ts';
import { spawnManaged } from '../../support/testbed/processes.ts';

let redis: RedisServer;
let dir: string;
beforeAll(async () => {
  redis = await startRedis();
  dir = mkdtempSync(join(tmpdir(), 'fencepost-store-'));
});
afterAll(async () => {
  await redis.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** nowUs: this host's clock in microseconds, which the Redis server on loopback floors tokens at. */
function nowUs(): bigint {
  return BigInt(Date.now()) * 1000n;
}

describe('acquire with a Redis store', () => {
  it('needs no pod identity: grants, reports the token, releases idempotently', async () => {
    expect(process.env['POD_NAME']).toBeUndefined();
    const before = nowUs();
    const lock = await acquire('plain', { store: redis.url, ttlMs: 2000 });
    // The first grant of a new lock: its token is the Redis server's clock in µs (this host's).
    expect(lock.token).toBeGreaterThan(before);
    expect(lock.token).toBeLessThanOrEqual(nowUs() + 1n);
    expect(lock).toMatchObject({ counterMissing: true, clockFloored: true });
    expect(lock.isHeld()).toBe(true);
    expect(lock.timings).toEqual({ leaseDurationMs: 2000, renewDeadlineMs: 2000 - 22, renewPeriodMs: 666 });
    await Promise.all([lock.release(), lock.release()]);
    expect(lock.isHeld()).toBe(false);
    expect(lock.signal.aborted).toBe(true);
    const c = redis.client();
    try {
      expect(await c.exists('fencepost:lock:{fencepost:fence:default/plain}')).toBe(0);
      expect(await c.get('fencepost:fence:default/plain')).toBe(lock.token.toString());
      expect(await c.ttl('fencepost:fence:default/plain')).toBe(-1); // the counter never expires
    } finally {
      c.disconnect();
    }
  });

  it('connectStore: one connection reused by many acquires, left open by their releases, closed by its owner', async () => {
    const conn = await connectStore(redis.url);
    try {
      const c = redis.client();
      const clients = async (): Promise<number> => Number(/connected_clients:(\d+)/.exec(await c.info('clients'))?.[1]);
      let last = 0n;
      let clientsBefore = 0;
      for (let i = 0; i < 20; i++) {
        const lock = await acquire('reused', { store: conn, ttlMs: 2000 });
        expect(lock.token).toBeGreaterThan(last);
        last = lock.token;
        await lock.release();
        if (i === 0) clientsBefore = await clients(); // the store's connections, its subscriber included
      }
      // No connection per acquire: the count after 19 more is what it was after the first.
      expect(await clients()).toBe(clientsBefore);
      c.disconnect();
    } finally {
      await conn.close();
    }
    await expect(acquire('reused', { store: conn, ttlMs: 2000, waitMs: 500 })).rejects.toThrow();
  });

  it('two holders contend: exactly one at a time, tokens strictly increasing', async () => {
    let inside = 0;
    let overlaps = 0;
    const grants: bigint[] = [];
    const worker = async (): Promise<void> => {
      for (let i = 0; i < 6; i++) {
        const lock = await acquire('contend', { store: redis.url, ttlMs: 2000, waitMs: 20_000 });
        if (++inside > 1) overlaps++;
        grants.push(lock.token);
        await sleep(15);
        inside--;
        await lock.release();
      }
    };
    await Promise.all([worker(), worker()]);
    expect(overlaps).toBe(0);
    expect(grants).toHaveLength(12);
    for (let i = 1; i < grants.length; i++) expect(grants[i]).toBeGreaterThan(grants[i - 1] ?? 0n);
  });

  it('a release wakes the waiter through pub/sub, long before its backoff would', async () => {
    const store = await openStore(redis.url, 'store', realClock);
    try {
      const a = await acquire('wake', { store: redis.url, ttlMs: 10_000 });
      // The waiter's fallback backoff is 5 s every time: only the notification can wake it sooner.
      const waiting = holdLock(store.lock('default', 'wake'), {
        lock: 'wake',
        ttlMs: 10_000,
        clock: realClock,
        log: silentLogger,
        ifHeld: 'wait',
        floor: () => 0n,
        backoff: { baseMs: 5000, capMs: 5000 },
        random: () => 0.999,
      });
      await sleep(300); // refused once, now sleeping its 5 s
      const releasedAt = performance.now();
      await a.release();
      const r = await waiting;
      const wokeAfterMs = performance.now() - releasedAt;
      expect(r.kind).toBe('held');
      expect(wokeAfterMs).toBeLessThan(1000);
      if (r.kind === 'held') {
        expect(r.hold.token).toBeGreaterThan(a.token);
        await r.hold.release();
      }
    } finally {
      await store.close();
    }
  });

  it('a holder paused past its TTL: the successor gets a larger token, the resumed holder sees its signal abort, and the guard refuses its write', async () => {
    const child = spawnManaged('holder', process.execPath, {
      args: [resolve(import.meta.dirname, 'holder-child.ts'), redis.url, 'paused', '1000'],
      logFile: join(dir, 'holder.log'),
      pipeStdio: true,
    });
    const c = redis.client();
    try {
      const lines = createInterface({ input: child.stdout ?? process.stdin })[Symbol.asyncIterator]();
      const next = async (): Promise<string> => String((await lines.next()).value);
      const pausedToken = BigInt((await next()).split(' ')[1] ?? '');
      child.signal('SIGSTOP');
      const successor = await acquire('paused', { store: redis.url, ttlMs: 1000, waitMs: 5000 });
      expect(successor.token).toBeGreaterThan(pausedToken);
      expect(await redisGuard(c, { lock: 'paused' }).write('account', successor.token, 'successor')).toEqual({
        accepted: true,
        duplicate: false,
      });
      child.signal('SIGCONT');
      expect((await next()).startsWith('lost false lock paused lost:')).toBe(true);
      // The resumed holder writes anyway (it checked before it was paused): refused.
      child.stdin?.write('write\n');
      expect(await next()).toBe(`write stale ${successor.token}`);
      expect(await c.get('account')).toBe('successor');
      child.stdin?.end();
      expect(await child.exited).toBe(0);
      // Its release was a compare-and-delete: the successor still holds the lock.
      expect(successor.isHeld()).toBe(true);
      const other = await acquire('paused', { store: redis.url, ttlMs: 1000, ifHeld: 'fail' }).catch((e: unknown) => e);
      expect(other).toBeInstanceOf(StoreLockHeldError);
      await successor.release();
    } finally {
      c.disconnect();
      await child.stop();
    }
  });

  it('a set is all or nothing: when one lock is held, the others taken are released', async () => {
    const b = await acquire('set-b', { store: redis.url, ttlMs: 2000 });
    const err = await acquire(['set-b', 'set-a'], { store: redis.url, ttlMs: 2000, waitMs: 300 }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(NotAcquiredError);
    expect((err as Error).message).toContain('lock set-b not granted within 300 ms');
    // set-a was taken first (global order) and released: free at once.
    const a = await acquire('set-a', { store: redis.url, ttlMs: 2000, ifHeld: 'fail' });
    await a.release();
    await b.release();
    const both = await acquire(['set-b', 'set-a'], { store: redis.url, ttlMs: 2000 });
    expect(both.locks.map((l) => l.lock)).toEqual(['set-a', 'set-b']);
    expect(both.isHeld()).toBe(true);
    await both.release();
    expect(both.signal.aborted).toBe(true);
  });

  it('reports a lost counter (FLUSHALL): the next token is floored at the clock, above the lost ones; and at the floor hook when that is higher', async () => {
    const first = await acquire('flushed', { store: redis.url, ttlMs: 2000 });
    await first.release();
    const second = await acquire('flushed', { store: redis.url, ttlMs: 2000 });
    expect(second).toMatchObject({ token: first.token + 1n, counterMissing: false, clockFloored: false });
    await second.release();
    await redis.flushAll();
    const after = await acquire('flushed', { store: redis.url, ttlMs: 2000 });
    expect(after).toMatchObject({ counterMissing: true, clockFloored: true });
    expect(after.token).toBeGreaterThan(second.token);
    await after.release();
    await redis.flushAll();
    const high = 10n ** 17n; // above the clock in µs until the year 5138
    const floored = await acquire('flushed', { store: redis.url, ttlMs: 2000, floor: () => high });
    expect(floored).toMatchObject({ token: high + 1n, counterMissing: true });
    await floored.release();
  });

  it("shares the controller's counter: FENCE_NEXT (redisFence) and the store continue one sequence, each re-flooring", async () => {
    const c = redis.client();
    try {
      const controller = redisFence(c);
      const viaController = await controller.next('fencepost:fence:default/moved', 0n);
      expect(viaController).toEqual({ token: 1n, refloored: false, existed: false, hadTtl: false });
      // The store's first grant here: the counter exists, but no store process issued from it yet,
      // so its token is floored at the clock, still above the controller's.
      const viaStore = await acquire('moved', { store: redis.url, ttlMs: 2000 });
      expect(viaStore).toMatchObject({ counterMissing: false, clockFloored: true });
      expect(viaStore.token).toBeGreaterThan(1n);
      await viaStore.release();
      expect((await controller.next('fencepost:fence:default/moved', 0n)).token).toBe(viaStore.token + 1n);
      // The shared fence_next raises a counter below the floor, and removes a TTL, in either script.
      await c.set('fencepost:fence:default/moved', '1', 'EX', 3600);
      const raised = await acquire('moved', { store: redis.url, ttlMs: 2000, floor: () => 10n });
      expect(raised.token).toBe(11n);
      expect(await c.ttl('fencepost:fence:default/moved')).toBe(-1);
      await raised.release();
      expect(await controller.next('fencepost:fence:default/moved', 20n)).toMatchObject({
        token: 21n,
        refloored: true,
      });
    } finally {
      c.disconnect();
    }
  });

  it('a Redis that is down: not acquired within waitMs, naming the store and why', async () => {
    const port = await freePort(); // nothing listens there
    const started = performance.now();
    const err = await acquire('down', { store: `redis://127.0.0.1:${port}`, waitMs: 700 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NotAcquiredError);
    expect((err as Error).message).toContain(
      `acquire(down): not granted within 700 ms (redis://127.0.0.1:${port}: not connected (connect ECONNREFUSED`,
    );
    expect(performance.now() - started).toBeLessThan(2000);
  });

  it('a Redis that stops answering (SIGSTOP): a release gives up at the command bound, naming the store and the bound', async () => {
    // The bound is defineScript's (stores/redis/connect.ts), not ioredis's commandTimeout.
    const frozen = await startRedis();
    try {
      const held = await acquire('frozen', { store: frozen.url, ttlMs: 10_000 });
      frozen.process().signal('SIGSTOP');
      try {
        const started = performance.now();
        const err = await held.release().catch((e: unknown) => e);
        expect((err as Error).message).toBe(`${frozen.url}: fencepostStoreRelease: no answer within 2000 ms`);
        expect(performance.now() - started).toBeLessThan(15_000); // a hang, not a timing
      } finally {
        frozen.process().signal('SIGCONT');
      }
    } finally {
      await frozen.stop();
    }
  });

  it('keeps the namespaces apart', async () => {
    const a = await acquire('shared-name', { store: redis.url, ttlMs: 2000, namespace: 'team-a' });
    const b = await acquire('shared-name', { store: redis.url, ttlMs: 2000, namespace: 'team-b', ifHeld: 'fail' });
    expect([a.counterMissing, b.counterMissing]).toEqual([true, true]); // each its own counter
    await Promise.all([a.release(), b.release()]);
  });

  it.each([
    { opts: { store: 'redis//127.0.0.1' }, type: StoreUrlError, says: 'options.store: must be a URL' },
    { opts: { store: 'redis://127.0.0.1:0' }, type: StoreUrlError, says: 'options.store: port 0 is not in 1..65535' },
    {
      opts: { ttlMs: 100 },
      type: RangeError,
      says: 'options.ttlMs: must be an integer number of ms in [300, 86400000], got 100',
    },
    { opts: { namespace: 'Team_A' }, type: TypeError, says: 'options.namespace: must be a DNS label' },
    { opts: { runId: 'r1' }, type: TypeError, says: 'options.runId: not for a store lock' },
    { opts: { kubeconfig: '/nowhere' }, type: TypeError, says: 'options.kubeconfig: not for a store lock' },
  ])('refuses $says', async ({ opts, type, says }) => {
    const err = await acquire('ok', { store: redis.url, ...opts }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(type);
    expect((err as Error).message).toContain(says);
  });

  it('refuses a lock name that is not a DNS label, naming it', async () => {
    await expect(acquire('Billing/x', { store: redis.url })).rejects.toThrow(
      'acquire: lock name must be a DNS label (a-z, 0-9, -; at most 63), got "Billing/x"',
    );
  });
});
