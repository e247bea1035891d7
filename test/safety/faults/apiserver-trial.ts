/**
 * The `apiserver` fault inside one trial: once the lock is held and written, the trial joins the
 * next shared outage of the control plane (outage-scheduler.ts). It records every term's validity
 * deadlines from the candidates' reports; after the outage it takes the term that held when the
 * outage began (under load that may not be the first holder, and a trial may wait through another
 * outage before its own) and waits for that holder to either renew the same term (it kept the lock)
 * or report `lost` (it stepped down); then, if it stepped down, for the successor's first accepted
 * write.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { ClientEvent } from '../history.ts';
import type { StampedOutput, WorkerHandle } from '../workers.ts';
import { drawPlan, observe, type HolderTrack, type OutageObservation, type OutagePlan } from './apiserver.ts';
import type { Admission, OutageScheduler } from './outage-scheduler.ts';

/** OutageTrial is what the script needs of a trial (trial.ts's Ctx). */
export interface OutageTrial {
  readonly spec: { readonly id: string };
  readonly events: readonly ClientEvent[];
  readonly workers: readonly WorkerHandle[];
  readonly leaseMs: number;
  pick<T>(xs: readonly T[]): T;
  uniform(lo: number, hi: number): number;
  progress(above: bigint, timeoutMs?: number): Promise<boolean>;
  next(
    w: WorkerHandle | undefined,
    match: (e: StampedOutput) => boolean,
    timeoutMs: number,
    what: string,
  ): Promise<{ w: WorkerHandle; e: StampedOutput }>;
}

/** OutageResult: the outage's times and the trial's observation of it. */
export interface OutageResult {
  readonly startAt: number;
  readonly endAt: number;
  readonly observation: OutageObservation;
  readonly above: bigint;
}

/** renewDeadlineOf: the lock's R at the trials' lease (resolveTimings' default: two thirds of L). */
export function renewDeadlineOf(leaseMs: number): number {
  return Math.floor((leaseMs * 2) / 3);
}

/** Terms tracks each term (holder and token) of a trial from its reports: deadlines and losses. */
export class Terms {
  readonly deadlines = new Map<string, { at: number; until: number }[]>();
  readonly losses = new Map<string, number[]>();
  readonly tokens = new Map<string, bigint>();
  add(e: StampedOutput): void {
    if (e.token === undefined) return;
    const key = `${e.holder}#${e.token}`;
    this.tokens.set(key, BigInt(e.token));
    if ((e.kind === 'granted' || e.kind === 'renewed') && e.expiresInMs !== undefined) {
      this.deadlines.set(key, [...(this.deadlines.get(key) ?? []), { at: e.at, until: e.at + e.expiresInMs }]);
    } else if (e.kind === 'lost' || e.kind === 'released') {
      this.losses.set(key, [...(this.losses.get(key) ?? []), e.at]);
    }
  }
  /** heldAt: the term that held at time t (its last confirmation before t is still valid and not lost since). */
  heldAt(t: number): string | undefined {
    let best: { key: string; at: number } | undefined;
    for (const [key, ds] of this.deadlines) {
      const d = ds.filter((x) => x.at <= t).at(-1);
      if (d === undefined || d.until <= t || (this.losses.get(key) ?? []).some((l) => l >= d.at && l < t)) continue;
      if (best === undefined || d.at > best.at) best = { key, at: d.at };
    }
    return best?.key;
  }
  track(key: string, endAt: number): HolderTrack {
    const losses = this.losses.get(key) ?? [];
    const deadlines = this.deadlines.get(key) ?? [];
    return { deadlines, losses, renewedAfterEnd: deadlines.some((d) => d.at > endAt) };
  }
}

/** apiserverFault runs the trial's part of a shared control-plane outage. */
export async function apiserverFault(
  t: OutageTrial,
  scheduler: OutageScheduler<OutagePlan>,
  admission: Admission,
): Promise<OutageResult> {
  const plan = drawPlan((xs) => t.pick(xs));
  const R = renewDeadlineOf(t.leaseMs);
  const terms = new Terms();
  const offs = t.workers.map((w) =>
    w.on(t.spec.id, (e) => {
      terms.add(e);
    }),
  );
  try {
    // Join at a seeded phase of the holder's renew period (the other trials of the same outage are
    // at whatever phase they happen to be).
    await t.next(undefined, (e) => e.kind === 'renewed', 5000, 'renew before the outage').catch(() => undefined);
    await sleep(t.uniform(0, R / 2));
    const outage = await scheduler.join(admission, plan);
    const key = terms.heldAt(outage.startAt);
    const token = key !== undefined ? (terms.tokens.get(key) ?? 0n) : 0n;
    const holderOf = key?.split('#')[0];
    const settled = (): boolean =>
      key === undefined ||
      terms.track(key, outage.endAt).renewedAfterEnd ||
      (terms.losses.get(key) ?? []).some((l) => l >= outage.startAt);
    if (!settled()) {
      await t
        .next(
          undefined,
          (e) =>
            e.holder === holderOf &&
            e.token === token.toString() &&
            (e.kind === 'lost' || e.kind === 'released' || (e.kind === 'renewed' && e.at > outage.endAt)),
          R + 5000,
          'renew or loss after the outage',
        )
        .catch(() => undefined);
    }
    const track = (): HolderTrack =>
      key !== undefined ? terms.track(key, outage.endAt) : { deadlines: [], losses: [], renewedAfterEnd: false };
    let observation = observe(outage, track(), R, undefined);
    const steppedDown = observation.observed === 'stepped-down';
    if (steppedDown) {
      await t.progress(token, 30_000);
      const grant = t.events.find((e) => e.kind === 'granted' && e.token > token && e.at >= outage.startAt);
      observation = observe(outage, track(), R, grant?.at);
    }
    return { startAt: outage.startAt, endAt: outage.endAt, observation, above: steppedDown ? token : token - 1n };
  } finally {
    for (const off of offs) off();
  }
}
