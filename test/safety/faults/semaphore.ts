/**
 * semaphore: a Semaphore lock with N permits (2 or 3) and N+2 candidates whose workers ask for a
 * permit, write while they hold one (fenced per permit), release after a while and ask again, so
 * that permits change hands throughout the trial. One of the usual faults — a pause, a kill, a
 * partition from the API server or a held store write — hits whichever holder checks next (or
 * nothing: `none`). The history is checked by semaphore-check.ts: S1–S5 per permit, tokens
 * increasing lock-wide, and S6, never more than N believing holders outside pauses.
 */
import type { DistributedLockSpec } from '../../../src/api/v1alpha1/distributedlock.ts';
import type { WorkerHandle } from '../workers.ts';
import type { Ctx, FaultOutcome, Holder } from '../trial.ts';

/** SEMAPHORE_FAULTS: what a semaphore trial draws; `none` keeps the fault-free churn in the mix. */
export const SEMAPHORE_FAULTS = ['none', 'pause', 'partition', 'store-delay', 'kill'] as const;
type Inner = (typeof SEMAPHORE_FAULTS)[number];
type InnerScript = (ctx: Ctx, h: Holder, other: WorkerHandle) => Promise<FaultOutcome>;

/** SemaphoreShape: the permits a trial's lock has and the candidates that compete for them. */
export interface SemaphoreShape {
  readonly permits: number;
  readonly candidates: number;
}

/** semaphoreShape draws the trial's shape from its seed. */
export function semaphoreShape(ctx: Ctx): SemaphoreShape {
  const permits = ctx.pick([2, 3] as const);
  return { permits, candidates: permits + 2 };
}

/** semaphoreLockSpec: the lock a semaphore trial creates. */
export function semaphoreLockSpec(shape: SemaphoreShape): Partial<DistributedLockSpec> {
  return { mode: 'Semaphore', permits: shape.permits };
}

/**
 * semaphoreWorkload: what a semaphore trial's workers are told on joining: hold a permit about 1.5
 * lease durations, ask again about 0.3 of one after releasing (so that some candidates always wait).
 */
export function semaphoreWorkload(leaseMs: number): { workload: 'semaphore'; holdMs: number; gapMs: number } {
  return { workload: 'semaphore', holdMs: Math.round(1.5 * leaseMs), gapMs: Math.round(0.3 * leaseMs) };
}

/**
 * semaphoreFault runs one of SEMAPHORE_FAULTS on the semaphore workload. Progress afterwards means
 * a write accepted with a token above every token granted before the fault ended (other permits'
 * holders may hold larger tokens than the faulted one all along).
 */
export async function semaphoreFault(
  ctx: Ctx,
  h: Holder,
  other: WorkerHandle,
  scripts: Readonly<Record<Inner, InnerScript>>,
): Promise<FaultOutcome> {
  const inner = ctx.pick(ctx.spec.calibrate === 'permits' ? (['none'] as const) : SEMAPHORE_FAULTS);
  const o = await scripts[inner](ctx, h, other);
  // Calibrating, give the over-granting controller a few lease durations of churn to show itself.
  if (ctx.spec.calibrate === 'permits') await new Promise((r) => setTimeout(r, 3 * ctx.leaseMs));
  const highest = ctx.events.reduce((m, e) => (e.kind === 'granted' && e.token > m ? e.token : m), o.above);
  return { ...o, variant: `${inner}/${o.variant}`, above: highest };
}
