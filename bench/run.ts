/**
 * run.ts — `npm run bench` (quick, a few minutes) and `npm run bench -- --full` (the published
 * figures, about an hour on 2 cores): every benchmark in turn, each in its own process so that
 * none shares an event loop or a control plane with another, then the plots. Every run writes its
 * JSON under .results/bench/ (hack/results.ts); the full run then keeps its results in the committed
 * bench/results/ (keep.ts), one file per benchmark, which the plots and docs/benchmarks.md use.
 *
 * quick: compare (3 runs, 15 s steady windows) → compare-quick.json; scale (100 and 1,000 locks,
 *   20 s steady) → scale-quick.json; Redis fencing (500 calls, 2 s) → redis-fence-quick.json.
 * full: compare (30 runs, 60 s windows) → compare.json; scale (100, 1,000, 10,000 locks, the
 *   controller with 16 workers) → scale.json and (100, 1,000 locks, its default 4 workers) →
 *   scale-workers4.json; Redis fencing → redis-fence.json; agent footprint (10 runs) → agent-footprint.json;
 *   voluntary handoff against the floor (30 runs) → handoff.json; plots → docs/img/*.svg.
 * `--only NAME[,NAME]` runs a subset (compare, scale, redis, agent, handoff, plot).
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const BENCH = import.meta.dirname;
const { values } = parseArgs({
  options: { full: { type: 'boolean' }, only: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
  strict: true,
});
if (values.help === true) {
  process.stdout.write('Usage: npm run bench [-- --full] [-- --only compare,scale,redis,agent,handoff,plot]\n');
  process.exit(0);
}
const full = values.full === true;
const steps: [string, string, string[]][] = full
  ? [
      ['compare', 'compare.ts', ['--runs', '30', '--window', '60']],
      ['scale', 'scale.ts', ['--locks', '100,1000,10000', '--steady', '60', '--workers', '16', '--timeout', '900']],
      ['scale', 'scale.ts', ['--locks', '100,1000', '--steady', '30', '--out', 'scale-workers4.json']],
      ['redis', 'redis-fence.ts', []],
      ['agent', 'agent-footprint.ts', ['--runs', '10']],
      ['agent', 'agent-imports.ts', ['--runs', '3']],
      ['handoff', 'handoff.ts', ['--runs', '30']],
      ['plot', 'plot.ts', []],
    ]
  : [
      ['compare', 'compare.ts', ['--runs', '3', '--window', '15', '--quick']],
      ['scale', 'scale.ts', ['--locks', '100,1000', '--steady', '20', '--out', 'scale-quick.json']],
      ['redis', 'redis-fence.ts', ['--runs', '500', '--seconds', '2', '--out', 'redis-fence-quick.json']],
    ];
const only = values.only?.split(',');
let failed = 0;
// The full run's results are the published ones: each is kept in bench/results/ (keep.ts) before
// the plots are drawn from it. A quick run stays in the raw results only.
const KEEP: Record<string, string[]> = {
  compare: ['compare'],
  scale: ['scale', 'scale-workers4'],
  redis: ['redis-fence'],
  agent: ['agent-footprint', 'agent-imports'],
  handoff: ['handoff'],
};
const ran = new Set<string>();
const broke = new Set<string>();
for (const [name, file, args] of steps) {
  if (only !== undefined && !only.includes(name)) continue;
  if (name === 'plot' && full) {
    const names = [
      ...new Set(Object.entries(KEEP).flatMap(([n, files]) => (ran.has(n) && !broke.has(n) ? files : []))),
    ];
    if (names.length > 0) spawnSync(process.execPath, [join(BENCH, 'keep.ts'), ...names], { stdio: 'inherit' });
  }
  process.stderr.write(`\n=== ${name}: node bench/${file} ${args.join(' ')}\n`);
  const r = spawnSync(process.execPath, [join(BENCH, file), ...args], { stdio: 'inherit' });
  ran.add(name);
  if (r.status !== 0) {
    broke.add(name);
    failed++;
    process.stderr.write(`=== ${name} failed (exit ${r.status ?? r.signal ?? '?'})\n`);
  }
}
process.exit(failed === 0 ? 0 : 1);
