/**
 * The trial runner: N trials per fault type on one safety testbed, `concurrency` at a time (each
 * on its own lock), fault types one after another. It aggregates the checker's reports into the
 * fault table of docs/safety.md and names every failed trial with its seed and replay command.
 */
import { percentile } from '../../bench/lib.ts';
import type { Invariant } from './checker.ts';
import { summarizeOutages, type OutageRow } from './faults/apiserver.ts';
import { withControllerSplit } from './faults/controller-split.ts';
import { withShardMove } from './faults/shard-move.ts';
import { withRunIdFleet } from './faults/run-id-fleet.ts';
import { closeCoTenant } from './faults/co-tenant.ts';
import type { SafetyBed } from './testbed.ts';
import { runTrial, type Calibration, type FaultType, type TrialResult } from './trial.ts';

/** RunOptions configures runTrials. */
export interface RunOptions {
  readonly bed: SafetyBed;
  readonly faults: readonly FaultType[];
  readonly trialsPerFault: number;
  readonly concurrency: number;
  /** baseSeed: trial i of every fault type uses seed baseSeed + i (so one trial replays alone). */
  readonly baseSeed: number;
  readonly leaseSeconds: number;
  readonly fenced: boolean;
  /** calibrate: how the run was weakened (for the replay command); undefined for the real suite. */
  readonly calibrate?: Calibration;
  readonly onResult?: (r: TrialResult) => void;
  /** phaseBudgetMs: per fault type; a phase stops starting new trials after this times its fault types (soak runs with a deadline). */
  readonly phaseBudgetMs?: number;
  /** onPhase is called with the summaries so far after each fault type (for partial results). */
  readonly onPhase?: (summaries: readonly FaultSummary[]) => void;
  /**
   * setupRetries: how many times a trial that failed before its fault (set-up: a worker that did
   * not start, no first grant in time) is run again, as a new trial with seed + k × SETUP_RETRY_SEED_STRIDE.
   * The failed attempts still count as `notRun`. CI uses it so that a set-up timeout on a busy
   * machine does not cost a trial of the required count; a systematic failure fails every attempt.
   */
  readonly setupRetries?: number;
}

/** SETUP_RETRY_SEED_STRIDE separates a retried trial's seed from the run's other seeds. */
export const SETUP_RETRY_SEED_STRIDE = 1_000_003;

/** Stat is a distribution summary in milliseconds. */
export interface Stat {
  readonly n: number;
  readonly p50: number | null;
  readonly p99: number | null;
  readonly max: number | null;
}

/** stat summarizes a distribution of milliseconds (nearest-rank p50, p99, max). */
export function stat(xs: readonly number[]): Stat {
  if (xs.length === 0) return { n: 0, p50: null, p99: null, max: null };
  return {
    n: xs.length,
    p50: Math.round(percentile(xs, 50)),
    p99: Math.round(percentile(xs, 99)),
    max: Math.round(Math.max(...xs)),
  };
}

/** FailedTrial names a trial whose history broke an invariant (or contradicted itself). */
export interface FailedTrial {
  readonly id: string;
  readonly seed: number;
  readonly variant: string;
  readonly violations: readonly string[];
  readonly replay: string;
}

/** FaultSummary is one row of the fault table. */
export interface FaultSummary {
  readonly fault: FaultType;
  /** trials: trials in which the fault was injected. */
  readonly trials: number;
  /** notRun: trials that failed before their fault could be injected (set-up errors); must be 0. */
  readonly notRun: number;
  /** survived: trials with the fault injected whose history held S1–S6 (and was consistent). */
  readonly survived: number;
  readonly violations: Readonly<Record<Invariant, number>>;
  /** stuck: trials that made no progress in time after the fault (liveness, not safety). */
  readonly stuck: number;
  readonly variants: Readonly<Record<string, number>>;
  readonly faultMsTotal: number;
  readonly staleRejected: number;
  readonly attemptsAfterValidUntil: number;
  readonly dualBelief: Stat;
  readonly failoverMs: Stat;
  readonly stepDownMs: Stat;
  /** stepDownByVariant: step-down latency per variant (api-errors), absent when no trial of the type reports one. */
  readonly stepDownByVariant?: Readonly<Record<string, Stat>>;
  /** missedStepDowns: trials whose holder did not report the loss although API errors outlasted its renew deadline. */
  readonly missedStepDowns?: number;
  /** resumedAfterLoss: `granted` reports of a term its holder had reported lost (see trial.ts resumedAfterLoss). */
  readonly resumedAfterLoss?: number;
  readonly ops: {
    readonly grants: number;
    readonly renews: number;
    readonly attempts: number;
    readonly accepted: number;
  };
  /** wallMs: the wall time of the phase this fault type ran in (shared by interleaved fault types). */
  readonly wallMs: number;
  readonly failed: readonly FailedTrial[];
  readonly stuckExamples: readonly string[];
  /** outages: the `apiserver` fault's table (per variant and D: kept, stepped down, matched the formula). */
  readonly outages?: readonly OutageRow[];
  /** counters: the trials' fault-specific counters, summed (controller-split: grants by a non-leader replica). */
  readonly counters: Readonly<Record<string, number>>;
}

