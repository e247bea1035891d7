/** formatTable renders fault summaries as the Markdown fault table of docs/safety.md. */
import type { FaultSummary, Stat } from './runner.ts';

const ms = (s: Stat): string => (s.n === 0 ? '–' : `${s.p50 ?? '–'} / ${s.p99 ?? '–'} / ${s.max ?? '–'}`);

/** formatTable: one row per fault type. */
export function formatTable(summaries: readonly FaultSummary[]): string {
  const head =
    '| fault | trials | not run | survived | S1 | S2 | S3 | S4 | S5 | S6 | H | stuck | stale rejected | sent after validUntil | dual belief n (p50/p99/max ms) | failover p50/p99/max ms | step-down p50/p99/max ms | wall s |';
  const rule = '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|---:|';
  const rows = summaries.map((s) => {
    const v = s.violations;
    return `| ${s.fault} | ${s.trials} | ${s.notRun} | ${s.survived} | ${v.S1} | ${v.S2} | ${v.S3} | ${v.S4} | ${v.S5} | ${v.S6} | ${v.H} | ${s.stuck} | ${s.staleRejected} | ${s.attemptsAfterValidUntil} | ${s.dualBelief.n} (${ms(s.dualBelief)}) | ${ms(s.failoverMs)} | ${ms(s.stepDownMs)} | ${Math.round(s.wallMs / 1000)} |`;
  });
  // Fault-specific counters (controller-split: which replica granted) follow the table.
  const counters = summaries
    .filter((s) => Object.keys(s.counters).length > 0)
    .map(
      (s) =>
        `counters: ${s.fault}: ${Object.entries(s.counters)
          .map(([k, n]) => `${k} ${n}`)
          .join(', ')}`,
    );
  return [head, rule, ...rows, ...(counters.length > 0 ? ['', ...counters] : [])].join('\n');
}

/**
 * formatStepDowns: per-variant step-down latency and missed step-downs (api-errors), and terms
 * re-confirmed after their holder reported them lost, for the fault types that have any.
 */
export function formatStepDowns(summaries: readonly FaultSummary[]): string {
  const lines: string[] = [];
  for (const s of summaries) {
    if (s.stepDownByVariant !== undefined) {
      const parts = Object.entries(s.stepDownByVariant)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([v, st]) => `${v} ${st.n} (${ms(st)})`);
      lines.push(
        `${s.fault}: step-down n (p50/p99/max ms) by variant: ${parts.join('; ')}; missed step-downs: ${s.missedStepDowns ?? 0}`,
      );
    }
    if ((s.resumedAfterLoss ?? 0) > 0)
      lines.push(`${s.fault}: terms re-confirmed after a reported loss: ${s.resumedAfterLoss ?? 0}`);
  }
  return lines.join('\n');
}
