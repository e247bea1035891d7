/**
 * The `apiserver` fault inside one trial: the holder is holding and writing; the trial joins the
 * next shared outage of the control plane (outage-scheduler.ts), records the holder's validity
 * deadlines from its reports, and after the outage waits for the holder to either renew the same
 * term (it kept the lock) or report `lost` (it stepped down); then, if it stepped down, for the
 * successor's first accepted write.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { ClientEvent } from '../history.ts';
import type { StampedOutput, WorkerHandle } from '../workers.ts';
import { drawPlan, observe, type OutageObservation, type OutagePlan } from './apiserver.ts';
import type { Admission, OutageScheduler } from './outage-scheduler.ts';

/** OutageTrial is what the script needs of a trial (trial.ts's Ctx). */
export interface OutageTrial {
  readonly spec: { readonly id: string };
  readonly events: readonly ClientEvent[];
  readonly leaseMs: number;
  pick<T>(xs: readonly T[]): T;
  uniform(lo: number, hi: number): number;
  progress(above: bigint, timeoutMs?: number): Promise<boolean>;
}

/** OutageHolder: the trial's holder when it joins. */
export interface OutageHolder { readonly w: WorkerHandle; readonly token: bigint }

/** OutageResult: the outage's times and the trial's observation of it. */
export interface OutageResult { readonly startAt: number; readonly endAt: number; readonly observation: OutageObservation; readonly above: bigint }

/** renewDeadlineOf: the lock's R at the trials' lease (resolveTimings' default: two thirds of L). */
export function renewDeadlineOf(leaseMs: number): number { return Math.floor((leaseMs * 2) / 3); }

/** apiserverFault runs the trial's part of a shared control-plane outage. */
export async function apiserverFault(t: OutageTrial, h: OutageHolder, scheduler: OutageScheduler<OutagePlan>, admission: Admission): Promise<OutageResult> {
  const plan = drawPlan((xs) => t.pick(xs));
  const R = renewDeadlineOf(t.leaseMs);
  const deadlines: { at: number; until: number }[] = [];
  let lostAt: number | undefined;
  let endAt = Infinity;
  let renewedAfterEnd = false;
  const off = h.w.on(t.spec.id, (e: StampedOutput) => {
    if (e.token === undefined || BigInt(e.token) !== h.token) return;
    if ((e.kind === 'granted' || e.kind === 'renewed') && e.expiresInMs !== undefined) {
      deadlines.push({ at: e.at, until: e.at + e.expiresInMs });
      if (e.at > endAt && lostAt === undefined) renewedAfterEnd = true;
    }
    if (e.kind === 'lost' || e.kind === 'released') lostAt ??= e.at;
  });
  try {
    // Start from a known deadline, at a seeded phase of the renew period (other trials of the same
    // outage are at whatever phase they happen to be).
    await h.w.waitFor(t.spec.id, (e) => e.kind === 'renewed' && e.token === h.token.toString(), 5000, 'renew before the outage').catch(() => undefined);
    await sleep(t.uniform(0, R / 2));
    const outage = await scheduler.join(admission, plan);
    endAt = outage.endAt;
    renewedAfterEnd ||= deadlines.some((d) => d.at > outage.endAt);
    if (lostAt === undefined && !renewedAfterEnd) {
      await h.w.waitFor(t.spec.id, (e) => e.token === h.token.toString() && (e.kind === 'lost' || e.kind === 'released' || (e.kind === 'renewed' && e.at > outage.endAt)), R + 5000, 'renew or loss after the outage').catch(() => undefined);
    }
    const steppedDown = lostAt !== undefined && lostAt >= outage.startAt;
    if (steppedDown) await t.progress(h.token, 30_000);
    const grant = steppedDown ? t.events.find((e) => e.kind === 'granted' && e.token > h.token && e.at >= outage.startAt) : undefined;
    const observation = observe(outage, { deadlines, lostAt, renewedAfterEnd }, R, grant?.at);
    return { startAt: outage.startAt, endAt: outage.endAt, observation, above: steppedDown ? h.token : h.token - 1n };
  } finally {
    off();
  }
}
