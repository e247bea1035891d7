/**
 * The `apiserver` fault (docs/safety.md: API server outages, and restarts of the API server or
 * etcd): outages of the REAL control plane of the safety testbed, shared by every trial that holds
 * its lock at that moment (see outage-scheduler.ts).
 *
 * Variants (seeded), each for a down time D:
 * - `apiserver-hang`: SIGSTOP kube-apiserver for D, then SIGCONT. Connections stay open and
 *   requests get no answer until it runs again (then the pending ones are answered).
 * - `apiserver-restart`: stop kube-apiserver (SIGTERM), wait D, start it on the same port and wait
 *   for /readyz. Requests are refused meanwhile; the real down time is D plus a start (seconds).
 * - `etcd-hang`: SIGSTOP etcd for D: kube-apiserver runs, its storage requests hang.
 * - `etcd-restart`: stop etcd (SIGTERM, SIGKILL after 1 s), wait D, start it on the same ports with
 *   its data; the outage ends when a read through kube-apiserver answers again.
 *
 * What the agent tolerates (read from src/agent/session.ts and resolveTimings in
 * src/api/v1alpha1/distributedlock.ts): a renew sent at t_s and answered is valid until
 * t_s + R; the next renew is sent P·(1 − 0.1·U) after that answer; a failed renew is retried every
 * max(50, min(P/4, 500)) ms (83 ms here); a renew in flight is aborted when the term's validity
 * ends, and then the lock is `lost`. So an outage starting φ after the last renew was sent is
 * ridden out iff the API server answers a renew again before t_s + R, i.e. iff D < R − φ (minus a
 * retry interval when requests are refused rather than hung). With φ anywhere in [0, P):
 *   D < R − P  (333 ms with R = 666, P = 333): the holder always keeps its lock;
 *   D > R      (666 ms): it always steps down, at t_s + R, before the lease L ends (by L − R + φ);
 *   in between it depends on the phase φ.
 * R − P equals the planned downtime tolerance floor(R/P)·P − P whenever R is a multiple of P, as
 * with the defaults (R = 2P). Each trial records its own margin (its validity deadline minus the
 * outage's end, both on the reference clock) and whether it kept the lock; `predict` turns the
 * margin into the formula's answer, with a borderline band where reply latency decides.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { CoreV1Api } from '@kubernetes/client-node';
import { percentile } from '../../../bench/lib.ts';
import type { ControlPlane } from '../../support/testbed/control-plane.ts';
import type { OutageRun, SharedOutage } from './outage-scheduler.ts';

export const OUTAGE_VARIANTS = ['apiserver-hang', 'apiserver-restart', 'etcd-hang', 'etcd-restart'] as const;
export type OutageVariant = (typeof OUTAGE_VARIANTS)[number];

/**
 * HANG_MS: D for the hang variants, on both sides of the tolerance with L = 1 s (R − P = 333 ms,
 * R = 666 ms), up to 2 L and 5 L. RESTART_EXTRA_MS: the extra time a restarted server stays down
 * (a restart alone takes seconds, far past R, so its D is always above the tolerance).
 */
export const HANG_MS = [100, 200, 300, 450, 550, 650, 800, 1000, 2000, 5000] as const;
export const RESTART_EXTRA_MS = [0, 1000] as const;

/** OutagePlan: what one outage does. */
export interface OutagePlan {
  readonly variant: OutageVariant;
  readonly downMs: number;
}

/** drawPlan picks a plan with the trial's seeded pick. */
export function drawPlan(pick: <T>(xs: readonly T[]) => T): OutagePlan {
  const variant = pick(OUTAGE_VARIANTS);
  return { variant, downMs: variant.endsWith('-hang') ? pick(HANG_MS) : pick(RESTART_EXTRA_MS) };
}

/**
 * apiAnswers resolves with the time a read through kube-apiserver first succeeds (bounded): the
 * end of an outage as clients see it (kube-apiserver serves requests before its /readyz says ok).
 */
async function apiAnswers(plane: ControlPlane, timeoutMs: number): Promise<number> {
  const core = plane.kubeConfig().makeApiClient(CoreV1Api);
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    try {
      await core.readNamespace({ name: 'default' });
      return performance.now();
    } catch {
      await sleep(20);
    }
  }
  throw new Error(`kube-apiserver did not answer within ${timeoutMs} ms`);
}

