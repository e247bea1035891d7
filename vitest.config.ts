import { defineConfig } from 'vitest/config';

// Two projects: unit tests are pure and need nothing; integration tests share one real control
// plane and redis-server per run (started in test/support/global-setup.ts) and get a fresh
// namespace each, so they run in few forks with generous timeouts that only catch hangs.
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
        },
      },
      {
        test: {
          name: 'integration',
          // test/safety: the fault-injection suite (docs/safety.md), on the same shared control plane.
          include: ['test/integration/**/*.test.ts', 'test/safety/**/*.test.ts'],
          globalSetup: ['test/support/global-setup.ts'],
          pool: 'forks',
          maxWorkers: 2,
          testTimeout: 60_000,
          hookTimeout: 180_000,
        },
      },
    ],
  },
});
