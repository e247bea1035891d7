/**
 * Candidate processes for the side-by-side benchmarks: a `fencepost agent` (as one pod) or the
 * client-go peer, each a child process whose output lines are stamped with performance.now() on
 * arrival, so both systems are timed the same way: from the signal the benchmark sends to the
 * line in which the successor says it holds the lock.
 *
 * - fencepost: the agent's JSON log line `"msg":"Acquired lock"` (stderr) is written when its
 *   first renew of a grant succeeded — the moment it reports `held: true` on its HTTP API.
 *   Synced: the first 200 on GET /readyz (its Lease watch has listed).
 * - client-go: the peer's `started <ns>` line (OnStartedLeading). Synced: its first `new-leader`
 *   line (the elector has read the Lease once).
 *
 * Every child is stopped by PID (and killed when this process exits); output also goes to a log file.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { getStatus } from '../test/support/testbed/http-probe.ts';
import { freePort } from '../test/support/testbed/ports.ts';

/** Line is one output line of a child, stamped on arrival. */
export interface Line {
  readonly at: number;
  readonly text: string;
}

const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of live) {
    try {
      c.kill('SIGKILL');
    } catch {
      /* gone */
    }
  }
});

/** LineProcess is a child process whose stdout and stderr lines are kept with their arrival times. */
export class LineProcess {
  readonly lines: Line[] = [];
  readonly pid: number;
  readonly exited: Promise<number | string>;
  readonly startedAt = performance.now();
  readonly #child: ChildProcess;
  #running = true;
  #wake: (() => void)[] = [];

  readonly name: string;
  readonly logFile: string;

  constructor(name: string, binary: string, args: readonly string[], env: NodeJS.ProcessEnv, logFile: string) {
    this.name = name;
    this.logFile = logFile;
    const child = spawn(binary, [...args], { stdio: ['ignore', 'pipe', 'pipe'], env });
    if (child.pid === undefined) throw new Error(`Failed to start ${name} (${binary})`);
    this.#child = child;
    this.pid = child.pid;
    live.add(child);
    for (const stream of [child.stdout, child.stderr]) {
      if (stream === null) continue;
      createInterface({ input: stream }).on('line', (text) => {
        this.lines.push({ at: performance.now(), text });
        appendFileSync(logFile, `${text}\n`);
        this.#wakeAll();
      });
    }
    this.exited = new Promise((resolve) => {
      child.on('exit', (code, sig) => {
        this.#running = false;
        live.delete(child);
        this.#wakeAll();
        resolve(code ?? sig ?? 'unknown');
      });
      child.on('error', () => {
        this.#running = false;
        live.delete(child);
        this.#wakeAll();
        resolve('spawn-error');
      });
    });
  }

  isRunning(): boolean {
    return this.#running;
  }

