/**
 * Where the Redis store's acquire+release time goes, layer by layer, against node-redlock on the
 * same redis-server (docs/benchmarks.md, "after the client-path changes"); with `--masters 5`,
 * the Redlock store's on five. Each layer adds one thing to the one above it:
 *
 *   - `ioredis, scripts`: the store's acquire and release scripts called on bare ioredis clients
 *     (ioredis's defaults; on every master at once), with a random owner id: the floor under
 *     every layer below;
 *   - `+ commandTimeout`: the same on a client with ioredis's commandTimeout (what the lock
 *     connections had before; kept here to show its cost);
 *   - `backend`: the store's LockBackend (stores/redis/lock-backend.ts) on its own connection: the
 *     scripts through defineScript (a 2 s bound per call), the reply parsed, the owner id;
 *   - `holdLock`: the waiter and the watchdog (stores/hold.ts) on that backend;
 *   - `acquire()`: the library call with a connectStore connection, as an app makes it.
 *
 * The pairs are interleaved over the layers, one by one (or `--block` at a time: the tight loop
 * of bench/redis-locks.ts, in which the peers run faster than one by one), so that drift falls on
 * all alike. The absolute figures move by 20% from run to run on this machine; the differences
 * between layers in one run are the result. Run it with the machine alone.
 */
import { randomUUID } from 'node:crypto';
import { relative } from 'node:path';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { acquire } from '../src/index.ts';
import { connectStore } from '../src/client/store-acquire.ts';
import { silentLogger } from '../src/observability/logger.ts';
import { realClock } from '../src/runtime/clock.ts';
import { holdLock } from '../src/stores/hold.ts';
import { newOwnerId } from '../src/stores/owner.ts';
import { ACQUIRE_KEYS, ACQUIRE_LUA, RELEASE_LUA } from '../src/stores/redis/scripts.ts';
import { REDLOCK_ACQUIRE_KEYS, REDLOCK_ACQUIRE_LUA } from '../src/stores/redlock/scripts.ts';
import { startRedis } from '../test/support/testbed/redis.ts';
import { describeMachine, loadAverage, machineLine, percentile, runMain, textTable, writeResult } from './lib.ts';
import { nodeRedlock } from './peers/redis-lock-peers.ts';

const USAGE = `Usage: node bench/redis-store-layers.ts [--runs N] [--masters 1|5]

  --runs N      acquire+release pairs per layer, interleaved (default 10000)
  --masters M   1: the Redis store (default); 5: the Redlock store on five redis-servers
  --block B     run each layer's pairs B at a time before the next layer's (default 1: one by
                one); B > 1 is the tight loop of bench/redis-locks.ts, where the peers get faster

Writes .results/bench/redis-store-layers.json (-5 for five masters, -blockB for --block B > 1).
`;

const TTL_MS = 10_000;

/** SERVER_PAIRS: pairs of acquire() alone, then of node-redlock alone, under INFO commandstats. */
const SERVER_PAIRS = 2000;

/** SLOW_US: the SLOWLOG threshold during the server-side pairs, in µs (Redis's default is 10,000). */
const SLOW_US = 100;

/** Pair is one timed acquire+release. */
type Pair = () => Promise<void>;

/** scriptPair: the store's two scripts on bare ioredis clients (all at once, as a quorum asks), on keys of their own. */
function scriptPair(clients: readonly Redis[], tag: string): Pair {
  const [keys, lua] = clients.length > 1 ? [REDLOCK_ACQUIRE_KEYS, REDLOCK_ACQUIRE_LUA] : [ACQUIRE_KEYS, ACQUIRE_LUA];
  for (const c of clients) {
    c.defineCommand('layerAcquire', { numberOfKeys: keys, lua });
    c.defineCommand('layerRelease', { numberOfKeys: 1, lua: RELEASE_LUA });
  }
  const call = (c: Redis, name: string, ...a: string[]): Promise<unknown> =>
    (Reflect.get(c, name) as (...x: string[]) => Promise<unknown>).call(c, ...a);
  const [holder, counter, epoch] = [`layer:lock:{${tag}}`, tag, `layer:epoch:{${tag}}`];
  return async () => {
    const owner = randomUUID();
    await Promise.all(clients.map((c) => call(c, 'layerAcquire', holder, counter, epoch, owner, String(TTL_MS), '0')));
    await Promise.all(clients.map((c) => call(c, 'layerRelease', holder, owner, `layer:released:${tag}`)));
  };
}

