/**
 * The randomized safety trials of the Redis store (issue 19, item 5 — the start of it): two
 * worker processes (store-worker.ts) contend for one store lock on a real redis-server and write
 * a second real redis-server through the Redis guard; each trial injects one fault, drawn from a
 * seeded generator:
 * - `pause`: the holder is SIGSTOPped past its TTL (1.5–3× of it) while the other takes the lock
 *   and writes; resumed, it writes once more with its old token (a process that checked first);
 * - `restart-lose`: the store's Redis restarts empty while the lock is held (a failover to a
 *   replica that had not received it, or a restart without persistence): the lock is free at
 *   once, and its counter restarts from 0.
 * The verdict (store-check.ts) reads the data key's writes in the order the guard's Redis applied
 * them (MONITOR): S3 — no token below an earlier one — must hold; windows in which both workers
 * believed are counted and expected (a lock alone cannot prevent them). The calibration runs
 * `pause` with bare SETs instead of the guard: S3 must then be found.
 * SAFETY_STORE_TRIALS (default 8) trials; SAFETY_SEED replays.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mulberry32 } from '../../support/prng.ts';
import { spawnManaged, type ManagedProcess } from '../../support/testbed/processes.ts';
import { startRedis, type RedisServer } from '../../support/testbed/redis.ts';
import { checkStoreTrial, parseWorkerLine, type StoreTrialVerdict, type WorkerEvent } from './store-check.ts';

const WORKER = resolve(import.meta.dirname, 'store-worker.ts');
const TRIALS = Number(process.env['SAFETY_STORE_TRIALS'] ?? '8');
const SEED =
  process.env['SAFETY_SEED'] !== undefined ? Number(process.env['SAFETY_SEED']) : Math.floor(Math.random() * 2 ** 31);
const TTL_MS = 500;

type Fault = 'pause' | 'restart-lose';

describe('Redis store locks under faults: locks may overlap, the guard refuses every stale write', () => {
  let storeRedis: RedisServer;
  let guardRedis: RedisServer;
  let monitor: Redis;
  let dir: string;
  /** applied: per data key, the values SET on it in the guard Redis's order. */
  const applied = new Map<string, bigint[]>();

  beforeAll(async () => {
    [storeRedis, guardRedis] = await Promise.all([startRedis(), startRedis()]);
    dir = mkdtempSync(join(tmpdir(), 'fencepost-store-safety-'));
    monitor = await guardRedis.client().monitor();
    monitor.on('monitor', (_time: string, args: string[]) => {
      const [cmd, key, value] = args;
      if (cmd?.toUpperCase() !== 'SET' || key === undefined || value === undefined || !key.startsWith('trial-')) return;
      if (!/^\d+$/.test(value)) return;
      applied.set(key, [...(applied.get(key) ?? []), BigInt(value)]);
    });
  });
  afterAll(async () => {
    monitor.disconnect();
    await Promise.all([storeRedis.stop(), guardRedis.stop()]);
    rmSync(dir, { recursive: true, force: true });
  });

  /** runTrial runs one trial and returns its verdict and what the fault did. */
  const runTrial = async (
    n: number,
    fault: Fault,
    mode: 'guard' | 'plain',
    rnd: () => number,
  ): Promise<StoreTrialVerdict & { faulted: boolean }> => {
    const lock = `trial-${mode}-${n}`;
    const key = `trial-${mode}-${n}-data`;
    const events: WorkerEvent[] = [];
    const workers: ManagedProcess[] = [];
    const lines: { worker: number; line: string }[] = [];
    for (let w = 0; w < 2; w++) {
      const p = spawnManaged(`store-worker-${n}-${w}`, process.execPath, {
        args: [WORKER, storeRedis.url, guardRedis.url, lock, String(TTL_MS), key, mode],
        logFile: join(dir, `${lock}-${w}.log`),
        pipeStdio: true,
      });
      workers.push(p);
      void (async () => {
        for await (const line of createInterface({ input: p.stdout ?? process.stdin })) {
          lines.push({ worker: w, line });
          const e = parseWorkerLine(w, line);
          if (e !== undefined) events.push(e);
        }
      })();
    }
    const holderNow = (): WorkerEvent | undefined => {
      const open = new Map<number, WorkerEvent>();
      for (const e of events)
        if (e.kind === 'granted') open.set(e.worker, e);
        else if (e.kind === 'lost' || e.kind === 'released') open.delete(e.worker);
      return [...open.values()].at(-1);
    };
    const waitFor = async (what: string, ok: () => boolean, ms = 10_000): Promise<void> => {
      const end = Date.now() + ms;
      while (!ok()) {
        if (Date.now() > end) throw new Error(`trial ${lock}: ${what} did not happen within ${ms} ms`);
        await sleep(10);
      }
    };
    let faulted = false;
    try {
      await waitFor('a grant', () => holderNow() !== undefined);
      await sleep(50 + rnd() * 300);
      // Between one worker's release and the other's grant nobody holds: wait for the next holder.
      await waitFor('a holder to fault', () => holderNow() !== undefined);
      const h = holderNow();
      if (h !== undefined) {
        if (fault === 'pause') {
          const p = workers[h.worker];
          p?.signal('SIGSTOP');
          const pausedMs = TTL_MS * (1.5 + rnd() * 1.5);
          const other = 1 - h.worker;
          // The other takes the lock and writes (the checker sees whether the stale write lands after it).
          await waitFor("the other worker's write with a larger token", () =>
            events.some((e) => e.worker === other && e.kind === 'write' && e.token > h.token && e.applied === true),
          ).catch(() => undefined);
          await sleep(Math.max(0, pausedMs - TTL_MS));
          p?.signal('SIGCONT');
          p?.stdin?.write('stale\n');
          faulted = true;
        } else {
          await storeRedis.restart({ loseData: true });
          faulted = true;
        }
      }
      await sleep(600 + rnd() * 400);
    } finally {
      for (const p of workers) p.stdin?.write('quit\n');
      await Promise.all(workers.map((p) => p.stop(3000)));
    }
    await sleep(50); // the last MONITOR lines
    return { ...checkStoreTrial(applied.get(key) ?? [], events, Date.now()), faulted };
  };

  it(
    `${TRIALS} trials with the guard: 0 S3 violations (seed ${SEED})`,
    async () => {
      const rnd = mulberry32(SEED);
      const counts = { pause: 0, 'restart-lose': 0, overlaps: 0, appliedWrites: 0 };
      const violations: string[] = [];
      for (let n = 0; n < TRIALS; n++) {
        const fault: Fault = rnd() < 0.6 ? 'pause' : 'restart-lose';
        const v = await runTrial(n, fault, 'guard', rnd);
        if (v.faulted) counts[fault]++;
        counts.overlaps += v.overlaps.length;
        counts.appliedWrites += v.appliedWrites;
        violations.push(...v.s3.map((s) => `trial ${n} (${fault}): ${s}`));
      }
      process.stdout.write(`store-faults (seed ${SEED}): ${JSON.stringify(counts)}\n`);
      expect(violations).toEqual([]);
      expect(counts.pause + counts['restart-lose']).toBe(TRIALS); // every trial had its fault
      expect(counts.appliedWrites).toBeGreaterThan(0);
    },
    Math.max(180_000, TRIALS * 10_000),
  );

  it("calibration: with bare SETs instead of the guard, the paused holder's stale write lands after the successor's (S3 found)", async () => {
    const rnd = mulberry32(SEED + 1);
    let found = 0;
    let overlaps = 0;
    for (let n = 0; n < 3; n++) {
      const v = await runTrial(n, 'pause', 'plain', rnd);
      if (v.s3.length > 0) found++;
      overlaps += v.overlaps.length;
    }
    process.stdout.write(
      `store-faults calibration (seed ${SEED + 1}): S3 in ${found} of 3, overlap windows ${overlaps}\n`,
    );
    expect(found).toBeGreaterThan(0);
    expect(overlaps).toBeGreaterThan(0); // the lock alone let two believe
  }, 120_000);
});