  /** signal sends sig if the process still runs; returns performance.now() just before sending. */
  signal(sig: NodeJS.Signals): number {
    const t = performance.now();
    if (this.#running) this.#child.kill(sig);
    return t;
  }

  /** stop sends SIGTERM, then SIGKILL after graceMs, and waits for the exit. */
  async stop(graceMs = 5000): Promise<void> {
    if (!this.#running) return;
    this.#child.kill('SIGTERM');
    const timer = setTimeout(() => {
      this.#child.kill('SIGKILL');
    }, graceMs);
    await this.exited;
    clearTimeout(timer);
  }

  /** waitLine resolves with the first line at index ≥ from that matches; rejects on exit or timeout. */
  async waitLine(
    what: string,
    match: (text: string) => boolean,
    from: number,
    timeoutMs: number,
    signal: AbortSignal,
  ): Promise<Line & { index: number }> {
    const deadline = performance.now() + timeoutMs;
    for (let i = from; ;) {
      for (; i < this.lines.length; i++) {
        const l = this.lines[i];
        if (l !== undefined && match(l.text)) return { ...l, index: i };
      }
      signal.throwIfAborted();
      if (!this.#running) throw new Error(`${this.name} exited before ${what}; see ${this.logFile}`);
      const left = deadline - performance.now();
      if (left <= 0) throw new Error(`${this.name}: no ${what} within ${timeoutMs} ms; see ${this.logFile}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.#wake.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  #wakeAll(): void {
    const w = this.#wake;
    this.#wake = [];
    for (const f of w) f();
  }
}

/** holdsNow: the candidate's last lead line is later than its last loss line (and it runs). */
export function holdsNow(c: Candidate): boolean {
  if (!c.proc.isRunning()) return false;
  let lead = -1;
  let loss = -1;
  c.proc.lines.forEach((l, i) => {
    if (c.isLeadLine(l.text)) lead = i;
    else if (c.isLossLine(l.text)) loss = i;
  });
  return lead > loss;
}

/** Timings are one lease configuration, the same numbers for both systems. */
export interface Timings {
  readonly leaseDurationSeconds: number;
  readonly renewDeadlineSeconds: number;
  /** retryPeriodSeconds: client-go's RetryPeriod; fencepost's renewPeriodSeconds. */
  readonly retryPeriodSeconds: number;
}

/** Candidate is one running candidate of either system. */
export interface Candidate {
  readonly pod: string;
  readonly proc: LineProcess;
  /** isLeadLine tells whether an output line says this candidate now holds the lock. */
  readonly isLeadLine: (text: string) => boolean;
  /** isLossLine tells whether an output line says this candidate no longer holds the lock. */
  readonly isLossLine: (text: string) => boolean;
  /** synced resolves once the candidate has read the lock's state (it can take over from now on). */
  synced(signal: AbortSignal): Promise<void>;
}

const STEP_TIMEOUT_MS = 60_000;

/**
 * fencepostAgent starts `fencepost-agent agent --lock LOCK` as pod (name, uid) in namespace: `agent`
 * is the shipped executable (test/support/agent-binary.ts), the bytes a pod's sidecar runs.
 */
export async function fencepostAgent(o: {
  agent: string;
  kubeconfig: string;
  namespace: string;
  lock: string;
  pod: string;
  uid: string;
  dir: string;
  tag: string;
}): Promise<Candidate> {
  const port = await freePort();
  const proc = new LineProcess(
    `agent-${o.pod}-${o.tag}`,
    o.agent,
    [
      'agent',
      '--lock',
      o.lock,
      '--listen',
      `127.0.0.1:${port}`,
      '--health-probe-bind-address=0',
      '--metrics-bind-address=0',
      '--kubeconfig',
      o.kubeconfig,
    ],
    { ...process.env, POD_NAME: o.pod, POD_NAMESPACE: o.namespace, POD_UID: o.uid },
    join(o.dir, `agent-${o.pod}.log`),
  );
  return {
    pod: o.pod,
    proc,
    isLeadLine: (text) => text.includes('"msg":"Acquired lock"'),
    isLossLine: (text) => text.includes('"msg":"Lost lock"') || text.includes('"msg":"Released lock"'),
    async synced(signal) {
      const deadline = performance.now() + STEP_TIMEOUT_MS;
      for (;;) {
        signal.throwIfAborted();
        if (!proc.isRunning()) throw new Error(`${proc.name} exited before it was ready; see ${proc.logFile}`);
        try {
          if ((await getStatus(`http://127.0.0.1:${port}/readyz`, undefined, 1000)).status === 200) return;
        } catch {
          /* not listening yet */
        }
        if (performance.now() > deadline)
          throw new Error(`${proc.name}: not ready after ${STEP_TIMEOUT_MS} ms; see ${proc.logFile}`);
        await sleep(20, undefined, { signal });
      }
    },
  };
}

/** clientGoPeer starts the client-go peer as identity pod on Lease lease. */
export function clientGoPeer(o: {
  bin: string;
  kubeconfig: string;
  namespace: string;
  lease: string;
  pod: string;
  timings: Timings;
  dir: string;
  tag: string;
}): Candidate {
  const s = (n: number): string => `${n * 1000}ms`;
  const proc = new LineProcess(
    `client-go-${o.pod}-${o.tag}`,
    o.bin,
    [
      '--kubeconfig',
      o.kubeconfig,
      '--namespace',
      o.namespace,
      '--lease',
      o.lease,
      '--identity',
      o.pod,
      '--lease-duration',
      s(o.timings.leaseDurationSeconds),
      '--renew-deadline',
      s(o.timings.renewDeadlineSeconds),
      '--retry-period',
      s(o.timings.retryPeriodSeconds),
    ],
    process.env,
    join(o.dir, `client-go-${o.pod}.log`),
  );
  return {
    pod: o.pod,
    proc,
    isLeadLine: (text) => text.startsWith('started '),
    isLossLine: (text) => text.startsWith('stopped '),
    async synced(signal) {
      await proc.waitLine(
        'first new-leader line',
        (t) => t.startsWith('new-leader ') || t.startsWith('started '),
        0,
        STEP_TIMEOUT_MS,
        signal,
      );
    },
  };
}
