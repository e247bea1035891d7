import { join } from 'node:path';
import { defineConfig } from 'vitest/config';
import { cacheRoot } from './hack/cache-root.ts';

// Three projects: unit tests are pure and need nothing; integration tests share one real control
// plane and redis-server per run (started in test/support/global-setup.ts) and get a fresh
// namespace each, so they run in few forks with generous timeouts that only catch hangs. Three
// forks on the 2-core machine, not two: the integration files mostly wait on leases and timers
// (`/usr/bin/time hack/npm test` with two: 548 s of wall time for 661 s of CPU, 1.2 cores busy
// on average), and a third fork took the run to 414 s with every test passing. The long
// tier (`npm run test:long`, FENCEPOST_TEST_TIER=long, test/support/tier.ts) runs some of the same
// files at larger sizes.
export default defineConfig({
  // Vitest records each file's duration there and starts the longest files first on the next run;
  // kept outside the repository so that CI's fresh clone finds the record of earlier runs (the
  // workers finish together instead of one long file starting last).
  cacheDir: join(cacheRoot(), 'vite'),
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
        },
      },
      {
        // Property-based tests (fast-check): the guards against their own real redis-server and
        // PostgreSQL (started by each file), and model-based tests of the pure decision logic.
        // No control plane; FC_SEED and FC_RUNS are the knobs (test/property/settings.ts).
        test: {
          name: 'property',
          include: ['test/property/**/*.test.ts'],
          pool: 'forks',
          maxWorkers: 3,
          testTimeout: 300_000,
          hookTimeout: 60_000,
        },
      },
      {
        test: {
          name: 'integration',
          // test/safety: the fault-injection suite (docs/safety.md), on the same shared control plane.
          include: ['test/integration/**/*.test.ts', 'test/safety/**/*.test.ts'],
          globalSetup: ['test/support/global-setup.ts'],
          pool: 'forks',
          maxWorkers: 3,
          testTimeout: 60_000,
          hookTimeout: 180_000,
        },
      },
    ],
  },
});
