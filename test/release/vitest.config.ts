import { resolve } from 'node:path';
import { defineConfig } from 'vitest/config';

// `npm run test:release`: hack/release.sh publishes two versions into a registry on loopback, then
// a cluster with kwok nodes installs, upgrades and uninstalls the chart from it (test/release).
// eslint-disable-next-line no-restricted-syntax -- vitest reads the config's default export
export default defineConfig({
  root: resolve(import.meta.dirname, '../..'),
  test: {
    name: 'release',
    include: ['test/release/**/*.test.ts'],
    pool: 'forks',
    maxWorkers: 1,
    fileParallelism: false,
    testTimeout: 300_000,
    hookTimeout: 600_000,
  },
});
