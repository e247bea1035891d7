/**
 * plot.ts — `npm run bench:plot`: renders docs/img/*.svg from bench/results/compare.json and
 * bench/results/scale.json (whichever exist): the handoff and failover distributions as empirical
 * CDFs per system, and the scale curves (locks granted and controller RSS over time, per size).
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { KEPT_DIR } from './lib.ts';
import { ecdf, lineChart, type Series } from './svg-chart.ts';

const ROOT = resolve(import.meta.dirname, '..');
const IMG = join(ROOT, 'docs/img');

interface CompareSample {
  readonly system: string;
  readonly scenario: string;
  readonly ms: number;
}
interface CompareResult {
  readonly runs: number;
  readonly settings: {
    readonly equal: { readonly leaseDurationSeconds: number };
    readonly clientGoDefaults: { readonly leaseDurationSeconds: number };
    readonly systems: Record<string, { readonly label: string }>;
  };
  readonly samples: readonly CompareSample[];
  readonly floorSamples: readonly { readonly casMs: number }[];
}
interface ScaleResult {
  readonly sizes: readonly {
    readonly locks: number;
    readonly samples: readonly {
      readonly t: number;
      readonly granted: number;
      readonly controllerRssMiB: number;
      readonly queueDepth: number;
      readonly apiWritesPerS: number;
    }[];
  }[];
}

function write(name: string, svg: string): void {
  mkdirSync(IMG, { recursive: true });
  const path = join(IMG, name);
  writeFileSync(path, svg);
  process.stdout.write(`Wrote ${relative(process.cwd(), path)}\n`);
}

function plotCompare(r: CompareResult): void {
  const label = (id: string): string => r.settings.systems[id]?.label ?? id;
  const series = (scenario: string): Series[] =>
    Object.keys(r.settings.systems)
      .map((id) => ({
        name: label(id),
        step: true,
        points: ecdf(r.samples.filter((s) => s.scenario === scenario && s.system === id).map((s) => s.ms)),
      }))
      .filter((s) => s.points.length > 0);
  write(
    'handoff.svg',
    lineChart({
      title: `Voluntary handoff (SIGTERM of the holder → successor holds), ${r.runs} runs each`,
      xLabel: 'milliseconds (log scale)',
      yLabel: 'fraction of runs',
      xLog: true,
      yMin: 0,
      yMax: 1,
      series: [
        ...series('handoff'),
        {
          name: 'floor: one bare Lease CAS (kept-alive)',
          step: true,
          dashed: true,
          points: ecdf(r.floorSamples.map((f) => f.casMs)),
        },
      ],
    }),
  );
  const lease = r.settings.equal.leaseDurationSeconds * 1000;
  write(
    'failover.svg',
    lineChart({
      title: `Crash failover (SIGKILL of the holder → successor holds), ${r.runs} runs each`,
      xLabel: 'milliseconds (log scale)',
      yLabel: 'fraction of runs',
      xLog: true,
      yMin: 0,
      yMax: 1,
      markers: [
        { x: lease, label: `lease ${lease / 1000} s` },
        {
          x: r.settings.clientGoDefaults.leaseDurationSeconds * 1000,
          label: `${r.settings.clientGoDefaults.leaseDurationSeconds} s`,
        },
      ],
      series: [
        ...series('crash-silent').map((s) => ({ ...s, name: `silent: ${s.name}` })),
        ...series('crash-terminated').map((s) => ({ ...s, name: `pod terminated: ${s.name}`, dashed: true })),
      ],
      height: 460,
    }),
  );
}

function plotScale(r: ScaleResult): void {
  write(
    'scale-granted.svg',
    lineChart({
      title: 'Scale: locks granted after a cold start of one controller replica',
      xLabel: 'seconds since the controller was started',
      yLabel: 'fraction of locks granted',
      yMin: 0,
      yMax: 1,
      series: r.sizes.map((s) => ({
        name: `${s.locks} locks`,
        points: [
          [0, 0],
          ...s.samples.map((x): [number, number] => [x.t, Number.isNaN(x.granted) ? 0 : x.granted / s.locks]),
        ],
      })),
    }),
  );
  write(
    'scale-rss.svg',
    lineChart({
      title: 'Scale: controller RSS (cold start, then holders renewing)',
      xLabel: 'seconds since the controller was started',
      yLabel: 'RSS (MiB)',
      yMin: 0,
      series: r.sizes.map((s) => ({
        name: `${s.locks} locks`,
        points: s.samples.map((x): [number, number] => [x.t, x.controllerRssMiB]),
      })),
    }),
  );
  write(
    'scale-queue.svg',
    lineChart({
      title: 'Scale: work-queue depth (keys waiting ÷ locks)',
      xLabel: 'seconds since the controller was started',
      yLabel: 'queue depth ÷ locks',
      yMin: 0,
      yMax: 1.05,
      series: r.sizes.map((s) => ({
        name: `${s.locks} locks`,
        points: s.samples.map((x): [number, number] => [x.t, Number.isNaN(x.queueDepth) ? 0 : x.queueDepth / s.locks]),
      })),
    }),
  );
  write(
    'scale-writes.svg',
    lineChart({
      title: 'Scale: API-server writes per second (POST/PUT/PATCH/DELETE)',
      xLabel: 'seconds since the controller was started',
      yLabel: 'writes per second',
      yMin: 0,
      series: r.sizes.map((s) => ({
        name: `${s.locks} locks`,
        points: s.samples.map((x): [number, number] => [x.t, x.apiWritesPerS]),
      })),
    }),
  );
}

const results = KEPT_DIR;
const compare = join(results, 'compare.json');
const scale = join(results, 'scale.json');
if (existsSync(compare)) plotCompare(JSON.parse(readFileSync(compare, 'utf8')) as CompareResult);
else process.stdout.write('No bench/results/compare.json: run npm run bench:compare first\n');
if (existsSync(scale)) plotScale(JSON.parse(readFileSync(scale, 'utf8')) as ScaleResult);
else process.stdout.write('No bench/results/scale.json: run npm run bench:scale first\n');
