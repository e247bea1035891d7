/**
 * One safety trial: a fresh lock with two candidate pods (A older than B, so A is granted first),
 * each served by a real worker process; one fault of the trial's type, with its kind and timing
 * drawn from the trial's seed; then the history is collected and checked.
 *
 * The trial waits for progress (a write accepted with a token above the faulted holder's), never
 * for a fixed time, and every wait is bounded. A trial that cannot make progress in time is
 * reported as `stuck` (a liveness finding, not a safety one), with its history still checked.
 */
import { writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLock, createPod, deleteLock, getLease, lockBody, setPodStatus } from '../support/fixtures.ts';
import { LOCK_LABEL, leaseName } from '../../src/protocol/names.ts';
import { mulberry32 } from '../support/prng.ts';
import { checkHistory, type TrialReport } from './checker.ts';
import { apiserverFault } from './faults/apiserver-trial.ts';
import type { OutageObservation } from './faults/apiserver.ts';
import type { Admission } from './faults/outage-scheduler.ts';
import type { ClientEvent, LeaseVersion } from './history.ts';
import { readFinalStore, trialPrefix } from './recorders.ts';
import { activeSplit } from './faults/controller-split.ts';
import { activeShardMove } from './faults/shard-move.ts';
import { startLaggingReplica } from './faults/redis-failover.ts';
import type { SafetyBed } from './testbed.ts';
import type { StampedOutput, WorkerHandle, WorkerPool } from './workers.ts';
import { apiErrors } from './faults/api-errors.ts';
import { checkMultiKey, multiKey, readFinalKeys } from './faults/multi-key.ts';
import { checkCoTenant, coTenant, coTenantLockSpec } from './faults/co-tenant.ts';
import { watchDelay } from './faults/watch-delay.ts';
import { runIdFleet } from './faults/run-id-fleet.ts';
import { execHandover, execTree } from './faults/exec-tree.ts';
import { nodeLoss } from './faults/node-loss.ts';
import {
  semaphoreFault,
  semaphoreLockSpec,
  semaphoreShape,
  semaphoreWorkload,
  type SemaphoreShape,
} from './faults/semaphore.ts';
import { checkSemaphore, peakBelievers } from './semaphore-check.ts';
import { handover, handoverOverlap } from './faults/handover.ts';

/** FAULT_TYPES: one per row of the fault table; `none` is the fault-free control. */
export const FAULT_TYPES = [
  'none',
  'pause',
  'pause-grant',
  'kill',
  'partition',
  'store-delay',
  'identity-reuse',
  'redis',
  'controller-kill',
  'clock',
  'apiserver',
  'api-errors',
  'watch-delay',
  'controller-split',
  'shard-move',
  'lease-delete',
  'run-id-fleet',
  'multi-key',
  'co-tenant',
  'exec-tree',
  'node-loss',
  'semaphore',
  'handover',
  'exec-handover',
] as const;
export type FaultType = (typeof FAULT_TYPES)[number];

/**
 * CALIBRATIONS: the ways a run can be weakened to prove the suite fails (`--calibrate`, docs/safety.md
 * "Calibration"); each names the protection removed.
 */
export const CALIBRATIONS = [
  'guard',
  'floor',
  'lost-marker',
  'no-recheck',
  'key-scope',
  'status-floor',
  'wedge',
  'child-only',
  'phase-proof',
  'permits',
  'no-drain',
] as const;
export type Calibration = (typeof CALIBRATIONS)[number];

/** TrialSpec: which trial, with which seed, under which fault. */
export interface TrialSpec {
  readonly id: string;
  readonly seed: number;
  readonly fault: FaultType;
  readonly leaseSeconds: number;
  /** fenced: false for the guard calibration (plain SETs). */
  readonly fenced: boolean;
  /**
   * calibrate: how the run is weakened; `lost-marker`: the lease-delete fault also creates the
   * new Lease itself, at once and without the `Lost` marker, as the controller did before it
   * waited out a deleted Lease's term (the suite must then count early grants); `child-only`: the
   * exec-tree trials run an exec that signals only its direct child (faults/child-only-exec.ts);
   * `phase-proof`: the bed's controller takes a pod's phase Failed as proof (node-loss); `no-drain`:
   * the exec-handover trials run an exec deaf to planned handovers (faults/no-drain-exec.ts).
   */
  readonly calibrate?: Calibration;
}

/** TrialResult: the checker's report plus what the fault did and the liveness figures. */
export interface TrialResult {
  readonly spec: TrialSpec;
  readonly variant: string;
  readonly report: TrialReport;
  /** faultMs: the fault's duration (0 for instantaneous faults). */
  readonly faultMs: number;
  /** failoverMs: fault start → a new term's first grant reported by its holder. */
  readonly failoverMs: number | undefined;
  /** stepDownMs: fault start → the faulted holder reported the loss (partition, clock). */
  readonly stepDownMs: number | undefined;
  /** outage: the `apiserver` fault's observation (variant, D, kept or stepped down, the formula's prediction). */
  readonly outage?: OutageObservation;
  /** missedStepDown: API errors outlasted the holder's renew deadline and it did not report the loss (api-errors). */
  readonly missedStepDown?: boolean | undefined;
  /** resumedAfterLoss: times a client reported `granted` again for a token it had reported `lost` (same term re-confirmed). */
  readonly resumedAfterLoss?: number;
  /** injected: the fault was applied (false when set-up failed before it: such a trial counts as not run). */
  readonly injected: boolean;
  /** stuck: the trial made no progress after the fault within its bound, or failed before it. */
  readonly stuck: string | undefined;
  readonly wallMs: number;
  /** counters: fault-specific figures (controller-split: grants by a replica that was not the leader). */
  readonly counters?: Readonly<Record<string, number>>;
}

