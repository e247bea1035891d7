/**
 * soak-totals.ts — the committed summaries of the safety soaks, one file per fault class in
 * test/safety/results/ (`<fault>.json`, `calibrate-<protection>.json`, `nemesis.json`,
 * `store-<fault>.json`): the class's totals (trials, survived, trials with a violation, stuck, not
 * run) and every run that made them, with its seed, its command and its own figures. Raw results
 * (every trial, every sample) are written under .results/ (hack/results.ts) and not committed.
 *
 *   node hack/soak-totals.ts [--runs NAME,...]       print the totals table of docs/safety.md from
 *                                                     the summaries (only the runs named, if given)
 *   node hack/soak-totals.ts --write RESULT.json...  add runs to the summaries: hack/soak.ts results
 *                                                     (trials, calibrations, the nemesis) and the
 *                                                     store soaks' (SAFETY_STORE_OUT); a run is named
 *                                                     by its file name, and a name already there is
 *                                                     replaced
 *
 * Calibration runs are summed in their own classes, never into a fault's totals: their violations
 * are the point (the check fires), not a result.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { FAULT_TYPES } from '../test/safety/trial.ts';

/** SUMMARY_DIR: the committed summaries. */
const SUMMARY_DIR = resolve(import.meta.dirname, '..', 'test/safety/results');

/** Run is one run's share of a class: what the table adds up, and its own figures. */
interface Run {
  readonly name: string;
  readonly seed: number | null;
  readonly command: string | null;
  readonly trials: number;
  readonly survived: number;
  readonly violated: number;
  readonly stuck: number;
  readonly notRun: number;
  /** wallSeconds: the run's wall time shared by the classes it ran. */
  readonly wallSeconds: number;
  readonly complete: boolean;
  readonly figures: Record<string, unknown>;
}

/** ClassSummary is one committed file. */
interface ClassSummary {
  readonly class: string;
  readonly kind: 'soak' | 'calibration' | 'nemesis' | 'store';
  trials: number;
  survived: number;
  violated: number;
  stuck: number;
  notRun: number;
  wallSeconds: number;
  runs: Run[];
}

type Json = Record<string, unknown>;

const num = (v: unknown): number => (typeof v === 'number' ? v : 0);
const obj = (v: unknown): Json => (v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Json) : {});
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

/** seedOf reads a seed from the run's JSON, else from its file name (`…-seed<N>`, `…-<N>`). */
function seedOf(j: Json, file: string): number | null {
  if (typeof j['seed'] === 'number') return j['seed'];
  const m = /seed(\d+)|-(\d{4,})\.json$/.exec(basename(file));
  return m !== null ? Number(m[1] ?? m[2]) : null;
}

/** TOP_VARIANTS: how many of a fault's variants a summary names (the most frequent); the rest are counted. */
const TOP_VARIANTS = 12;

/** topVariants keeps the most frequent variants of a run and counts the others. */
function topVariants(v: Json): Json {
  const all = Object.entries(v).sort((a, b) => num(b[1]) - num(a[1]));
  if (all.length <= TOP_VARIANTS) return v;
  const rest = all.slice(TOP_VARIANTS);
  return {
    ...Object.fromEntries(all.slice(0, TOP_VARIANTS)),
    [`${rest.length} others`]: rest.reduce((a, [, n]) => a + num(n), 0),
  };
}

/** soakRuns: a hack/soak.ts trials run, one Run per fault type in it. */
function soakRuns(j: Json, name: string, file: string): [string, ClassSummary['kind'], Run][] {
  const summaries = arr(j['summaries']).map(obj);
  const calibrate = typeof j['calibrate'] === 'string' ? j['calibrate'] : null;
  const share = num(j['wallSeconds']) / Math.max(1, summaries.length);
  return summaries.map((s) => {
    const failed = arr(s['failed']).map(obj);
    const { failed: _f, stuckExamples: _s, fault, variants, ...figures } = s;
    const run: Run = {
      name,
      seed: seedOf(j, file),
      command: typeof j['command'] === 'string' ? j['command'] : null,
      trials: num(s['trials']),
      survived: num(s['survived']),
      violated: failed.length,
      stuck: num(s['stuck']),
      notRun: num(s['notRun']),
      wallSeconds: share,
      complete: j['complete'] !== false,
      figures: {
        ...figures,
        ...(calibrate !== null ? { fault } : {}),
        variants: topVariants(obj(variants)),
        // The first few failed trials, to replay (--fault F --trials 1 --seed S): all are in the raw result.
        failedExamples: failed.slice(0, 3).map((f) => ({
          id: f['id'],
          seed: f['seed'],
          violations: arr(f['violations'])
            .slice(0, 2)
            .map((v) => String(v).slice(0, 240)),
        })),
      },
    };
    return calibrate !== null ? [`calibrate-${calibrate}`, 'calibration', run] : [String(fault), 'soak', run];
  });
}

