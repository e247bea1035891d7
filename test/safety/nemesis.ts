/**
 * The combined nemesis (docs/safety.md, the Jepsen-style soak): one long run in which a few
 * candidate processes contend for a few locks while a seeded schedule (nemesis-schedule.ts) throws
 * overlapping faults at them and at what they share (nemesis-faults.ts); then a healing final phase
 * (every process resumed, every proxy healed, every clock reset), a wait until every lock again has
 * a holder whose write the store accepted, and the checker (`checkHistory`, S1–S5 and H) on each
 * lock's history.
 *
 * Each candidate is one real worker process that serves every lock at once (a session per lock,
 * keyed by the lock's name as its trial id), as one pod per lock: so pausing, killing or cutting
 * off a process hits all its sessions together. A killed process is replaced by a new incarnation:
 * its pods are deleted and created again under the same names (new uids) for a new process.
 * Workers come from the testbed's jump pool (libfaketime reading an offset file), so any of them
 * can have its wall clock stepped.
 */
import { writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLock, createPod, deleteLock, lockBody } from '../support/fixtures.ts';
import { checkHistory, type Invariant } from './checker.ts';
import type { ClientEvent } from './history.ts';
import { NEMESIS_FAULTS, type Candidate, type NemesisEnv, type NemesisFault } from './nemesis-faults.ts';
import { livenessBoundMs, lockLiveness, tallyFaults, type FaultTally, type LockLiveness } from './nemesis-liveness.ts';
import { nemesisSchedule, type ScheduledFault } from './nemesis-schedule.ts';
import { readFinalStore, trialPrefix } from './recorders.ts';
import { stat, type Stat } from './runner.ts';
import type { SafetyBed } from './testbed.ts';
import { clientEvent, INTERVAL_MS, THINK_MS } from './trial.ts';
import type { WorkerHandle } from './workers.ts';

/** NemesisOptions configures runNemesis. */
export interface NemesisOptions {
  readonly bed: SafetyBed;
  readonly seed: number;
  /** durationMs: how long faults keep starting (the schedule's length). */
  readonly durationMs: number;
  /** intervalMs: the gap between fault starts, U[lo, hi) (5–15 s in the soak, shorter in CI). */
  readonly intervalMs: readonly [number, number];
  readonly leaseSeconds: number;
  readonly locks?: number;
  readonly candidates?: number;
  readonly kinds?: readonly NemesisFault[];
  /** recoveryTimeoutMs: a hang-catching bound on the wait for every lock after the final heal. */
  readonly recoveryTimeoutMs?: number;
  /** reconcileMs: the reconcile allowance in the reported bound L + R + P + reconcile. */
  readonly reconcileMs?: number;
  /** fenced: false for the guard calibration (plain SETs: the store accepts any token). */
  readonly fenced?: boolean;
  /** name: lock name prefix (several runs on one bed need different names). */
  readonly name?: string;
  readonly log?: (line: string) => void;
}

/** InjectedFault is one scheduled fault as it happened (times from the start of the nemesis phase). */
export interface InjectedFault {
  readonly index: number;
  readonly kind: string;
  readonly variant: string;
  /** candidate: the slot the fault acted on (for holder-targeted faults, the holder found at its start). */
  readonly candidate: number | undefined;
  /** holderOf: the lock whose holder was targeted, if the schedule asked for one. */
  readonly holderOf: string | undefined;
  readonly plannedAtMs: number;
  readonly startMs: number;
  readonly endMs: number;
  readonly error?: string;
}

/** LockOutcome is one lock's verdict and figures. */
export interface LockOutcome {
  readonly lock: string;
  readonly ok: boolean;
  readonly violations: readonly string[];
  readonly counts: ReturnType<typeof checkHistory>['counts'];
  readonly dualBelief: Stat;
  readonly liveness: LockLiveness;
}

