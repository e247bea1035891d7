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
          include: ['test/integration/**/*.test.ts'],
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
