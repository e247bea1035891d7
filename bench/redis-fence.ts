/**
 * redis-fence.ts — `npm run bench:redis [-- --runs N --seconds S]`: the Redis side of fencing on
 * a real redis-server on loopback (Debian's redis-server, started and stopped by PID):
 *   - token round trip: one `redisFence().next()` (the controller's FENCE_NEXT Lua script:
 *     INCR with a floor), sequential, N times, next to a bare PING (the floor of one round trip);
 *   - guarded write round trip: one `redisGuard().write()` (the fenced-write Lua script), sequential;
 *   - guard throughput: fenced writes per second for S seconds with 1 and with 32 writes in flight
 *     on one connection (ioredis pipelines them), over 100 keys, the tokens rising; and the stale
 *     write rejection path (a token below the mark) at 32 in flight.
 * Writes .results/bench/redis-fence.json and prints a table.
 */
import { relative } from 'node:path';
import { parseArgs } from 'node:util';
import type { Redis } from 'ioredis';
import { redisFence } from '../src/fencing/redis-fence.ts';
import { redisGuard, type RedisGuard } from '../src/guards/redis-guard.ts';
import { startRedis, type RedisServer } from '../test/support/testbed/redis.ts';
import {
  describeMachine,
  loadAverage,
  machineLine,
  onInterrupt,
  runMain,
  summarize,
  writeResult,
  type Stats,
} from './lib.ts';

const USAGE = `Usage: node bench/redis-fence.ts [--runs N] [--seconds S] [--out FILE]

  --runs N      sequential round trips per figure (default 2000)
  --seconds S   seconds per throughput figure (default 5)
  --out FILE    results file under .results/bench/ (default redis-fence.json)
`;

async function timeEach(n: number, fn: (i: number) => Promise<unknown>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await fn(i);
    out.push(performance.now() - t0);
  }
  return out;
}

/** throughput runs `inFlight` loops of fn for seconds and returns completed calls per second. */
async function throughput(
  seconds: number,
  inFlight: number,
  fn: (i: number) => Promise<boolean>,
): Promise<{ perSecond: number; ok: number; rejected: number }> {
  const end = performance.now() + seconds * 1000;
  let i = 0;
  let ok = 0;
  let rejected = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (performance.now() < end) {
        if (await fn(i++)) ok++;
        else rejected++;
      }
    }),
  );
  const s = (performance.now() - t0) / 1000;
  return { perSecond: Math.round((ok + rejected) / s), ok, rejected };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      runs: { type: 'string', default: '2000' },
      seconds: { type: 'string', default: '5' },
      out: { type: 'string', default: 'redis-fence.json' },
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
  const interrupt = onInterrupt();
  const loadStart = loadAverage();
  let redis: RedisServer | undefined;
  let client: Redis | undefined;
  try {
    redis = await startRedis();
    const c = redis.client();
    client = c;
    const fence = redisFence(c);
    const guard: RedisGuard = redisGuard(c);
    for (let i = 0; i < 200; i++) {
      await c.ping();
      await fence.next('bench:warm', 0n);
      await guard.write('bench:warm-data', BigInt(i + 1), 'x');
    }

    const ping = summarize(await timeEach(runs, () => c.ping()));
    const token = summarize(await timeEach(runs, () => fence.next('fencepost:fence:bench/lock', 0n)));
    const guarded = summarize(await timeEach(runs, (i) => guard.write('bench:data', BigInt(i + 1), `v${i}`)));
    interrupt.signal.throwIfAborted();

    const KEYS = 100;
    let seq = 1_000_000;
    const write = async (i: number): Promise<boolean> =>
      (await guard.write(`bench:tp:${i % KEYS}`, BigInt(++seq), 'v')).accepted;
    const tp1 = await throughput(seconds, 1, write);
    const tp32 = await throughput(seconds, 32, write);
    const stale = await throughput(
      seconds,
      32,
      async (i) => (await guard.write(`bench:tp:${i % KEYS}`, 1n, 'stale')).accepted,
    );
    const redisVersion = /^redis_version:(\S+)/m.exec(await c.info('server'))?.[1] ?? 'unknown';

    const result = {
      benchmark: 'redis-fence',
      date: new Date().toISOString(),
      command: `node bench/redis-fence.ts ${process.argv.slice(2).join(' ')}`.trimEnd(),
      loadAverage: { start: loadStart, end: loadAverage() },
      settings: {
        runs,
        seconds,
        keys: KEYS,
        note: 'one ioredis connection; round trips sequential (call to resolve, performance.now()); throughput = calls completed per second with N in flight (pipelined on the one connection); stale = every write below the mark (rejected)',
      },
      machine: describeMachine(),
      versions: { node: process.version, redis: redisVersion },
      roundTripMs: { ping, tokenNext: token, guardedWrite: guarded },
      throughputPerSecond: { guardedWrite1InFlight: tp1, guardedWrite32InFlight: tp32, staleWrite32InFlight: stale },
    };
    const out = writeResult(values.out, result);
    const row = (label: string, s: Stats): string =>
      `${label.padEnd(34)} ${[s.p50, s.p90, s.p99, s.max].map((v) => `${v.toFixed(3)} ms`.padStart(11)).join(' ')}`;
    process.stdout.write(
      [
        `Redis fencing on redis-server ${redisVersion}, ${runs} sequential calls each`,
        machineLine(result.machine),
        '',
        `${''.padEnd(34)} ${['p50', 'p90', 'p99', 'max'].map((h) => h.padStart(11)).join(' ')}`,
        row('PING (floor)', ping),
        row('token: FENCE_NEXT (INCR + floor)', token),
        row('guarded write (Lua)', guarded),
        '',
        `guarded writes/s, 1 in flight:   ${tp1.perSecond}`,
        `guarded writes/s, 32 in flight:  ${tp32.perSecond}`,
        `stale writes rejected/s, 32:     ${stale.perSecond} (accepted ${stale.ok})`,
        '',
        `Wrote ${relative(process.cwd(), out) || out}`,
        '',
      ].join('\n'),
    );
  } finally {
    client?.disconnect();
    await redis?.stop();
    interrupt.dispose();
  }
}

runMain('redis-fence', main);
