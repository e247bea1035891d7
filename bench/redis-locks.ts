/**
 * redis-locks.ts — `node bench/redis-locks.ts [--runs N] [--seconds S] [--workers W]`: the Redis
 * lock designs side by side, in one run, on the same redis-servers (Debian's, on loopback,
 * started and stopped by PID; `--save "" --appendonly no`):
 *   - one Redis: fencepost's Redis store (SET NX PX + token in one script), node-redlock and
 *     @sesamecare-oss/redlock with one client;
 *   - five masters: fencepost's Redlock store (majority, with a token), node-redlock and
 *     @sesamecare-oss/redlock with five clients;
 *   - the Lease store (the controller grants through the API server), for contrast.
 * Per implementation:
 *   - latency: N sequential acquire+release pairs of a free lock (each pair timed), interleaved
 *     over the Redis implementations in 10 rounds after a warm-up round; the Lease store's after
 *     them, on its own (see main);
 *   - contention: W workers, each with its own connections, take and release the same lock
 *     for S seconds: acquisitions per second, and each acquire's wait (p50/p99).
 * Writes .results/bench/redis-locks.json (machine, load average at start and end) and prints a table.
 */
import { relative } from 'node:path';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { startRedis, type RedisServer } from '../test/support/testbed/redis.ts';
import {
  describeMachine,
  loadAverage,
  machineLine,
  onInterrupt,
  percentile,
  runMain,
  summarize,
  textTable,
  writeResult,
  type Stats,
} from './lib.ts';
import { nodeRedlock, sesameRedlock, type BenchLockImpl } from './peers/redis-lock-peers.ts';
import { fencepostImpls, type FencepostImpls } from './redis-locks-fencepost.ts';

const USAGE = `Usage: node bench/redis-locks.ts [--runs N] [--seconds S] [--workers W] [--out FILE]

  --runs N      sequential acquire+release pairs per implementation, in 10 interleaved rounds
                (default 2000; Lease: N/20)
  --seconds S   seconds of contention per implementation (default 5)
  --workers W   contending workers (default 8)
  --out FILE    results file under .results/bench/ (default redis-locks.json)
`;

/** TTL_MS: every lock's time to live (Redis stores, peers) or lease (Lease store). */
const TTL_MS = 10_000;

/** ImplResult is one implementation's figures. */
interface ImplResult {
  readonly name: string;
  readonly masters: number;
  readonly issuesTokens: boolean;
  readonly latencyMs: Stats;
  readonly contention: {
    readonly workers: number;
    readonly perSecond: number;
    readonly waitMs: Stats;
    /** perWorker: acquisitions per worker — how evenly the lock went round (a releasing worker that takes it straight back starves the others). */
    readonly perWorker: readonly number[];
    /**
     * scriptsPerGrant: the scripts (EVALSHA and EVAL, each a round trip) the first Redis ran per
     * acquisition, from INFO commandstats: the acquires refused to waiters that lost the race, the
     * grant, the release. Undefined for the Lease store.
     */
    readonly scriptsPerGrant?: number;
  };
  /** tokensIncreasing: every token seen under contention was above the one before (undefined: no tokens). */
  readonly tokensIncreasing: boolean | undefined;
  /** latencyP50Us: the latency p50 in µs, unrounded to 0.1 (Stats round to 0.01 ms: ±5% on a ratio of 0.2 ms figures). */
  readonly latencyP50Us: number;
  /** p50VsFastestPeer: a fencepost store's latencyP50Us over the fastest peer's on as many masters (the target: 1.2). */
  readonly p50VsFastestPeer?: number;
}

/** withPeerRatios adds p50VsFastestPeer to each result that issues tokens (fencepost's stores; the peers issue none). */
function withPeerRatios(results: readonly ImplResult[]): ImplResult[] {
  return results.map((r) => {
    const peers = results.filter((p) => !p.issuesTokens && p.masters === r.masters).map((p) => p.latencyP50Us);
    if (!r.issuesTokens || peers.length === 0) return r;
    return { ...r, p50VsFastestPeer: Math.round((r.latencyP50Us / Math.min(...peers)) * 100) / 100 };
  });
}

/** ROUNDS: the latency runs are interleaved in this many rounds over the implementations, so that warm-up and drift of the machine fall on all alike. */
const ROUNDS = 10;

