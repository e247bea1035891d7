/**
 * The bed of the store-lock safety trials (store-faults.test.ts): real redis-servers, a pool of
 * real worker processes (store-worker.ts), the faults, and the verdicts.
 *
 * Trials run `concurrency` at a time, each in a *slot* of its own: two worker processes (kept from
 * trial to trial), and the slot's servers — a plain store Redis (`pause`, `restart-lose`), one
 * with an append-only file fsynced on every write (`restart-keep`), and five Redlock masters under
 * libfaketime (`redlock-*`). A `failover` trial starts its own primary, replica and store proxy
 * (the primary dies in it). So a restart or a clock step hits only its own trial's lock, and
 * every trial has a fresh lock name. The guarded data lives on one shared guard Redis, whose
 * MONITOR is the verdict's source: the order in which Redis applied the writes, not what the
 * workers were told.
 *
 * Every random choice of trial i comes from mulberry32(seed + i), so a fault plan replays
 * whatever the other slots do (the interleaving is real scheduling and does not replay exactly).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { openMonitor, type RedisMonitor } from '../../support/testbed/redis-monitor.ts';
import { lockKeys, type LockKeys } from '../../../src/stores/redis/keys.ts';
import { mulberry32 } from '../../support/prng.ts';
import { freePort } from '../../support/testbed/ports.ts';
import { spawnManaged, type ManagedProcess } from '../../support/testbed/processes.ts';
import { startRedis, startReplica, type RedisServer, type Replica } from '../../support/testbed/redis.ts';
import { startTcpProxy, type TcpProxy } from '../../support/testbed/tcp-proxy.ts';
import {
  checkStoreTrial,
  parseAppliedValue,
  parseWorkerLine,
  type AppliedWrite,
  type StoreTrialVerdict,
  type WorkerEvent,
} from './store-check.ts';

const WORKER = resolve(import.meta.dirname, 'store-worker.ts');

/**
 * StoreFault is one fault type:
 * - `pause`: the Redis store's holder SIGSTOPped for 1.5–3 TTL while the other takes the lock and
 *   writes; resumed, it writes once more with its old token;
 * - `restart-lose`: the store Redis restarts empty while the lock is held;
 * - `failover`: the store Redis has a real replica (REPLICAOF over a proxy of ours); the link is
 *   cut (blackholed), one or two grants reach the primary alone, then — while that holder holds —
 *   the primary is SIGKILLed, the replica promoted (REPLICAOF NO ONE) and the workers' store
 *   proxy pointed at it, as a Sentinel would: the lock is free there and its counter lags;
 * - `restart-keep`: the store Redis, with appendonly yes + appendfsync always, is SIGKILLed (or
 *   shut down) and started again while the lock is held: the holder key and the counter survive;
 * - `failback`: as `failover` (the link cut in half the trials, so that the replica misses the
 *   last grants), but the primary is not killed: it is demoted under a master nobody reaches and
 *   its clients are disconnected, the replica promoted and granted on, then the promoted replica
 *   is SIGKILLed before the old primary resynced from it, and the old primary — the same process —
 *   is promoted again as Sentinel does (REPLICAOF the lost node, then REPLICAOF NO ONE);
 * - `failback-resync`: as `failback`, but the old primary first resyncs from the promoted replica,
 *   which is then demoted under it (a planned failback);
 * - `flap`: as `failback`, then 2–10 promotions in all, back and forth between the two nodes, each
 *   time the other one demoted under a master nobody reaches (they never resync) and one grant
 *   waited for;
 * - `promote-clock-behind`: `failover` to a replica whose wall clock is 1–30 s behind the
 *   primary's (libfaketime), after it missed the last grant(s);
 * - `redlock-pause`: as `pause`, on a Redlock over 5 masters;
 * - `redlock-clock-jump`: the wall clocks of 1–5 of the 5 masters step forward by 1.5–4 TTL
 *   (libfaketime), so the holder's keys there expire early; with 3 or more the lock is free;
 * - `redlock-restart-lose`: 1 or 2 of the 5 masters (a minority) restart empty.
 */
export type StoreFault =
  | 'pause'
  | 'restart-lose'
  | 'failover'
  | 'failback'
  | 'failback-resync'
  | 'flap'
  | 'promote-clock-behind'
  | 'restart-keep'
  | 'redlock-pause'
  | 'redlock-clock-jump'
  | 'redlock-restart-lose';