/** runOutage acts on the plane's real processes and returns when the service went away and came back. */
export async function runOutage(plane: ControlPlane, plan: OutagePlan): Promise<OutageRun> {
  const startAt = performance.now();
  switch (plan.variant) {
    case 'apiserver-hang':
    case 'etcd-hang': {
      const p = plan.variant === 'apiserver-hang' ? plane.apiServer.process() : plane.etcd.process();
      p.signal('SIGSTOP');
      try {
        await sleep(plan.downMs);
      } finally {
        p.signal('SIGCONT');
      }
      return { startAt, endAt: performance.now() };
    }
    case 'apiserver-restart': {
      await plane.apiServer.stop();
      await sleep(plan.downMs);
      const [endAt] = await Promise.all([apiAnswers(plane, 120_000), plane.apiServer.start()]);
      return { startAt, endAt };
    }
    case 'etcd-restart': {
      await plane.etcd.stop(1000);
      await sleep(plan.downMs);
      await plane.etcd.start();
      return { startAt, endAt: await apiAnswers(plane, 60_000) };
    }
  }
}

/** Prediction: what the formula says for a trial's margin. */
export type Prediction = 'keep' | 'step-down' | 'borderline';

/**
 * BORDERLINE_MS: within this of its deadline the outcome depends on how fast the first renew after
 * the outage is answered (a retry interval, 83 ms, plus a round trip on a loaded machine).
 */
export const BORDERLINE_MS = 150;

/** predict: keep when the API answers again well before the holder's deadline, step down when after it. */
export function predict(marginMs: number): Prediction {
  if (marginMs > BORDERLINE_MS) return 'keep';
  if (marginMs < 0) return 'step-down';
  return 'borderline';
}

/** OutageObservation is one trial's view of the outage it lived through. */
export interface OutageObservation {
  readonly variant: OutageVariant;
  /** downMs: the planned D; outageMs: the measured down time (start → the API answers again). */
  readonly downMs: number;
  readonly outageMs: number;
  /** seq and trials: which shared outage, and how many trials lived through it. */
  readonly seq: number;
  readonly trials: number;
  /** holding: the holder still held its term when the outage began (else nothing to measure). */
  readonly holding: boolean;
  /** phaseMs: φ, the outage's start minus the last renew's send time (deadline − R). */
  readonly phaseMs: number | undefined;
  /** marginMs: the holder's deadline minus the outage's end (positive: the formula says keep). */
  readonly marginMs: number | undefined;
  readonly predicted: Prediction | undefined;
  readonly observed: 'kept' | 'stepped-down' | 'unknown';
  /** lostAfterMs: outage start → the holder's `lost`; lostVsDeadlineMs: `lost` − its deadline. */
  readonly lostAfterMs: number | undefined;
  readonly lostVsDeadlineMs: number | undefined;
  /** failoverAfterEndMs: the outage's end → the first grant of a larger token (when it stepped down). */
  readonly failoverAfterEndMs: number | undefined;
}

/** HolderTrack is the holder's term as its reports show it: validity deadlines and its loss. */
export interface HolderTrack {
  /** deadlines: (report time, deadline) of each granted/renewed report, on the reference clock. */
  readonly deadlines: readonly { readonly at: number; readonly until: number }[];
  /** losses: times of its `lost`/`released` reports for the term's token (a term may be lost and confirmed again). */
  readonly losses: readonly number[];
  /** renewedAfterEnd: a renew of the same term was reported after the outage ended. */
  readonly renewedAfterEnd: boolean;
}

/** observe turns the outage and the holder's reports into the trial's observation (pure). */
export function observe(
  o: SharedOutage<OutagePlan>,
  track: HolderTrack,
  renewDeadlineMs: number,
  failoverAt: number | undefined,
): OutageObservation {
  const before = track.deadlines.filter((d) => d.at <= o.startAt).at(-1);
  const holding =
    before !== undefined && before.until > o.startAt && !track.losses.some((t) => t >= before.at && t < o.startAt);
  // A loss counts for this outage if it came before the term's first renew after it (a later loss is another story).
  const firstRenewAfterEnd = track.deadlines.find((d) => d.at > o.endAt)?.at ?? Infinity;
  const lostAt = track.losses.find((t) => t >= o.startAt && t < firstRenewAfterEnd);
  const lostInside = lostAt !== undefined;
  const observed = !holding ? 'unknown' : lostInside ? 'stepped-down' : track.renewedAfterEnd ? 'kept' : 'unknown';
  const marginMs = holding ? Math.round(before.until - o.endAt) : undefined;
  return {
    variant: o.plan.variant,
    downMs: o.plan.downMs,
    outageMs: Math.round(o.endAt - o.startAt),
    seq: o.seq,
    trials: o.trials,
    holding,
    phaseMs: holding ? Math.round(o.startAt - (before.until - renewDeadlineMs)) : undefined,
    marginMs,
    predicted: marginMs !== undefined ? predict(marginMs) : undefined,
    observed,
    lostAfterMs: lostInside ? Math.round((lostAt ?? 0) - o.startAt) : undefined,
    lostVsDeadlineMs: lostInside && before !== undefined ? Math.round((lostAt ?? 0) - before.until) : undefined,
    failoverAfterEndMs:
      failoverAt !== undefined && observed === 'stepped-down' ? Math.round(failoverAt - o.endAt) : undefined,
  };
}

