/** formatTable renders fault summaries as the Markdown fault table of docs/safety.md. */
import type { FaultSummary, Stat } from './runner.ts';

const ms = (s: Stat): string => (s.n === 0 ? '–' : `${s.p50 ?? '–'} / ${s.p99 ?? '–'} / ${s.max ?? '–'}`);

/** formatTable: one row per fault type. */
export function formatTable(summaries: readonly FaultSummary[]): string {
  const head = '| fault | trials | not run | survived | S1 | S2 | S3 | S4 | S5 | H | stuck | stale rejected | sent after validUntil | dual belief n (p50/p99/max ms) | failover p50/p99/max ms | step-down p50/p99/max ms | wall s |';
  const rule = '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|---:|';
  const rows = summaries.map((s) => {
    const v = s.violations;
    return `| ${s.fault} | ${s.trials} | ${s.notRun} | ${s.survived} | ${v.S1} | ${v.S2} | ${v.S3} | ${v.S4} | ${v.S5} | ${v.H} | ${s.stuck} | ${s.staleRejected} | ${s.attemptsAfterValidUntil} | ${s.dualBelief.n} (${ms(s.dualBelief)}) | ${ms(s.failoverMs)} | ${ms(s.stepDownMs)} | ${Math.round(s.wallMs / 1000)} |`;
  });
  // Fault-specific counters (controller-split: which replica granted) follow the table.
  const counters = summaries.filter((s) => Object.keys(s.counters).length > 0)
    .map((s) => `counters: ${s.fault}: ${Object.entries(s.counters).map(([k, n]) => `${k} ${n}`).join(', ')}`);
  return [head, rule, ...rows, ...(counters.length > 0 ? ['', ...counters] : [])].join('\n');
}
