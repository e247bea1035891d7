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
  next(w: WorkerHandle | undefined, match: (e: StampedOutput) => boolean, timeoutMs: number, what: string): Promise<{ w: WorkerHandle; e: StampedOutput }>;
}

/** OutageHolder: the trial's holder when it joins. */
interface OutageHolder { readonly w: WorkerHandle; readonly token: bigint }

/** OutageResult: the outage's times and the trial's observation of it. */
export interface OutageResult { readonly startAt: number; readonly endAt: number; readonly observation: OutageObservation; readonly above: bigint }

/** renewDeadlineOf: the lock's R at the trials' lease (resolveTimings' default: two thirds of L). */
export function renewDeadlineOf(leaseMs: number): number { return Math.floor((leaseMs * 2) / 3); }

/** apiserverFault runs the trial's part of a shared control-plane outage. */
export async function apiserverFault(t: OutageTrial, scheduler: OutageScheduler<OutagePlan>, admission: Admission): Promise<OutageResult> {
  const plan = drawPlan((xs) => t.pick(xs));
  const R = renewDeadlineOf(t.leaseMs);
  // Whoever holds the lock now (under load the first holder may have lost it during set-up).
  const now = await t.next(undefined, (e) => e.kind === 'check', 15_000, 'check before the outage');
  const h: OutageHolder = { w: now.w, token: BigInt(now.e.token ?? '0') };
  const deadlines: { at: number; until: number }[] = [];
  const losses: number[] = [];
  let startAt = Infinity;
  let endAt = Infinity;
  let renewedAfterEnd = false;
  const off = h.w.on(t.spec.id, (e: StampedOutput) => {
    if (e.token === undefined || BigInt(e.token) !== h.token) return;
    if ((e.kind === 'granted' || e.kind === 'renewed') && e.expiresInMs !== undefined) {
      deadlines.push({ at: e.at, until: e.at + e.expiresInMs });
      if (e.at > endAt && !losses.some((t) => t >= startAt)) renewedAfterEnd = true;
    }
    if (e.kind === 'lost' || e.kind === 'released') losses.push(e.at);
  });
  try {
    // Start from a known deadline, at a seeded phase of the renew period (other trials of the same
    // outage are at whatever phase they happen to be).
    await h.w.waitFor(t.spec.id, (e) => e.kind === 'renewed' && e.token === h.token.toString(), 5000, 'renew before the outage').catch(() => undefined);
    await sleep(t.uniform(0, R / 2));
    const outage = await scheduler.join(admission, plan);
    startAt = outage.startAt;
    endAt = outage.endAt;
    const lostSinceStart = (): boolean => losses.some((x) => x >= outage.startAt);
    renewedAfterEnd ||= !lostSinceStart() && deadlines.some((d) => d.at > outage.endAt);
    if (!lostSinceStart() && !renewedAfterEnd) {
      await h.w.waitFor(t.spec.id, (e) => e.token === h.token.toString() && (e.kind === 'lost' || e.kind === 'released' || (e.kind === 'renewed' && e.at > outage.endAt)), R + 5000, 'renew or loss after the outage').catch(() => undefined);
    }
    const steppedDown = lostSinceStart();
    if (steppedDown) await t.progress(h.token, 30_000);
    const grant = steppedDown ? t.events.find((e) => e.kind === 'granted' && e.token > h.token && e.at >= outage.startAt) : undefined;
    const observation = observe(outage, { deadlines, losses, renewedAfterEnd }, R, grant?.at);
    if (process.env['DBG_OUTAGE'] !== undefined && !observation.holding) console.log('DBG', t.spec.id, JSON.stringify({ start: outage.startAt, end: outage.endAt, losses, deadlines: deadlines.slice(-4), token: h.token.toString(), w: h.w.id, evs: t.events.filter((e) => e.kind !== 'attempt' && e.kind !== 'outcome').slice(-6).map((e) => `${e.kind}@${Math.round(e.at)} ${'token' in e ? String(e.token) : ''}`) }));
    return { startAt: outage.startAt, endAt: outage.endAt, observation, above: steppedDown ? h.token : h.token - 1n };
  } finally {
    off();
  }
}
