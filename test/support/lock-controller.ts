/**
 * useLockController: the setup most integration tests share — a fresh namespace on the shared
 * API server and the lock controller running in-process, watching only that namespace, stopped
 * after the file's tests. Call it at the top of a describe block.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll } from 'vitest';
import { startLockController, type LockController } from '../../src/controllers/distributedlock/setup.ts';
import { silentLogger } from '../../src/observability/logger.ts';
import { realClock } from '../../src/runtime/clock.ts';
import { freshNamespace, sharedKubeConfig, sharedRedisUrl } from './env.ts';
import { testKube, type TestKube } from './fixtures.ts';
import { openStoreObserver } from '../../src/controllers/distributedlock/store-observer.ts';
import type { StoreObserver } from '../../src/controllers/distributedlock/store-locks.ts';
import { startRedis, type RedisServer } from './testbed/redis.ts';

/** ControllerFixture gives tests the namespace's clients once beforeAll has run. */
export interface ControllerFixture {
  readonly t: TestKube;
  readonly controller: LockController;
}

/**
 * startTestController starts the lock controller in-process for one namespace, as the tests run
 * it: the real clock, a silent log, the shared admin kubeconfig and the shared Redis unless given
 * (`kc`: another, e.g. through a fault proxy; `redisUrl`: another list of shards).
 */
export function startTestController(o: {
  readonly namespace: string;
  readonly identity: string;
  readonly kc?: KubeConfig;
  readonly redisUrl?: string;
}): Promise<LockController> {
  return startLockController({
    kc: o.kc ?? sharedKubeConfig(),
    redisUrl: o.redisUrl ?? sharedRedisUrl(),
    namespace: o.namespace,
    identity: o.identity,
    clock: realClock,
    log: silentLogger,
  });
}

/**
 * useLockController registers beforeAll/afterAll. redisUrl: the shared Redis by default, a
 * function for a Redis the file starts itself, or null for the Lease fencing backend.
 */
export function useLockController(prefix: string, redisUrl: (() => string) | null = sharedRedisUrl): ControllerFixture {
  const kc = sharedKubeConfig();
  let t: TestKube | undefined;
  let controller: LockController | undefined;
  beforeAll(async () => {
    t = testKube(kc, await freshNamespace(kc, prefix));
    controller = await startLockController({
      kc,
      redisUrl: redisUrl === null ? undefined : redisUrl(),
      namespace: t.namespace,
      identity: 'test-controller',
      clock: realClock,
      log: silentLogger,
    });
  });
  afterAll(async () => {
    await controller?.stop();
  });
  return {
    get t() {
      if (t === undefined) throw new Error('useLockController: used before beforeAll');
      return t;
    },
    get controller() {
      if (controller === undefined) throw new Error('useLockController: used before beforeAll');
      return controller;
    },
  };
}

/** StoreFixture: a namespace, the controller observing store locks, and the Redis it reads. */
export interface StoreFixture {
  readonly t: TestKube;
  /** redisUrl: one Redis (spec.store Redis); redlockUrl: five masters (spec.store Redlock). */
  readonly redisUrl: string;
  readonly redlockUrl: string;
}

/**
 * useStoreController registers beforeAll/afterAll: six redis-servers of the file's own (one for
 * Redis store locks, five Redlock masters), a fresh namespace, and the lock controller observing
 * both stores (--redis-store-url, --redlock-store-url), as the store-lock tests need.
 */
export function useStoreController(prefix: string): StoreFixture {
  const kc = sharedKubeConfig();
  let t: TestKube | undefined;
  let controller: LockController | undefined;
  let observer: StoreObserver | undefined;
  const servers: RedisServer[] = [];
  beforeAll(async () => {
    servers.push(...(await Promise.all(Array.from({ length: 6 }, () => startRedis()))));
    t = testKube(kc, await freshNamespace(kc, prefix));
    observer = await openStoreObserver({ redis: fixture.redisUrl, redlock: fixture.redlockUrl }, silentLogger);
    controller = await startLockController({
      kc,
      redisUrl: undefined,
      namespace: t.namespace,
      identity: 'test-controller',
      clock: realClock,
      log: silentLogger,
      stores: observer,
    });
  });
  afterAll(async () => {
    await controller?.stop();
    await observer?.close();
    await Promise.all(servers.map((s) => s.stop()));
  });
  const fixture: StoreFixture = {
    get t() {
      if (t === undefined) throw new Error('useStoreController: used before beforeAll');
      return t;
    },
    get redisUrl() {
      return servers[0]?.url ?? '';
    },
    get redlockUrl() {
      return `redlock://${servers
        .slice(1)
        .map((s) => s.url.replace(/^redis:\/\//, ''))
        .join(',')}`;
    },
  };
  return fixture;
}