/**
 * latencies times `runs` acquire+release pairs of a free lock per implementation, interleaved in
 * ROUNDS rounds (each pair timed; one warm-up round first). Each round starts with the next
 * implementation, so that no one is always the first after the warm-up round. What one leaves
 * running in the background falls on whichever follows it in the cycle, the same one every round:
 * an implementation that leaves work behind (the Lease store) is timed in a call of its own.
 */
async function latencies(impls: readonly { impl: BenchLockImpl; runs: number; tag: string }[]): Promise<number[][]> {
  const out = impls.map(() => [] as number[]);
  for (let round = -1; round < ROUNDS; round++) {
    for (let j = 0; j < impls.length; j++) {
      const k = (j + round + 1) % impls.length;
      const entry = impls[k];
      if (entry === undefined) continue;
      const { impl, runs, tag } = entry;
      const n = Math.max(1, Math.round(runs / ROUNDS));
      for (let i = 0; i < n; i++) {
        const t0 = performance.now();
        const held = await impl.acquire(`lat-${tag}`, TTL_MS);
        await held.release();
        if (round >= 0) out[k]?.push(performance.now() - t0); // round -1 warms up
      }
    }
  }
  return out;
}

/** scriptsPer: EVALSHA and EVAL calls in an INFO commandstats reply, per `grants`. */
function scriptsPer(stats: string, grants: number): number {
  let calls = 0;
  for (const m of stats.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)) calls += Number(m[1]);
  return Math.round((calls / Math.max(1, grants)) * 100) / 100;
}

