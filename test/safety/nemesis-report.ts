/** formatNemesis renders a combined-nemesis run as the Markdown tables of docs/safety.md. */
import { stat, type Stat } from './runner.ts';
import type { NemesisResult } from './nemesis.ts';

const ms = (s: Stat): string => (s.n === 0 ? '–' : `${s.p50 ?? '–'} / ${s.p99 ?? '–'} / ${s.max ?? '–'}`);

/** formatNemesis: the faults by kind, one row per lock, and a verdict line. */
export function formatNemesis(r: NemesisResult): string {
  const kinds = Object.entries(r.faultsByKind)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([kind, t]) => {
      const variants = Object.entries(t.variants)
        .map(([v, n]) => `${v} ${n}`)
        .join(', ');
      return `| ${kind} | ${t.count} | ${(t.totalMs / 1000).toFixed(1)} | ${variants} |`;
    });
  const errors = r.faults.filter((f) => f.error !== undefined).length;
  const locks = r.perLock.map((l) => {
    const c = l.counts;
    const v = l.violations.length;
    return `| ${l.lock} | ${l.ok ? 'ok' : `${v} violation(s)`} | ${c.terms} | ${c.accepted} | ${c.staleRejected} | ${c.attemptsAfterValidUntil} | ${l.dualBelief.n} (${ms(l.dualBelief)}) | ${ms(stat(l.liveness.failoversMs))} | ${l.liveness.maxGapMs} (at +${Math.round(l.liveness.maxGapFromMs / 1000)} s) | ${l.liveness.recoveryMs !== undefined ? Math.round(l.liveness.recoveryMs) : 'none'} |`;
  });
  return [
    `| fault | count | cumulative s | variants |`,
    `|---|---:|---:|---|`,
    ...kinds,
    '',
    `| lock | S1–S5, H | terms | accepted | stale rejected | sent after validUntil | dual belief n (p50/p99/max ms) | failover p50/p99/max ms | max gap ms | recovery after heal ms |`,
    `|---|---|---:|---:|---:|---:|---|---|---|---:|`,
    ...locks,
    '',
    `seed ${r.seed}, L = ${r.leaseSeconds} s, ${r.candidates} candidates × ${r.locks} locks, ${r.faults.length} faults over ${Math.round(r.durationMs / 1000)} s ` +
      `(interval U[${r.intervalMs[0] / 1000}, ${r.intervalMs[1] / 1000}] s; at most ${r.maxConcurrentFaults} at once${errors > 0 ? `; ${errors} failed to inject` : ''}); ` +
      `${r.workerIncarnations} worker incarnations, ${r.controllerRestarts} controller restarts so far on this bed; ` +
      `violations ${Object.entries(r.violations)
        .map(([k, n]) => `${k} ${n}`)
        .join(' ')}; ` +
      `recovery after the final heal ${r.recoveryMs !== null ? `${r.recoveryMs} ms` : 'NOT within the bound'} (L + R + P + reconcile = ${r.livenessBoundMs} ms); ` +
      `failover p50/p99/max ${ms(r.failoverMs)} ms; dual belief n ${r.dualBelief.n} (${ms(r.dualBelief)} ms); wall ${Math.round(r.wallMs / 1000)} s` +
      `${r.setupError !== undefined ? `; SET-UP ERROR: ${r.setupError}` : ''}`,
  ].join('\n');
}