/** NemesisResult is what a run reports (JSON-safe: no BigInt). */
export interface NemesisResult {
  readonly seed: number;
  readonly leaseSeconds: number;
  readonly durationMs: number;
  readonly intervalMs: readonly [number, number];
  readonly locks: number;
  readonly candidates: number;
  readonly ok: boolean;
  readonly violations: Readonly<Record<Invariant, number>>;
  readonly faults: readonly InjectedFault[];
  readonly faultsByKind: Readonly<Record<string, FaultTally>>;
  /** maxConcurrentFaults: the most faults in effect at one moment (overlaps). */
  readonly maxConcurrentFaults: number;
  readonly perLock: readonly LockOutcome[];
  /** recoveryMs: final heal → every lock has had an accepted write (null: some lock did not within the bound). */
  readonly recoveryMs: number | null;
  readonly livenessBoundMs: number;
  readonly failoverMs: Stat;
  readonly dualBelief: Stat;
  readonly workerIncarnations: number;
  readonly controllerRestarts: number;
  readonly wallMs: number;
  /** setupError: the run could not start (no lock became available); the histories are still checked. */
  readonly setupError?: string;
}

interface Slot extends Candidate {
  /** uids: the pod uid of this candidate's current incarnation, per lock. */
  readonly uids: Map<string, string>;
  offs: (() => void)[];
  /** replacing: kills of one candidate are serialised. */
  replacing: Promise<void>;
}

