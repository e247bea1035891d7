/**
 * run-tests.ts — `npm test`: runs vitest (all projects, or the arguments given), then prints the
 * totals as one plain line, "N passed, N failed, N skipped", and exits with vitest's code.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

interface JsonReport {
  numPassedTests: number;
  numFailedTests: number;
  numPendingTests: number;
  numTodoTests: number;
}

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
  if (r.numPassedTests === 0) code = code === 0 ? 1 : code;
} catch {
  process.stdout.write('\nvitest wrote no report\n');
  code = code === 0 ? 1 : code;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
process.exit(code);
