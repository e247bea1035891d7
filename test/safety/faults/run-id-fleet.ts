/**
 * The `run-id-fleet` fault type: run once per run id, under a fault. Beside the trial's own lock
 * (whose holder the trial hands over at the end, so S1–S5 are checked as in every trial), three
 * fleet pods — real processes (run-id-fleet-worker.ts), each reaching the API server through a TCP
 * proxy of its own — go through the same RUN_IDS run ids in order on a Mutex lock of the trial's
 * lease length, as `fencepost exec --run-id` does: acquire with the run id, run (U[RUN_MS]),
 * complete, release. One fault, drawn from the trial's seed, hits the pod that has just started a
 * run:
 *
 * - `pause`: SIGSTOP for U[0.5 L, 3 L], then SIGCONT (it finishes its run late; its completion is
 *   refused when its term ended meanwhile);
 * - `kill`: SIGKILL mid-run, and the pod reported terminated as a kubelet would (the run is lost;
 *   another pod may run it again);
 * - `partition`: its API traffic blackholed for U[0.5 L, 3 L] mid-run;
 * - `watch-delay`: the controller's pod watch events arrive U[0, 2 L] late for the whole trial
 *   (what once let a run id run twice: status copied from a lagging pod cache).
 *
 * The invariant (checkRunIds), over the fleet's reports — `ran` (a run started, holding the lock
 * with token t) and `completed` (its completion was recorded):
 *   R1: a run id is completed at most once;
 *   R2: no run of a run id starts in a term after the one that completed it: every `ran` of a run
 *       id has a token ≤ the token of its completion.
 * A run that was cut short (paused, killed, cut off) and never completed may run again — that is
 * at-least-once for runs that never completed, exactly-once for runs that did; runs that ran more
 * than once are counted (`runIdRunsAgain`), not violations. Liveness (every run id completed by
 * the end) is reported as `runIdNotCompleted`.
 *
 * Calibration `no-recheck`: the fleet pods skip the run-once gate's check after the grant (they
 * look once, before asking); the checker must count R1/R2 violations.
 *
 * The fleet's workers are pooled per bed for the phase (withRunIdFleet, registered in runner.ts):
 * starting a process costs about a second of CPU. The type is a global one (its own phase), as
 * its `watch-delay` variant acts on the shared controller.
 */
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { KubeConfig } from '@kubernetes/client-node';
import { mulberry32 } from '../../support/prng.ts';
import { createLock, createPod, deleteLock, lockBody, setPodStatus } from '../../support/fixtures.ts';
import { spawnManaged, type ManagedProcess } from '../../support/testbed/processes.ts';
import { startTcpProxy, type TcpProxy } from '../../support/testbed/tcp-proxy.ts';
import type { SafetyBed } from '../testbed.ts';
import type { Ctx, FaultOutcome, Holder } from '../trial.ts';
import type { FleetCommand, FleetEvent } from './run-id-fleet-worker.ts';
import { workerExecutable } from '../worker-runtime.ts';

const WORKER = resolve(import.meta.dirname, 'run-id-fleet-worker.ts');

/** FLEET: pods per trial; RUN_IDS: run ids per trial; RUN_MS: how long a run lasts. */
export const FLEET = 3;
export const RUN_IDS = 3;
const RUN_MS: readonly [number, number] = [20, 150];
/** FINISH_MS bounds the wait for the fleet to go through its run ids. */
const FINISH_MS = 90_000;

export type RunIdVariant = 'pause' | 'kill' | 'partition' | 'watch-delay';
const VARIANTS: readonly RunIdVariant[] = ['pause', 'kill', 'partition', 'watch-delay'];

/** RunReport is one fleet event that matters to the checker. */
export interface RunReport {
  readonly kind: 'ran' | 'completed';
  readonly runId: string;
  readonly pod: string;
  readonly token: bigint;
}

/** RunIdCheck: what checkRunIds found. */
export interface RunIdCheck {
  /** violations: one sentence per run id that broke R1 or R2. */
  readonly violations: readonly string[];
  /** runsAgain: run ids that started more than once (allowed: the earlier runs never completed). */
  readonly runsAgain: number;
  /** notCompleted: run ids of `runIds` that no pod completed (liveness, reported). */
  readonly notCompleted: number;
}

