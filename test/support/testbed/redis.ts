/**
 * A real redis-server for tests (REDIS_SERVER, else the first redis-server on PATH: Debian's
 * package, which hack/prereqs.sh installs), on a free loopback port, with the faults the
 * safety suite needs: restart keeping data, restart empty (data loss), crash (SIGKILL), FLUSHALL.
 *
 * The server runs without automatic persistence (`--save "" --appendonly no`) unless asked for
 * `persistence: 'aof-always'` (`--appendonly yes --appendfsync always`: every acknowledged write is
 * on disk before the reply, so a crash loses nothing acknowledged); a restart that keeps data
 * saves an RDB snapshot explicitly first. A sentinel key written at every start lets the harness
 * (and tests) tell whether the data survived.
 *
 * `faketime: true` runs the server under Debian's libfaketime with a timestamp file that
 * {@link RedisServer.stepClock} rewrites, read on every call (FAKETIME_NO_CACHE): the server's
 * wall clock — the one Redis measures key expiry with — steps at once, as after an NTP step; its
 * monotonic clock is left alone (FAKETIME_DONT_FAKE_MONOTONIC), as an NTP step leaves it.
 * {@link startReplica} adds a real replica whose link to its primary we can cut.
 */
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { executable } from './assets.ts';
import { freePort } from './ports.ts';
import { raceTimeout, spawnManaged, tailLog, type ManagedProcess } from './processes.ts';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.ts';

const SENTINEL_KEY = 'fencepost:testbed:sentinel';

/** quiet keeps a harness-internal client's connection errors out of the test output (the
 *  command's own promise still rejects). */
function quiet(c: Redis): Redis {
  c.on('error', () => undefined);
  return c;
}

/**
 * redisServerBinary returns the redis-server to run: REDIS_SERVER when set, else the first
 * redis-server on PATH; it throws saying how to get one when there is none.
 */
export function redisServerBinary(): string {
  const fromEnv = process.env['REDIS_SERVER'];
  if (fromEnv !== undefined && fromEnv !== '') {
    if (executable(fromEnv)) return fromEnv;
    throw new Error(`REDIS_SERVER=${fromEnv} is not an executable file`);
  }
  for (const dir of (process.env['PATH'] ?? '').split(delimiter)) {
    const candidate = join(dir === '' ? '.' : dir, 'redis-server');
    if (executable(candidate)) return candidate;
  }
  throw new Error(
    "redis-server not found on PATH: run hack/prereqs.sh (as root it installs Debian's redis-server), " +
      'apt-get install redis-server, or set REDIS_SERVER to a redis-server binary',
  );
}

/** RedisServer is a running redis-server that this process started. */
export interface RedisServer {
  readonly url: string;
  readonly port: number;
  process(): ManagedProcess;
  /** client opens a new ioredis connection (the caller quits it). */
  client(): Redis;
  /** restart stops the server and starts it on the same port; loseData: true starts it empty. */
  restart(opts: { loseData: boolean }): Promise<void>;
  /** crash SIGKILLs the server and starts it again: everything since the last save is lost. */
  crash(): Promise<void>;
  /** stopForOutage stops the server until resume() is called (Redis-down tests). */
  stopForOutage(): Promise<void>;
  resume(): Promise<void>;
  /** flushAll runs FLUSHALL, as an operator's mistake would. */
  flushAll(): Promise<void>;
  /** lostData is true once a restart or crash since startRedis has lost the server's data. */
  lostData(): Promise<boolean>;
  /**
   * stepClock moves the server's wall clock by `ms` (added to the steps before; negative steps
   * back). Only for a server started with `faketime: true`; takes effect on its next clock read.
   */
  stepClock(ms: number): void;
  /** clockOffsetMs is the sum of the steps so far (0 without faketime). */
  clockOffsetMs(): number;
  stop(): Promise<void>;
}

/** StartRedisOptions: where and how the server runs (see the module comment). */
export interface StartRedisOptions {
  readonly dir?: string;
  readonly binary?: string;
  /** persistence: 'none' (default: no RDB saves, no AOF) or 'aof-always' (appendonly yes, appendfsync always). */
  readonly persistence?: 'none' | 'aof-always';
  /** faketime: run under libfaketime so that stepClock() can move the wall clock. */
  readonly faketime?: boolean;
}

const LIB_DIRS = ['/usr/lib/x86_64-linux-gnu', '/usr/lib/aarch64-linux-gnu', '/usr/lib64', '/usr/lib'];

/**
 * faketimePreload is the LD_PRELOAD that lets libfaketime run inside Debian's redis-server.
 * Under libfaketime alone that redis-server exits at once: libfaketime reports "Unexpected
 * recursive calls to clock_gettime() without proper initialization" and gives up. The server links
 * the system jemalloc, which reads the clock as it initializes — most likely while libfaketime is
 * still initializing itself. glibc's libc_malloc_debug.so, preloaded first, puts glibc's malloc
 * (and free, realloc, malloc_usable_size) in front of jemalloc's, and the server then starts and
 * sees the steps (a PX key expires early). Redis only counts its memory differently then.
 */
