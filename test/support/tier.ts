/**
 * tier.ts — the two sizes of the suite. The default (`hack/npm test`, what `.ci/run` runs) proves
 * every property once at a size that keeps CI within its time budget; the long tier
 * (`hack/npm run test:long`, which sets FENCEPOST_TEST_TIER=long) runs the same tests with the same
 * assertions at the sizes that re-prove them at length: more trials per fault type, a longer
 * nemesis, more run ids, the three slowest calibrations, and the end-to-end node-loss scenario,
 * which waits out the real pod GC. package.json's `test:long` names the files.
 * Each file's own knob (SAFETY_TRIALS, NEMESIS_SECONDS, …) still overrides either size.
 */

/** TIER_ENV names the variable that selects the long tier. */
export const TIER_ENV = 'FENCEPOST_TEST_TIER';

/** LONG is true in the long tier (FENCEPOST_TEST_TIER=long). */
export const LONG = process.env[TIER_ENV] === 'long';

/**
 * tierSize is a test's size: the environment variable `knob` when it is set (a positive integer,
 * else an error naming it), otherwise `long` in the long tier and `ci` in the default one.
 */
export function tierSize(knob: string, ci: number, long: number): number {
  const raw = process.env[knob];
  if (raw === undefined || raw === '') return LONG ? long : ci;
  const n = Number(raw);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`${knob}=${JSON.stringify(raw)}: expected a positive integer`);
  return n;
}