/** checkRunIds checks R1 and R2 (see the header) over a fleet's reports, in any order. */
export function checkRunIds(reports: readonly RunReport[], runIds: readonly string[]): RunIdCheck {
  const violations: string[] = [];
  let runsAgain = 0;
  let notCompleted = 0;
  for (const id of runIds) {
    const ran = reports.filter((r) => r.kind === 'ran' && r.runId === id);
    const completed = reports.filter((r) => r.kind === 'completed' && r.runId === id);
    if (ran.length > 1) runsAgain++;
    if (completed.length === 0) notCompleted++;
    const show = (rs: readonly RunReport[]): string => rs.map((r) => `${r.pod}@${r.token}`).join(', ');
    if (completed.length > 1) {
      violations.push(`R1: run ${id} was completed ${completed.length} times (${show(completed)})`);
      continue;
    }
    const done = completed[0];
    if (done === undefined) continue;
    const later = ran.filter((r) => r.token > done.token);
    if (later.length > 0)
      violations.push(
        `R2: run ${id} completed by ${done.pod}@${done.token} ran again in a later term (${show(later)})`,
      );
  }
  return { violations, runsAgain, notCompleted };
}

// ----- the fleet's worker processes -----

interface FleetWorker {
  readonly id: string;
  readonly apiProxy: TcpProxy;
  readonly proc: ManagedProcess;
  send(c: FleetCommand): void;
  on(trial: string, listener: (e: FleetEvent) => void): () => void;
  alive(): boolean;
  stop(): Promise<void>;
}

async function startFleetWorker(bed: SafetyBed, id: string): Promise<FleetWorker> {
  const admin = new KubeConfig();
  admin.loadFromFile(bed.kubeconfigPath);
  const server = new URL(admin.getCurrentCluster()?.server ?? '');
  const apiProxy = await startTcpProxy({ targetPort: Number(server.port) });
  const kubeconfig = join(bed.dir, `${id}.kubeconfig`);
  writeFileSync(kubeconfig, admin.exportConfig().replace(server.origin, `https://127.0.0.1:${apiProxy.port}`), {
    mode: 0o600,
  });
  const proc = spawnManaged(id, workerExecutable(), {
    args: [WORKER, '--kubeconfig', kubeconfig],
    logFile: join(bed.dir, `${id}.log`),
    pipeStdio: true,
  });
  if (proc.stdin === null || proc.stdout === null) throw new Error(`Failed to start ${id}`);
  const stdin = proc.stdin;
  stdin.on('error', () => undefined);
  const listeners = new Map<string, Set<(e: FleetEvent) => void>>();
  const ready = Promise.withResolvers<boolean>();
  createInterface({ input: proc.stdout }).on('line', (line) => {
    let e: FleetEvent;
    try {
      e = JSON.parse(line) as FleetEvent;
    } catch {
      return;
    }
    if (e.kind === 'ready') ready.resolve(true);
    for (const l of [...(listeners.get(e.trial) ?? [])]) l(e);
  });
  void proc.exited.then(() => {
    ready.resolve(false);
  });
  const timer = setTimeout(() => {
    ready.resolve(false);
  }, 60_000);
  const w: FleetWorker = {
    id,
    apiProxy,
    proc,
    send(c) {
      if (proc.isRunning()) stdin.write(`${JSON.stringify(c)}\n`);
    },
    on(trial, listener) {
      const set = listeners.get(trial) ?? new Set();
      listeners.set(trial, set);
      set.add(listener);
      return () => {
        set.delete(listener);
        if (set.size === 0) listeners.delete(trial);
      };
    },
    alive: () => proc.isRunning(),
    async stop() {
      if (proc.isRunning()) {
        proc.signal('SIGCONT');
        proc.signal('SIGKILL');
        await proc.exited;
      }
      await apiProxy.close();
    },
  };
  const ok = await ready.promise;
  clearTimeout(timer);
  if (!ok) {
    await w.stop();
    throw new Error(`${id} did not start; see ${join(bed.dir, `${id}.log`)}`);
  }
  return w;
}

/** FleetPool lends fleet workers to trials; a dead or paused-and-killed one is replaced. */
class FleetPool {
  readonly #bed: SafetyBed;
  readonly #idle: FleetWorker[] = [];
  readonly #all = new Set<FleetWorker>();
  #next = 0;
  #starting: Promise<unknown> = Promise.resolve();

  constructor(bed: SafetyBed) {
    this.#bed = bed;
  }

