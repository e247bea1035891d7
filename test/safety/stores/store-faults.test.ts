/**
 * The randomized safety trials of the lock stores: two worker processes (store-worker.ts) contend
 * for one store lock — the Redis store (src/stores/redis) or Redlock over five masters
 * (src/stores/redlock) — on real redis-servers, and write a second real redis-server through the
 * Redis guard; each trial injects one fault (store-bed.ts says what each does): `pause`,
 * `restart-lose`, `failover`, `failback`, `failback-resync`, `flap`, `promote-clock-behind`,
 * `restart-keep`, `redlock-pause`, `redlock-clock-jump`, `redlock-restart-lose`.
 * The verdict (store-check.ts) reads the data key's writes in the order the guard's Redis applied
 * them (MONITOR): S3 — no token below an earlier one — must hold, and S1 — no token handed out
 * twice, no grant below an earlier one, even across a failover or lost data (the epoch floor,
 * fence-next.lua fence_epoch). Windows in which both workers believed are counted and expected (a
 * lock alone cannot prevent them); the guard is what makes them harmless.
 * The calibration runs the same faults with bare SETs instead of the guard and reports, per
 * fault type, what the checker then finds; where the fault breaks the lock it must find S3.
 *
 * Knobs: SAFETY_STORE_TRIALS (trials per fault type, default 3), SAFETY_STORE_FAULTS
 * (comma-separated, default all), SAFETY_STORE_CONCURRENCY (default 4), SAFETY_STORE_TTL_MS
 * (default 400), SAFETY_STORE_CALIBRATION_TRIALS (per fault type, default 2; 0 skips it),
 * SAFETY_STORE_OUT (write the run's raw JSON there, e.g. under .results/; `node hack/soak-totals.ts
 * --write` adds it to the committed summaries), SAFETY_SEED (replays the fault plans),
 * SAFETY_STORE_DEBUG=<fault> (print the grants and ends of that fault's trials with an overlap
 * window or a token that went back).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isStoreFault, STORE_FAULTS, StoreBed, type RunSummary, type StoreFault } from './store-bed.ts';

const PER_FAULT = Number(process.env['SAFETY_STORE_TRIALS'] ?? '3');
const CALIBRATION = Number(process.env['SAFETY_STORE_CALIBRATION_TRIALS'] ?? '2');
/** MORE_CALIBRATION: the calibration trials a fault that has not bitten yet gets once more (at 55 %, all 12 miss with p ≈ 7e-5). */
const MORE_CALIBRATION = 12;
const CONCURRENCY = Number(process.env['SAFETY_STORE_CONCURRENCY'] ?? '4');
const TTL_MS = Number(process.env['SAFETY_STORE_TTL_MS'] ?? '400');
const FAULTS: readonly StoreFault[] = (process.env['SAFETY_STORE_FAULTS'] ?? STORE_FAULTS.join(','))
  .split(',')
  .map((f) => f.trim())
  .filter((f): f is StoreFault => {
    if (!isStoreFault(f))
      throw new Error(`SAFETY_STORE_FAULTS: unknown fault ${f} (known: ${STORE_FAULTS.join(', ')})`);
    return true;
  });
const SEED =
  process.env['SAFETY_SEED'] !== undefined ? Number(process.env['SAFETY_SEED']) : Math.floor(Math.random() * 2 ** 31);
const OUT = process.env['SAFETY_STORE_OUT'];

/**
 * BITES: the fault types after which a lock alone lets a stale write land, so the calibration
 * (bare SETs) must find S3. The others are reported, not required: `restart-keep`,
 * `redlock-restart-lose` of a minority and `redlock-clock-jump` (it frees the lock only when 3 of
 * the 5 masters jump) the lock is meant to survive; `failover` and `restart-lose` bit through
 * tokens going back, which the epoch floor ended — they now bite only when the old holder writes
 * in its short window of belief (about 1 trial in 12), and FLOOR_FAULTS calibrates them instead.
 */
const BITES: ReadonlySet<StoreFault> = new Set(['pause', 'redlock-pause']);

/** FLOOR_FAULTS: where the epoch floor is what keeps tokens unique and rising; calibrated by defeating it. */
const FLOOR_FAULTS: readonly StoreFault[] = (
  ['failover', 'restart-lose', 'failback', 'flap', 'promote-clock-behind'] as const
).filter((f) => FAULTS.includes(f));

/** COMMAND: this run's command line, for the summaries (hack/soak-totals.ts --write). */
const COMMAND = `${Object.entries(process.env)
  .filter(([k]) => k.startsWith('SAFETY_STORE_') && k !== 'SAFETY_STORE_OUT')
  .map(([k, v]) => `${k}=${v ?? ''} `)
  .join('')}SAFETY_SEED=${SEED} node hack/run-tests.ts test/safety/stores/store-faults.test.ts`;
const results: {
  command: string;
  guard?: RunSummary;
  calibration?: RunSummary;
  floorCalibration?: RunSummary;
} = { command: COMMAND };
const save = (): void => {
  if (OUT === undefined) return;
  mkdirSync(dirname(resolve(OUT)), { recursive: true });
  writeFileSync(OUT, `${JSON.stringify(results, null, 2)}\n`);
};
const line = (label: string, s: RunSummary): string =>
  `${label} (seed ${s.seed}, ${s.seconds} s, load ${s.loadAverage.start.map((x) => x.toFixed(2)).join('/')} → ${s.loadAverage.end.map((x) => x.toFixed(2)).join('/')}):\n` +
  Object.entries(s.faults)
    .map(([f, v]) => `  ${f}: ${JSON.stringify(v)}`)
    .join('\n') +
  '\n';