/** THINK_MS, INTERVAL_MS: the workers' check → write gap and their pause between writes. */
export const THINK_MS = 60;
export const INTERVAL_MS = 100;

/** clientEvent turns a worker's stamped output into a history event (undefined for protocol-only lines). */
export function clientEvent(e: StampedOutput): ClientEvent | undefined {
  const token = e.token !== undefined ? BigInt(e.token) : undefined;
  switch (e.kind) {
    case 'granted':
    case 'renewed':
    case 'lost':
    case 'released':
      return token !== undefined
        ? { kind: e.kind, at: e.at, holder: e.holder, token, ...(e.reason !== undefined ? { reason: e.reason } : {}) }
        : undefined;
    case 'attempt':
      return token !== undefined && e.writeId !== undefined
        ? {
            kind: 'attempt',
            at: e.at,
            holder: e.holder,
            token,
            writeId: e.writeId,
            afterValidUntil: e.afterValidUntil === true,
          }
        : undefined;
    case 'outcome':
      return token !== undefined && e.writeId !== undefined && e.result !== undefined
        ? {
            kind: 'outcome',
            at: e.at,
            holder: e.holder,
            token,
            writeId: e.writeId,
            result: e.result,
            ...(e.detail !== undefined ? { detail: e.detail } : {}),
          }
        : undefined;
    default:
      return undefined;
  }
}

/** Ctx is what a fault script works with. */
export class Ctx {
  readonly events: ClientEvent[] = [];
  readonly workers: WorkerHandle[] = [];
  readonly #offs: (() => void)[] = [];
  readonly #borrowed: { w: WorkerHandle; pool: WorkerPool }[] = [];
  /** #actedAt: per worker, when it last reported a write outcome or a loss. */
  readonly #actedAt = new Map<WorkerHandle, number>();
  readonly bed: SafetyBed;
  readonly spec: TrialSpec;
  readonly rnd: () => number;
  constructor(bed: SafetyBed, spec: TrialSpec, rnd: () => number) {
    this.bed = bed;
    this.spec = spec;
    this.rnd = rnd;
  }

  get leaseMs(): number {
    return this.spec.leaseSeconds * 1000;
  }
  uniform(lo: number, hi: number): number {
    return lo + (hi - lo) * this.rnd();
  }
  pick<T>(xs: readonly T[]): T {
    return xs[Math.floor(this.rnd() * xs.length) % xs.length] as T;
  }

  record(e: StampedOutput): void {
    const c = clientEvent(e);
    if (c !== undefined) this.events.push(c);
  }