export const STORE_FAULTS: readonly StoreFault[] = [
  'pause',
  'restart-lose',
  'failover',
  'failback',
  'failback-resync',
  'flap',
  'promote-clock-behind',
  'restart-keep',
  'redlock-pause',
  'redlock-clock-jump',
  'redlock-restart-lose',
];

/** isStoreFault narrows a string (an env var's item) to a fault type. */
export function isStoreFault(s: string): s is StoreFault {
  return (STORE_FAULTS as readonly string[]).includes(s);
}

/** TrialResult is one trial's verdict plus what its fault did. */
export interface TrialResult extends StoreTrialVerdict {
  readonly n: number;
  readonly fault: StoreFault;
  /** variant: the seeded shape of the fault (e.g. "3 of 5 masters +1200 ms"). */
  readonly variant: string;
  /** faulted: the fault was injected while a worker held the lock. */
  readonly faulted: boolean;
  /** checks: fault-specific observations, each true/false (summed per fault type). */
  readonly checks: Readonly<Record<string, boolean>>;
  readonly error?: string;
}

/** WorkerProc is one pooled worker process and the events of the trial it serves. */
class WorkerProc {
  readonly proc: ManagedProcess;
  private sink: WorkerEvent[] = [];
  private index = 0;
  private readonly done = new Set<string>();
  private readonly waiters: (() => void)[] = [];

  constructor(name: string, guardUrl: string, dir: string) {
    const proc = spawnManaged(name, process.execPath, {
      args: [WORKER, guardUrl, name],
      logFile: join(dir, `${name}.log`),
      pipeStdio: true,
    });
    this.proc = proc;
    void (async () => {
      if (proc.stdout === null) return;
      for await (const line of createInterface({ input: proc.stdout })) {
        const m = /^done (\S+)$/.exec(line);
        if (m?.[1] !== undefined) {
          this.done.add(m[1]);
          for (const w of this.waiters.splice(0)) w();
          continue;
        }
        const e = parseWorkerLine(this.index, line);
        if (e !== undefined) this.sink.push(e);
      }
    })();
  }

  /** start begins trial `id`; its events go to `sink`, tagged with worker `index` (0 or 1). */
  start(id: string, index: number, sink: WorkerEvent[], args: readonly string[]): void {
    this.sink = sink;
    this.index = index;
    this.proc.stdin?.write(`start ${id} ${args.join(' ')}\n`);
  }

  stale(): void {
    this.proc.stdin?.write('stale\n');
  }

  /** end ends trial `id`; false if the worker did not answer within `ms` (it is then killed). */
  async end(id: string, ms = 10_000): Promise<boolean> {
    this.proc.signal('SIGCONT');
    this.proc.stdin?.write('end\n');
    const deadline = Date.now() + ms;
    while (!this.done.has(id)) {
      if (Date.now() > deadline || !this.proc.isRunning()) {
        await this.proc.stop(1000);
        return false;
      }
      await new Promise<void>((r) => {
        this.waiters.push(r);
        setTimeout(r, 100);
      });
    }
    this.done.delete(id);
    this.sink = [];
    return true;
  }

  async quit(): Promise<void> {
    this.proc.signal('SIGCONT');
    this.proc.stdin?.write('quit\n');
    await this.proc.stop(3000);
  }
}

/** Slot: what one concurrently running trial owns. Servers start on first use and are reused. */
class Slot {
  workers: WorkerProc[] = [];
  private plainStore: Promise<RedisServer> | undefined;
  private aofStore: Promise<RedisServer> | undefined;
  private redlockMasters: Promise<RedisServer[]> | undefined;
  readonly id: number;
  private readonly guardUrl: string;
  private readonly dir: string;

  constructor(id: number, guardUrl: string, dir: string) {
    this.id = id;
    this.guardUrl = guardUrl;
    this.dir = dir;
  }

