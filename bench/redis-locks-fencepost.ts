/**
 * fencepost's three lock stores behind the benchmark's BenchLockImpl (bench/peers/redis-lock-peers.ts):
 * the Redis store and the Redlock store through `acquire(name, { store })`, standalone (no
 * Kubernetes), and the Lease store through `acquire(name)` with a pod identity, on a control plane
 * with the controller in-process (Mutex mode: first come, first served, as the Redis locks are).
 * Every `make()` is a separate holder: its own connections (Redis stores) or its own pod (Lease).
 */
import { acquire } from '../src/index.ts';
import { connectStore, type StoreConnection } from '../src/client/store-acquire.ts';
import { startLockController, type LockController } from '../src/controllers/distributedlock/setup.ts';
import { apiClientFor } from '../src/kube/api-client.ts';
import { silentLogger } from '../src/observability/logger.ts';
import { realClock } from '../src/runtime/clock.ts';
import { createLock, createPod, lockBody, testKube } from '../test/support/fixtures.ts';
import { startControlPlane, type ControlPlane } from '../test/support/testbed/control-plane.ts';
import type { BenchLockImpl, HeldBenchLock } from './peers/redis-lock-peers.ts';

/** FencepostImpls makes holders of each fencepost store; close() stops what it started. */
export interface FencepostImpls {
  redis(): BenchLockImpl;
  redlock(): BenchLockImpl;
  lease(): BenchLockImpl;
  close(): Promise<void>;
}

/** LEASE_LOCK: the Lease-store lock every Lease holder contends for (and the latency runs use). */
const LEASE_LOCK = 'bench';

/**
 * fencepostImpls: urls[0] is the single Redis (also the controller's fencing backend), urls (all
 * five) the Redlock masters. Starts a control plane for the Lease store.
 */
export async function fencepostImpls(urls: readonly string[], ttlMs: number): Promise<FencepostImpls> {
  const single = urls[0];
  if (single === undefined) throw new Error('fencepostImpls: no Redis URL');
  const redlockUrl = `redlock://${urls.map((u) => new URL(u).host).join(',')}`;
  let plane: ControlPlane | undefined;
  let controller: LockController | undefined;
  try {
    plane = await startControlPlane();
    const namespace = await plane.createNamespace('bench-redis-locks-');
    const t = testKube(plane.kubeConfig(), namespace);
    controller = await startLockController({
      kc: apiClientFor(plane.kubeconfigPath),
      redisUrl: single,
      namespace,
      identity: 'bench-controller',
      clock: realClock,
      log: silentLogger,
    });
    await createLock(
      t,
      lockBody(LEASE_LOCK, LEASE_LOCK, { mode: 'Mutex', leaseDurationSeconds: Math.round(ttlMs / 1000) }),
    );
    const kubeconfig = plane.kubeconfigPath;
    let pods = 0;
    const connections: Promise<StoreConnection>[] = [];
    // Each holder opens one connection (connectStore) and reuses it, as the peers reuse their clients.
    const storeImpl = (name: string, url: string, masters: number): BenchLockImpl => {
      let conn: Promise<StoreConnection> | undefined;
      return {
        name,
        masters,
        issuesTokens: true,
        acquire: async (resource) => {
          if (conn === undefined) {
            conn = connectStore(url, { waitMs: 10_000 });
            connections.push(conn);
          }
          const held = await acquire(resource, { store: await conn, ttlMs, waitMs: 60_000 });
          return { token: held.token, release: () => held.release() };
        },
      };
    };
    const started = { plane, controller };
    return {
      redis: () => storeImpl('fencepost Redis store', single, 1),
      redlock: () => storeImpl('fencepost Redlock store', redlockUrl, urls.length),
      lease: () => {
        // Its own pod, created on first use (make() is synchronous).
        const name = `holder-${pods++}`;
        let pod: Promise<{ name: string; uid: string }> | undefined;
        return {
          name: 'fencepost Lease store (Mutex)',
          masters: 1,
          issuesTokens: true,
          acquire: async (): Promise<HeldBenchLock> => {
            pod ??= createPod(t, name, { app: LEASE_LOCK }).then((p) => ({ name, uid: p.metadata?.uid ?? '' }));
            const held = await acquire(LEASE_LOCK, { kubeconfig, namespace, pod: await pod, waitMs: 60_000 });
            return { token: held.token, release: () => held.release() };
          },
        };
      },
      close: async () => {
        await Promise.allSettled(connections.map(async (c) => (await c).close()));
        await started.controller.stop();
        await started.plane.stop();
      },
    };
  } catch (err) {
    await controller?.stop();
    await plane?.stop();
    throw err;
  }
}
