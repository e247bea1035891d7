import { resolve } from 'node:path';
import { defineConfig } from 'vitest/config';

// `npm run test:e2e`: each file starts its own cluster with nodes (about 5 s), installs the chart
// with helm and runs scenarios that take tens of seconds; files run one at a time (2 cores).
// eslint-disable-next-line no-restricted-syntax -- vitest reads the config's default export
export default defineConfig({
  root: resolve(import.meta.dirname, '../..'),
  test: {
    name: 'e2e',
    include: ['test/e2e/**/*.test.ts'],
    pool: 'forks',
    maxWorkers: 1,
    fileParallelism: false,
    testTimeout: 120_000,
    hookTimeout: 240_000,
  },
});