function faketimePreload(): string {
  const find = (names: readonly string[]): string | undefined => {
    for (const d of LIB_DIRS)
      for (const n of names) {
        const f = join(d, n);
        if (existsSync(f)) return f;
      }
    return undefined;
  };
  const faketime = find(['faketime/libfaketime.so.1', 'libfaketime.so.1']);
  const mallocDebug = find(['libc_malloc_debug.so.0']);
  if (faketime === undefined || mallocDebug === undefined)
    throw new Error(
      'faketime: libfaketime.so.1 or glibc libc_malloc_debug.so.0 not found (apt-get install libfaketime)',
    );
  return `${mallocDebug}:${faketime}`;
}

/** PortTaken: another process answered on the port chosen for a new server. */
class PortTaken extends Error {}

/** startRedis starts redis-server (opts.binary, else redisServerBinary()) in dir (a fresh temporary folder by default). */
export async function startRedis(opts: StartRedisOptions = {}): Promise<RedisServer> {
  const temporary = opts.dir === undefined;
  const dir = opts.dir ?? mkdtempSync(join(tmpdir(), 'fencepost-redis-'));
  mkdirSync(dir, { recursive: true });
  const binary = opts.binary ?? redisServerBinary();
  // Chosen again when another process answers on the first choice (PortTaken below); fixed once
  // the server runs, since restarts come back on the same port.
  let port = await freePort();
  let url = `redis://127.0.0.1:${port}`;
  let proc: ManagedProcess | undefined;
  let epoch = 0;
  const aof = opts.persistence === 'aof-always';
  const clockFile = join(dir, 'faketime-offset');
  let offsetMs = 0;
  const writeOffset = (): void => {
    // Written whole, then renamed: libfaketime re-reads the file on every clock call and must
    // never see half of it.
    const tmp = `${clockFile}.tmp`;
    writeFileSync(tmp, `${offsetMs >= 0 ? '+' : '-'}${(Math.abs(offsetMs) / 1000).toFixed(3)}\n`);
    renameSync(tmp, clockFile);
  };
  const env: NodeJS.ProcessEnv | undefined =
    opts.faketime === true
      ? {
          ...process.env,
          LD_PRELOAD: faketimePreload(),
          FAKETIME_TIMESTAMP_FILE: clockFile,
          FAKETIME_NO_CACHE: '1',
          FAKETIME_DONT_FAKE_MONOTONIC: '1',
        }
      : undefined;
  if (opts.faketime === true) writeOffset();

  const launch = async (): Promise<void> => {
    const p = spawnManaged('redis-server', binary, {
      args: [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        aof ? 'yes' : 'no',
        ...(aof ? ['--appendfsync', 'always'] : []),
        '--dir',
        dir,
        '--dbfilename',
        'dump.rdb',
        '--protected-mode',
        'yes',
        '--loglevel',
        'warning',
      ],
      logFile: join(dir, 'redis.log'),
      ...(env !== undefined ? { env } : {}),
    });
    proc = p;
    const deadline = performance.now() + 15_000;
    for (;;) {
      if (!p.isRunning()) throw new Error(`redis-server exited at start:\n${tailLog(p.logFile)}`);
      const c = quiet(new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null }));
      try {
        await c.connect();
        // An answer proves a server on the port, not ours: one that lost the bind race exits
        // while the winner answers for it.
        const pid = /^process_id:(\d+)/m.exec(await c.info('server'))?.[1];
        if (pid !== String(p.pid)) {
          await p.stop();
          throw new PortTaken(`${url} answered with process_id ${pid ?? '?'}, ours is ${p.pid}`);
        }
        // The sentinel survives only if the data did; lostData() compares it with our epoch.
        if ((await c.get(SENTINEL_KEY)) === null) await c.set(SENTINEL_KEY, String(++epoch));
        return;
      } catch (err) {
        if (err instanceof PortTaken) throw err;
        if (performance.now() > deadline) throw new Error(`redis-server not ready on ${url}`, { cause: err });
      } finally {
        c.disconnect();
      }
      await sleep(50);
    }
  };
  const command = async (...args: [string, ...string[]]): Promise<void> => {
    const c = quiet(new Redis(url, { maxRetriesPerRequest: 0, retryStrategy: () => null }));
    try {
      await c.call(...args);
    } catch (err) {
      // SHUTDOWN closes the connection instead of answering.
      if (args[0] !== 'SHUTDOWN') throw err;
    } finally {
      c.disconnect();
    }
  };
  const stopProc = async (): Promise<void> => {
    const p = proc;
    if (p === undefined || !p.isRunning()) return;
    await command('SHUTDOWN', 'NOSAVE');
    await raceTimeout(p.exited, 5000, 'timeout');
    await p.stop();
  };

  for (let attempt = 1; ; attempt++) {
    try {
      await launch();
      break;
    } catch (err) {
      if (!(err instanceof PortTaken) || attempt >= 3) throw err;
      port = await freePort();
      url = `redis://127.0.0.1:${port}`;
    }
  }
  const server: RedisServer = {
    url,
    port,
    process: () => {
      if (proc === undefined) throw new Error('redis-server not started');
      return proc;
    },
    // Quiet: a test that stops the server must not get ioredis' unhandled 'error' noise from its clients.
    client: () => quiet(new Redis(url)),
    async restart({ loseData }) {
      if (loseData) {
        await stopProc();
        rmSync(join(dir, 'dump.rdb'), { force: true });
        rmSync(join(dir, 'appendonlydir'), { recursive: true, force: true });
      } else {
        await command('SAVE');
        await stopProc();
      }
      await launch();
    },
    // With 'aof-always' the append-only file survives the crash: nothing acknowledged is lost.
    async crash() {
      proc?.signal('SIGKILL');
      await proc?.exited;
      rmSync(join(dir, 'dump.rdb'), { force: true });
      await launch();
    },
    async stopForOutage() {
      await stopProc();
    },
    async resume() {
      await launch();
    },
    async flushAll() {
      await command('FLUSHALL');
    },
    async lostData() {
      const c = quiet(new Redis(url, { maxRetriesPerRequest: 1 }));
      try {
        return (await c.get(SENTINEL_KEY)) !== '1';
      } finally {
        c.disconnect();
      }
    },
    stepClock(ms) {
      if (opts.faketime !== true) throw new Error('stepClock: this redis-server does not run under faketime');
      offsetMs += ms;
      writeOffset();
    },
    clockOffsetMs: () => offsetMs,
    async stop() {
      await stopProc();
      if (temporary) rmSync(dir, { recursive: true, force: true });
    },
  };
  return server;
}

