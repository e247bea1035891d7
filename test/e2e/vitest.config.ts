import { resolve } from 'node:path';
import { configDefaults, defineConfig } from 'vitest/config';
import { LONG } from '../support/tier.ts';

/**
 * LONG_ONLY: e2e files that run only in the long tier (`hack/npm run test:long`). node-loss waits
 * out kube-controller-manager's pod GC and a 90 s lease (about 100 s of the suite's 190 s), and on
 * the real node (FENCEPOST_E2E_RUNTIME=kubelet) starts a second kubelet to lose (57–125 s); the rule
 * it proves on a real cluster — a holder whose pod the GC marked Failed keeps the lock until its
 * lease and lock delay have passed — is checked on every CI run by the safety suite's node-loss
 * trials (the real controller and API server, the GC's two calls made by the trial) and by the
 * decision's unit tests (test/unit/controllers/decide.test.ts, pods.test.ts).
 */
const LONG_ONLY = ['test/e2e/node-loss.test.ts'];

// `npm run test:e2e`: the files share the run's cluster (shared-cluster.ts boots it on the first
// file's request: a real node with FENCEPOST_E2E_RUNTIME=kubelet; under the pod runner each file
// boots its own, about 5 s) or boot their own (node-loss), the chart installed with helm, and run
// scenarios that take tens of seconds; files run one at a time (2 cores).
// eslint-disable-next-line no-restricted-syntax -- vitest reads the config's default export
export default defineConfig({
  root: resolve(import.meta.dirname, '../..'),
  test: {
    name: 'e2e',
    include: ['test/e2e/**/*.test.ts'],
    globalSetup: ['test/e2e/shared-cluster.ts'],
    exclude: [...configDefaults.exclude, ...(LONG ? [] : LONG_ONLY)],
    pool: 'forks',
    maxWorkers: 1,
    fileParallelism: false,
    testTimeout: 120_000,
    hookTimeout: 240_000,
  },
});
