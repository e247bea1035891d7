/**
 * The runner's side of the worker processes: a pool of real child processes (test/safety/worker.ts),
 * each reaching the API server through a TCP proxy of its own and the store through another, so
 * that one candidate can be paused (SIGSTOP), killed (SIGKILL), cut off from the API server or
 * have its store traffic delayed without touching any other.
 *
 * Worker processes are reused from trial to trial (starting one costs about a second of CPU);
 * a killed worker is replaced. Every event a worker prints is stamped on arrival with the
 * runner's monotonic clock: the reference clock of the history — except the lines of a killed
 * worker read after its kill, which it wrote before dying (see {@link ArrivalClock}).
 */
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { KubeConfig } from '@kubernetes/client-node';
import { spawnManaged } from '../support/testbed/processes.ts';
import { startTcpProxy, type TcpProxy } from '../support/testbed/tcp-proxy.ts';
import { proxyTargetOf, startHttpFaultProxy, type HttpFaultProxy } from '../support/testbed/http-fault-proxy.ts';
import { parseWorkerOutput, type WorkerCommand, type WorkerOutput } from './worker-protocol.ts';
import { workerExecutable } from './worker-runtime.ts';

const WORKER = resolve(import.meta.dirname, 'worker.ts');

/**
 * ArrivalClock stamps one worker's lines. A line is stamped when the runner reads it, which can be
 * well after the worker wrote it on a loaded machine; that is harmless for a live worker (a report
 * only ever arrives late), but not for a killed one: a `renewed` it wrote just before its SIGKILL,
 * read after the kill was noted, would reopen a belief that no later line can close, and the
 * history would show a dead process believing to the end of the trial. A dead process writes
 * nothing, so every line read after the kill was written before it: such lines are stamped just
 * before the kill's instant, which is what `kill()` returns for the caller to note the kill at.
 */
export class ArrivalClock {
  readonly #now: () => number;
  #killedAt: number | undefined;

  constructor(now: () => number = () => performance.now()) {
    this.#now = now;
  }

  /** stamp: the time to give a line read now. */
  stamp(): number {
    const now = this.#now();
    return this.#killedAt !== undefined ? Math.min(now, this.#killedAt - KILL_EPSILON_MS) : now;
  }

  /** kill records the kill as happening now and returns its instant (after every line's stamp). */
  kill(): number {
    this.#killedAt ??= this.#now();
    return this.#killedAt;
  }
}

/** KILL_EPSILON_MS: how far before the kill's instant a line read after it is stamped (so that it sorts first). */
const KILL_EPSILON_MS = 0.001;

/** StampedOutput is a worker event with its arrival time on the reference clock. */
export type StampedOutput = WorkerOutput & { readonly at: number };

/** WorkerHandle is one worker process with its two proxies. */
export interface WorkerHandle {
  readonly id: string;
  readonly pid: number;
  readonly apiProxy: TcpProxy;
  readonly storeProxy: TcpProxy;
  /** httpProxy: in a pool with `httpFaults`, the HTTP fault proxy between the worker and its apiProxy. */
  readonly httpProxy: HttpFaultProxy | undefined;
  alive(): boolean;
  send(cmd: WorkerCommand): void;
  /** on subscribes to one trial's events; returns the unsubscribe. */
  on(trial: string, listener: (e: StampedOutput) => void): () => void;
  /** waitFor resolves with the first future event of the trial that matches, or rejects after timeoutMs. */
  waitFor(trial: string, match: (e: StampedOutput) => boolean, timeoutMs: number, what: string): Promise<StampedOutput>;
  /** signal sends SIGSTOP or SIGCONT to the process (no-op once it exited). */
  signal(sig: 'SIGSTOP' | 'SIGCONT'): void;
  /**
   * kill SIGKILLs the process and returns the kill's instant on the reference clock: note the
   * kill at it. Lines still in the pipe are stamped before it ({@link ArrivalClock}).
   */
  kill(): number;
  readonly exited: Promise<void>;
  stop(): Promise<void>;
}

/** PoolOptions: where workers connect, and where their logs go. */
export interface PoolOptions {
  readonly dir: string;
  /** kubeconfigPath: an admin kubeconfig; each worker gets a copy pointing at its API proxy. */
  readonly kubeconfigPath: string;
  readonly storePort: number;
  /** env: extra environment for each worker, by worker id (e.g. libfaketime); a pool per environment. */
  readonly env?: (id: string) => NodeJS.ProcessEnv;
  readonly name?: string;
  /** httpFaults: each worker reaches its API proxy through an HTTP fault proxy of its own (API-level faults). */
  readonly httpFaults?: boolean;
}