/** parseOptions reads --runs and --masters (undefined after --help), naming a bad flag and its value. */
function parseOptions(): { runs: number; masters: 1 | 5; block: number } | undefined {
  const { values } = parseArgs({
    options: {
      runs: { type: 'string', default: '10000' },
      masters: { type: 'string', default: '1' },
      block: { type: 'string', default: '1' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help === true) {
    process.stdout.write(USAGE);
    return undefined;
  }
  const runs = Number(values.runs);
  if (!Number.isInteger(runs) || runs < 1)
    throw new Error(`--runs: must be a positive integer, got ${JSON.stringify(values.runs)}`);
  if (values.masters !== '1' && values.masters !== '5')
    throw new Error(`--masters: must be 1 or 5, got ${JSON.stringify(values.masters)}`);
  const block = Number(values.block);
  if (!Number.isInteger(block) || block < 1 || block > runs)
    throw new Error(`--block: must be an integer in [1, --runs], got ${JSON.stringify(values.block)}`);
  return { runs, masters: values.masters === '1' ? 1 : 5, block };
}

async function main(): Promise<void> {
  const options = parseOptions();
  if (options === undefined) return;
  const { runs, masters, block } = options;
  const loadStart = loadAverage();
  const servers = await Promise.all(Array.from({ length: masters }, () => startRedis()));
  const url =
    masters === 1
      ? (servers[0]?.url ?? '')
      : `redlock://${servers.map((r) => r.url.replace(/^redis:\/\//, '')).join(',')}`;
  const clients: Redis[] = [];
  // One client per server, ready: for the bare scripts, the same with commandTimeout, the peer.
  const connectAll = async (extra: { commandTimeout?: number } = {}): Promise<Redis[]> => {
    const cs = servers.map(
      (r) => new Redis(r.url, { enableOfflineQueue: false, maxRetriesPerRequest: 0, lazyConnect: true, ...extra }),
    );
    clients.push(...cs);
    await Promise.all(cs.map((c) => c.connect()));
    return cs;
  };
  // Three store connections: the backend's, the hold's, acquire()'s (each layer on its own).
  const conns = await Promise.all([1, 2, 3].map(() => connectStore(url, { waitMs: 10_000 })));
  try {
    const [backendConn, holdConn, conn] = conns;
    if (backendConn === undefined || holdConn === undefined || conn === undefined) throw new Error('no connections');
    const bare = await connectAll();
    const timed = await connectAll({ commandTimeout: 2000 });
    const peerClients = await connectAll();
    const backend = backendConn.store.lock('default', 'layer-backend');
    const held = holdConn.store.lock('default', 'layer-hold');
    const peer = nodeRedlock(peerClients);
    const layers: [string, Pair][] = [
      ['ioredis, scripts', scriptPair(bare, 'bare')],
      ['+ commandTimeout', scriptPair(timed, 'timed')],
      [
        'backend',
        async () => {
          const owner = newOwnerId();
          const a = await backend.tryAcquire(owner, TTL_MS, 0n);
          if (!a.granted) throw new Error(`backend: not granted: ${a.reason}`);
          await backend.release(owner);
        },
      ],
      [
        'holdLock',
        async () => {
          const r = await holdLock(held, {
            lock: 'layer-hold',
            ttlMs: TTL_MS,
            clock: realClock,
            log: silentLogger,
            ifHeld: 'fail',
            floor: () => 0n,
          });
          if (r.kind !== 'held') throw new Error(`holdLock: ${r.kind}`);
          await r.hold.release();
        },
      ],
      [
        'acquire()',
        async () => {
          const h = await acquire('layer-acquire', { store: conn, ttlMs: TTL_MS, ifHeld: 'fail' });
          await h.release();
        },
      ],
      [
        'node-redlock (no token)',
        async () => {
          const h = await peer.acquire('layer-peer', TTL_MS);
          await h.release();
        },
      ],
    ];
    process.stderr.write(`${runs} pairs per layer, interleaved ${block} at a time…\n`);
    for (const [, pair] of layers) for (let i = 0; i < 1000; i++) await pair(); // warm-up
    const times = layers.map(() => [] as number[]);
    for (let i = 0; i < runs; i += block)
      for (const [k, [, pair]] of layers.entries())
        for (let j = 0; j < block && i + j < runs; j++) {
          const t0 = performance.now();
          await pair();
          times[k]?.push(performance.now() - t0);
        }
    const us = (ms: number): number => Math.round(ms * 10_000) / 10;
    const base = us(percentile(times[0] ?? [], 50));
    const peerP50 = us(percentile(times[layers.length - 1] ?? [], 50));
    const results = layers.map(([name], k) => {
      const p50 = us(percentile(times[k] ?? [], 50));
      return {
        name,
        p50Us: p50,
        p99Us: us(percentile(times[k] ?? [], 99)),
        overScriptsUs: Math.round((p50 - base) * 10) / 10,
        vsNodeRedlock: Math.round((p50 / peerP50) * 100) / 100,
      };
    });
    // The servers' side: INFO commandstats of the first server over SERVER_PAIRS pairs of
    // acquire() alone, then of node-redlock alone: every command either sends, how many per
    // acquire+release pair (EVALSHA and EVAL: the round trips; the rest run inside the scripts)
    // and µs per call (INFO: the epoch floor's replication ID).
    // SLOWLOG: how many of those commands took more than SLOW_US on the server, and the slowest.
    const serverSide: Record<string, Record<string, { perPair: number; usPerCall: number }>> = {};
    const slow: Record<string, { over: number; slowestUs: number }> = {};
    const first = peerClients[0];
    for (const k of [layers.length - 2, layers.length - 1]) {
      const [name, pair] = layers[k] ?? [];
      if (first === undefined || name === undefined || pair === undefined) continue;
      await first.config('SET', 'slowlog-log-slower-than', String(SLOW_US));
      await first.slowlog('RESET');
      await first.config('RESETSTAT');
      for (let i = 0; i < SERVER_PAIRS; i++) await pair();
      const entries = (await first.slowlog('GET', 1000)) as [number, number, number, ...unknown[]][];
      slow[name] = { over: entries.length, slowestUs: Math.max(0, ...entries.map((e) => Number(e[2]))) };
      const stats = await first.info('commandstats');
      const commands: Record<string, { perPair: number; usPerCall: number }> = {};
      for (const m of stats.matchAll(/^cmdstat_(\w+):calls=(\d+),usec=\d+,usec_per_call=([0-9.]+)/gm)) {
        const [, cmd = '', calls = '0', us = '0'] = m;
        // The statistics' own commands (CONFIG RESETSTAT, this INFO) are not the pairs'.
        if (cmd === 'config' || (cmd === 'info' && Number(calls) <= 1)) continue;
        commands[cmd] = { perPair: Math.round((Number(calls) / SERVER_PAIRS) * 100) / 100, usPerCall: Number(us) };
      }
      serverSide[name] = commands;
    }
    const loadEnd = loadAverage();
    const machine = describeMachine();
    const file = writeResult(
      `redis-store-layers${masters === 1 ? '' : `-${masters}`}${block === 1 ? '' : `-block${block}`}.json`,
      {
        benchmark: 'redis-store-layers',
        machine,
        loadAverage: { start: loadStart, end: loadEnd },
        settings: { runs, masters, block, ttlMs: TTL_MS, serverPairs: SERVER_PAIRS },
        results,
        serverSide,
        slowlog: { thresholdUs: SLOW_US, byLayer: slow },
      },
    );
    process.stdout.write(
      [
        machineLine(machine),
        `load ${loadStart.one} → ${loadEnd.one}`,
        ...textTable(
          [
            ['layer', 'p50 µs', 'p99 µs', 'over the bare scripts µs', '÷ node-redlock'],
            ...results.map((r) => [
              r.name,
              r.p50Us.toFixed(1),
              r.p99Us.toFixed(1),
              r.overScriptsUs.toFixed(1),
              `${r.vsNodeRedlock.toFixed(2)}×`,
            ]),
          ],
          1,
        ),
        ...Object.entries(serverSide).map(
          ([name, cmds]) =>
            `${name}, on the first server over ${SERVER_PAIRS} pairs, per pair (µs per call): ${Object.entries(cmds)
              .sort(([a], [b]) => a.localeCompare(b))
              .map(([cmd, v]) => `${cmd} ${v.perPair} (${v.usPerCall})`)
              .join(', ')}`,
        ),
        ...Object.entries(slow).map(
          ([name, v]) => `${name}: ${v.over} commands over ${SLOW_US} µs in SLOWLOG, the slowest ${v.slowestUs} µs`,
        ),
        relative(process.cwd(), file),
      ]
        .join('\n')
        .concat('\n'),
    );
  } finally {
    await Promise.all(conns.map((c) => c.close()));
    for (const c of clients) c.disconnect();
    await Promise.all(servers.map((r) => r.stop()));
  }
}

runMain('redis-store-layers', main);
