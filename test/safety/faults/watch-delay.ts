/**
 * The `watch-delay` fault: the controller decides on a stale informer cache. The bed's controller
 * reaches the API server through an HTTP fault proxy (`bed.controllerApi`); while any trial of this
 * phase runs, every event of the controller's watches (Leases, Pods, DistributedLocks) is delivered
 * U[0, 2L] late, in order. Each trial then hands its lock over — the holder releases it, or is
 * SIGKILLed — so the controller's next grant is decided while its cache lags the Lease by up to 2L.
 * The delay is on the shared controller: one event, many trials (a global fault, its own phase).
 * The per-event delays come from a generator seeded by the trial that switched the delay on.
 *
 * What it shows: S5 (no two terms interleave in the Lease history) and S1–S4 hold — grants are
 * a fresh GET plus a resourceVersion-conditional replace, so a stale cache can delay a grant but
 * not make two.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { mulberry32 } from '../../support/prng.ts';
import type { SafetyBed } from '../testbed.ts';
import type { Ctx, FaultOutcome, Holder } from '../trial.ts';

/** users: how many trials of the phase want the delay on, per bed. */
const users = new WeakMap<SafetyBed, number>();

function acquire(ctx: Ctx): void {
  const n = users.get(ctx.bed) ?? 0;
  if (n === 0) {
    const rnd = mulberry32(Math.floor(ctx.rnd() * 2 ** 32));
    const maxMs = 2 * ctx.leaseMs;
    ctx.bed.controllerApi.watchDelay(() => rnd() * maxMs);
  }
  users.set(ctx.bed, n + 1);
}

function release(bed: SafetyBed): void {
  const n = (users.get(bed) ?? 1) - 1;
  users.set(bed, n);
  if (n === 0) bed.controllerApi.heal();
}

/** watchDelay runs one watch-delay trial's handover under the delayed watch. */
export async function watchDelay(ctx: Ctx, h: Holder): Promise<FaultOutcome> {
  const variant = ctx.pick(['release', 'kill'] as const);
  acquire(ctx);
  try {
    // Let the delay take hold: the holder's renews now reach the controller's cache late.
    await sleep(ctx.uniform(0, ctx.leaseMs));
    const startAt = performance.now();
    if (variant === 'release') {
      const left = h.w.waitFor(ctx.spec.id, (e) => e.kind === 'left', 10_000, 'left').catch(() => undefined);
      h.w.send({ cmd: 'leave', trial: ctx.spec.id, release: true });
      await left;
    } else {
      ctx.note('killed', h.id, h.w.kill());
    }
    // Keep the cache stale until the successor is granted (or the trial's bound passes).
    await ctx.progress(h.token, 30_000);
    return { variant, faultMs: performance.now() - startAt, startAt, above: h.token };
  } finally {
    release(ctx.bed);
  }
}
