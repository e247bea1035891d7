/**
 * soak-totals.ts — `node hack/soak-totals.ts FILE.json...`: sums soak result files (written by
 * hack/soak.ts) per fault type and prints the totals table of docs/safety.md: trials with the
 * fault injected, survived, trials with a violation, stuck, not run, and the runs' wall time.
 * Calibration runs are refused (their violations are the point, not a result to add up).
 */
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';

interface Summary {
  fault: string;
  trials: number;
  notRun: number;
  survived: number;
  stuck: number;
  failed: readonly unknown[];
}
interface SoakFile {
  calibrate: string | null;
  wallSeconds: number;
  summaries: readonly Summary[];
}

const files = process.argv.slice(2);
if (files.length === 0) {
  process.stderr.write('Usage: node hack/soak-totals.ts RESULT.json...\n');
  process.exit(2);
}
interface Total {
  trials: number;
  survived: number;
  violated: number;
  stuck: number;
  notRun: number;
  runs: string[];
  wallSeconds: number;
}
const totals = new Map<string, Total>();
for (const file of files) {
  const soak = JSON.parse(readFileSync(file, 'utf8')) as SoakFile;
  if (soak.calibrate !== null)
    throw new Error(`${file}: a calibration run (--calibrate ${soak.calibrate}); not added to the totals`);
  for (const s of soak.summaries) {
    const t = totals.get(s.fault) ?? {
      trials: 0,
      survived: 0,
      violated: 0,
      stuck: 0,
      notRun: 0,
      runs: [],
      wallSeconds: 0,
    };
    t.trials += s.trials;
    t.survived += s.survived;
    t.violated += s.failed.length;
    t.stuck += s.stuck;
    t.notRun += s.notRun;
    t.runs.push(basename(file));
    t.wallSeconds += soak.wallSeconds / soak.summaries.length; // a run's wall time, shared by the fault types in it
    totals.set(s.fault, t);
  }
}
const lines = [
  "| fault | trials with the fault | survived | trials with a violation | stuck | not run | machine time (share of the runs' wall time) | runs |",
  '|---|---:|---:|---:|---:|---:|---:|---|',
];
for (const [fault, t] of totals) {
  lines.push(
    `| ${fault} | ${t.trials} | ${t.survived} | ${t.violated} | ${t.stuck} | ${t.notRun} | ${Math.round(t.wallSeconds / 60)} min | ${t.runs.join(', ')} |`,
  );
}
const all = [...totals.values()];
lines.push(
  `| **all** | **${all.reduce((a, t) => a + t.trials, 0)}** | ${all.reduce((a, t) => a + t.survived, 0)} | **${all.reduce((a, t) => a + t.violated, 0)}** | ${all.reduce((a, t) => a + t.stuck, 0)} | ${all.reduce((a, t) => a + t.notRun, 0)} | ${Math.round(all.reduce((a, t) => a + t.wallSeconds, 0) / 60)} min | |`,
);
process.stdout.write(`${lines.join('\n')}\n`);