async function startWorker(o: PoolOptions, id: string): Promise<WorkerHandle> {
  const admin = new KubeConfig();
  admin.loadFromFile(o.kubeconfigPath);
  const server = new URL(admin.getCurrentCluster()?.server ?? '');
  if (server.hostname !== '127.0.0.1') throw new Error(`no loopback API server in ${o.kubeconfigPath}`);
  const apiProxy = await startTcpProxy({ targetPort: Number(server.port) });
  const storeProxy = await startTcpProxy({ targetPort: o.storePort });
  // worker → HTTP fault proxy (TLS, per request) → TCP proxy (bytes) → kube-apiserver
  const httpProxy =
    o.httpFaults === true
      ? await startHttpFaultProxy({ targetPort: apiProxy.port, tls: proxyTargetOf(o.kubeconfigPath).tls })
      : undefined;
  const kubeconfig = join(o.dir, `${id}.kubeconfig`);
  writeFileSync(
    kubeconfig,
    admin.exportConfig().replace(server.origin, httpProxy?.url ?? `https://127.0.0.1:${apiProxy.port}`),
    { mode: 0o600 },
  );
  // A managed process: stopped with this process even after a failed test, like every testbed child.
  const proc = spawnManaged(`worker ${id}`, workerExecutable(), {
    args: [WORKER, '--kubeconfig', kubeconfig, '--store', `redis://127.0.0.1:${storeProxy.port}`],
    logFile: join(o.dir, `${id}.log`),
    env: { ...process.env, ...o.env?.(id) },
    pipeStdio: true,
  });
  if (proc.stdout === null || proc.stdin === null) throw new Error(`Failed to start worker ${id}`);
  const stdin = proc.stdin;
  stdin.on('error', () => undefined); // a killed worker's pipe
  const exited = proc.exited.then(() => undefined);
  const listeners = new Map<string, Set<(e: StampedOutput) => void>>();
  let onReady: (() => void) | undefined;
  const ready = new Promise<void>((r) => {
    onReady = r;
  });
  const clock = new ArrivalClock();
  createInterface({ input: proc.stdout }).on('line', (line) => {
    const at = clock.stamp();
    const o = parseWorkerOutput(line);
    if (o === undefined) return;
    if (o.kind === 'ready') {
      onReady?.();
      return;
    }
    for (const l of [...(listeners.get(o.trial) ?? [])]) l({ ...o, at });
  });
  const on = (trial: string, listener: (e: StampedOutput) => void): (() => void) => {
    let set = listeners.get(trial);
    if (set === undefined) {
      set = new Set();
      listeners.set(trial, set);
    }
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0) listeners.delete(trial);
    };
  };
  const h: WorkerHandle = {
    id,
    pid: proc.pid,
    apiProxy,
    storeProxy,
    httpProxy,
    exited,
    on,
    alive: () => proc.isRunning(),
    send(cmd) {
      if (proc.isRunning()) stdin.write(`${JSON.stringify(cmd)}\n`);
    },
    waitFor(trial, match, timeoutMs, what) {
      return new Promise((resolveEvent, reject) => {
        const timer = setTimeout(() => {
          off();
          reject(new Error(`worker ${id}: no ${what} within ${timeoutMs} ms`));
        }, timeoutMs);
        const off = on(trial, (e) => {
          if (match(e)) {
            clearTimeout(timer);
            off();
            resolveEvent(e);
          }
        });
      });
    },
    signal(sig) {
      proc.signal(sig);
    },
    kill() {
      const at = clock.kill();
      proc.signal('SIGKILL');
      return at;
    },
    async stop() {
      if (proc.isRunning()) {
        proc.signal('SIGCONT');
        proc.signal('SIGKILL');
        await exited;
      }
      await Promise.allSettled([apiProxy.close(), storeProxy.close(), httpProxy?.close()]);
    },
  };
  const started = await Promise.race([
    ready.then(() => true),
    exited.then(() => false),
    new Promise<boolean>((r) => {
      setTimeout(() => {
        r(false);
      }, 60_000).unref();
    }),
  ]);
  if (!started) {
    await h.stop();
    throw new Error(`worker ${id} did not start; see ${join(o.dir, `${id}.log`)}`);
  }
  return h;
}

/**
 * STARTS_AT_ONCE: worker processes a pool starts at the same time. Each start costs about a second
 * of CPU; dozens at once on two cores starve each other past the start timeout.
 */
const STARTS_AT_ONCE = 4;

/** WorkerPool lends idle workers to trials and takes them back. */
export class WorkerPool {
  readonly #o: PoolOptions;
  readonly #idle: WorkerHandle[] = [];
  readonly #all = new Set<WorkerHandle>();
  readonly #startQueue: (() => void)[] = [];
  #starting = 0;
  #next = 0;
  #closed = false;

  constructor(o: PoolOptions) {
    this.#o = o;
  }

  /** started is how many worker processes this pool has started (replacements included). */
  get started(): number {
    return this.#next;
  }

  /** borrow takes an idle worker or starts a new one. */
  async borrow(): Promise<WorkerHandle> {
    if (this.#closed) throw new Error('worker pool closed');
    for (let w = this.#idle.pop(); w !== undefined; w = this.#idle.pop()) {
      if (w.alive()) return w;
      this.#all.delete(w);
      await w.stop();
    }
    // A finished start hands its slot straight to the next waiter.
    if (this.#starting >= STARTS_AT_ONCE)
      await new Promise<void>((r) => {
        this.#startQueue.push(r);
      });
    else this.#starting++;
    try {
      const w = await startWorker(this.#o, `${this.#o.name ?? 'worker'}-${++this.#next}`);
      this.#all.add(w);
      return w;
    } finally {
      const next = this.#startQueue.shift();
      if (next !== undefined) next();
      else this.#starting--;
    }
  }

  /** give returns a worker: resumed and with healed proxies; a dead one is discarded. */
  async give(w: WorkerHandle): Promise<void> {
    w.signal('SIGCONT');
    w.apiProxy.heal();
    w.storeProxy.heal();
    w.httpProxy?.heal();
    if (w.alive() && !this.#closed) {
      this.#idle.push(w);
      return;
    }
    this.#all.delete(w);
    await w.stop();
  }

  /** prestart starts n workers ahead of the trials. */
  async prestart(n: number): Promise<void> {
    const ws = await Promise.all(Array.from({ length: n }, () => this.borrow()));
    for (const w of ws) await this.give(w);
  }

  async close(): Promise<void> {
    this.#closed = true;
    await Promise.allSettled([...this.#all].map((w) => w.stop()));
    this.#all.clear();
    this.#idle.length = 0;
  }
}
