/**
 * handover: a planned handover of the trial's lock to the other candidate, as
 * `kubectl fencepost handover` asks for it (the lock's request annotation, made against the
 * holder's token), with a drain period of 0 or 1 s, alone or with a fault while the holder drains:
 *
 * - `clean`: nothing else; the successor must be granted (counter `handedOver`).
 * - `pause-drain`: the holder is SIGSTOPped once it starts draining, for U[0.5, 3] L, then resumed.
 * - `partition-drain`: the holder's API traffic is blackholed once it drains, for U[1, 3] L.
 * - `store-delay-drain`: the holder's next write is held in its store proxy from the drain on, and
 *   let through after the successor wrote (the guard must refuse it: S3).
 * - `kill-target`: the target's worker is SIGKILLed once the holder drains (the grant then goes to
 *   a pod nobody runs; its lease expires and the lock moves on).
 * - `stale-request`: the request names the token before the holder's (a stale `kubectl` view): it
 *   must be refused and nothing handed over (counter `staleHandedOver`: a handover mark on the
 *   Lease in its history, must be 0; `staleOtherGrant` counts other grants meanwhile, for information);
 *   the holder then leaves so that the trial makes progress.
 *
 * Besides S1–S5 (checker.ts) the trial counts `handoverOverlap`: windows over OVERLAP_SLACK_MS in
 * which both pods believed and neither had been paused — a planned handover ends the old belief
 * before the release is written and grants only after the release, so this must be 0.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { askHandover } from '../../support/fixtures.ts';
import type { ClientEvent } from '../history.ts';
import type { DualBelief } from '../checker.ts';
import { OVERLAP_SLACK_MS } from '../semaphore-check.ts';
import type { WorkerHandle } from '../workers.ts';
import type { Ctx, FaultOutcome, Holder } from '../trial.ts';

/** HANDOVER_VARIANTS: what a handover trial draws. */
export const HANDOVER_VARIANTS = [
  'clean',
  'pause-drain',
  'partition-drain',
  'store-delay-drain',
  'kill-target',
  'stale-request',
] as const;

/** handover runs one handover trial's script on holder h, the other pod's worker being `other`. */
export async function handover(ctx: Ctx, h: Holder, other: WorkerHandle): Promise<FaultOutcome> {
  const variant = ctx.pick(HANDOVER_VARIANTS);
  const drainSeconds = ctx.pick([0, 1] as const);
  const target = h.pod.endsWith('-a') ? `${ctx.spec.id}-b` : `${ctx.spec.id}-a`;
  const startAt = performance.now();
  const label = `${variant} (drain ${drainSeconds} s)`;
  if (variant === 'stale-request') {
    await askHandover(ctx.bed.t, ctx.spec.id, target, h.token - 1n, { drainSeconds, by: 'safety-suite' });
    // Long enough for the controller to answer and for a wrong handover to show.
    await sleep(drainSeconds * 1000 + 2 * ctx.leaseMs);
    // Moved by the request, or about to be: the controller marked the Lease for a handover (only
    // its mark makes an agent drain and the next grant go to the target).
    const versions = await ctx.bed.leases.versions(ctx.spec.id);
    const moved = versions.some((v) => v.handoverMark !== undefined);
    // Any other grant meanwhile (informational: the holder lost or let go of the lock on its own).
    const otherGrant = ctx.events.some((e) => e.kind === 'granted' && e.token > h.token);
    const left = h.w.waitFor(ctx.spec.id, (e) => e.kind === 'left', 10_000, 'left').catch(() => undefined);
    h.w.send({ cmd: 'leave', trial: ctx.spec.id, release: true });
    await left;
    return {
      variant: label,
      faultMs: 0,
      startAt,
      above: h.token,
      counters: { staleHandedOver: moved ? 1 : 0, staleOtherGrant: otherGrant ? 1 : 0 },
    };
  }
  const draining = ctx
    .next(h.w, (e) => e.kind === 'draining', drainSeconds * 1000 + 15_000, 'draining')
    .catch(() => undefined);
  const granted = ctx
    .next(
      undefined,
      (e) => e.kind === 'granted' && BigInt(e.token ?? '0') > h.token,
      drainSeconds * 1000 + 30_000,
      'the successor granted',
    )
    .catch(() => undefined);
  await askHandover(ctx.bed.t, ctx.spec.id, target, h.token, { drainSeconds, by: 'safety-suite' });
  const d = await draining;
  const faultAt = performance.now();
  let faultMs = 0;
  let resumed: WorkerHandle | undefined;
  let resumedAt: number | undefined;
  if (d !== undefined) {
    if (variant === 'pause-drain') {
      h.w.signal('SIGSTOP');
      ctx.note('paused', h.id);
      faultMs = ctx.uniform(0.5, 3) * ctx.leaseMs;
      await sleep(faultMs);
      h.w.signal('SIGCONT');
      ctx.note('resumed', h.id);
      resumed = h.w;
      resumedAt = performance.now();
    } else if (variant === 'partition-drain') {
      h.w.apiProxy.blackhole();
      faultMs = ctx.uniform(1, 3) * ctx.leaseMs;
      await sleep(faultMs);
      h.w.apiProxy.heal();
      resumed = h.w;
    } else if (variant === 'store-delay-drain') {
      h.w.storeProxy.blackhole();
      await ctx.progress(h.token, 30_000);
      h.w.storeProxy.heal();
      await ctx.next(h.w, (e) => e.kind === 'outcome', 5000, 'delayed write outcome').catch(() => undefined);
      faultMs = performance.now() - faultAt;
      resumed = h.w;
    } else if (variant === 'kill-target') {
      other.kill(); // before its grant: it never believed, so there is no belief to close
    }
  }
  const g = await granted;
  // The Lease watch records the controller's mark (so that the stale-request check is not vacuous).
  const marked = (await ctx.bed.leases.versions(ctx.spec.id)).some((v) => v.handoverMark !== undefined);
  return {
    variant: `${label}${d === undefined ? ' (no drain seen)' : ''}`,
    faultMs,
    startAt,
    above: h.token,
    ...(resumed !== undefined ? { resumed } : {}),
    ...(resumedAt !== undefined ? { resumedAt } : {}),
    counters: {
      handedOver: g !== undefined && g.e.holder.startsWith(`${target}/`) ? 1 : 0,
      drainSeen: d !== undefined ? 1 : 0,
      markSeen: marked ? 1 : 0,
    },
  };
}

/**
 * handoverOverlap counts dual-belief windows longer than OVERLAP_SLACK_MS in which neither holder
 * had been paused before the window ended: a planned handover must never make two believers.
 */
export function handoverOverlap(windows: readonly DualBelief[], events: readonly ClientEvent[]): number {
  const pausedBy = (holder: string, at: number): boolean =>
    events.some((e) => e.kind === 'paused' && e.holder === holder && e.at <= at);
  return windows.filter(
    (w) => w.ms > OVERLAP_SLACK_MS && !pausedBy(w.holders[0], w.toMs) && !pausedBy(w.holders[1], w.toMs),
  ).length;
}
