/**
 * Vitest global setup for the integration project: one real control plane (etcd +
 * kube-apiserver, CRDs applied) and one redis-server for the whole run, handed to test files
 * through `inject`. Tests that restart or break a server start their own instead. It also builds
 * the shipped agent executable (dist/bin/fencepost-agent) that agent and exec tests start.
 */
import type { TestProject } from 'vitest/node';
import { buildAgent } from '../../hack/build-agent.ts';
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
  // The agent executable every agent and exec test starts (test/support/agent-binary.ts).
  buildAgent();
  const [plane, redis] = await Promise.all([startControlPlane(), startRedis()]);
  project.provide('kubeconfigPath', plane.kubeconfigPath);
  project.provide('redisUrl', redis.url);
  return async () => {
    await Promise.allSettled([plane.stop(), redis.stop()]);
  };
}
