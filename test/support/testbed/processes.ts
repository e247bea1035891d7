/**
 * Child processes started by the testbed: spawned with their output in a log file, stopped by
 * PID (SIGTERM, then SIGKILL), and recorded in a pid file so that a crashed run's leftovers can be
 * reaped by the next one (`reapStale`) — only processes whose command line still matches what we
 * started are ever signalled. The pid file also names crun state roots (crun-container.ts), whose
 * containers reapStale force-deletes.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { appendFileSync, existsSync, openSync, readFileSync, closeSync, writeFileSync } from 'node:fs';

/** ManagedProcess is one child process that the testbed started and will stop. */
export interface ManagedProcess {
  readonly name: string;
  readonly pid: number;
  /** exited resolves with the exit code (or the signal name) when the process ends. */
  readonly exited: Promise<number | string>;
  readonly logFile: string;
  /** stdin and stdout are pipes when spawned with pipeStdio (else null: stdout goes to logFile). */
  readonly stdin: Writable | null;
  readonly stdout: Readable | null;
  isRunning(): boolean;
  /** stop sends SIGTERM, then SIGKILL after graceMs (default 5 s), and waits for the exit. */
  stop(graceMs?: number): Promise<void>;
  /** signal sends a signal (SIGSTOP/SIGCONT for pauses, SIGKILL for crashes) if still running. */
  signal(sig: NodeJS.Signals): void;
}

const live = new Set<ChildProcess>();
let exitHookInstalled = false;

/** Kill every child we still own when this process exits, even after a failed test. */
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const child of live) {
      try {
        child.kill('SIGCONT');
        child.kill('SIGKILL');
      } catch {
        /* already gone */
      }
    }
  });
}

export interface SpawnOptions {
  readonly args: readonly string[];
  readonly logFile: string;
  readonly env?: NodeJS.ProcessEnv;
  readonly cwd?: string;
  /** pidFile, when given, records "pid<TAB>binary" so that reapStale can clean up after a crash. */
  readonly pidFile?: string;
  /** pipeStdio gives the caller stdin and stdout as pipes (a line protocol); stderr still goes to logFile. */
  readonly pipeStdio?: boolean;
}

/** spawnManaged starts binary with its stdout and stderr appended to logFile. */
export function spawnManaged(name: string, binary: string, opts: SpawnOptions): ManagedProcess {
  installExitHook();
  const fd = openSync(opts.logFile, 'a');
  const child = spawn(binary, [...opts.args], {
    stdio: opts.pipeStdio === true ? ['pipe', 'pipe', fd] : ['ignore', fd, fd],
    env: opts.env ?? process.env,
    cwd: opts.cwd,
  });
  closeSync(fd);
  if (child.pid === undefined) throw new Error(`Failed to start ${name} (${binary})`);
  const pid = child.pid;
  live.add(child);
  if (opts.pidFile !== undefined) recordPid(opts.pidFile, pid, binary);
  let running = true;
  const exited = new Promise<number | string>((resolve) => {
    child.on('exit', (code, sig) => {
      running = false;
      live.delete(child);
      resolve(code ?? sig ?? 'unknown');
    });
    child.on('error', () => {
      running = false;
      live.delete(child);
      resolve('spawn-error');
    });
  });
  return {
    name,
    pid,
    exited,
    logFile: opts.logFile,
    stdin: child.stdin,
    stdout: child.stdout,
    isRunning: () => running,
    signal(sig) {
      if (running) child.kill(sig);
    },
    async stop(graceMs = 5000) {
      if (!running) return;
      child.kill('SIGCONT'); // a paused process cannot act on SIGTERM
      child.kill('SIGTERM');
      const done = await raceTimeout(
        exited.then(() => true),
        graceMs,
        false,
      );
      if (!done) {
        child.kill('SIGKILL');
        await exited;
      }
    },
  };
}

/**
 * recordPid appends "pid<TAB>program" to pidFile: reapStale will kill pid if its command line
 * still starts with program (what the process runs now, e.g. `sleep` for a process that exec'd it).
 */
export function recordPid(pidFile: string, pid: number, program: string): void {
  appendFileSync(pidFile, `${pid}\t${program}\n`);
}

/** recordCrunRoot appends "crun-root<TAB>dir" to pidFile: reapStale will delete every container in that crun state root. */
export function recordCrunRoot(pidFile: string, root: string): void {
  appendFileSync(pidFile, `crun-root\t${root}\n`);
}

/**
 * reapStale cleans up after an earlier run that did not: it force-deletes the containers of every
 * crun state root recorded (`crun --root R delete -f`, which kills them), then kills the processes
 * recorded in pidFile, but only those whose /proc command line still starts with the recorded
 * program (a reused PID is left alone), and empties the file. Returns how many it reaped.
 */
export function reapStale(pidFile: string): number {
  if (!existsSync(pidFile)) return 0;
  let reaped = 0;
  const lines = readFileSync(pidFile, 'utf8').split('\n');
  for (const line of lines) {
    const [kind, root] = line.split('\t');
    if (kind !== 'crun-root' || root === undefined || !existsSync(root)) continue;
    reaped += reapCrunRoot(root);
  }
  for (const line of lines) {
    const [pidText, binary] = line.split('\t');
    const pid = Number(pidText);
    if (!Number.isInteger(pid) || pid <= 0 || binary === undefined) continue;
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0];
      if (cmd !== binary) continue;
      process.kill(pid, 'SIGCONT');
      process.kill(pid, 'SIGKILL');
      reaped++;
    } catch {
      /* not running any more */
    }
  }
  writeFileSync(pidFile, '');
  return reaped;
}

/** reapCrunRoot force-deletes every container crun lists in the state root; returns how many. */
export function reapCrunRoot(root: string): number {
  let ids: string[];
  try {
    ids = execFileSync('crun', ['--root', root, 'list', '-q'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    })
      .split('\n')
      .filter((l) => l.trim() !== '');
  } catch {
    return 0; // no crun, or not a state root
  }
  let n = 0;
  for (const id of ids) {
    try {
      execFileSync('crun', ['--root', root, 'delete', '-f', id.trim()], { stdio: 'ignore' });
      n++;
    } catch {
      /* gone meanwhile */
    }
  }
  return n;
}

/** tailLog returns the last lines of a log file, for error messages when a process fails to start. */
export function tailLog(file: string, lines = 30): string {
  try {
    return readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/**
 * raceTimeout resolves with p's value, or with `onTimeout` after ms — and clears its timer either
 * way, so that a caller's process can exit as soon as its work is done.
 */
export async function raceTimeout<T>(p: Promise<T>, ms: number, onTimeout: T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<T>((resolve) => {
        timer = setTimeout(() => {
          resolve(onTimeout);
        }, ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