  /** ensureWorkers replaces a worker process that died or was killed. */
  ensureWorkers(): WorkerProc[] {
    for (let w = 0; w < 2; w++) {
      const cur = this.workers[w];
      if (cur === undefined || !cur.proc.isRunning())
        this.workers[w] = new WorkerProc(`store-worker-${this.id}-${w}`, this.guardUrl, this.dir);
    }
    return this.workers;
  }
  plain(): Promise<RedisServer> {
    this.plainStore ??= startRedis();
    return this.plainStore;
  }
  aof(): Promise<RedisServer> {
    this.aofStore ??= startRedis({ persistence: 'aof-always' });
    return this.aofStore;
  }
  masters(): Promise<RedisServer[]> {
    this.redlockMasters ??= Promise.all(Array.from({ length: 5 }, () => startRedis({ faketime: true })));
    return this.redlockMasters;
  }
  async stop(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.quit()));
    const servers = [
      ...(this.plainStore !== undefined ? [await this.plainStore] : []),
      ...(this.aofStore !== undefined ? [await this.aofStore] : []),
      ...(this.redlockMasters !== undefined ? await this.redlockMasters : []),
    ];
    await Promise.all(servers.map((s) => s.stop()));
  }
}

/** FaultSummary: one fault type's totals over a run. */
export interface FaultSummary {
  trials: number;
  faulted: number;
  errors: number;
  s3: number;
  trialsWithS3: number;
  overlaps: number;
  trialsWithOverlap: number;
  overlapMaxMs: number;
  appliedWrites: number;
  sharedTokens: number;
  trialsWithSharedToken: number;
  interleavedSharedTokens: number;
  trialsWithInterleavedSharedToken: number;
  grantRegressions: number;
  variants: Record<string, number>;
  checks: Record<string, { yes: number; of: number }>;
  /** overlapsByVariant: trials with an overlap window, per variant (where the fault bites). */
  overlapsByVariant: Record<string, number>;
}

/** RunSummary: a run of trials (the soak's JSON). */
export interface RunSummary {
  mode: 'guard' | 'plain';
  seed: number;
  ttlMs: number;
  concurrency: number;
  seconds: number;
  loadAverage: { start: number[]; end: number[] };
  faults: Partial<Record<StoreFault, FaultSummary>>;
  violations: string[];
}

const emptySummary = (): FaultSummary => ({
  trials: 0,
  faulted: 0,
  errors: 0,
  s3: 0,
  trialsWithS3: 0,
  overlaps: 0,
  trialsWithOverlap: 0,
  overlapMaxMs: 0,
  appliedWrites: 0,
  sharedTokens: 0,
  trialsWithSharedToken: 0,
  interleavedSharedTokens: 0,
  trialsWithInterleavedSharedToken: 0,
  grantRegressions: 0,
  variants: {},
  checks: {},
  overlapsByVariant: {},
});

/** keysOf: the store's own key names of a trial's lock (namespace `default`). */
const keysOf = (lock: string): LockKeys => lockKeys('default', lock);

/**
 * forgeEpoch defeats the epoch floor on `s` for `lock`, for the calibration (Defeat): it records
 * the server's own replication ID (INFO replication master_replid) as the last issuer's, and —
 * when the counter was lost — puts it back at 0, which is what the acquire scripts did before
 * fence_epoch. The next grant then continues the counter it finds, however far behind.
 */
async function forgeEpoch(s: RedisServer, lock: string): Promise<void> {
  const info = await call(s, 'INFO', 'replication');
  const id = typeof info === 'string' ? /master_replid:([0-9a-f]+)/.exec(info)?.[1] : undefined;
  if (id === undefined) throw new Error('forgeEpoch: no master_replid in INFO replication');
  const k = keysOf(lock);
  await call(s, 'SET', k.counter, '0', 'NX');
  await call(s, 'SET', k.epoch, id);
}

async function call(s: RedisServer, ...args: [string, ...string[]]): Promise<unknown> {
  const c = s.client();
  try {
    return await c.call(...args);
  } finally {
    c.disconnect();
  }
}

/** REPLICATED: the fault types whose store is a primary with a replica behind the workers' proxy. */
const REPLICATED: ReadonlySet<StoreFault> = new Set([
  'failover',
  'failback',
  'failback-resync',
  'flap',
  'promote-clock-behind',
]);