function infoField(text: string, field: string): string | undefined {
  return new RegExp(`^${field}:(.*)$`, 'm').exec(text)?.[1]?.trim();
}

/** Replica is a real replica of a primary, replicating over a TCP proxy of ours (its link). */
export interface Replica {
  readonly server: RedisServer;
  /** inSync waits (at most timeoutMs) until the replica has everything the primary had when asked. */
  inSync(timeoutMs?: number): Promise<void>;
  /**
   * cut blackholes the link: from now on the replica misses every write, as across a network
   * partition. Why not SIGSTOP the replica: a stopped process's kernel still receives and
   * acknowledges the replication stream into its socket buffer, and the replica applies it when
   * resumed — it would not lag at all. Closing the blackholed link (promote) drops what it held.
   */
  cut(): void;
  /** promote SIGKILLs `primary`, drops the held replication stream and runs REPLICAOF NO ONE. */
  promote(primary: RedisServer): Promise<void>;
  /** stop stops the replica (or promoted primary) and its link. */
  stop(): Promise<void>;
}

/** startReplica starts a redis-server (same options as startRedis) as a replica of `primary`, linked through a proxy. */
export async function startReplica(primary: RedisServer, opts: StartRedisOptions = {}): Promise<Replica> {
  const server = await startRedis(opts);
  let link: TcpProxy | undefined;
  const call = async (s: RedisServer, ...args: [string, ...string[]]): Promise<string> => {
    const c = s.client();
    try {
      return String(await c.call(...args));
    } finally {
      c.disconnect();
    }
  };
  try {
    link = await startTcpProxy({ targetPort: primary.port });
    // A full sync otherwise waits 5 s for more replicas to join the same transfer.
    await call(primary, 'CONFIG', 'SET', 'repl-diskless-sync-delay', '0');
    await call(server, 'REPLICAOF', '127.0.0.1', String(link.port));
  } catch (err) {
    await link?.close();
    await server.stop();
    throw err;
  }
  const cutLink = link;
  return {
    server,
    async inSync(timeoutMs = 15_000) {
      const target = Number(infoField(await call(primary, 'INFO', 'replication'), 'master_repl_offset') ?? 'NaN');
      const deadline = performance.now() + timeoutMs;
      for (;;) {
        const text = await call(server, 'INFO', 'replication');
        if (
          infoField(text, 'master_link_status') === 'up' &&
          Number(infoField(text, 'slave_repl_offset') ?? '-1') >= target
        )
          return;
        if (performance.now() > deadline)
          throw new Error(`replica on ${server.port} did not catch up with ${primary.port} within ${timeoutMs} ms`);
        await sleep(10);
      }
    },
    cut() {
      cutLink.blackhole();
    },
    async promote(p) {
      p.process().signal('SIGKILL');
      await p.process().exited;
      await cutLink.close();
      await call(server, 'REPLICAOF', 'NO', 'ONE');
    },
    async stop() {
      await cutLink.close();
      await server.stop();
    },
  };
}
