/**
 * keep.ts — `npm run bench:keep -- NAME...`: copies benchmark runs from the raw results
 * (.results/bench/NAME.json, hack/results.ts) to the committed bench/results/NAME.json, one file
 * per benchmark, replacing the run kept before: the docs quote the kept run, report.ts builds the
 * tables of docs/benchmarks.md from it and plot.ts the figures. NAME may end in `.json`.
 */
import { copyFileSync, existsSync, mkdirSync } from 'node:fs';
import { basename, join } from 'node:path';
import { KEPT_DIR, RAW_DIR } from './lib.ts';

const names = process.argv.slice(2).map((n) => `${basename(n, '.json')}.json`);
if (names.length === 0) {
  process.stderr.write(`Usage: npm run bench:keep -- NAME... (a run in ${RAW_DIR})\n`);
  process.exit(2);
}
let missing = 0;
mkdirSync(KEPT_DIR, { recursive: true });
for (const n of names) {
  const from = join(RAW_DIR, n);
  if (!existsSync(from)) {
    process.stderr.write(`bench:keep: no run ${from}: run its benchmark first\n`);
    missing++;
    continue;
  }
  copyFileSync(from, join(KEPT_DIR, n));
  process.stdout.write(`kept ${n} in bench/results/\n`);
}
process.exit(missing === 0 ? 0 : 1);
