/** Per-test access to the shared control plane and Redis that global-setup started. */
import { KubeConfig } from '@kubernetes/client-node';
import { createTestNamespace } from './testbed/control-plane.ts';
import { inject } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';

/** sharedKubeConfig returns an admin KubeConfig for the run's shared API server. */
export function sharedKubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(inject('kubeconfigPath'));
  return kc;
}

/** sharedKubeconfigPath is the admin kubeconfig file, for kubectl. */
export function sharedKubeconfigPath(): string {
  return inject('kubeconfigPath');
}

/** sharedRedisUrl is the run's shared redis-server. */
export function sharedRedisUrl(): string {
  return inject('redisUrl');
}

/** freshNamespace creates a namespace with a generated name for one test file. */
export function freshNamespace(kc: KubeConfig, prefix = 'test-'): Promise<string> {
  return createTestNamespace(kc, prefix);
}

/**
 * eventually retries an assertion until it passes or timeoutMs passes (then rethrows its last
 * failure). The timeout only catches hangs; it is not a performance claim.
 */
export async function eventually<T>(check: () => Promise<T> | T, timeoutMs = 20_000, intervalMs = 50): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (err) {
      if (performance.now() > deadline) throw err;
    }
    await sleep(intervalMs);
  }
}
