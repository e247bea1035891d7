/**
 * agent-imports.ts — `npm run bench:imports [-- --runs N]`: where the agent's resident memory
 * comes from, module by module. Each figure is a fresh `node` that imports one module (nothing
 * else runs), waits 300 ms and reports its VmRSS and V8 heap: the cost of loading that module's
 * code (a module graph's RSS is mostly compiled code, parsed source and the objects its top level
 * builds). The agent (`src/cli/main.ts agent`) loads src/cli/agent.ts and its imports; main.ts
 * imports the other subcommands only when they run. No servers needed. Writes
 * .results/bench/agent-imports.json.
 */
import { execFileSync } from 'node:child_process';
import { join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { describeMachine, loadAverage, percentile, writeResult } from './lib.ts';

const ROOT = resolve(import.meta.dirname, '..');
const MODULES: readonly [string, string][] = [
  ['(nothing: bare node)', ''],
  ['@kubernetes/client-node', '@kubernetes/client-node'],
  ['ioredis', 'ioredis'],
  ['pino', 'pino'],
  ['prom-client', 'prom-client'],
  ['src/agent/session.ts (LockSession)', pathToFileURL(join(ROOT, 'src/agent/session.ts')).href],
  ['src/cli/agent.ts (the agent command)', pathToFileURL(join(ROOT, 'src/cli/agent.ts')).href],
  ['src/cli/controller.ts (the controller command)', pathToFileURL(join(ROOT, 'src/cli/controller.ts')).href],
];

const PROBE = `const m = process.argv[1];
if (m) await import(m);
await new Promise((r) => setTimeout(r, 300));
const rss = Number(/VmRSS:\\s+(\\d+)/.exec((await import('node:fs')).readFileSync('/proc/self/status', 'utf8'))[1]);
const u = process.memoryUsage();
process.stdout.write(JSON.stringify({ rssKiB: rss, heapUsedKiB: Math.round(u.heapUsed / 1024), externalKiB: Math.round(u.external / 1024) }));`;

const { values } = parseArgs({ options: { runs: { type: 'string', default: '3' } }, strict: true });
const runs = Number(values.runs);
const loadStart = loadAverage();
const rows = MODULES.map(([label, spec]) => {
  const xs = Array.from(
    { length: runs },
    () =>
      JSON.parse(
        execFileSync(process.execPath, ['--input-type=module', '-e', PROBE, spec], { cwd: ROOT, encoding: 'utf8' }),
      ) as { rssKiB: number; heapUsedKiB: number; externalKiB: number },
  );
  const med = (f: (x: (typeof xs)[number]) => number): number => percentile(xs.map(f), 50);
  return {
    module: label,
    rssMiB: Math.round(med((x) => x.rssKiB) / 102.4) / 10,
    heapUsedMiB: Math.round(med((x) => x.heapUsedKiB) / 102.4) / 10,
    externalMiB: Math.round(med((x) => x.externalKiB) / 102.4) / 10,
  };
});
const base = rows[0]?.rssMiB ?? 0;
const out = writeResult('agent-imports.json', {
  benchmark: 'agent-imports',
  date: new Date().toISOString(),
  command: `node bench/agent-imports.ts --runs ${runs}`,
  runs,
  loadAverage: { start: loadStart, end: loadAverage() },
  machine: describeMachine(),
  versions: { node: process.version },
  note: 'median of runs; each a fresh node importing one module then idling 300 ms; overMiB = rssMiB − bare node',
  rows: rows.map((r) => ({ ...r, overBareMiB: Math.round((r.rssMiB - base) * 10) / 10 })),
});
for (const r of rows)
  process.stdout.write(
    `${r.module.padEnd(48)} RSS ${r.rssMiB.toFixed(1).padStart(6)} MiB (+${(r.rssMiB - base).toFixed(1).padStart(5)})  heap ${r.heapUsedMiB.toFixed(1).padStart(5)} MiB\n`,
  );
process.stdout.write(`Wrote ${relative(process.cwd(), out)}\n`);