/** runNemesis runs one combined-nemesis run on the bed and checks every lock's history. */
export async function runNemesis(o: NemesisOptions): Promise<NemesisResult> {
  const began = performance.now();
  const { bed } = o;
  const log = o.log ?? (() => undefined);
  const leaseMs = o.leaseSeconds * 1000;
  const kinds = o.kinds ?? NEMESIS_FAULTS;
  const nLocks = o.locks ?? 3;
  const nCandidates = o.candidates ?? 4;
  const name = o.name ?? 'nemesis';
  const locks = Array.from({ length: nLocks }, (_, i) => `${name}-l${i}`);
  const events = new Map<string, ClientEvent[]>(locks.map((l) => [l, []]));
  const pool = bed.jumpPool;
  const podName = (lock: string, c: number): string => `${lock}-c${c}`;
  const identity = (s: Slot, lock: string): string => `${podName(lock, s.index)}/${s.uids.get(lock) ?? ''}`;
  let incarnations = 0;
  /** holders: per lock, the identity of the last grant a client reported. */
  const holders = new Map<string, string>();

  /** attach makes w the slot's process and joins every lock as the slot's current pods. */
  const attach = async (s: Slot, w: WorkerHandle): Promise<void> => {
    incarnations++;
    s.worker = w;
    s.offs = locks.map((lock) =>
      w.on(lock, (e) => {
        const c = clientEvent(e);
        if (c === undefined) return;
        events.get(lock)?.push(c);
        if (c.kind === 'granted') holders.set(lock, c.holder);
      }),
    );
    await Promise.all(
      locks.map(async (lock) => {
        const joined = w.waitFor(lock, (e) => e.kind === 'joined' || e.kind === 'failed', 30_000, 'joined');
        w.send({
          cmd: 'join',
          trial: lock,
          lock,
          namespace: bed.t.namespace,
          pod: podName(lock, s.index),
          uid: s.uids.get(lock) ?? '',
          fenced: o.fenced ?? true,
          dataPrefix: trialPrefix(lock),
          thinkMs: THINK_MS,
          intervalMs: INTERVAL_MS,
        });
        const e = await joined;
        if (e.kind === 'failed') throw new Error(`worker ${w.id} failed to join ${lock}: ${e.detail ?? ''}`);
      }),
    );
  };
  const createPods = async (s: Slot): Promise<void> => {
    await Promise.all(
      locks.map(async (lock) => {
        const pod = await createPod(bed.t, podName(lock, s.index), { app: lock });
        s.uids.set(lock, pod.metadata?.uid ?? '');
      }),
    );
  };

  const holds = new Map<string, { n: number; off: () => void }>();
  const slots: Slot[] = [];
  const env: NemesisEnv = {
    bed,
    leaseSeconds: o.leaseSeconds,
    hold(key, on, off) {
      const h = holds.get(key);
      if (h !== undefined) h.n++;
      else {
        holds.set(key, { n: 1, off });
        on();
      }
      let released = false;
      return () => {
        const x = holds.get(key);
        if (released || x === undefined) return;
        released = true;
        if (--x.n === 0) {
          holds.delete(key);
          x.off();
        }
      };
    },
    replace(c) {
      const s = slots[c.index] as Slot;
      const run = s.replacing.then(async () => {
        const old = s.worker;
        const at = old.kill();
        for (const lock of locks) events.get(lock)?.push({ kind: 'killed', at, holder: identity(s, lock) });
        await Promise.race([old.exited, sleep(10_000)]);
        for (const off of s.offs) off();
        await pool.give(old);
        // The new incarnation: same pod names, new uids (the old ones' terms must never be inherited).
        await Promise.all(
          locks.map((lock) =>
            bed.t.core
              .deleteNamespacedPod({ namespace: bed.t.namespace, name: podName(lock, s.index), gracePeriodSeconds: 0 })
              .catch(() => undefined),
          ),
        );
        await createPods(s);
        await attach(s, await pool.borrow());
      });
      s.replacing = run.catch(() => undefined);
      return run;
    },
  };

  const accepted = (lock: string, since: number): boolean =>
    (events.get(lock) ?? []).some((e) => e.kind === 'outcome' && e.result === 'accepted' && e.at >= since);
  const waitAll = async (since: number, timeoutMs: number): Promise<boolean> => {
    const deadline = performance.now() + timeoutMs;
    while (!locks.every((l) => accepted(l, since))) {
      if (performance.now() > deadline) return false;
      await sleep(50);
    }
    return true;
  };

  const injected: InjectedFault[] = [];
  let startAt = performance.now();
  let healAt: number;
  let endAt: number;
  let recovered = false;
  let setupError: string | undefined;
  try {
    const workers = await Promise.all(Array.from({ length: nCandidates }, () => pool.borrow()));
    for (const [index, worker] of workers.entries())
      slots.push({ index, worker, uids: new Map(), offs: [], replacing: Promise.resolve() });
    await Promise.all(
      slots.map(async (s) => {
        await createPods(s);
        await attach(s, s.worker);
      }),
    );
    await Promise.all(
      locks.map((lock) => createLock(bed.t, lockBody(lock, lock, { leaseDurationSeconds: o.leaseSeconds }))),
    );
    if (!(await waitAll(0, 60_000)))
      throw new Error('not every lock had an accepted write within 60 s of its creation');
    startAt = performance.now();

    // The nemesis phase: start each scheduled fault on time, without waiting for earlier ones.
    const schedule = nemesisSchedule({
      seed: o.seed,
      durationMs: o.durationMs,
      intervalMs: o.intervalMs,
      candidates: nCandidates,
      locks: nLocks,
      leaseMs,
      kinds,
    });
    log(`nemesis: ${schedule.length} faults scheduled over ${Math.round(o.durationMs / 1000)} s (seed ${o.seed})`);
    const inflight: Promise<void>[] = [];
    const run = async (f: ScheduledFault): Promise<void> => {
      const kind = kinds.find((k) => k.kind === f.kind) as NemesisFault;
      const lock = f.holderOf !== undefined ? locks[f.holderOf] : undefined;
      const holder = lock !== undefined ? holders.get(lock) : undefined;
      const s =
        lock !== undefined && holder !== undefined
          ? (slots.find((x) => identity(x, lock) === holder) ?? slots[f.candidate ?? 0])
          : f.candidate !== undefined
            ? slots[f.candidate]
            : undefined;
      const t0 = performance.now();
      let error: string | undefined;
      log(
        `nemesis: +${Math.round((t0 - startAt) / 1000)} s ${f.kind} ${f.variant}${s !== undefined ? ` on candidate ${s.index} (${s.worker.id}${lock !== undefined ? `, holder of ${lock}` : ''})` : ''}${f.durationMs > 0 ? ` for ${f.durationMs} ms` : ''}`,
      );
      try {
        await kind.inject(env, s, f);
      } catch (err) {
        error = err instanceof Error ? err.message : String(err);
        log(`nemesis: ${f.kind} #${f.index} failed: ${error}`);
      }
      injected.push({
        index: f.index,
        kind: f.kind,
        variant: f.variant,
        candidate: s?.index,
        holderOf: lock,
        plannedAtMs: f.atMs,
        startMs: Math.round(t0 - startAt),
        endMs: Math.round(performance.now() - startAt),
        ...(error !== undefined ? { error } : {}),
      });
    };
    for (const f of schedule) {
      await sleep(Math.max(0, startAt + f.atMs - performance.now()));
      inflight.push(run(f));
    }
    await sleep(Math.max(0, startAt + o.durationMs - performance.now()));
    await Promise.all(inflight);
  } catch (err) {
    setupError = err instanceof Error ? err.message : String(err);
    log(`nemesis: ${setupError}`);
  } finally {
    // The healing final phase: whatever is still in effect ends now.
    await Promise.all(slots.map((s) => s.replacing));
    for (const h of holds.values()) h.off();
    holds.clear();
    for (const s of slots) {
      s.worker.signal('SIGCONT');
      s.worker.apiProxy.heal();
      s.worker.storeProxy.heal();
      writeFileSync(bed.clockFile(s.worker.id), '+0\n');
    }
    healAt = performance.now();
    if (setupError === undefined) {
      recovered = await waitAll(healAt, o.recoveryTimeoutMs ?? 120_000);
      log(
        `nemesis: healed; every lock ${recovered ? `had an accepted write ${Math.round(performance.now() - healAt)} ms later` : 'did NOT recover within the bound'}`,
      );
    }
    endAt = performance.now();
    await Promise.all(
      slots.map(async (s) => {
        const w = s.worker;
        await Promise.all(
          locks.map(async (lock) => {
            const left = w.waitFor(lock, (e) => e.kind === 'left', 10_000, 'left').catch(() => undefined);
            w.send({ cmd: 'leave', trial: lock, release: false });
            await left;
          }),
        );
        for (const off of s.offs) off();
        await pool.give(w);
      }),
    );
  }

  await sleep(200); // the MONITOR stream trails the clients' acknowledgements slightly
  const perLock: LockOutcome[] = [];
  const violations: Record<Invariant, number> = { S1: 0, S2: 0, S3: 0, S4: 0, S5: 0, S6: 0, H: 0 };
  const dualBeliefMs: number[] = [];
  for (const lock of locks) {
    const clients = events.get(lock) ?? [];
    const report = checkHistory({
      lock,
      leaseDurationMs: leaseMs,
      leases: await bed.leases.versions(lock),
      clients,
      store: bed.storeLog.applies(lock),
      finalStore: await readFinalStore(bed.storeClient, lock),
    });
    for (const v of report.violations) violations[v.invariant]++;
    dualBeliefMs.push(...report.dualBelief.map((d) => d.ms));
    perLock.push({
      lock,
      ok: report.ok,
      violations: report.violations.map((v) => `${v.invariant}: ${v.message}`),
      counts: report.counts,
      dualBelief: stat(report.dualBelief.map((d) => d.ms)),
      liveness: lockLiveness(clients, startAt, healAt, endAt),
    });
    void deleteLock(bed.t, lock).catch(() => undefined);
  }
  const recoveries = perLock.map((l) => l.liveness.recoveryMs);
  return {
    seed: o.seed,
    leaseSeconds: o.leaseSeconds,
    durationMs: o.durationMs,
    intervalMs: o.intervalMs,
    locks: nLocks,
    candidates: nCandidates,
    ok: perLock.every((l) => l.ok),
    violations,
    faults: injected.sort((a, b) => a.index - b.index),
    faultsByKind: tallyFaults(
      injected.map((f) => ({ kind: f.kind, variant: f.variant, startAt: f.startMs, endAt: f.endMs })),
    ),
    maxConcurrentFaults: maxOverlap(injected),
    perLock,
    recoveryMs: recovered && recoveries.every((r) => r !== undefined) ? Math.round(Math.max(...recoveries)) : null,
    livenessBoundMs: livenessBoundMs(leaseMs, o.reconcileMs ?? 1000),
    failoverMs: stat(perLock.flatMap((l) => l.liveness.failoversMs)),
    dualBelief: stat(dualBeliefMs),
    workerIncarnations: incarnations,
    controllerRestarts: bed.controllerRestarts,
    wallMs: Math.round(performance.now() - began),
    ...(setupError !== undefined ? { setupError } : {}),
  };
}

/** maxOverlap: the most intervals [startMs, max(endMs, startMs + 1)) in effect at one time. */
export function maxOverlap(faults: readonly { startMs: number; endMs: number }[]): number {
  const edges = faults
    .flatMap(
      (f) =>
        [
          [f.startMs, 1],
          [Math.max(f.endMs, f.startMs + 1), -1],
        ] as const,
    )
    .sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let n = 0;
  let max = 0;
  for (const [, d] of edges) {
    n += d;
    max = Math.max(max, n);
  }
  return max;
}