/** replayCommand is the command line that runs one trial again. */
export function replayCommand(
  fault: FaultType,
  seed: number,
  o: Pick<RunOptions, 'leaseSeconds' | 'calibrate'>,
): string {
  return `npm run soak -- --fault ${fault} --trials 1 --seed ${seed} --lease ${o.leaseSeconds}${o.calibrate !== undefined ? ` --calibrate ${o.calibrate}` : ''}`;
}

/** pooled runs run(0..n-1), `concurrency` at a time, starting none after `until` (monotonic ms). */
async function pooled<T>(
  n: number,
  concurrency: number,
  run: (i: number) => Promise<T>,
  until = Infinity,
): Promise<T[]> {
  const out: T[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, n) }, async () => {
      for (let i = next++; i < n && performance.now() < until; i = next++) out.push(await run(i));
    }),
  );
  return out;
}

/** summarize aggregates one fault type's trial results. */
export function summarize(
  fault: FaultType,
  results: readonly TrialResult[],
  wallMs: number,
  o: Pick<RunOptions, 'leaseSeconds' | 'calibrate'>,
): FaultSummary {
  const violations: Record<Invariant, number> = { S1: 0, S2: 0, S3: 0, S4: 0, S5: 0, S6: 0, H: 0 };
  const variants: Record<string, number> = {};
  const failed: FailedTrial[] = [];
  for (const r of results) {
    variants[r.variant] = (variants[r.variant] ?? 0) + 1;
    const kinds = new Set(r.report.violations.map((v) => v.invariant));
    for (const k of kinds) violations[k]++;
    if (!r.report.ok) {
      failed.push({
        id: r.spec.id,
        seed: r.spec.seed,
        variant: r.variant,
        violations: r.report.violations.map((v) => `${v.invariant}: ${v.message}`),
        replay: replayCommand(fault, r.spec.seed, o),
      });
    }
  }
  const sum = (f: (r: TrialResult) => number): number => results.reduce((a, r) => a + f(r), 0);
  const counters: Record<string, number> = {};
  for (const r of results) for (const [k, v] of Object.entries(r.counters ?? {})) counters[k] = (counters[k] ?? 0) + v;
  return {
    fault,
    trials: results.filter((r) => r.injected).length,
    notRun: results.filter((r) => !r.injected).length,
    survived: results.filter((r) => r.injected && r.report.ok).length,
    violations,
    stuck: results.filter((r) => r.stuck !== undefined).length,
    variants,
    faultMsTotal: sum((r) => r.faultMs),
    staleRejected: sum((r) => r.report.counts.staleRejected),
    attemptsAfterValidUntil: sum((r) => r.report.counts.attemptsAfterValidUntil),
    dualBelief: stat(results.flatMap((r) => r.report.dualBelief.map((d) => d.ms))),
    failoverMs: stat(results.flatMap((r) => (r.failoverMs !== undefined ? [r.failoverMs] : []))),
    stepDownMs: stat(results.flatMap((r) => (r.stepDownMs !== undefined ? [r.stepDownMs] : []))),
    ...stepDownDetail(results),
    resumedAfterLoss: sum((r) => r.resumedAfterLoss ?? 0),
    ops: {
      grants: sum((r) => r.report.counts.grants),
      renews: sum((r) => r.report.counts.renews),
      attempts: sum((r) => r.report.counts.attempts),
      accepted: sum((r) => r.report.counts.accepted),
    },
    wallMs: Math.round(wallMs),
    failed,
    counters,
    stuckExamples: results
      .flatMap((r) => (r.stuck !== undefined ? [`${r.spec.id} (seed ${r.spec.seed}, ${r.variant}): ${r.stuck}`] : []))
      .slice(0, 5),
    ...(fault === 'apiserver'
      ? { outages: summarizeOutages(results.flatMap((r) => (r.outage !== undefined ? [r.outage] : []))) }
      : {}),
  };
}