/** nemesisRun: a combined-nemesis run (hack/soak.ts --nemesis-minutes). */
function nemesisRun(j: Json, name: string, file: string): [string, ClassSummary['kind'], Run] {
  const calibrate = typeof j['calibrate'] === 'string' ? j['calibrate'] : null;
  const perLock = arr(j['perLock']).map(obj);
  const { faults: _f, perLock: _p, machine: _m, ...figures } = j;
  const run: Run = {
    name,
    seed: seedOf(j, file),
    command: typeof j['command'] === 'string' ? j['command'] : null,
    trials: perLock.length,
    survived: perLock.filter((l) => l['ok'] === true).length,
    violated: perLock.filter((l) => l['ok'] !== true).length,
    stuck: 0,
    notRun: 0,
    wallSeconds: num(j['wallMs']) / 1000,
    complete: true,
    figures: {
      ...figures,
      faultsInjected: arr(j['faults']).length,
      perLock: perLock.map((l) => ({
        lock: l['lock'],
        ok: l['ok'],
        violations: arr(l['violations']).length,
        counts: l['counts'],
      })),
    },
  };
  return [calibrate !== null ? `nemesis-calibrate-${calibrate}` : 'nemesis', 'nemesis', run];
}

/** storeRuns: a store soak (test/safety/stores/store-faults.test.ts with SAFETY_STORE_OUT), one Run per fault. */
function storeRuns(j: Json, name: string, file: string): [string, ClassSummary['kind'], Run][] {
  const guard = obj(j['guard']);
  const faults = obj(guard['faults']);
  const share = num(guard['seconds']) / Math.max(1, Object.keys(faults).length);
  return Object.entries(faults).map(([fault, raw]) => {
    const f = obj(raw);
    const violated = num(f['trialsWithS3']) + num(f['trialsWithSharedToken']) + num(f['grantRegressions']);
    const calibrations = Object.fromEntries(
      ['calibration', 'floorCalibration']
        .filter((k) => j[k] !== undefined)
        .map((k) => {
          const c = obj(j[k]);
          return [
            k,
            {
              mode: c['mode'],
              seed: c['seed'],
              faults: obj(c['faults'])[fault],
              violations: arr(c['violations']).length,
            },
          ];
        }),
    );
    const run: Run = {
      name,
      seed: typeof guard['seed'] === 'number' ? guard['seed'] : seedOf(j, file),
      command: typeof j['command'] === 'string' ? j['command'] : null,
      trials: num(f['faulted'] ?? f['trials']),
      survived: num(f['faulted'] ?? f['trials']) - violated,
      violated,
      stuck: 0,
      notRun: num(f['trials']) - num(f['faulted'] ?? f['trials']),
      wallSeconds: share,
      complete: true,
      figures: { ttlMs: guard['ttlMs'], concurrency: guard['concurrency'], ...f, ...calibrations },
    };
    return [`store-${fault}`, 'store', run];
  });
}

/** runsOf reads one raw result file into (class, kind, run) rows. */
function runsOf(file: string): [string, ClassSummary['kind'], Run][] {
  const j = obj(JSON.parse(readFileSync(file, 'utf8')));
  const name = basename(file, '.json');
  if (Array.isArray(j['summaries'])) return soakRuns(j, name, file);
  if (Array.isArray(j['perLock'])) return [nemesisRun(j, name, file)];
  if (j['guard'] !== undefined) return storeRuns(j, name, file);
  throw new Error(`${file}: not a soak, nemesis or store-soak result (no summaries, perLock or guard)`);
}

