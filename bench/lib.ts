/**
 * Pieces every benchmark in bench/ shares: nearest-rank percentiles, the --runs flag, stopping
 * on SIGINT/SIGTERM, starting the testbed's servers, and a description of the machine.
 */
import { writeFileSync } from 'node:fs';
import { arch, cpus, loadavg, platform, release, totalmem } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { RESULTS_DIR, resultsPath } from '../hack/results.ts';
import { startControlPlane, type ControlPlane } from '../test/support/testbed/control-plane.ts';
import { startRedis, type RedisServer } from '../test/support/testbed/redis.ts';

/** percentile uses the nearest-rank method on a copy of xs (NaN for none). */
export function percentile(xs: readonly number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  const i = Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1));
  return s[i] ?? Number.NaN;
}

/**
 * parseRuns reads `--runs N` (and `--help`) from the command line: the run count, or undefined
 * after printing usage. Throws naming the flag and the value on a bad count.
 */
export function parseRuns(defaultRuns: number, usage: string): number | undefined {
  const { values } = parseArgs({
    options: { runs: { type: 'string', default: String(defaultRuns) }, help: { type: 'boolean', short: 'h' } },
    strict: true,
  });
  if (values.help === true) {
    process.stdout.write(usage);
    return undefined;
  }
  const runs = Number(values.runs);
  if (!Number.isInteger(runs) || runs < 1)
    throw new Error(`--runs: must be a positive integer, got ${JSON.stringify(values.runs)}`);
  return runs;
}

/** Interrupt: a signal aborted on SIGINT/SIGTERM, and dispose() to remove the handlers. */
export interface Interrupt {
  readonly signal: AbortSignal;
  dispose(): void;
}

/** onInterrupt aborts the returned signal on the first SIGINT or SIGTERM, so the benchmark can clean up. */
export function onInterrupt(): Interrupt {
  const abort = new AbortController();
  const onSignal = (sig: NodeJS.Signals): void => {
    process.stderr.write(`\n${sig}: stopping\n`);
    abort.abort(new Error(`interrupted by ${sig}`));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  return {
    signal: abort.signal,
    dispose: () => {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    },
  };
}

/** startServers starts a control plane and a redis-server side by side; if either fails, the other is stopped. */
export async function startServers(): Promise<{ plane: ControlPlane; redis: RedisServer }> {
  const [p, r] = await Promise.allSettled([startControlPlane(), startRedis()]);
  if (p.status === 'fulfilled' && r.status === 'fulfilled') return { plane: p.value, redis: r.value };
  await Promise.allSettled([
    p.status === 'fulfilled' ? p.value.stop() : undefined,
    r.status === 'fulfilled' ? r.value.stop() : undefined,
  ]);
  throw p.status === 'rejected' ? p.reason : (r as PromiseRejectedResult).reason;
}

/** Machine describes where a benchmark ran (recorded with every result). */
export interface Machine {
  readonly cpu: string;
  readonly cores: number;
  readonly totalMemoryBytes: number;
  readonly platform: string;
  readonly arch: string;
  readonly kernel: string;
}

/** describeMachine reads this machine's description. */
export function describeMachine(): Machine {
  const cpu = cpus();
  return {
    cpu: cpu[0]?.model ?? 'unknown',
    cores: cpu.length,
    totalMemoryBytes: totalmem(),
    platform: platform(),
    arch: arch(),
    kernel: release(),
  };
}

/** machineLine is the one-line machine header of a results table. */
export function machineLine(m: Pick<Machine, 'cpu' | 'cores' | 'totalMemoryBytes'>): string {
  return `machine: ${m.cpu}, ${m.cores} cores, ${(m.totalMemoryBytes / 2 ** 30).toFixed(1)} GiB`;
}

/** Stats: nearest-rank percentiles and the maximum of a series, rounded to 0.01. */
export interface Stats {
  readonly n: number;
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
  readonly max: number;
}

const round2 = (n: number): number => Math.round(n * 100) / 100;

/** summarize computes Stats over xs (NaN fields for none). */
export function summarize(xs: readonly number[]): Stats {
  return {
    n: xs.length,
    p50: round2(percentile(xs, 50)),
    p90: round2(percentile(xs, 90)),
    p99: round2(percentile(xs, 99)),
    max: round2(xs.length > 0 ? Math.max(...xs) : Number.NaN),
  };
}

/** LoadAverage: the 1, 5 and 15 minute load averages, with the time they were read. */
export interface LoadAverage {
  readonly at: string;
  readonly one: number;
  readonly five: number;
  readonly fifteen: number;
}

/** loadAverage reads the load average now (the machine is shared: every result records it at start and end). */
export function loadAverage(): LoadAverage {
  const [one = 0, five = 0, fifteen = 0] = loadavg();
  return { at: new Date().toISOString(), one: round2(one), five: round2(five), fifteen: round2(fifteen) };
}

/** RAW_DIR is where every benchmark run writes its JSON: under the ignored raw results (hack/results.ts). */
export const RAW_DIR = join(RESULTS_DIR, 'bench');

/**
 * KEPT_DIR is the committed bench/results/: one file per benchmark, the run whose figures the docs
 * quote (`npm run bench:keep -- NAME…` copies a run there; report.ts and plot.ts read it).
 */
export const KEPT_DIR = join(import.meta.dirname, 'results');

/** writeResult writes RAW_DIR/<file> (pretty JSON) and returns its path. */
export function writeResult(file: string, result: unknown): string {
  const path = resultsPath('bench', file);
  writeFileSync(path, `${JSON.stringify(result, null, 2)}\n`);
  return path;
}

/**
 * textTable lays out rows (the first is the header) as aligned text lines: the first `leftColumns`
 * columns padded to the left edge, the rest to the right (numbers), two spaces apart, with a
 * dashed rule under the header unless `rule` is false.
 */
export function textTable(rows: readonly (readonly string[])[], leftColumns: number, rule = true): string[] {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
  const line = (r: readonly string[]): string =>
    r.map((c, i) => (i < leftColumns ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join('  ');
  return [
    line(rows[0] ?? []),
    ...(rule ? [widths.map((w) => '-'.repeat(w)).join('  ')] : []),
    ...rows.slice(1).map(line),
  ];
}

/** runMain runs a benchmark's main and turns a failure into one line on stderr (prefixed by name) and exit code 1. */
export function runMain(name: string, main: () => Promise<void>): void {
  main().then(
    () => {
      process.exitCode = 0;
    },
    (err: unknown) => {
      process.stderr.write(`${name}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
