/**
 * The `api-errors` fault (a slow or failing API server): the holder's API requests misbehave at the
 * HTTP level, through the HTTP fault proxy between its worker and the API server (the worker's own,
 * so no other trial is touched). One seeded variant per trial:
 *
 * - `latency`: every request waits U[0, 2R] before it is forwarded, for U[2L, 4L];
 * - `429` / `500` / `503`: every request is answered with that error (429 with Retry-After) for
 *   U[0.25L, 3L], never forwarded;
 * - `409-renew`: every Lease PUT (the renews) is answered 409 Conflict for U[0.25L, 3L], never
 *   forwarded (the session re-reads the Lease, sees itself still the holder, and tries again);
 * - `hung-renew`: every Lease PUT is taken and never answered for U[0.25L, 3L].
 *
 * What it shows: a renew never outlives the term's deadline (the session's own bound), so errors
 * or hung renews that outlast the renew deadline R make the holder report `lost` — counted as a
 * missed step-down otherwise — and the checker's S1/S2 show that no write is accepted with the
 * old token after a successor's. Short faults (< R) may be ridden out.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { RequestInfo } from '../../support/testbed/http-fault-proxy.ts';
import type { Ctx, FaultOutcome, Holder } from '../trial.ts';

export const API_ERROR_VARIANTS = ['latency', '429', '500', '503', '409-renew', 'hung-renew'] as const;

/** STEP_DOWN_GRACE_MS: how long after the heal a `lost` report may still arrive (the worker's event loop and pipe, on a loaded machine). */
const STEP_DOWN_GRACE_MS = 1000;

const isRenew = (r: RequestInfo): boolean => r.method === 'PUT' && r.path.includes('/leases/');

/** apiErrors runs one api-errors trial's fault on the holder. */
export async function apiErrors(ctx: Ctx, h: Holder): Promise<FaultOutcome> {
  const p = h.w.httpProxy;
  if (p === undefined) throw new Error(`api-errors: worker ${h.w.id} has no HTTP fault proxy`);
  const variant = ctx.pick(API_ERROR_VARIANTS);
  // The lock's renew deadline: the default, two thirds of the lease (666 ms at L = 1 s).
  const renewDeadlineMs = Math.floor((ctx.leaseMs * 2) / 3);
  await sleep(ctx.uniform(0, ctx.leaseMs / 2));
  const ms = variant === 'latency' ? ctx.uniform(2, 4) * ctx.leaseMs : ctx.uniform(0.25, 3) * ctx.leaseMs;
  const seed = Math.floor(ctx.rnd() * 2 ** 32);
  let draws = seed;
  // Per-request latency from the trial's seed (a small LCG: the order of requests is the process's, the values are the seed's).
  const nextLatency = (): number => {
    draws = (Math.imul(draws, 1664525) + 1013904223) >>> 0;
    return (draws / 2 ** 32) * 2 * renewDeadlineMs;
  };

  // Was h still holding when the fault began? (Under load it may have lost the lock already.)
  const last = [...ctx.events]
    .reverse()
    .find((e) => e.holder === h.id && (e.kind === 'granted' || e.kind === 'lost' || e.kind === 'released'));
  const holding = last?.kind === 'granted' || last === undefined;
  const lost = ctx.next(h.w, (e) => e.kind === 'lost', ms + STEP_DOWN_GRACE_MS, 'lost').catch(() => undefined);
  const startAt = performance.now();
  switch (variant) {
    case 'latency':
      p.latency(nextLatency);
      break;
    case '429':
    case '500':
    case '503':
      p.errors({ status: Number(variant) as 429 | 500 | 503, forMs: ms, retryAfterSeconds: 1 });
      break;
    case '409-renew':
      p.conflictWrites({ forMs: ms, match: isRenew });
      break;
    case 'hung-renew':
      p.hang(isRenew);
      break;
  }
  await sleep(ms);
  p.heal();
  const l = await lost;
  const outlasts = variant !== 'latency' && ms > renewDeadlineMs;
  return {
    variant: holding ? variant : `${variant} (not holding)`,
    faultMs: ms,
    startAt,
    // Errors past R: the holder must lose this term, so progress means a successor's token.
    above: outlasts && holding ? h.token : h.token - 1n,
    ...(l !== undefined ? { stepDownMs: l.e.at - startAt } : {}),
    ...(holding && variant !== 'latency' ? { missedStepDown: outlasts && l === undefined } : {}),
  };
}
