/**
 * Vitest global setup for the integration project: one real control plane (etcd +
 * kube-apiserver, CRDs applied) and one redis-server for the whole run, handed to test files
 * through `inject`. Tests that restart or break a server start their own instead.
 */
import type { TestProject } from 'vitest/node';
import { startControlPlane } from './testbed/control-plane.ts';
import { startRedis } from './testbed/redis.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    kubeconfigPath: string;
    redisUrl: string;
  }
}

/** setup starts the shared servers and returns the teardown that stops them. */
export async function setup(project: TestProject): Promise<() => Promise<void>> {
  const [plane, redis] = await Promise.all([startControlPlane(), startRedis()]);
  project.provide('kubeconfigPath', plane.kubeconfigPath);
  project.provide('redisUrl', redis.url);
  return async () => {
    await Promise.allSettled([plane.stop(), redis.stop()]);
  };
}
