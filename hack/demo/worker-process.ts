/**
 * Starting and stopping the demo's worker processes (hack/demo/worker.ts). Their stdout is read
 * line by line as WorkerEvents; their stderr goes to a log file. Every worker still running when
 * the demo exits is killed by PID.
 */
import { spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { parseWorkerEvent, type WorkerEvent } from './events.ts';

const WORKER = resolve(import.meta.dirname, 'worker.ts');

/** WorkerProcess is one running worker. */
export interface WorkerProcess {
  readonly pod: string;
  readonly pid: number;
  /** events is every event the worker printed so far, in order. */
  readonly events: readonly WorkerEvent[];
  /** onEvent calls listener for each new event (synchronously, as the line arrives); returns the unsubscribe. */
  onEvent(listener: (e: WorkerEvent) => void): () => void;
  /** next resolves with the next event that matches (not one already received). */
  next<T extends WorkerEvent>(match: (e: WorkerEvent) => e is T, timeoutMs: number, what: string): Promise<T>;
  /** signal sends SIGSTOP/SIGCONT (the pause) while the worker runs. */
  signal(sig: NodeJS.Signals): void;
  /** stop sends SIGCONT and SIGTERM, then SIGKILL after 3 s, and waits for the exit. */
  stop(): Promise<void>;
}

/** WorkerOptions configures startWorker. */
export interface WorkerOptions {
  readonly pod: string;
  readonly agentPort: number;
  readonly redisUrl: string;
  readonly lock: string;
  readonly key: string;
  readonly fenced: boolean;
  readonly logFile: string;
}

const live = new Set<WorkerProcess>();
let hooked = false;

/** startWorker spawns a worker with Node's own binary. */
export function startWorker(o: WorkerOptions): WorkerProcess {
  if (!hooked) {
    hooked = true;
    process.on('exit', () => {
      for (const w of live) {
        w.signal('SIGCONT');
        w.signal('SIGKILL');
      }
    });
  }
  const args = [
    WORKER,
    '--pod',
    o.pod,
    '--agent',
    `http://127.0.0.1:${o.agentPort}`,
    '--redis',
    o.redisUrl,
    '--lock',
    o.lock,
    '--key',
    o.key,
  ];
  if (!o.fenced) args.push('--no-fencing');
  const fd = openSync(o.logFile, 'a');
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', fd] });
  closeSync(fd);
  if (child.pid === undefined || child.stdout === null) throw new Error(`Failed to start the worker of ${o.pod}`);
  let running = true;
  const exited = new Promise<void>((done) => {
    child.on('exit', () => {
      running = false;
      live.delete(worker);
      done();
    });
    child.on('error', () => {
      running = false;
      live.delete(worker);
      done();
    });
  });
  const events: WorkerEvent[] = [];
  const listeners = new Set<(e: WorkerEvent) => void>();
  createInterface({ input: child.stdout }).on('line', (line) => {
    const e = parseWorkerEvent(line);
    if (e === undefined) return;
    events.push(e);
    for (const l of [...listeners]) l(e);
  });
  const onEvent = (listener: (e: WorkerEvent) => void): (() => void) => {
    listeners.add(listener);
    return () => {
      listeners.delete(listener);
    };
  };
  const worker: WorkerProcess = {
    pod: o.pod,
    pid: child.pid,
    events,
    onEvent,
    next(match, timeoutMs, what) {
      return new Promise((resolveEvent, reject) => {
        const timer = setTimeout(() => {
          off();
          reject(new Error(`Timed out after ${timeoutMs / 1000} s waiting for ${what}`));
        }, timeoutMs);
        const off = onEvent((e) => {
          if (match(e)) {
            clearTimeout(timer);
            off();
            resolveEvent(e);
          }
        });
      });
    },
    signal(sig) {
      if (running) child.kill(sig);
    },
    async stop() {
      if (!running) return;
      child.kill('SIGCONT');
      child.kill('SIGTERM');
      const kill = setTimeout(() => {
        child.kill('SIGKILL');
      }, 3000);
      await exited;
      clearTimeout(kill);
    },
  };
  live.add(worker);
  return worker;
}
