/**
 * results.ts — where the soaks, the long safety runs and the benchmarks write their raw results:
 * FENCEPOST_RESULTS_DIR, or `.results/` at the repository root, which git ignores. Raw results are
 * large (every sample, every trial) and a new one is written on every run, so they stay out of the
 * source tree. What is committed is a summary of the run the docs cite: one file per benchmark in
 * bench/results/ (`cp .results/bench/<name>.json bench/results/` when the docs take its figures) and
 * one per safety fault class in test/safety/results/ (`node hack/soak-totals.ts --write <files>`).
 */
import { mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

/** RESULTS_ENV names the variable that moves the raw results elsewhere. */
export const RESULTS_ENV = 'FENCEPOST_RESULTS_DIR';

/** RESULTS_DIR is the folder of raw results (absolute). */
export const RESULTS_DIR = resolve(process.env[RESULTS_ENV] || join(import.meta.dirname, '..', '.results'));

/** resultsPath is `RESULTS_DIR/<parts…>`, its parent folder created. */
export function resultsPath(...parts: string[]): string {
  const path = join(RESULTS_DIR, ...parts);
  mkdirSync(dirname(path), { recursive: true });
  return path;
}
