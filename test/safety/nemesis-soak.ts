/**
 * nemesis-soak.ts — the `hack/soak.ts --nemesis-minutes M` form: one combined-nemesis run on the
 * soak's own bed, a fault every U[5, 15] s for M minutes, then the final heal; prints the tables
 * and writes the result as JSON (with the command that replays it by seed).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { dirname } from 'node:path';
import { runNemesis } from './nemesis.ts';
import { formatNemesis } from './nemesis-report.ts';
import type { SafetyBed } from './testbed.ts';

/** NemesisSoakOptions: the soak's bed and flags. */
export interface NemesisSoakOptions {
  readonly bed: SafetyBed;
  readonly minutes: number;
  readonly seed: number;
  readonly leaseSeconds: number;
  readonly out: string;
  /** calibrate: which protection the bed runs without (guard: plain SETs; floor: set by the bed's controller); the run must then find violations. */
  readonly calibrate?: 'guard' | 'floor';
  /** command: the command line, recorded in the JSON. */
  readonly command: string;
}

/** SOAK_INTERVAL_MS: the plan's nemesis cadence, a fault every 5–15 s. */
export const SOAK_INTERVAL_MS = [5000, 15_000] as const;

/** runNemesisSoak runs, reports and writes the result; true when every lock held S1–S5 and recovered (calibrating: when violations were found). */
export async function runNemesisSoak(o: NemesisSoakOptions): Promise<boolean> {
  const log = (l: string): void => {
    process.stderr.write(`${l}\n`);
  };
  const replay = `node hack/soak.ts --nemesis-minutes ${o.minutes} --seed ${o.seed} --lease ${o.leaseSeconds}${o.calibrate !== undefined ? ` --calibrate ${o.calibrate}` : ''}`;
  log(
    `soak: combined nemesis for ${o.minutes} min, seed ${o.seed}, lease ${o.leaseSeconds} s${o.calibrate !== undefined ? `, CALIBRATION: ${o.calibrate} disabled` : ''} (replay: ${replay})`,
  );
  const r = await runNemesis({
    bed: o.bed,
    seed: o.seed,
    durationMs: o.minutes * 60_000,
    intervalMs: SOAK_INTERVAL_MS,
    leaseSeconds: o.leaseSeconds,
    fenced: o.calibrate !== 'guard',
    log,
  });
  mkdirSync(dirname(o.out), { recursive: true });
  writeFileSync(
    o.out,
    `${JSON.stringify(
      {
        command: o.command,
        calibrate: o.calibrate ?? null,
        replay,
        storeLogBroken: o.bed.storeLog.broken,
        leaseWatchRestarts: o.bed.leases.restarts,
        machine: {
          cpus: cpus().length,
          cpuModel: cpus()[0]?.model ?? '',
          memoryGiB: Math.round(totalmem() / 2 ** 30),
          node: process.version,
          loadavgAtEnd: loadavg().map((x) => Math.round(x * 10) / 10),
        },
        ...r,
      },
      null,
      2,
    )}\n`,
  );
  process.stdout.write(`${formatNemesis(r)}\n`);
  for (const l of r.perLock)
    if (!l.ok) process.stdout.write(`FAILED ${l.lock}:\n  ${l.violations.slice(0, 10).join('\n  ')}\n`);
  process.stdout.write(`results in ${o.out}\n`);
  if (o.calibrate !== undefined) return !r.ok;
  return r.ok && r.recoveryMs !== null && r.setupError === undefined && !o.bed.storeLog.broken;
}
