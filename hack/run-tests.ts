/**
 * run-tests.ts — `npm test`: runs vitest (all projects, or the arguments given), then prints the
 * totals as one plain line, "N passed, N failed, N skipped", and the slowest test files (CI's
 * time budget is spent there; every file's time is kept in `.results/tests/durations.json`), and exits
 * with vitest's code.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { resultsPath } from './results.ts';

interface JsonReport {
  numPassedTests: number;
  numFailedTests: number;
  numPendingTests: number;
  numTodoTests: number;
  testResults: readonly { name: string; startTime: number; endTime: number }[];
}

/** SLOWEST: how many of the slowest files the summary names. */
const SLOWEST = 8;

const root = resolve(import.meta.dirname, '..');
const dir = mkdtempSync(join(tmpdir(), 'fencepost-vitest-'));
const out = join(dir, 'report.json');
const vitest = join(root, 'node_modules/vitest/vitest.mjs');
const run = spawnSync(
  process.execPath,
  [vitest, 'run', '--reporter=default', '--reporter=json', `--outputFile.json=${out}`, ...process.argv.slice(2)],
  {
    cwd: root,
    stdio: 'inherit',
  },
);
let code = run.status ?? 1;
try {
  const r = JSON.parse(readFileSync(out, 'utf8')) as JsonReport;
  process.stdout.write(
    `\n${r.numPassedTests} passed, ${r.numFailedTests} failed, ${r.numPendingTests + r.numTodoTests} skipped\n`,
  );
  const slow = [...r.testResults]
    .map((f) => ({
      file: f.name.startsWith(root) ? f.name.slice(root.length + 1) : f.name,
      ms: f.endTime - f.startTime,
    }))
    .sort((a, b) => b.ms - a.ms);
  // Every file's time, slowest first, for tiering the default run: this run's files replace their
  // earlier times, the others' stay (a run of the end-to-end files alone keeps the rest's).
  const file = resultsPath('tests', 'durations.json');
  const ran = new Set(slow.map((f) => f.file));
  const kept = existsSync(file)
    ? (JSON.parse(readFileSync(file, 'utf8')) as { file: string; ms: number }[]).filter((f) => !ran.has(f.file))
    : [];
  writeFileSync(
    file,
    JSON.stringify(
      [...slow, ...kept].sort((a, b) => b.ms - a.ms),
      null,
      1,
    ) + '\n',
  );
  slow.splice(SLOWEST);
  if (slow.length > 1)
    process.stdout.write(`slowest files: ${slow.map((f) => `${f.file} ${(f.ms / 1000).toFixed(0)} s`).join(', ')}\n`);
  if (r.numPassedTests === 0) code = code === 0 ? 1 : code;
} catch {
  process.stdout.write('\nvitest wrote no report\n');
  code = code === 0 ? 1 : code;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
process.exit(code);
