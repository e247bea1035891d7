/**
 * A real redis-server for tests (REDIS_SERVER, else the first redis-server on PATH: Debian's
 * package, which hack/prereqs.sh installs), on a free loopback port, with the faults the
 * safety suite needs: restart keeping data, restart empty (data loss), crash (SIGKILL), FLUSHALL.
 *
 * The server runs without automatic persistence (`--save "" --appendonly no`); a restart that
 * keeps data saves an RDB snapshot explicitly first. A sentinel key written at every start lets
 * the harness (and tests) tell whether the data survived.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { executable } from './assets.ts';
import { freePort } from './ports.ts';
import { raceTimeout, spawnManaged, tailLog, type ManagedProcess } from './processes.ts';

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
  stop(): Promise<void>;
}

/** startRedis starts redis-server (opts.binary, else redisServerBinary()) in dir (a fresh temporary folder by default). */
export async function startRedis(opts: { dir?: string; binary?: string } = {}): Promise<RedisServer> {
  const temporary = opts.dir === undefined;
  const dir = opts.dir ?? mkdtempSync(join(tmpdir(), 'fencepost-redis-'));
  mkdirSync(dir, { recursive: true });
  const binary = opts.binary ?? redisServerBinary();
  const port = await freePort();
  const url = `redis://127.0.0.1:${port}`;
  let proc: ManagedProcess | undefined;
  let epoch = 0;

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
        'no',
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
    });
    proc = p;
    const deadline = performance.now() + 15_000;
    for (;;) {
      if (!p.isRunning()) throw new Error(`redis-server exited at start:\n${tailLog(p.logFile)}`);
      const c = quiet(new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null }));
      try {
        await c.connect();
        await c.ping();
        // The sentinel survives only if the data did; lostData() compares it with our epoch.
        if ((await c.get(SENTINEL_KEY)) === null) await c.set(SENTINEL_KEY, String(++epoch));
        return;
      } catch (err) {
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

  await launch();
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
      } else {
        await command('SAVE');
        await stopProc();
      }
      await launch();
    },
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
    async stop() {
      await stopProc();
      if (temporary) rmSync(dir, { recursive: true, force: true });
    },
  };
  return server;
}