/** OutageRow aggregates the observations of one variant and D. */
export interface OutageRow {
  readonly variant: OutageVariant;
  readonly downMs: number;
  readonly trials: number;
  /** outages: distinct shared outages behind these trials. */
  readonly outages: number;
  readonly outageMsMax: number;
  readonly holding: number;
  readonly kept: number;
  readonly steppedDown: number;
  readonly unknown: number;
  readonly predictedKeep: number;
  readonly predictedStepDown: number;
  readonly borderline: number;
  /** matched / decided: non-borderline trials whose behaviour matched the formula, of those decided. */
  readonly matched: number;
  readonly decided: number;
  /** lostVsDeadlineMaxMs: the latest `lost` relative to the holder's own deadline. */
  readonly lostVsDeadlineMaxMs: number | null;
  readonly failoverAfterEnd: {
    readonly n: number;
    readonly p50: number | null;
    readonly p99: number | null;
    readonly max: number | null;
  };
}

/** summarizeOutages groups observations by variant and D, in plan order. */
export function summarizeOutages(obs: readonly OutageObservation[]): OutageRow[] {
  const groups = new Map<string, OutageObservation[]>();
  for (const o of obs) {
    const k = `${o.variant}\t${o.downMs}`;
    groups.set(k, [...(groups.get(k) ?? []), o]);
  }
  const order = (o: OutageObservation): number => OUTAGE_VARIANTS.indexOf(o.variant) * 1e6 + o.downMs;
  return [...groups.values()]
    .sort((a, b) => order(a[0] as OutageObservation) - order(b[0] as OutageObservation))
    .map((g) => {
      const first = g[0] as OutageObservation;
      const held = g.filter((o) => o.holding);
      const decided = held.filter(
        (o) => o.observed !== 'unknown' && (o.predicted === 'keep' || o.predicted === 'step-down'),
      );
      const matched = decided.filter((o) => (o.predicted === 'keep') === (o.observed === 'kept'));
      const fo = g.flatMap((o) => (o.failoverAfterEndMs !== undefined ? [o.failoverAfterEndMs] : []));
      const late = g.flatMap((o) => (o.lostVsDeadlineMs !== undefined ? [o.lostVsDeadlineMs] : []));
      return {
        variant: first.variant,
        downMs: first.downMs,
        trials: g.length,
        outages: new Set(g.map((o) => o.seq)).size,
        outageMsMax: Math.max(...g.map((o) => o.outageMs)),
        holding: held.length,
        kept: held.filter((o) => o.observed === 'kept').length,
        steppedDown: held.filter((o) => o.observed === 'stepped-down').length,
        unknown: held.filter((o) => o.observed === 'unknown').length,
        predictedKeep: held.filter((o) => o.predicted === 'keep').length,
        predictedStepDown: held.filter((o) => o.predicted === 'step-down').length,
        borderline: held.filter((o) => o.predicted === 'borderline').length,
        matched: matched.length,
        decided: decided.length,
        lostVsDeadlineMaxMs: late.length > 0 ? Math.max(...late) : null,
        failoverAfterEnd:
          fo.length === 0
            ? { n: 0, p50: null, p99: null, max: null }
            : {
                n: fo.length,
                p50: Math.round(percentile(fo, 50)),
                p99: Math.round(percentile(fo, 99)),
                max: Math.max(...fo),
              },
      };
    });
}

/** formatOutageTable renders the rows as Markdown (the outage table of docs/safety.md). */
export function formatOutageTable(rows: readonly OutageRow[]): string {
  const head =
    '| variant | D ms | trials (outages) | max down ms | holding | kept | stepped down | unknown | formula: keep / step down / borderline | matched / decided | latest lost − deadline ms | failover after end p50/p99/max ms |';
  const rule = '|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|';
  const ms = (v: number | null): string => (v === null ? '–' : String(v));
  return [
    head,
    rule,
    ...rows.map(
      (r) =>
        `| ${r.variant} | ${r.downMs} | ${r.trials} (${r.outages}) | ${r.outageMsMax} | ${r.holding} | ${r.kept} | ${r.steppedDown} | ${r.unknown} | ${r.predictedKeep} / ${r.predictedStepDown} / ${r.borderline} | ${r.matched} / ${r.decided} | ${ms(r.lostVsDeadlineMaxMs)} | ${r.failoverAfterEnd.n > 0 ? `${ms(r.failoverAfterEnd.p50)} / ${ms(r.failoverAfterEnd.p99)} / ${ms(r.failoverAfterEnd.max)}` : '–'} |`,
    ),
  ].join('\n');
}
