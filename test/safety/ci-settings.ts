/**
 * ci-settings.ts — what the CI-size safety files (safety.test.ts, calibration.test.ts) share: the
 * knobs read from the environment and the table they print. Each file draws its seed once (vitest
 * runs each in its own process) and prints it with every table, so a failing CI run can be replayed
 * with SAFETY_SEED.
 */
import { formatOutageTable } from './faults/apiserver.ts';
import { formatStepDowns, formatTable } from './report.ts';
import { formatFailures, type FaultSummary } from './runner.ts';

/** CONCURRENCY is how many trials run at once (SAFETY_CONCURRENCY, default 10). */
export const CONCURRENCY = Number(process.env['SAFETY_CONCURRENCY'] ?? '10');
/**
 * SETUP_RETRIES: a CI trial that fails before its fault (a set-up timeout on a busy machine) is run
 * again as a new trial, up to this many times (SAFETY_SETUP_RETRIES, default 2), so that every run
 * still has its full count of trials with the fault; the failed attempts are reported as `not run`.
 */
export const SETUP_RETRIES = Number(process.env['SAFETY_SETUP_RETRIES'] ?? '2');
/** LEASE_SECONDS is every trial lock's lease: short, so that a trial takes seconds. */
export const LEASE_SECONDS = 1;
/** SEED is the run's base seed (SAFETY_SEED, else random); trial i uses SEED + i. */
export const SEED =
  process.env['SAFETY_SEED'] !== undefined ? Number(process.env['SAFETY_SEED']) : Math.floor(Math.random() * 2 ** 31);

/** printSummaries writes a titled fault table, the seed and every failed trial's replay command. */
export function printSummaries(title: string, summaries: readonly FaultSummary[]): void {
  const failures = formatFailures(summaries);
  const outages = summaries.flatMap((s) => s.outages ?? []);
  process.stdout.write(
    `\n${title} (seed ${SEED}; replay the run with SAFETY_SEED=${SEED})\n${formatTable(summaries)}\n${formatStepDowns(summaries)}\n${outages.length > 0 ? `\nControl-plane outages (apiserver fault):\n${formatOutageTable(outages)}\n` : ''}${failures !== '' ? `${failures}\n` : ''}`,
  );
}