/** inSyncWith waits (at most 15 s) until `replica` has everything `primary` had when asked. */
async function inSyncWith(replica: RedisServer, primary: RedisServer): Promise<void> {
  const field = (text: unknown, f: string): number =>
    Number(new RegExp(`^${f}:(\\d+)`, 'm').exec(typeof text === 'string' ? text : '')?.[1] ?? '-1');
  const target = field(await call(primary, 'INFO', 'replication'), 'master_repl_offset');
  const end = Date.now() + 15_000;
  for (;;) {
    const text = await call(replica, 'INFO', 'replication');
    if (
      typeof text === 'string' &&
      text.includes('master_link_status:up') &&
      field(text, 'slave_repl_offset') >= target
    )
      return;
    if (Date.now() > end) throw new Error(`${replica.port} did not catch up with ${primary.port}`);
    await sleep(10);
  }
}

/** keysOn says, per master, whether the lock's holder key exists there (one snapshot, read in parallel). */
async function keysOn(masters: readonly RedisServer[], lock: string): Promise<Map<RedisServer, boolean>> {
  const found = await Promise.all(masters.map((m) => call(m, 'EXISTS', keysOf(lock).holder)));
  return new Map(masters.map((m, i) => [m, found[i] === 1]));
}

/** keysLabel: "lock key on N of 5, K of them <done>" for the `hit` masters of a keysOn snapshot. */
function keysLabel(on: Map<RedisServer, boolean>, hit: readonly RedisServer[], done: string): string {
  const total = [...on.values()].filter(Boolean).length;
  return `lock key on ${total} of ${on.size}, ${hit.filter((m) => on.get(m) === true).length} of them ${done}`;
}

/** pick returns k distinct items of xs, chosen by rnd. */
function pick<T>(xs: readonly T[], k: number, rnd: () => number): T[] {
  const rest = [...xs];
  const out: T[] = [];
  while (out.length < k && rest.length > 0) out.push(...rest.splice(Math.floor(rnd() * rest.length), 1));
  return out;
}

/** StoreBed: the shared guard Redis with its MONITOR, and the slots. */
export class StoreBed {
  private readonly applied = new Map<string, AppliedWrite[]>();
  private readonly slots: Slot[];
  private readonly guard: RedisServer;
  private readonly monitor: RedisMonitor;
  private readonly dir: string;
  readonly ttlMs: number;

  private constructor(guard: RedisServer, monitor: RedisMonitor, dir: string, concurrency: number, ttlMs: number) {
    this.guard = guard;
    this.monitor = monitor;
    this.dir = dir;
    this.ttlMs = ttlMs;
    this.slots = Array.from({ length: concurrency }, (_, i) => new Slot(i, guard.url, dir));
    monitor.on('monitor', (_time: string, args: string[]) => {
      const [cmd, key, value] = args;
      if (cmd?.toUpperCase() !== 'SET' || key === undefined || value === undefined || !key.startsWith('trial-')) return;
      const w = parseAppliedValue(value);
      if (w === undefined) return;
      const list = this.applied.get(key);
      if (list === undefined) this.applied.set(key, [w]);
      else list.push(w);
    });
  }

  static async start(concurrency: number, ttlMs: number): Promise<StoreBed> {
    const guard = await startRedis();
    const monitor = await openMonitor(guard.url);
    const dir = mkdtempSync(join(tmpdir(), 'fencepost-store-safety-'));
    return new StoreBed(guard, monitor, dir, concurrency, ttlMs);
  }

  async stop(): Promise<void> {
    await Promise.all(this.slots.map((s) => s.stop()));
    this.monitor.disconnect();
    await this.guard.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }

  /**
   * run runs `perFault` trials with the fault injected for each of `faults` (a trial that found
   * nothing to fault — an error before the fault — is run again as a new trial, at most
   * perFault / 10 + 3 times per fault), `concurrency` at a time, interleaving the fault types.
   */
  async run(opts: {
    readonly faults: readonly StoreFault[];
    readonly perFault: number;
    readonly mode: 'guard' | 'plain';
    readonly seed: number;
    readonly label: string;
    /** defeatEpochFloor: calibration — after `failover` and `restart-lose`, forge the epoch (forgeEpoch). */
    readonly defeatEpochFloor?: boolean;
    readonly onTrial?: (r: TrialResult) => void;
  }): Promise<RunSummary> {
    const started = performance.now();
    const start = loadavg();
    const summary: RunSummary = {
      mode: opts.mode,
      seed: opts.seed,
      ttlMs: this.ttlMs,
      concurrency: this.slots.length,
      seconds: 0,
      loadAverage: { start, end: [] },
      faults: {},
      violations: [],
    };
    const need = new Map(opts.faults.map((f) => [f, opts.perFault]));
    const retries = new Map(opts.faults.map((f) => [f, Math.floor(opts.perFault / 10) + 3]));
    let next = 0;
    let rr = 0;
    const take = (): { n: number; fault: StoreFault } | undefined => {
      for (let k = 0; k < opts.faults.length; k++) {
        const fault = opts.faults[(rr + k) % opts.faults.length];
        if (fault !== undefined && (need.get(fault) ?? 0) > 0) {
          rr = (rr + k + 1) % opts.faults.length;
          need.set(fault, (need.get(fault) ?? 0) - 1);
          return { n: next++, fault };
        }
      }
      return undefined;
    };
    const record = (r: TrialResult): void => {
      const s = (summary.faults[r.fault] ??= emptySummary());
      s.trials++;
      if (r.faulted) s.faulted++;
      if (r.error !== undefined) s.errors++;
      s.s3 += r.s3.length;
      if (r.s3.length > 0) s.trialsWithS3++;
      s.overlaps += r.overlaps.length;
      if (r.overlaps.length > 0) {
        s.trialsWithOverlap++;
        s.overlapsByVariant[r.variant] = (s.overlapsByVariant[r.variant] ?? 0) + 1;
      }
      for (const o of r.overlaps) s.overlapMaxMs = Math.max(s.overlapMaxMs, o.ms);
      s.appliedWrites += r.appliedWrites;
      s.sharedTokens += r.sharedTokens;
      if (r.sharedTokens > 0) s.trialsWithSharedToken++;
      s.interleavedSharedTokens += r.interleavedSharedTokens;
      if (r.interleavedSharedTokens > 0) s.trialsWithInterleavedSharedToken++;
      s.grantRegressions += r.grantRegressions;
      s.variants[r.variant] = (s.variants[r.variant] ?? 0) + 1;
      for (const [k, v] of Object.entries(r.checks)) {
        const c = (s.checks[k] ??= { yes: 0, of: 0 });
        c.of++;
        if (v) c.yes++;
      }
      const at = `trial ${r.n} (${r.fault} ${r.variant}, seed ${opts.seed + r.n})`;
      summary.violations.push(...r.s3.map((v) => `${at}: S3: ${v}`));
      // S1 for the stores: a token handed out twice (two holders' writes applied at one token) or a
      // grant not above one counted before it was asked for. Since the epoch floor
      // (fence-next.lua fence_epoch) neither a failover nor lost data may do it; bare-SET
      // calibration runs count them as findings instead.
      if (opts.mode === 'guard') {
        if (r.sharedTokens > 0)
          summary.violations.push(`${at}: S1: ${r.sharedTokens} writes at a token another holder had`);
        if (r.grantRegressions > 0)
          summary.violations.push(`${at}: S1: ${r.grantRegressions} grants not above an earlier grant's token`);
      }
      opts.onTrial?.(r);
    };
    await Promise.all(
      this.slots.map(async (slot) => {
        for (let t = take(); t !== undefined; t = take()) {
          const r = await this.trial(
            slot,
            t.n,
            t.fault,
            opts.mode,
            mulberry32(opts.seed + t.n),
            opts.label,
            opts.defeatEpochFloor ?? false,
          );
          record(r);
          if (!r.faulted && (retries.get(t.fault) ?? 0) > 0) {
            retries.set(t.fault, (retries.get(t.fault) ?? 0) - 1);
            need.set(t.fault, (need.get(t.fault) ?? 0) + 1);
          }
        }
      }),
    );
    summary.seconds = Math.round((performance.now() - started) / 100) / 10;
    summary.loadAverage.end = loadavg();
    return summary;
  }