  async borrow(): Promise<FleetWorker> {
    for (let w = this.#idle.pop(); w !== undefined; w = this.#idle.pop()) {
      if (w.alive()) return w;
      this.#all.delete(w);
      await w.stop();
    }
    // One start at a time: each costs about a second of CPU.
    const started = this.#starting.then(() => startFleetWorker(this.#bed, `fleet-${++this.#next}`));
    this.#starting = started.catch(() => undefined);
    const w = await started;
    this.#all.add(w);
    return w;
  }

  async give(w: FleetWorker): Promise<void> {
    w.proc.signal('SIGCONT');
    w.apiProxy.heal();
    if (w.alive()) this.#idle.push(w);
    else {
      this.#all.delete(w);
      await w.stop();
    }
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.#all].map((w) => w.stop()));
    this.#all.clear();
    this.#idle.length = 0;
  }
}

const pools = new WeakMap<SafetyBed, FleetPool>();

/** withRunIdFleet runs a phase of run-id-fleet trials with a pool of fleet workers, stopped after it. */
export async function withRunIdFleet<T>(bed: SafetyBed, phase: () => Promise<T>): Promise<T> {
  const pool = new FleetPool(bed);
  pools.set(bed, pool);
  try {
    return await phase();
  } finally {
    pools.delete(bed);
    await pool.close();
  }
}

/** delayUsers: trials of the phase that want the controller's pod watch delayed, per bed. */
const delayUsers = new WeakMap<SafetyBed, number>();

function delayPodWatch(ctx: Ctx): () => void {
  const bed = ctx.bed;
  const n = delayUsers.get(bed) ?? 0;
  if (n === 0) {
    const rnd = mulberry32(Math.floor(ctx.rnd() * 2 ** 32));
    const maxMs = 2 * ctx.leaseMs;
    bed.controllerApi.watchDelay(
      () => rnd() * maxMs,
      (r) => r.path.endsWith('/pods'),
    );
  }
  delayUsers.set(bed, n + 1);
  return () => {
    const left = (delayUsers.get(bed) ?? 1) - 1;
    delayUsers.set(bed, left);
    if (left === 0) bed.controllerApi.heal();
  };
}

// ----- the trial -----

