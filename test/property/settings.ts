/**
 * Knobs of the property tests, read once: the seed and the number of runs, so that a CI failure
 * replays exactly (fast-check prints `seed` and `path` in the failure message; pass them back as
 * FC_SEED, and the path through `fcParams({ path })` while debugging).
 *
 * - FC_SEED: the seed of every property (default {@link DEFAULT_SEED}, fixed, so CI is repeatable;
 *   set it to explore other inputs).
 * - FC_RUNS: a multiplier on every property's default run count (default 1). `FC_RUNS=10` is the
 *   nightly size (the race model: 1000 sequences per seed). Fractions shrink a run for quick local
 *   checks.
 */
import type fc from 'fast-check';

/** DEFAULT_SEED: fixed, so that CI runs the same inputs every time. */
export const DEFAULT_SEED = 20261203;

function numberFromEnv(name: string, fallback: number): number {
  const text = process.env[name];
  if (text === undefined || text === '') return fallback;
  const v = Number(text);
  if (!Number.isFinite(v) || v <= 0) throw new Error(`${name} must be a positive number, got ${JSON.stringify(text)}`);
  return v;
}

/** SEED is FC_SEED, or the fixed default. */
export const SEED = Math.trunc(numberFromEnv('FC_SEED', DEFAULT_SEED));
/** RUNS_FACTOR is FC_RUNS (a multiplier of each property's default run count). */
export const RUNS_FACTOR = numberFromEnv('FC_RUNS', 1);

/** runs scales a property's default run count by FC_RUNS (at least 1). */
export function runs(defaultRuns: number): number {
  return Math.max(1, Math.round(defaultRuns * RUNS_FACTOR));
}

/**
 * fcParams: the parameters every property passes to fc.assert: the seed, the scaled run count,
 * and `endOnFailure: false` so that a counterexample is shrunk before it is reported.
 */
export function fcParams<T>(defaultRuns: number, extra: fc.Parameters<T> = {}): fc.Parameters<T> {
  return { seed: SEED, numRuns: runs(defaultRuns), ...extra };
}

/** banner is logged once per file so that a CI log says which inputs were tried. */
export function banner(what: string, totalRuns: number): string {
  return `${what}: FC_SEED=${SEED} FC_RUNS=${RUNS_FACTOR} (${totalRuns} runs); replay a failure with FC_SEED=<seed> and the printed path`;
}