  /** join borrows a worker and starts a session on the trial's lock as pod/uid. */
  async join(pool: WorkerPool, pod: string, uid: string): Promise<WorkerHandle> {
    const w = await pool.borrow();
    this.#borrowed.push({ w, pool });
    this.workers.push(w);
    this.#offs.push(
      w.on(this.spec.id, (e) => {
        this.record(e);
        if (e.kind === 'outcome' || e.kind === 'lost') this.#actedAt.set(w, e.at);
      }),
    );
    const joined = w.waitFor(this.spec.id, (e) => e.kind === 'joined' || e.kind === 'failed', 30_000, 'joined');
    w.send({
      cmd: 'join',
      trial: this.spec.id,
      lock: this.spec.id,
      namespace: this.bed.t.namespace,
      pod,
      uid,
      fenced: this.spec.fenced,
      dataPrefix: trialPrefix(this.spec.id),
      thinkMs: THINK_MS,
      intervalMs: INTERVAL_MS,
      ...(this.spec.fault === 'multi-key'
        ? { workload: 'multi-key', keyScope: this.spec.calibrate === 'key-scope' ? 'key' : 'lock' }
        : this.spec.fault === 'semaphore'
          ? semaphoreWorkload(this.leaseMs)
          : {}),
    });
    const e = await joined;
    if (e.kind === 'failed') throw new Error(`worker ${w.id} failed to join: ${e.detail ?? ''}`);
    return w;
  }

  /** next resolves with the next event of worker w (any worker when undefined) that matches. */
  next(
    w: WorkerHandle | undefined,
    match: (e: StampedOutput) => boolean,
    timeoutMs: number,
    what: string,
  ): Promise<{ w: WorkerHandle; e: StampedOutput }> {
    const ws = w !== undefined ? [w] : this.workers;
    return new Promise((resolveNext, reject) => {
      const offs: (() => void)[] = [];
      const done = (): void => {
        clearTimeout(timer);
        for (const off of offs) off();
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`no ${what} within ${timeoutMs} ms`));
      }, timeoutMs);
      for (const x of ws)
        offs.push(
          x.on(this.spec.id, (e) => {
            if (match(e)) {
              done();
              resolveNext({ w: x, e });
            }
          }),
        );
    });
  }

  /** progress waits for a write accepted with a token above `above`; returns false on timeout. */
  async progress(above: bigint, timeoutMs = 30_000): Promise<boolean> {
    const seen = this.events.some((e) => e.kind === 'outcome' && e.result === 'accepted' && e.token > above);
    if (seen) return true;
    try {
      await this.next(
        undefined,
        (e) => e.kind === 'outcome' && e.result === 'accepted' && e.token !== undefined && BigInt(e.token) > above,
        timeoutMs,
        `write accepted above token ${above}`,
      );
      return true;
    } catch {
      return false;
    }
  }

  /** settle gives a process resumed after `since` the time to act on its stale belief (a write outcome or a loss), unless it already has. */
  async settle(w: WorkerHandle, since: number, ms = 3000): Promise<void> {
    if ((this.#actedAt.get(w) ?? -Infinity) >= since) return;
    await this.next(w, (e) => e.kind === 'outcome' || e.kind === 'lost', ms, 'attempt or loss').catch(() => undefined);
  }

  firstGrantAbove(token: bigint, since: number): number | undefined {
    const g = this.events.find((e) => e.kind === 'granted' && e.token > token && e.at >= since);
    return g !== undefined ? g.at - since : undefined;
  }

  /**
   * handOff: the holder's pod stops being a candidate (unready) and its worker leaves, releasing
   * the lock, so the next grant goes to a candidate that is still running (trials with three pods).
   */
  async handOff(w: WorkerHandle, holder: string): Promise<void> {
    await setPodStatus(this.bed.t, holder.split('/')[0] ?? '', 'unready').catch(() => undefined);
    w.send({ cmd: 'leave', trial: this.spec.id, release: true });
  }

  /** note records a fault on a holder, now or at `at` (a kill's instant: WorkerHandle.kill). */
  note(kind: 'paused' | 'resumed' | 'killed', holder: string, at = performance.now()): void {
    this.events.push({ kind, at, holder });
  }

  async leaveAll(): Promise<void> {
    await Promise.all(
      this.#borrowed.map(async ({ w }) => {
        if (!w.alive()) return;
        w.signal('SIGCONT');
        w.apiProxy.heal();
        w.storeProxy.heal();
        w.httpProxy?.heal();
        const left = w.waitFor(this.spec.id, (e) => e.kind === 'left', 10_000, 'left').catch(() => undefined);
        w.send({ cmd: 'leave', trial: this.spec.id, release: false });
        await left;
      }),
    );
    for (const off of this.#offs) off();
    await Promise.all(this.#borrowed.map(({ w, pool }) => pool.give(w)));
  }
}

/** Holder is the first holder of the trial's lock. */
export interface Holder {
  readonly w: WorkerHandle;
  readonly id: string;
  readonly token: bigint;
  readonly pod: string;
}

/** FaultOutcome: what a fault script reports back. */
export interface FaultOutcome {
  variant: string;
  faultMs: number;
  startAt: number;
  above: bigint;
  resumed?: WorkerHandle;
  resumedAt?: number;
  stepDownMs?: number;
  missedStepDown?: boolean;
  outage?: OutageObservation;
  /** tally computes the trial's counters from its Lease history. */
  tally?: (leases: readonly LeaseVersion[]) => Record<string, number>;
  /** counters: fault-specific figures the script measured itself. */
  counters?: Record<string, number>;
}

type Script = (ctx: Ctx, h: Holder, other: WorkerHandle) => Promise<FaultOutcome>;

/**
 * nextCheck waits for the next check of whoever holds the lock now (under load the first holder
 * may have lost it meanwhile) and returns that holder: the fault then acts on it.
 */
async function nextCheck(ctx: Ctx): Promise<Holder> {
  const { w, e } = await ctx.next(undefined, (x) => x.kind === 'check', 15_000, 'check');
  return { w, id: e.holder, token: BigInt(e.token ?? '0'), pod: e.holder.split('/')[0] ?? '' };
}

/** stopAt SIGSTOPs the holder when `point` comes (check-write, during-renew, random); returns whom it stopped. */
async function stopAt(ctx: Ctx, first: Holder, point: string): Promise<Holder> {
  let h = first;
  if (point === 'check-write') {
    h = await nextCheck(ctx);
  } else if (point === 'during-renew') {
    // The API traffic is TLS: the first client→server bytes after arming are a request in flight
    // (a renew, in steady state; the watch sends nothing after its request).
    await new Promise<void>((r) => {
      const off = h.w.apiProxy.onClientData(() => {
        off();
        r();
      });
      setTimeout(() => {
        off();
        r();
      }, 5000).unref();
    });
  } else {
    await sleep(ctx.uniform(0, ctx.leaseMs));
  }
  h.w.signal('SIGSTOP');
  ctx.note('paused', h.id);
  return h;
}

const scripts: Record<Exclude<FaultType, 'pause-grant' | 'clock' | 'apiserver'>, Script> = {
  async none(_ctx, h) {
    await sleep(500);
    return { variant: 'none', faultMs: 0, startAt: performance.now(), above: h.token - 1n };
  },
  async pause(ctx, first) {
    const point = ctx.pick(['check-write', 'during-renew', 'random']);
    const ms = ctx.uniform(0.5, 3) * ctx.leaseMs;
    const h = await stopAt(ctx, first, point);
    const startAt = performance.now();
    await sleep(ms);
    h.w.signal('SIGCONT');
    ctx.note('resumed', h.id);
    return {
      variant: point,
      faultMs: ms,
      startAt,
      above: ms > ctx.leaseMs ? h.token : h.token - 1n,
      resumed: h.w,
      resumedAt: performance.now(),
    };
  },
  async kill(ctx, first) {
    const point = ctx.pick(['check-write', 'random']);
    let h = first;
    if (point === 'check-write') h = await nextCheck(ctx);
    else await sleep(ctx.uniform(0, ctx.leaseMs));
    ctx.note('killed', h.id, h.w.kill());
    return { variant: point, faultMs: 0, startAt: performance.now(), above: h.token };
  },
  async partition(ctx, h) {
    await sleep(ctx.uniform(0, ctx.leaseMs / 2));
    const ms = ctx.uniform(1, 3) * ctx.leaseMs;
    const lost = ctx.next(h.w, (e) => e.kind === 'lost', ms, 'lost').catch(() => undefined);
    h.w.apiProxy.blackhole();
    const startAt = performance.now();
    const l = await lost;
    await sleep(Math.max(0, startAt + ms - performance.now()));
    h.w.apiProxy.heal();
    return {
      variant: 'blackhole',
      faultMs: ms,
      startAt,
      above: h.token,
      resumed: h.w,
      ...(l !== undefined ? { stepDownMs: l.e.at - startAt } : {}),
    };
  },
  async ['store-delay'](ctx) {
    // Hold this holder's store traffic from its next check (its write waits in the proxy) and cut
    // it off from the API server so the lock moves on; release the held write after the successor wrote.
    const h = await nextCheck(ctx);
    h.w.storeProxy.blackhole();
    h.w.apiProxy.blackhole();
    const startAt = performance.now();
    const ms = ctx.uniform(1, 3) * ctx.leaseMs;
    await ctx.progress(h.token, 30_000);
    await sleep(Math.max(0, startAt + ms - performance.now()));
    h.w.storeProxy.heal();
    await ctx.next(h.w, (e) => e.kind === 'outcome', 5000, 'delayed write outcome').catch(() => undefined);
    h.w.apiProxy.heal();
    return { variant: 'hold-store-bytes', faultMs: performance.now() - startAt, startAt, above: h.token, resumed: h.w };
  },
  async ['identity-reuse'](ctx) {
    const h = await nextCheck(ctx);
    h.w.signal('SIGSTOP');
    ctx.note('paused', h.id);
    const startAt = performance.now();
    await ctx.bed.t.core.deleteNamespacedPod({ namespace: ctx.bed.t.namespace, name: h.pod, gracePeriodSeconds: 0 });
    const again = await createPod(ctx.bed.t, h.pod, { app: ctx.spec.id });
    await ctx.join(ctx.bed.pool, h.pod, again.metadata?.uid ?? '');
    await ctx.progress(h.token, 30_000);
    const ms = Math.max(ctx.uniform(1, 2) * ctx.leaseMs, performance.now() - startAt);
    await sleep(Math.max(0, startAt + ms - performance.now()));
    h.w.signal('SIGCONT');
    ctx.note('resumed', h.id);
    return {
      variant: 'same-name-new-uid',
      faultMs: ms,
      startAt,
      above: h.token,
      resumed: h.w,
      resumedAt: performance.now(),
    };
  },
  async redis(ctx, h) {
    const variant = ctx.pick([
      'del',
      'expire',
      'flushall',
      'restart-empty',
      'crash',
      'failover-lagging-replica',
    ] as const);
    if (variant === 'failover-lagging-replica') return await failoverToLaggingReplica(ctx, h);
    const key = `fencepost:fence:${ctx.bed.t.namespace}/${ctx.spec.id}`;
    const startAt = performance.now();
    if (variant === 'del' || variant === 'expire') {
      const client = ctx.bed.counter.client();
      client.on('error', () => undefined);
      try {
        if (variant === 'del') await client.del(key);
        else await client.pexpire(key, 1);
      } finally {
        client.disconnect();
      }
    } else {
      await ctx.bed.exclusive(async () => {
        const c = ctx.bed.counter; // now: a failover may have replaced it
        if (variant === 'flushall') await c.flushAll();
        else if (variant === 'restart-empty') await c.restart({ loseData: true });
        else await c.crash();
      });
    }
    // Hand over now, so that the next token is drawn from the damaged counter.
    const released = h.w.waitFor(ctx.spec.id, (e) => e.kind === 'left', 10_000, 'left').catch(() => undefined);
    h.w.send({ cmd: 'leave', trial: ctx.spec.id, release: true });
    await released;
    return { variant, faultMs: 0, startAt, above: h.token };
  },
  ['lease-delete']: leaseDelete,
  ['run-id-fleet']: runIdFleet,
  ['multi-key']: (ctx, h, other) => multiKey(ctx, h, other, scripts),
  ['co-tenant']: coTenant,
  ['exec-tree']: (ctx, h) => execTree(ctx, h),
  ['exec-handover']: execHandover,
  ['node-loss']: nodeLoss,
  semaphore: (ctx, h, other) => semaphoreFault(ctx, h, other, scripts),
  handover,
  ['api-errors']: apiErrors,
  ['watch-delay']: watchDelay,
  async ['controller-kill'](ctx, h) {
    const wanted = ctx.pick(['between-incr-and-lease', 'during-handoff'] as const);
    let variant: string = wanted;
    const key = `fencepost:fence:${ctx.bed.t.namespace}/${ctx.spec.id}`;
    const proxy = ctx.bed.counterProxy;
    let startAt = performance.now();
    // One kill serves every trial of its round (see killTogether); this trial's part is its handoff.
    await ctx.bed.killTogether(wanted === 'between-incr-and-lease' ? 'hold-counter-replies' : 'plain', async () => {
      startAt = performance.now();
      if (wanted === 'between-incr-and-lease') {
        // The counter's replies are held now: once this lock's token script has left for Redis
        // (it runs there), the grant cannot reach its Lease write before the kill.
        const sent = new Promise<boolean>((r) => {
          const off = proxy.onClientData((chunk) => {
            if (chunk.toString('latin1').includes(key)) {
              off();
              r(true);
            }
          });
          setTimeout(() => {
            off();
            r(false);
          }, 5000).unref();
        });
        h.w.send({ cmd: 'leave', trial: ctx.spec.id, release: true });
        // Labelled by what happened: a token request that never left makes it a kill mid-handoff.
        if (!(await sent)) variant = 'during-handoff (token not requested in 5 s)';
      } else {
        h.w.send({ cmd: 'leave', trial: ctx.spec.id, release: true });
        await sleep(ctx.uniform(0, 300));
      }
    });
    return { variant, faultMs: 0, startAt, above: h.token };
  },
  async ['controller-split'](ctx, h) {
    const split = activeSplit(ctx.bed);
    if (split === undefined)
      throw new Error('controller-split trials run in their own phase (runTrials starts the two replicas)');
    // A third candidate, so that there is a second handoff to make when the old leader comes back.
    const c = await createPod(ctx.bed.t, `${ctx.spec.id}-c`, { app: ctx.spec.id });
    await ctx.join(ctx.bed.pool, `${ctx.spec.id}-c`, c.metadata?.uid ?? '');
    const ticket = await split.join(ctx.rnd);
    const startAt = await ticket.stopped;
    // First handoff while the leader is paused or cut off: only a takeover can grant it.
    await sleep(ctx.uniform(0, 500));
    const granted = ctx.next(
      undefined,
      (e) => e.kind === 'granted' && BigInt(e.token ?? '0') > h.token,
      60_000,
      'a grant during the split',
    );
    granted.catch(() => undefined);
    await ctx.handOff(h.w, h.id);
    await ticket.resuming;
    // Second handoff as the old leader comes back believing it leads.
    const second = await granted;
    await ctx.handOff(second.w, second.e.holder);
    await ticket.done;
    return {
      variant: ticket.variant,
      faultMs: ticket.faultMs,
      startAt,
      above: BigInt(second.e.token ?? '0'),
      tally: (leases) => split.tally(leases),
    };
  },
  async ['shard-move'](ctx) {
    const mv = activeShardMove(ctx.bed);
    if (mv === undefined)
      throw new Error('shard-move trials run in their own phase (runTrials starts the three replicas)');
    // As controller-split: a third candidate, for a second handoff when the faulted replica comes back.
    const c = await createPod(ctx.bed.t, `${ctx.spec.id}-c`, { app: ctx.spec.id });
    await ctx.join(ctx.bed.pool, `${ctx.spec.id}-c`, c.metadata?.uid ?? '');
    const lockKey = `${ctx.bed.t.namespace}/${ctx.spec.id}`;
    const ticket = await mv.join(ctx.rnd, lockKey);
    const startAt = await ticket.stopped;
    // First handoff while the shard's owner is gone, paused or cut off: only a shard move grants it
    // (or the owner itself, when this lock's shard is held by another replica). By whoever holds
    // the lock now: the wait for the event may outlast the first holder's term (a 1 s lease on a
    // loaded machine), and a handoff by a pod that no longer holds would leave the lock held.
    await sleep(ctx.uniform(0, 500));
    const now = await nextCheck(ctx);
    const granted = ctx.next(
      undefined,
      (e) => e.kind === 'granted' && BigInt(e.token ?? '0') > now.token,
      60_000,
      'a grant during the shard move',
    );
    granted.catch(() => undefined);
    await ctx.handOff(now.w, now.id);
    await ticket.resuming;
    // Second handoff as the faulted replica comes back (resumed, healed, or joining again).
    const second = await granted;
    await ctx.handOff(second.w, second.e.holder);
    await ticket.done;
    return {
      variant: ticket.variant,
      faultMs: ticket.faultMs,
      startAt,
      above: BigInt(second.e.token ?? '0'),
      tally: (leases) => mv.tally(lockKey, leases),
    };
  },
};

/**
 * lease-delete: the holder is cut off from the API server (it cannot see what happens next), then
 * someone deletes the lock's Lease — once, twice (again while the controller waits out the lost
 * term), or deletes the lock and applies it again at once. No grant may come before the cut-off
 * holder has stepped down: the counter `grantedBeforeStepDown` must stay 0 (a dual belief here is
 * the protocol's fault, not a pause's).
 */
async function leaseDelete(ctx: Ctx, h: Holder): Promise<FaultOutcome> {
  const variant = ctx.pick(['delete-lease', 'delete-lease-twice', 'delete-and-reapply-lock'] as const);
  const { t } = ctx.bed;
  const deleteLease = (): Promise<unknown> =>
    t.leases.deleteNamespacedLease({ namespace: t.namespace, name: leaseName(ctx.spec.id) }).catch(() => undefined);
  // The holder's pod stops being a candidate (a rollout is replacing it), so that the next grant
  // goes to the other pod, which can see it at once; the holder keeps its term meanwhile.
  await setPodStatus(t, h.pod, 'unready').catch(() => undefined);
  await sleep(ctx.uniform(0, ctx.leaseMs / 2));
  const lost = ctx.next(h.w, (e) => e.kind === 'lost', 10 * ctx.leaseMs, 'lost').catch(() => undefined);
  h.w.apiProxy.blackhole();
  const startAt = performance.now();
  if (ctx.spec.calibrate === 'lost-marker') {
    // Delete the Lease and put a plain one in its place; when the controller's (marked Lost) wins
    // the race, delete that one too and try again, so that the calibration always removes the marker.
    for (let i = 0; i < 20; i++) {
      await deleteLease();
      const made = await t.leases
        .createNamespacedLease({
          namespace: t.namespace,
          body: { metadata: { name: leaseName(ctx.spec.id), labels: { [LOCK_LABEL]: ctx.spec.id } }, spec: {} },
        })
        .then(
          () => true,
          () => false,
        );
      if (made) break;
    }
  } else if (variant === 'delete-lease') {
    await deleteLease();
  } else if (variant === 'delete-lease-twice') {
    await deleteLease();
    for (let i = 0; i < 50 && (await getLease(t, ctx.spec.id)) === undefined; i++) await sleep(100);
    await sleep(ctx.uniform(0, ctx.leaseMs / 2));
    await deleteLease();
  } else {
    await deleteLock(t, ctx.spec.id).catch(() => undefined);
    const body = lockBody(ctx.spec.id, ctx.spec.id, { leaseDurationSeconds: ctx.spec.leaseSeconds });
    // `kubectl apply` in a loop: refused (AlreadyExists) while the old lock is still terminating.
    for (let i = 0; i < 300; i++) {
      try {
        await createLock(t, body);
        break;
      } catch {
        await sleep(100);
      }
    }
  }
  const l = await lost;
  await ctx.progress(h.token, 30_000);
  h.w.apiProxy.heal();
  // Early: when the successor reported its grant, the cut-off holder still believed — its last
  // report before that moment (from the recorded history, whatever the subscription above saw) was
  // a grant or a renewal of the old term, not a loss or a release.
  const grant = ctx.events.find((e) => e.kind === 'granted' && e.token > h.token && e.at >= startAt);
  const holderBefore = (at: number): ClientEvent | undefined =>
    ctx.events
      .filter((e) => e.holder === h.id && e.at <= at && ['granted', 'renewed', 'lost', 'released'].includes(e.kind))
      .sort((x, y) => x.at - y.at)
      .at(-1);
  const last = grant !== undefined ? holderBefore(grant.at) : undefined;
  const early = last !== undefined && (last.kind === 'granted' || last.kind === 'renewed') ? 1 : 0;
  return {
    variant,
    faultMs: performance.now() - startAt,
    startAt,
    above: h.token,
    resumed: h.w,
    ...(l !== undefined ? { stepDownMs: l.e.at - startAt } : {}),
    counters: { grantedBeforeStepDown: early },
  };
}

/**
 * Failover to a lagging replica: a replica of the counter is cut off, the next grant draws its
 * token from the primary alone, then the primary dies and the replica (missing that INCR) is
 * promoted; the grant after that must still be above every token issued. A third candidate C is
 * joined so that there is a grant after the failover.
 */
async function failoverToLaggingReplica(ctx: Ctx, h: Holder): Promise<FaultOutcome> {
  const c = await createPod(ctx.bed.t, `${ctx.spec.id}-c`, { app: ctx.spec.id });
  await ctx.join(ctx.bed.pool, `${ctx.spec.id}-c`, c.metadata?.uid ?? '');
  const replica = await ctx.bed.exclusive(() => startLaggingReplica(ctx.bed.counter));
  const startAt = performance.now();
  let second: { w: WorkerHandle; e: StampedOutput };
  try {
    const granted = ctx.next(
      undefined,
      (e) => e.kind === 'granted' && BigInt(e.token ?? '0') > h.token,
      30_000,
      'a grant after the replication cut',
    );
    await ctx.handOff(h.w, h.id);
    second = await granted;
  } catch (err) {
    await replica.discard();
    throw err;
  }
  await ctx.bed.exclusive(async () => {
    await replica.promote(ctx.bed.counter);
    ctx.bed.replaceCounter(replica.server);
  });
  // Hand over again: this token comes from the promoted replica.
  await ctx.handOff(second.w, second.e.holder);
  return { variant: 'failover-lagging-replica', faultMs: 0, startAt, above: BigInt(second.e.token ?? '0') };
}

async function pauseGrant(ctx: Ctx, a: WorkerHandle, aId: string): Promise<FaultOutcome> {
  // A is paused before its lock exists: the controller grants it while it cannot see the grant.
  a.signal('SIGSTOP');
  ctx.note('paused', aId);
  await createLock(ctx.bed.t, lockBody(ctx.spec.id, ctx.spec.id, { leaseDurationSeconds: ctx.spec.leaseSeconds }));
  const startAt = performance.now();
  const ms = ctx.uniform(0.5, 3) * ctx.leaseMs;
  await sleep(ms);
  a.signal('SIGCONT');
  ctx.note('resumed', aId);
  return {
    variant: ms > ctx.leaseMs ? 'resumed-after-lease' : 'resumed-within-lease',
    faultMs: ms,
    startAt,
    above: 0n,
    resumed: a,
    resumedAt: performance.now(),
  };
}

/**
 * mixSeed scrambles a seed (murmur3's finalizer): mulberry32's first outputs for adjacent seeds
 * are correlated, and trials use adjacent seeds (base + i).
 */
export function mixSeed(seed: number): number {
  let h = seed >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) >>> 0;
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35) >>> 0;
  return (h ^ (h >>> 16)) >>> 0;
}

