/**
 * The combined nemesis's schedule (docs/safety.md, the Jepsen-style soak), as a pure function of a
 * seed: when each fault starts, of which kind, on which candidate, with which variant and for how
 * long. The whole plan is drawn before the run starts, so a seed replays the plan (the interleaving
 * with real processes still depends on scheduling, as in every trial).
 *
 * A fault kind is described here only by what the schedule needs (its name, weight, scope and how
 * it draws a variant and a duration); what it does to the processes is in nemesis-faults.ts.
 */
import { mulberry32 } from '../support/prng.ts';
import { mixSeed } from './trial.ts';

/** Draw is the seeded random source a kind draws its variant and duration from. */
export interface Draw {
  /** uniform in [lo, hi). */
  uniform(lo: number, hi: number): number;
  pick<T>(xs: readonly T[]): T;
}

/** FaultPlan is what a kind drew for one injection. */
export interface FaultPlan {
  readonly variant: string;
  readonly durationMs: number;
}

/**
 * FaultKindPlan: the schedule's view of a fault kind. `scope: 'candidate'` acts on one candidate
 * process (the schedule picks which); `'global'` on something every lock shares.
 */
export interface FaultKindPlan {
  readonly kind: string;
  /** weight: relative frequency among the kinds of a run. */
  readonly weight: number;
  readonly scope: 'candidate' | 'global';
  /** plan draws a variant and a duration (0 for an instantaneous fault) for a lease of leaseMs. */
  plan(draw: Draw, leaseMs: number): FaultPlan;
}

/** ScheduledFault is one entry of the schedule. */
export interface ScheduledFault extends FaultPlan {
  readonly index: number;
  /** atMs: start, from the start of the nemesis phase. */
  readonly atMs: number;
  readonly kind: string;
  /** candidate: the target's index, for candidate-scoped kinds. */
  readonly candidate: number | undefined;
  /**
   * holderOf: for about half the candidate-scoped faults, a lock's index: the fault then acts on
   * whoever holds that lock when it starts (falling back to `candidate`), so faults bite holders.
   */
  readonly holderOf: number | undefined;
}

/** ScheduleOptions: how long the nemesis acts, how often, on how many candidates, with which kinds. */
export interface ScheduleOptions {
  readonly seed: number;
  readonly durationMs: number;
  /** intervalMs: the gap between two fault starts is drawn from U[lo, hi). */
  readonly intervalMs: readonly [number, number];
  readonly candidates: number;
  /** locks: how many locks holder-targeted faults choose from (0: target candidates only). */
  readonly locks?: number;
  readonly leaseMs: number;
  readonly kinds: readonly FaultKindPlan[];
}

/** makeDraw wraps a [0, 1) source as a Draw. */
export function makeDraw(rnd: () => number): Draw {
  return {
    uniform: (lo, hi) => lo + (hi - lo) * rnd(),
    pick: <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length) % xs.length] as T,
  };
}

/**
 * nemesisSchedule draws the run's faults: the first after one interval, each next one an interval
 * later, none starting at or after durationMs. Faults may overlap (a fault's duration is not
 * waited for). Pure: the same options give the same schedule.
 */
export function nemesisSchedule(o: ScheduleOptions): ScheduledFault[] {
  const kinds = o.kinds.filter((k) => k.weight > 0);
  if (kinds.length === 0) throw new Error('nemesisSchedule: no fault kind with a positive weight');
  const [lo, hi] = o.intervalMs;
  if (!(lo > 0 && hi >= lo)) throw new Error(`nemesisSchedule: bad interval [${lo}, ${hi}]`);
  if (o.candidates < 1 && kinds.some((k) => k.scope === 'candidate'))
    throw new Error('nemesisSchedule: candidate faults need candidates');
  const rnd = mulberry32(mixSeed(o.seed));
  const draw = makeDraw(rnd);
  const total = kinds.reduce((a, k) => a + k.weight, 0);
  const out: ScheduledFault[] = [];
  for (let at = draw.uniform(lo, hi); at < o.durationMs; at += draw.uniform(lo, hi)) {
    let r = rnd() * total;
    const kind = kinds.find((k) => (r -= k.weight) < 0) ?? kinds.at(-1);
    if (kind === undefined) break;
    const candidate = kind.scope === 'candidate' ? Math.floor(rnd() * o.candidates) % o.candidates : undefined;
    const locks = o.locks ?? 0;
    const holderOf =
      candidate !== undefined && locks > 0 && rnd() < 0.5 ? Math.floor(rnd() * locks) % locks : undefined;
    const p = kind.plan(draw, o.leaseMs);
    out.push({
      index: out.length,
      atMs: Math.round(at),
      kind: kind.kind,
      candidate,
      holderOf,
      variant: p.variant,
      durationMs: Math.round(p.durationMs),
    });
  }
  return out;
}