/** readSummaries loads every committed class summary. */
function readSummaries(): Map<string, ClassSummary> {
  const out = new Map<string, ClassSummary>();
  for (const f of readdirSync(SUMMARY_DIR)
    .filter((n) => n.endsWith('.json'))
    .sort()) {
    const s = JSON.parse(readFileSync(join(SUMMARY_DIR, f), 'utf8')) as ClassSummary;
    out.set(s.class, s);
  }
  return out;
}

/** retotal recomputes a summary's totals from its runs. */
function retotal(s: ClassSummary): void {
  const sum = (k: 'trials' | 'survived' | 'violated' | 'stuck' | 'notRun' | 'wallSeconds'): number =>
    s.runs.reduce((a, r) => a + r[k], 0);
  s.trials = sum('trials');
  s.survived = sum('survived');
  s.violated = sum('violated');
  s.stuck = sum('stuck');
  s.notRun = sum('notRun');
  s.wallSeconds = Math.round(sum('wallSeconds'));
}

const { values, positionals } = parseArgs({
  options: { write: { type: 'boolean', default: false }, runs: { type: 'string' } },
  allowPositionals: true,
});

if (values.write) {
  if (positionals.length === 0) {
    process.stderr.write('Usage: node hack/soak-totals.ts --write RESULT.json...\n');
    process.exit(2);
  }
  const summaries = readSummaries();
  const touched = new Set<string>();
  for (const file of positionals)
    for (const [cls, kind, run] of runsOf(file)) {
      const s = summaries.get(cls) ?? {
        class: cls,
        kind,
        trials: 0,
        survived: 0,
        violated: 0,
        stuck: 0,
        notRun: 0,
        wallSeconds: 0,
        runs: [],
      };
      s.runs = [...s.runs.filter((r) => r.name !== run.name), run];
      retotal(s);
      summaries.set(cls, s);
      touched.add(cls);
    }
  for (const cls of touched) {
    const path = join(SUMMARY_DIR, `${cls}.json`);
    writeFileSync(path, `${JSON.stringify(summaries.get(cls), null, 2)}\n`);
    process.stdout.write(`${path}\n`);
  }
  process.exit(0);
}

// The table: the soak classes (no calibration, nemesis or store classes) in the order of the fault
// table, summed over the runs named by --runs when given, else over all.
const only = values.runs !== undefined ? new Set(values.runs.split(',').map((n) => basename(n.trim(), '.json'))) : null;
const rank = (cls: string): number => {
  const i = (FAULT_TYPES as readonly string[]).indexOf(cls);
  return i < 0 ? FAULT_TYPES.length : i;
};
const rows = [...readSummaries().values()]
  .filter((s) => s.kind === 'soak')
  .map((s) => ({ ...s, runs: s.runs.filter((r) => only === null || only.has(r.name)) }))
  .filter((s) => s.runs.length > 0)
  .sort((a, b) => rank(a.class) - rank(b.class) || a.class.localeCompare(b.class));
for (const s of rows) retotal(s);
const lines = [
  "| fault | trials with the fault | survived | trials with a violation | stuck | not run | machine time (share of the runs' wall time) | runs |",
  '|---|---:|---:|---:|---:|---:|---:|---|',
  ...rows.map(
    (t) =>
      `| ${t.class} | ${t.trials} | ${t.survived} | ${t.violated} | ${t.stuck} | ${t.notRun} | ${Math.round(t.wallSeconds / 60)} min | ${t.runs.map((r) => r.name).join(', ')} |`,
  ),
];
const total = (k: 'trials' | 'survived' | 'violated' | 'stuck' | 'notRun' | 'wallSeconds'): number =>
  rows.reduce((a, t) => a + t[k], 0);
lines.push(
  `| **all** | **${total('trials')}** | ${total('survived')} | **${total('violated')}** | ${total('stuck')} | ${total('notRun')} | ${Math.round(total('wallSeconds') / 60)} min | |`,
);
process.stdout.write(`${lines.join('\n')}\n`);