/**
 * CLOCK_SPECS: libfaketime settings for the clock trials, on the holder: wall-clock steps of ±10
 * minutes taken mid-run (monotonic clock untouched, as an NTP step), and rate skew from the start
 * (both clocks run at half or double speed; half speed is beyond the L/R tolerance).
 */
export const CLOCK_SPECS = ['step +600', 'step -600', 'rate +0 x0.5', 'rate +0 x2'] as const;

/**
 * resumedAfterLoss counts `granted` reports for a (holder, token) that the same holder had reported
 * `lost` before: the session stepped down at its deadline, then re-confirmed the very same term
 * (the Lease still named it, and its compare-and-swap renew succeeded) instead of waiting for a new
 * grant with a new token. Not a fencing violation (no other term came between: the renew is a CAS),
 * but a step-down must be final (a new term needs a new token): the session has refused to take an
 * ended term up again since it was seen in the soak, and CI and the soak require 0.
 */
export function resumedAfterLoss(events: readonly ClientEvent[]): number {
  const lost = new Set<string>();
  let n = 0;
  for (const e of events) {
    if (e.kind !== 'lost' && e.kind !== 'granted') continue;
    const key = `${e.holder}#${e.token}`;
    if (e.kind === 'lost') lost.add(key);
    else if (lost.has(key)) n++;
  }
  return n;
}