  /** trial runs trial n with `fault` in `slot`. */
  private async trial(
    slot: Slot,
    n: number,
    fault: StoreFault,
    mode: 'guard' | 'plain',
    rnd: () => number,
    label: string,
    defeatEpochFloor: boolean,
  ): Promise<TrialResult> {
    const ttl = this.ttlMs;
    const lock = `trial-${label}-${n}`;
    const key = `${lock}-data`;
    const id = `${label}-${n}`;
    const events: WorkerEvent[] = [];
    const checks: Record<string, boolean> = {};
    let variant = '';
    let faulted = false;
    let error: string | undefined;
    const cleanup: (() => Promise<void>)[] = [];
    const workers = slot.ensureWorkers();
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
        await sleep(5);
      }
    };
    let started = false;
    try {
      // 1. The store this trial's workers use.
      let url: string;
      let failover: { primary: RedisServer; replica: Replica; proxy: TcpProxy } | undefined;
      let masters: RedisServer[] = [];
      let server: RedisServer | undefined;
      if (fault === 'pause' || fault === 'restart-lose') {
        server = await slot.plain();
        url = server.url;
      } else if (fault === 'restart-keep') {
        server = await slot.aof();
        url = server.url;
      } else if (REPLICATED.has(fault)) {
        const primary = await startRedis();
        cleanup.push(() => primary.stop());
        const replica = await startReplica(primary, { faketime: fault === 'promote-clock-behind' });
        cleanup.push(() => replica.stop());
        // The primary draws a new replication ID when its first replica syncs, which floors its
        // next token at its clock: settle that before the first grant, so that the grants a
        // replica misses are the lock's ordinary ones (docs/stores.md says what else breaks).
        await replica.inSync();
        if (fault === 'promote-clock-behind') {
          const behindMs = Math.round(1000 + rnd() * 29_000);
          replica.server.stepClock(-behindMs);
          variant = behindMs < 10_000 ? 'clock 1-10 s behind, ' : 'clock 10-30 s behind, ';
        }
        const proxy = await startTcpProxy({ targetPort: primary.port });
        cleanup.push(() => proxy.close());
        failover = { primary, replica, proxy };
        url = `redis://127.0.0.1:${proxy.port}`;
      } else {
        masters = await slot.masters();
        url = `redlock://${masters.map((m) => `127.0.0.1:${m.port}`).join(',')}`;
      }
      // 2. Both workers contend for the lock.
      workers.forEach((w, i) => {
        w.start(id, i, events, [url, lock, String(ttl), key, mode]);
      });
      started = true;
      await waitFor('a grant', () => holderNow() !== undefined);
      await sleep(30 + rnd() * 200);
      // A counter that went back to 0 would be seen only once it had passed 1 (before the epoch
      // floor, tokens started at 1): `restart-lose` waits for the 2nd–4th grant of the trial.
      const minGrants = fault === 'restart-lose' ? 2 + Math.floor(rnd() * 3) : 1;
      const grants = (): number => events.filter((e) => e.kind === 'granted').length;
      // Between one worker's release and the other's grant nobody holds: wait for the next holder.
      await waitFor('a holder to fault', () => holderNow() !== undefined && grants() >= minGrants);
      let h = holderNow();
      if (h === undefined) throw new Error('no holder');
      // 3. The fault.
      switch (fault) {
        case 'pause':
        case 'redlock-pause': {
          const w = workers[h.worker];
          w?.proc.signal('SIGSTOP');
          const pausedMs = ttl * (1.5 + rnd() * 1.5);
          variant = pausedMs < 2 * ttl ? '1.5-2 TTL' : '2-3 TTL';
          const other = 1 - h.worker;
          const holder = h;
          const since = Date.now();
          // The other takes the lock and writes (the checker sees whether the stale write lands after it).
          await waitFor(
            "the other worker's write with a larger token",
            () =>
              events.some(
                (e) => e.worker === other && e.kind === 'write' && e.token > holder.token && e.applied === true,
              ),
            3000,
          ).catch(() => undefined);
          await sleep(Math.max(0, pausedMs - (Date.now() - since)));
          w?.proc.signal('SIGCONT');
          w?.stale();
          faulted = true;
          break;
        }
        case 'restart-lose':
          variant = 'restart empty';
          await server?.restart({ loseData: true });
          // Racing the workers' reconnects: a trial they win is one the calibration does not count.
          if (defeatEpochFloor && server !== undefined) await forgeEpoch(server, lock);
          faulted = true;
          break;
        case 'restart-keep': {
          const crash = rnd() < 0.5;
          variant = crash ? 'SIGKILL + restart' : 'SHUTDOWN + restart';
          if (server === undefined) throw new Error('no server');
          if (crash) await server.crash();
          else await server.restart({ loseData: false });
          faulted = true;
          const k = keysOf(lock);
          const counter = await call(server, 'GET', k.counter);
          const holderKey = await call(server, 'EXISTS', k.holder);
          checks['counter kept'] = typeof counter === 'string' && BigInt(counter) >= h.token;
          // Only while the holder still believes: a key released meanwhile is gone for a good reason.
          if (holderNow()?.token === h.token) checks['holder key kept'] = holderKey === 1;
          break;
        }
        case 'failover':
        case 'promote-clock-behind': {
          if (failover === undefined) throw new Error('no failover set');
          const { primary, replica, proxy } = failover;
          await replica.inSync();
          replica.cut();
          // Every grant whose token is above the primary's counter as read after the cut ran after
          // the cut: the replica misses it (its replication bytes are held in the blackholed link).
          const atCut = await call(primary, 'GET', keysOf(lock).counter);
          const cutToken = typeof atCut === 'string' ? BigInt(atCut) : 0n;
          const after = 1 + Math.floor(rnd() * 2);
          await waitFor(`${after} grant(s) after the cut`, () => {
            const hn = holderNow();
            return (
              events.filter((e) => e.kind === 'granted' && e.token > cutToken).length >= after &&
              hn !== undefined &&
              hn.token > cutToken
            );
          });
          await sleep(rnd() * Math.min(100, ttl / 4));
          h = holderNow() ?? h;
          const highest = events.reduce((m, e) => (e.kind === 'granted' && e.token > m ? e.token : m), 0n);
          await replica.promote(primary);
          // What the promoted replica has, read before any worker can reach it.
          const counter = await call(replica.server, 'GET', keysOf(lock).counter);
          if (defeatEpochFloor) await forgeEpoch(replica.server, lock);
          // A clock behind keeps a replicated holder key alive that much longer (Redis expires at
          // an absolute time): removed, as if expired, so that the promoted replica grants soon.
          if (fault === 'promote-clock-behind') await call(replica.server, 'DEL', keysOf(lock).holder);
          proxy.retarget(replica.server.port);
          faulted = true;
          if (fault === 'promote-clock-behind') {
            const g = grants();
            checks['grant on the promoted replica'] = await waitFor(
              'a grant on the promoted replica',
              () => grants() > g,
              5000,
            ).then(
              () => true,
              () => false,
            );
          }
          const lag = highest - (typeof counter === 'string' ? BigInt(counter) : 0n);
          variant +=
            lag <= 0n ? 'replica not behind' : lag === 1n ? 'replica 1 grant behind' : 'replica 2+ grants behind';
          // (Its holder key may still be there: an earlier holder's, whose release never reached it.)
          checks['replica missed the grant'] = lag > 0n;
          break;
        }
        case 'failback':
        case 'failback-resync':
        case 'flap': {
          if (failover === undefined) throw new Error('no failover set');
          const { primary, replica, proxy } = failover;
          const promoted = replica.server;
          const nobody = await freePort(); // a master nobody reaches: a node demoted under it never resyncs
          const missed = rnd() < 0.5;
          if (missed) {
            replica.cut();
            const g = grants();
            await waitFor('a grant after the cut', () => grants() > g);
          }
          // Each promotion as Sentinel makes it: the node that was master is demoted (here under a
          // master nobody reaches) and its clients disconnected, then the other is promoted and the
          // workers' store proxy pointed at it. Demoted first, so that no grant is made on the old
          // side after the new one's: two masters at once is a split brain no lock store survives.
          const promote = async (up: RedisServer, down: RedisServer | undefined, what: string): Promise<boolean> => {
            if (down !== undefined) {
              await call(down, 'REPLICAOF', '127.0.0.1', String(nobody));
              await call(down, 'CLIENT', 'KILL', 'TYPE', 'normal');
            }
            await call(up, 'REPLICAOF', 'NO', 'ONE');
            if (defeatEpochFloor) await forgeEpoch(up, lock);
            proxy.retarget(up.port);
            const g = grants();
            return waitFor(what, () => grants() > g, 5000).then(
              () => true,
              () => false,
            );
          };
          checks['grant on the promoted replica'] = await promote(promoted, primary, 'a grant on the promoted replica');
          let flaps = 1;
          if (fault === 'failback') {
            // The promoted replica is lost before the old primary resynced from it; Sentinel then
            // demotes the old primary under it and, finding it gone, promotes the old primary again.
            promoted.process().signal('SIGKILL');
            await promoted.process().exited;
            await call(primary, 'REPLICAOF', '127.0.0.1', String(promoted.port));
            checks['grant after the failback'] = await promote(primary, undefined, 'a grant after the failback');
            variant = missed ? 'replica missed grants, lost after its own' : 'replica in sync, lost after its own';
          } else if (fault === 'failback-resync') {
            await call(primary, 'REPLICAOF', '127.0.0.1', String(promoted.port));
            await inSyncWith(primary, promoted);
            checks['grant after the failback'] = await promote(primary, promoted, 'a grant after the failback');
            variant = missed ? 'replica missed grants, resynced back' : 'replica in sync, resynced back';
          } else {
            const n = 2 + Math.floor(rnd() * 9);
            let [up, down] = [promoted, primary];
            let all = checks['grant on the promoted replica'];
            for (; flaps < n; flaps++) {
              [up, down] = [down, up];
              all = (await promote(up, down, `a grant after flap ${flaps + 1}`)) && all;
            }
            checks['a grant after every promotion'] = all;
            variant = `${n < 5 ? '2-4' : '5-10'} promotions${missed ? ', replica missed grants' : ''}`;
          }
          faulted = true;
          break;
        }
        case 'redlock-clock-jump': {
          const k = 1 + Math.floor(rnd() * 5);
          const jumpMs = Math.round(ttl * (1.5 + rnd() * 2.5));
          const jumped = pick(masters, k, rnd);
          // A holder that won a contended acquire may hold only a bare majority (3): one early expiry frees the lock.
          variant = `${k} of 5 masters, ${keysLabel(await keysOn(masters, lock), jumped, 'jumped')}`;
          // A probe per master that must expire with the jump: Redis really saw its clock step.
          const probe = `probe:${lock}`;
          await Promise.all(jumped.map((m) => call(m, 'SET', probe, '1', 'PX', String(Math.round(jumpMs / 2)))));
          for (const m of jumped) m.stepClock(jumpMs);
          const gone = await Promise.all(jumped.map((m) => call(m, 'EXISTS', probe)));
          checks['Redis saw the jump'] = gone.every((g) => g === 0);
          faulted = true;
          break;
        }
        case 'redlock-restart-lose': {
          const k = 1 + Math.floor(rnd() * 2);
          const restarted = pick(masters, k, rnd);
          // A holder that won a contended acquire may hold only a bare majority (3): losing one of them frees the lock.
          variant = `${k} of 5 masters, ${keysLabel(await keysOn(masters, lock), restarted, 'restarted')}`;
          await Promise.all(restarted.map((m) => m.restart({ loseData: true })));
          faulted = true;
          break;
        }
      }
      const holder = h;
      await sleep(300 + rnd() * 300);
      if (fault === 'restart-keep')
        checks['holder kept the lock'] = !events.some(
          (e) => e.kind === 'lost' && e.worker === holder.worker && e.token === holder.token,
        );
    } catch (err) {
      error = err instanceof Error ? err.message : String(err);
    } finally {
      if (started) await Promise.all(workers.map((w) => w.end(id)));
      for (const c of cleanup.reverse()) await c().catch(() => undefined);
    }
    await sleep(50); // the last MONITOR lines
    const applied = this.applied.get(key) ?? [];
    this.applied.delete(key);
    const verdict = checkStoreTrial(applied, events, Date.now());
    if (process.env['SAFETY_STORE_DEBUG'] === fault && (verdict.overlaps.length > 0 || verdict.grantRegressions > 0))
      process.stderr.write(
        `${lock} ${variant}: ${JSON.stringify(verdict.overlaps)}\n${events
          .filter((e) => e.kind !== 'write')
          .map((e) => `  w${e.worker} ${e.kind} ${e.token} ${e.at}`)
          .join('\n')}\n`,
      );
    return {
      ...verdict,
      n,
      fault,
      variant,
      faulted,
      checks,
      ...(error !== undefined ? { error } : {}),
    };
  }
}