/**
 * GLOBAL_FAULTS act on something every trial shares (the controller process, the counter Redis
 * server, the control plane): their trials run in a phase of their own. The others act on one trial's processes and
 * proxies only, so their trials run interleaved in one phase (no idle slots between fault types).
 */
export const GLOBAL_FAULTS: ReadonlySet<FaultType> = new Set<FaultType>([
  'redis',
  'controller-kill',
  'apiserver',
  'watch-delay',
  'controller-split',
  'shard-move',
  'run-id-fleet',
]);

/** stepDownDetail: per-variant step-down latency and missed step-downs, for fault types that report them. */
function stepDownDetail(results: readonly TrialResult[]): Pick<FaultSummary, 'stepDownByVariant' | 'missedStepDowns'> {
  if (!results.some((r) => r.missedStepDown !== undefined)) return {};
  const byVariant: Record<string, Stat> = {};
  for (const v of new Set(results.map((r) => r.variant)))
    byVariant[v] = stat(results.flatMap((r) => (r.variant === v && r.stepDownMs !== undefined ? [r.stepDownMs] : [])));
  return { stepDownByVariant: byVariant, missedStepDowns: results.filter((r) => r.missedStepDown === true).length };
}

/** runTrials runs every fault type's trials and returns one summary per fault type. */
export async function runTrials(o: RunOptions): Promise<FaultSummary[]> {
  const out: FaultSummary[] = [];
  const local = o.faults.filter((f) => !GLOBAL_FAULTS.has(f));
  const phases: FaultType[][] = [
    ...(local.length > 0 ? [local] : []),
    ...o.faults.filter((f) => GLOBAL_FAULTS.has(f)).map((f) => [f]),
  ];
  try {
    await runPhases(o, phases, out);
  } finally {
    await closeCoTenant(o.bed); // the lease-protection policy co-tenant trials installed (cluster-scoped)
  }
  return out;
}

async function runPhases(o: RunOptions, phases: readonly FaultType[][], out: FaultSummary[]): Promise<void> {
  for (const faults of phases) {
    const began = performance.now();
    // Trial k of the phase: fault faults[k % n], its index i = floor(k / n) (seed baseSeed + i).
    const phase = async (): Promise<TrialResult[]> =>
      (
        await pooled(
          o.trialsPerFault * faults.length,
          o.concurrency,
          async (k) => {
            const fault = faults[k % faults.length] as FaultType;
            const i = Math.floor(k / faults.length);
            const attempts: TrialResult[] = [];
            for (let a = 0; a <= (o.setupRetries ?? 0); a++) {
              const r = await runTrial(o.bed, {
                id: a === 0 ? `${fault}-${i}` : `${fault}-${i}-r${a}`,
                seed: (o.baseSeed + i + a * SETUP_RETRY_SEED_STRIDE) >>> 0,
                fault,
                leaseSeconds: o.leaseSeconds,
                fenced: o.fenced,
                ...(o.calibrate !== undefined ? { calibrate: o.calibrate } : {}),
              });
              o.onResult?.(r);
              attempts.push(r);
              if (r.injected) break;
            }
            return attempts;
          },
          began + (o.phaseBudgetMs ?? Infinity) * faults.length,
        )
      ).flat();
    // controller-split replaces the bed's controller with two replicas for its phase.
    // shard-move replaces it with three replicas sharing the locks (--shards).
    const results = faults.includes('controller-split')
      ? await withControllerSplit(o.bed, phase)
      : faults.includes('shard-move')
        ? await withShardMove(o.bed, phase)
        : faults.includes('run-id-fleet')
          ? await withRunIdFleet(o.bed, phase)
          : await phase();
    const wallMs = performance.now() - began;
    for (const fault of faults)
      out.push(
        summarize(
          fault,
          results.filter((r) => r.spec.fault === fault),
          wallMs,
          o,
        ),
      );
    o.onPhase?.(out);
  }
}

/** formatFailures prints failed trials with their seeds and replay commands. */
export function formatFailures(summaries: readonly FaultSummary[]): string {
  const lines: string[] = [];
  for (const s of summaries) {
    for (const f of s.failed) {
      lines.push(`FAILED ${f.id} (fault ${s.fault}, variant ${f.variant}, seed ${f.seed})`);
      for (const v of f.violations.slice(0, 5)) lines.push(`  ${v}`);
      lines.push(`  replay: ${f.replay}`);
    }
  }
  return lines.join('\n');
}