/** runIdFleet is the run-id-fleet trial's script (see the header); it ends by handing the trial's lock over. */
export async function runIdFleet(ctx: Ctx, h: Holder): Promise<FaultOutcome> {
  const pool = pools.get(ctx.bed);
  if (pool === undefined)
    throw new Error('run-id-fleet trials run in their own phase (runTrials starts the fleet pool)');
  const variant = ctx.pick(VARIANTS);
  const recheck = ctx.spec.calibrate !== 'no-recheck';
  const lock = `${ctx.spec.id}-f`;
  const runIds = Array.from({ length: RUN_IDS }, (_, i) => `${ctx.spec.id}-run-${i}`);
  const reports: RunReport[] = [];
  const workers: FleetWorker[] = [];
  const offs: (() => void)[] = [];
  const finished = new Set<FleetWorker>();
  let errors = 0;
  const errorDetails: string[] = [];
  let completeRefused = 0;
  let undelay: (() => void) | undefined;
  let startAt: number;
  let faultMs = 0;
  const pods: { name: string; uid: string }[] = [];
  const t0 = performance.now();
  const marks: string[] = [];
  const mark = (what: string): void => {
    marks.push(`${what} ${Math.round(performance.now() - t0)}`);
  };
  try {
    for (let i = 0; i < FLEET; i++) {
      const p = await createPod(ctx.bed.t, `${lock}-${i}`, { app: lock });
      pods.push({ name: p.metadata?.name ?? '', uid: p.metadata?.uid ?? '' });
    }
    await createLock(ctx.bed.t, lockBody(lock, lock, { mode: 'Mutex', leaseDurationSeconds: ctx.spec.leaseSeconds }));
    mark('lock');
    for (let i = 0; i < FLEET; i++) workers.push(await pool.borrow());
    mark('borrowed');
    // The fault's target: the first pod to start a run after the fault's moment.
    const started = Promise.withResolvers<FleetWorker>();
    let armed = false;
    for (const w of workers)
      offs.push(
        w.on(ctx.spec.id, (e) => {
          if ((e.kind === 'ran' || e.kind === 'completed') && e.runId !== undefined && e.token !== undefined)
            reports.push({ kind: e.kind, runId: e.runId, pod: e.pod, token: BigInt(e.token) });
          if (e.kind === 'ran' && armed) started.resolve(w);
          if (e.kind === 'error') {
            errors++;
            if (errorDetails.length < 3) errorDetails.push(`${e.pod} ${e.runId ?? ''}: ${e.detail ?? ''}`);
          }
          if (e.kind === 'complete-failed') completeRefused++;
          if (e.kind === 'finished') finished.add(w);
        }),
      );
    if (variant === 'watch-delay') undelay = delayPodWatch(ctx);
    const waitMs = 20 * ctx.leaseMs + 10_000;
    workers.forEach((w, i) => {
      const pod = pods[i];
      if (pod === undefined) return;
      w.send({
        trial: ctx.spec.id,
        namespace: ctx.bed.t.namespace,
        lock,
        pod,
        runIds,
        runMs: RUN_MS,
        waitMs,
        attempts: 3,
        recheck,
      });
    });
    // The fault, at a random moment of the fleet's work.
    await sleep(ctx.uniform(0, 2 * ctx.leaseMs));
    armed = true;
    startAt = performance.now();
    if (variant !== 'watch-delay') {
      const target = await Promise.race([started.promise, sleep(FINISH_MS / 3).then(() => undefined)]);
      if (target !== undefined) {
        startAt = performance.now();
        const ms = ctx.uniform(0.5, 3) * ctx.leaseMs;
        if (variant === 'kill') {
          target.proc.signal('SIGKILL');
          // The kubelet's report: the pod's containers terminated (its Mutex request goes with it).
          const pod = pods[workers.indexOf(target)];
          if (pod !== undefined) await setPodStatus(ctx.bed.t, pod.name, 'terminated').catch(() => undefined);
        } else if (variant === 'pause') {
          target.proc.signal('SIGSTOP');
          await sleep(ms);
          target.proc.signal('SIGCONT');
          faultMs = ms;
        } else {
          target.apiProxy.blackhole();
          await sleep(ms);
          target.apiProxy.heal();
          faultMs = ms;
        }
      }
    }
    mark('fault');
    // Every live pod goes through its run ids (bounded).
    const deadline = performance.now() + FINISH_MS;
    while (performance.now() < deadline && workers.some((w) => w.alive() && !finished.has(w))) await sleep(200);
    if (variant === 'watch-delay') faultMs = performance.now() - startAt;
    mark('finished');
  } finally {
    undelay?.();
    for (const off of offs) off();
    await Promise.all(workers.map((w) => pool.give(w)));
    void deleteLock(ctx.bed.t, lock).catch(() => undefined);
  }
  const unfinished = workers.filter((w) => w.alive() && !finished.has(w)).length;
  const check = checkRunIds(reports, runIds);
  if (check.violations.length > 0)
    process.stderr.write(
      `run-id-fleet ${ctx.spec.id} seed ${ctx.spec.seed} (${variant}): ${check.violations.join('; ')}\n`,
    );
  if (errorDetails.length > 0)
    process.stderr.write(`run-id-fleet ${ctx.spec.id} (${variant}): ${errors} error(s): ${errorDetails.join(' | ')}\n`);
  // The trial's own lock: hand it over, so the trial's progress and S1–S5 are checked as always.
  const left = h.w.waitFor(ctx.spec.id, (e) => e.kind === 'left', 10_000, 'left').catch(() => undefined);
  h.w.send({ cmd: 'leave', trial: ctx.spec.id, release: true });
  await left;
  if (process.env['RUN_ID_FLEET_TIMING'] === '1')
    process.stderr.write(
      `run-id-fleet ${ctx.spec.id} ${variant}: ${marks.join(', ')}, left ${Math.round(performance.now() - t0)}\n`,
    );
  return {
    variant: `${variant}${recheck ? '' : ' (no recheck)'}`,
    faultMs,
    startAt,
    above: h.token,
    counters: {
      runIdViolations: check.violations.length,
      runIdRunsAgain: check.runsAgain,
      runIdNotCompleted: check.notCompleted,
      runIdRuns: reports.filter((r) => r.kind === 'ran').length,
      runIdCompleteRefused: completeRefused,
      runIdErrors: errors,
      runIdUnfinishedPods: unfinished,
    },
  };
}