/** handoverChecked: the usual checker, plus the handover's overlap counter (faults/handover.ts). */
function handoverChecked(
  history: Parameters<typeof checkHistory>[0],
  events: readonly ClientEvent[],
): { report: TrialReport; counters: Record<string, number> } {
  const report = checkHistory(history);
  return { report, counters: { handoverOverlap: handoverOverlap(report.dualBelief, events) } };
}

/** runTrial runs one trial on the bed and checks its history. Never throws for a fault's effect. */
export async function runTrial(bed: SafetyBed, spec: TrialSpec): Promise<TrialResult> {
  const began = performance.now();
  const ctx = new Ctx(bed, spec, mulberry32(mixSeed(spec.seed)));
  let outcome: FaultOutcome | undefined;
  let stuck: string | undefined;
  const clockSpec = spec.fault === 'clock' ? ctx.pick(CLOCK_SPECS) : undefined;
  const shape: SemaphoreShape | undefined = spec.fault === 'semaphore' ? semaphoreShape(ctx) : undefined;
  // apiserver: the trial sets up only while no shared outage is gathered or running (outage-scheduler.ts).
  const outages = spec.fault === 'apiserver' ? bed.outages : undefined;
  let admission: Admission | undefined;
  try {
    if (spec.fault === 'apiserver') {
      if (outages === undefined)
        throw new Error('the apiserver fault needs a bed that owns its control plane (startSafetyBed({ plane }))');
      admission = await outages.admit();
    }
    const a = await createPod(bed.t, `${spec.id}-a`, { app: spec.id });
    const b = await createPod(bed.t, `${spec.id}-b`, { app: spec.id });
    const aId = `${spec.id}-a/${a.metadata?.uid ?? ''}`;
    const poolB = spec.fault === 'api-errors' ? bed.httpPool : bed.pool;
    const poolA =
      clockSpec === undefined
        ? poolB
        : clockSpec.startsWith('rate ')
          ? bed.skewedPool(clockSpec.slice(5))
          : bed.jumpPool;
    const wa = await ctx.join(poolA, `${spec.id}-a`, a.metadata?.uid ?? '');
    const wb = await ctx.join(poolB, `${spec.id}-b`, b.metadata?.uid ?? '');
    if (shape !== undefined)
      for (let i = 2; i < shape.candidates; i++) {
        const pod = `${spec.id}-${String.fromCharCode(97 + i)}`;
        const p = await createPod(bed.t, pod, { app: spec.id });
        await ctx.join(bed.pool, pod, p.metadata?.uid ?? '');
      }
    if (spec.fault === 'pause-grant') {
      outcome = await pauseGrant(ctx, wa, aId);
    } else {
      await createLock(
        bed.t,
        lockBody(spec.id, spec.id, {
          leaseDurationSeconds: spec.leaseSeconds,
          ...(spec.fault === 'co-tenant' ? coTenantLockSpec(ctx) : {}),
          ...(shape !== undefined ? semaphoreLockSpec(shape) : {}),
        }),
      );
      const first = await ctx.next(undefined, (e) => e.kind === 'granted', 60_000, 'first grant');
      const h: Holder = {
        w: first.w,
        id: first.e.holder,
        token: BigInt(first.e.token ?? '0'),
        pod: first.e.holder.split('/')[0] ?? '',
      };
      await ctx.next(undefined, (e) => e.kind === 'outcome' && e.result === 'accepted', 15_000, 'first accepted write');
      const other = h.w === wa ? wb : wa;
      if (spec.fault === 'clock') {
        // A stepped clock: step the holder's wall clock now. Then the holder is cut off from the API
        // server, so its belief ends by its own (stepped or skewed) clock alone.
        if (clockSpec?.startsWith('step ') === true && h.w === wa)
          writeFileSync(bed.clockFile(wa.id), `${clockSpec.slice(5)}\n`);
        outcome = {
          ...(await scripts.partition(ctx, h, other)),
          variant: `${clockSpec ?? ''}${h.w === wa ? '' : ' (not the holder)'} + blackhole`,
        };
      } else if (spec.fault === 'apiserver') {
        if (outages === undefined || admission === undefined) throw new Error('apiserver: not admitted');
        const r = await apiserverFault(ctx, outages, admission);
        outcome = {
          variant: r.observation.variant,
          faultMs: r.endAt - r.startAt,
          startAt: r.startAt,
          above: r.above,
          outage: r.observation,
          ...(r.observation.lostAfterMs !== undefined ? { stepDownMs: r.observation.lostAfterMs } : {}),
        };
      } else {
        outcome = await scripts[spec.fault](ctx, h, other);
      }
    }
    if (!(await ctx.progress(outcome.above, 30_000)))
      stuck = `no write accepted above token ${outcome.above} within 30 s of the fault`;
    if (outcome.resumed !== undefined) await ctx.settle(outcome.resumed, outcome.resumedAt ?? outcome.startAt);
  } catch (err) {
    stuck = err instanceof Error ? err.message : String(err);
  } finally {
    if (admission !== undefined) outages?.leave(admission);
    // A clock file that cannot be reset (its worker is gone with its folder) must not end the run.
    if (clockSpec?.startsWith('step ') === true)
      for (const w of ctx.workers)
        if (w.id.startsWith('jump'))
          try {
            writeFileSync(bed.clockFile(w.id), '+0\n');
          } catch {
            /* see above */
          }
    await ctx.leaveAll();
  }
  await sleep(200); // the MONITOR stream trails the clients' acknowledgements slightly
  const history = {
    lock: spec.id,
    leaseDurationMs: ctx.leaseMs,
    leases: await bed.leases.versions(spec.id),
    clients: ctx.events,
    store: bed.storeLog.applies(spec.id),
    finalStore: await readFinalStore(bed.storeClient, spec.id),
  };
  // multi-key, co-tenant and semaphore trials have checks of their own (faults/multi-key.ts,
  // faults/co-tenant.ts, semaphore-check.ts).
  const checked =
    spec.fault === 'multi-key'
      ? checkMultiKey(history, await readFinalKeys(bed.storeClient, spec.id))
      : spec.fault === 'co-tenant'
        ? checkCoTenant(ctx, history)
        : spec.fault === 'handover'
          ? handoverChecked(history, ctx.events)
          : shape !== undefined
            ? {
                report: checkSemaphore(history, shape.permits),
                // How many trials had every permit held at once (the bound was exercised, not just kept).
                counters: { allPermitsHeldAtOnce: peakBelievers(ctx.events, ctx.leaseMs) >= shape.permits ? 1 : 0 },
              }
            : undefined;
  const report = checked?.report ?? checkHistory(history);
  const tallied = outcome?.tally?.(history.leases);
  const counters =
    tallied !== undefined || outcome?.counters !== undefined || checked !== undefined
      ? { ...tallied, ...outcome?.counters, ...checked?.counters }
      : undefined;
  void deleteLock(bed.t, spec.id).catch(() => undefined);
  const startAt = outcome?.startAt ?? began;
  return {
    spec,
    variant: outcome?.variant ?? '(not reached)',
    report,
    injected: outcome !== undefined,
    faultMs: Math.round(outcome?.faultMs ?? 0),
    failoverMs: spec.fault === 'none' ? undefined : ctx.firstGrantAbove(outcome?.above ?? 0n, startAt),
    stepDownMs: outcome?.stepDownMs,
    missedStepDown: outcome?.missedStepDown,
    resumedAfterLoss: resumedAfterLoss(ctx.events),
    stuck,
    wallMs: performance.now() - began,
    ...(outcome?.outage !== undefined ? { outage: outcome.outage } : {}),
    ...(counters !== undefined ? { counters } : {}),
  };
}