async function contention(
  workers: readonly BenchLockImpl[],
  seconds: number,
  resource: string,
): Promise<{ perSecond: number; waits: number[]; tokensIncreasing: boolean | undefined; perWorker: number[] }> {
  const end = performance.now() + seconds * 1000;
  const waits: number[] = [];
  const perWorker = workers.map(() => 0);
  const tokens: bigint[] = [];
  let holders = 0;
  const t0 = performance.now();
  await Promise.all(
    workers.map(async (impl, w) => {
      while (performance.now() < end) {
        const w0 = performance.now();
        const held = await impl.acquire(resource, TTL_MS);
        waits.push(performance.now() - w0);
        perWorker[w] = (perWorker[w] ?? 0) + 1;
        holders++;
        if (holders > 1) throw new Error(`${impl.name}: ${holders} holders at once`);
        if (held.token !== undefined) tokens.push(held.token);
        holders--;
        await held.release();
      }
    }),
  );
  const s = (performance.now() - t0) / 1000;
  const increasing = tokens.length === 0 ? undefined : tokens.every((t, i) => i === 0 || t > (tokens[i - 1] ?? 0n));
  return { perSecond: Math.round(waits.length / s), waits, tokensIncreasing: increasing, perWorker };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      runs: { type: 'string', default: '2000' },
      seconds: { type: 'string', default: '5' },
      workers: { type: 'string', default: '8' },
      out: { type: 'string', default: 'redis-locks.json' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help === true) {
    process.stdout.write(USAGE);
    return;
  }
  const runs = Number(values.runs);
  const seconds = Number(values.seconds);
  const workers = Number(values.workers);
  for (const [flag, v] of [
    ['--runs', runs],
    ['--seconds', seconds],
    ['--workers', workers],
  ] as const)
    if (!Number.isInteger(v) || v < 1) throw new Error(`${flag}: ${String(v)} is not a positive integer`);

  const loadStart = loadAverage();
  const servers: RedisServer[] = [];
  const clients: Redis[] = [];
  const interrupt = onInterrupt();
  let fp: FencepostImpls | undefined;
  try {
    for (let i = 0; i < 5; i++) servers.push(await startRedis());
    const urls = servers.map((s) => s.url);
    /** connect opens clients of its own: each worker has its own connections, as separate processes would. */
    const connect = (n: number): Redis[] => {
      const cs = urls.slice(0, n).map((u) => new Redis(u, { lazyConnect: false, maxRetriesPerRequest: 1 }));
      clients.push(...cs);
      return cs;
    };
    fp = await fencepostImpls(urls, TTL_MS);
    const [admin] = connect(1);
    if (admin === undefined) throw new Error('no admin client');
    const plans: { tag: string; make: () => BenchLockImpl; runs: number }[] = [
      { tag: 'fp-redis', make: () => fp?.redis() ?? unready(), runs },
      { tag: 'node-redlock-1', make: () => nodeRedlock(connect(1)), runs },
      { tag: 'sesame-1', make: () => sesameRedlock(connect(1)), runs },
      { tag: 'fp-redlock', make: () => fp?.redlock() ?? unready(), runs },
      { tag: 'node-redlock-5', make: () => nodeRedlock(connect(5)), runs },
      { tag: 'sesame-5', make: () => sesameRedlock(connect(5)), runs },
      { tag: 'fp-lease', make: () => fp?.lease() ?? unready(), runs: Math.max(1, Math.round(runs / 20)) },
    ];
    const ones = plans.map((p) => ({ impl: p.make(), runs: p.runs, tag: p.tag }));
    process.stderr.write(`latency: ${ROUNDS} interleaved rounds…\n`);
    // The Lease store's pairs are timed apart, after the others: each leaves its in-process
    // controller reconciling for a while after the release, and in one rotation with the others
    // that work always fell on the same implementation (rotating where a round starts does not
    // change which one follows the Lease store in the cycle: the fencepost Redis store, whose p99
    // was 2–7 ms while the peers' was under 1 ms).
    const apart = (tag: string): boolean => tag === 'fp-lease';
    const together = await latencies(ones.filter((o) => !apart(o.tag)));
    const alone = await latencies(ones.filter((o) => apart(o.tag)));
    let [t, a] = [0, 0];
    const lat = ones.map((o) => (apart(o.tag) ? alone[a++] : together[t++]) ?? []);
    const measured: ImplResult[] = [];
    for (const [k, p] of plans.entries()) {
      if (interrupt.signal.aborted) throw new Error('interrupted');
      process.stderr.write(`contention: ${p.tag}…\n`);
      const one = ones[k]?.impl ?? p.make();
      const redisImpl = !apart(p.tag);
      if (redisImpl) await admin.config('RESETSTAT');
      const c = await contention(
        Array.from({ length: workers }, () => p.make()),
        seconds,
        `contended-${p.tag}`,
      );
      measured.push({
        name: one.name,
        masters: one.masters,
        issuesTokens: one.issuesTokens,
        latencyMs: summarize(lat[k] ?? []),
        contention: {
          workers,
          perSecond: c.perSecond,
          waitMs: summarize(c.waits),
          perWorker: c.perWorker,
          ...(redisImpl ? { scriptsPerGrant: scriptsPer(await admin.info('commandstats'), c.waits.length) } : {}),
        },
        tokensIncreasing: c.tokensIncreasing,
        latencyP50Us: Math.round(percentile(lat[k] ?? [], 50) * 10_000) / 10,
      });
    }
    const results = withPeerRatios(measured);
    const loadEnd = loadAverage();
    const machine = describeMachine();
    const file = writeResult(values.out, {
      benchmark: 'redis-locks',
      machine,
      loadAverage: { start: loadStart, end: loadEnd },
      settings: { runs, seconds, workers, ttlMs: TTL_MS },
      results,
    });
    const f = (x: number): string => x.toFixed(2);
    const rows = [
      [
        'implementation',
        'masters',
        'token',
        'acq+rel p50',
        '÷ fastest peer',
        'p90',
        'p99',
        `${workers} workers/s`,
        'wait p50',
        'wait p99',
        'scripts/grant',
        'per worker min/max',
      ],
      ...results.map((r) => [
        r.name,
        String(r.masters),
        r.issuesTokens ? (r.tokensIncreasing === true ? 'yes, increasing' : 'yes, NOT increasing') : 'no',
        f(r.latencyMs.p50),
        r.p50VsFastestPeer !== undefined ? `${r.p50VsFastestPeer.toFixed(2)}×` : '',
        f(r.latencyMs.p90),
        f(r.latencyMs.p99),
        String(r.contention.perSecond),
        f(r.contention.waitMs.p50),
        f(r.contention.waitMs.p99),
        r.contention.scriptsPerGrant?.toFixed(2) ?? '',
        `${Math.min(...r.contention.perWorker)}/${Math.max(...r.contention.perWorker)}`,
      ]),
    ];
    process.stdout.write(
      [
        machineLine(machine),
        `load ${loadStart.one} → ${loadEnd.one}`,
        ...textTable(rows, 3),
        relative(process.cwd(), file),
      ]
        .join('\n')
        .concat('\n'),
    );
  } finally {
    interrupt.dispose();
    await fp?.close();
    await Promise.allSettled(clients.map((c) => c.quit()));
    await Promise.allSettled(servers.map((s) => s.stop()));
  }
}

function unready(): never {
  throw new Error('the fencepost stores were not started');
}

runMain('redis-locks', main);