describe('lock stores under faults: locks may overlap, the guard refuses every stale write', () => {
  let bed: StoreBed;
  beforeAll(async () => {
    bed = await StoreBed.start(CONCURRENCY, TTL_MS);
  }, 60_000);
  afterAll(async () => {
    await bed.stop();
  }, 60_000);

  it(
    `${PER_FAULT} trials of each of ${FAULTS.join(', ')} with the guard: 0 S3 violations (seed ${SEED})`,
    async () => {
      let done = 0;
      const s = await bed.run({
        faults: FAULTS,
        perFault: PER_FAULT,
        mode: 'guard',
        seed: SEED,
        label: 'guard',
        onTrial: (r) => {
          if (++done % 100 === 0)
            process.stdout.write(`store-faults: ${done} trials (last: ${r.fault} ${r.variant})\n`);
        },
      });
      results.guard = s;
      save();
      process.stdout.write(line('store-faults', s));
      expect(s.violations).toEqual([]);
      for (const f of FAULTS) {
        const v = s.faults[f];
        expect(v?.faulted, `${f}: trials with the fault injected`).toBe(PER_FAULT);
        // Tokens never go back nor repeat, whatever the fault: since the epoch floor, not even when a
        // store loses acknowledged data or fails over (S1 above; spelled out here per fault).
        expect(v?.grantRegressions, `${f}: grants whose token was not above an earlier grant's`).toBe(0);
        expect(v?.sharedTokens, `${f}: writes at a token another holder had`).toBe(0);
      }
      const checks = Object.entries(s.faults).flatMap(([f, v]) =>
        Object.entries(v.checks).map(([k, c]) => ({ f, k, ...c })),
      );
      // Real faults, verified: the replica really lagged, Redis really saw its clock step, the AOF kept the counter.
      for (const c of checks)
        if (
          c.k === 'Redis saw the jump' ||
          c.k === 'counter kept' ||
          c.k === 'replica missed the grant' ||
          c.k === 'grant on the promoted replica'
        )
          expect(c.yes, `${c.f}: ${c.k}`).toBe(c.of);
      expect(Object.values(s.faults).reduce((a, v) => a + v.appliedWrites, 0)).toBeGreaterThan(0);
    },
    Math.max(180_000, PER_FAULT * FAULTS.length * 15_000),
  );

  it.skipIf(CALIBRATION === 0)(
    'calibration: with bare SETs instead of the guard, the faults that break the lock let a stale write land (S3 found)',
    async () => {
      const s = await bed.run({
        faults: FAULTS,
        perFault: CALIBRATION,
        mode: 'plain',
        seed: SEED + 1_000_000,
        label: 'plain',
      });
      results.calibration = s;
      save();
      process.stdout.write(line('store-faults calibration', s));
      for (const f of FAULTS) {
        const v = s.faults[f];
        if (!BITES.has(f) || v === undefined) continue;
        let found = v.trialsWithS3 + v.trialsWithSharedToken;
        // Some faults bite in only part of the trials (failover: 11 of 20 in the soak, docs/safety.md),
        // so a small CI run may miss by chance: it tries up to MORE_CALIBRATION more before it fails.
        if (found === 0 && CALIBRATION < MORE_CALIBRATION) {
          const more = await bed.run({
            faults: [f],
            perFault: MORE_CALIBRATION,
            mode: 'plain',
            seed: SEED + 2_000_000,
            label: `plain-${f}-more`,
          });
          const w = more.faults[f];
          found = (w?.trialsWithS3 ?? 0) + (w?.trialsWithSharedToken ?? 0);
          process.stdout.write(line(`store-faults calibration, ${f} again`, more));
        }
        expect(found, `${f}: calibration trials with S3 or a shared token`).toBeGreaterThan(0);
      }
    },
    Math.max(240_000, (CALIBRATION * FAULTS.length + MORE_CALIBRATION * 2) * 15_000),
  );

  it.skipIf(CALIBRATION === 0 || FLOOR_FAULTS.length === 0)(
    'calibration: with the epoch floor defeated (the new Redis forged to look like the last issuer), failover, failback, flapping and lost data hand out a token twice or going back (S1 found)',
    async () => {
      const s = await bed.run({
        faults: FLOOR_FAULTS,
        perFault: CALIBRATION,
        mode: 'guard',
        seed: SEED + 3_000_000,
        label: 'no-floor',
        defeatEpochFloor: true,
      });
      results.floorCalibration = s;
      save();
      process.stdout.write(line('store-faults calibration, epoch floor defeated', s));
      const found = (x: RunSummary, f: StoreFault): number => x.violations.filter((v) => v.includes(`(${f} `)).length;
      const counts = new Map(FLOOR_FAULTS.map((f) => [f, found(s, f)]));
      const missed = FLOOR_FAULTS.filter((f) => counts.get(f) === 0);
      if (missed.length > 0 && CALIBRATION < MORE_CALIBRATION) {
        const more = await bed.run({
          faults: missed,
          perFault: MORE_CALIBRATION,
          mode: 'guard',
          seed: SEED + 4_000_000,
          label: 'no-floor-more',
          defeatEpochFloor: true,
        });
        process.stdout.write(line('store-faults calibration, epoch floor defeated, again', more));
        for (const f of missed) counts.set(f, found(more, f));
      }
      for (const f of FLOOR_FAULTS)
        expect(counts.get(f), `${f}: S1 violations with the floor defeated`).toBeGreaterThan(0);
    },
    Math.max(240_000, (CALIBRATION + MORE_CALIBRATION) * FLOOR_FAULTS.length * 15_000),
  );
});
