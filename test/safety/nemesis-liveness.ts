/**
 * Liveness figures of a nemesis run, from one lock's client events on the reference clock. Pure.
 * Liveness is reported, never asserted beyond a hang-catching bound: the machine's load decides it.
 *
 * - recovery: from the final heal to the first write the store accepted (from any holder) at or
 *   after it: "the lock has a holder whose write was accepted".
 * - gaps: intervals without an accepted write, between consecutive accepted writes and from the
 *   last one to the end of the observation (the lock was unavailable to its users meanwhile).
 * - failovers: at each change of term (a larger token accepted), from the last accepted write of
 *   the previous term to the first accepted write of the new one.
 */
import type { ClientEvent } from './history.ts';

/** LockLiveness: one lock's figures, in milliseconds. */
export interface LockLiveness {
  /** recoveryMs: final heal → first accepted write at or after it; undefined if none came. */
  readonly recoveryMs: number | undefined;
  /** maxGapMs: the longest interval without an accepted write, between the first accepted write and `endAt`. */
  readonly maxGapMs: number;
  /** maxGapAt: where that gap started, from `startAt`. */
  readonly maxGapFromMs: number;
  readonly failoversMs: readonly number[];
  readonly accepted: number;
}

/** acceptedWrites: the accepted outcomes' (time, token), in time order. */
function acceptedWrites(events: readonly ClientEvent[]): { at: number; token: bigint }[] {
  const out: { at: number; token: bigint }[] = [];
  for (const e of events) if (e.kind === 'outcome' && e.result === 'accepted') out.push({ at: e.at, token: e.token });
  return out.sort((a, b) => a.at - b.at);
}

/**
 * lockLiveness computes one lock's figures. `startAt`: the start of the observation (times of gaps
 * are reported from it); `healAt`: the final heal; `endAt`: the end of the observation.
 */
export function lockLiveness(
  events: readonly ClientEvent[],
  startAt: number,
  healAt: number,
  endAt: number,
): LockLiveness {
  const writes = acceptedWrites(events).filter((w) => w.at >= startAt && w.at <= endAt);
  const after = writes.find((w) => w.at >= healAt);
  let maxGapMs = 0;
  let maxGapFromMs = 0;
  const failoversMs: number[] = [];
  let term: bigint | undefined;
  for (let i = 0; i < writes.length; i++) {
    const w = writes[i] as { at: number; token: bigint };
    const next = writes[i + 1];
    const gap = (next?.at ?? endAt) - w.at;
    if (gap > maxGapMs) {
      maxGapMs = gap;
      maxGapFromMs = w.at - startAt;
    }
    if (term !== undefined && w.token > term) failoversMs.push(w.at - (writes[i - 1]?.at ?? w.at));
    if (term === undefined || w.token > term) term = w.token;
  }
  if (writes.length === 0) {
    maxGapMs = endAt - startAt;
    maxGapFromMs = 0;
  }
  return {
    recoveryMs: after !== undefined ? after.at - healAt : undefined,
    maxGapMs: Math.round(maxGapMs),
    maxGapFromMs: Math.round(maxGapFromMs),
    failoversMs: failoversMs.map((x) => Math.round(x)),
    accepted: writes.length,
  };
}

/** FaultTally: per kind, how many faults were injected and their cumulative duration. */
export interface FaultTally {
  readonly count: number;
  readonly totalMs: number;
  readonly variants: Readonly<Record<string, number>>;
}

/** tallyFaults sums injected faults by kind. */
export function tallyFaults(
  faults: readonly { kind: string; variant: string; startAt: number; endAt: number }[],
): Record<string, FaultTally> {
  const out: Record<string, { count: number; totalMs: number; variants: Record<string, number> }> = {};
  for (const f of faults) {
    const t = out[f.kind] ?? (out[f.kind] = { count: 0, totalMs: 0, variants: {} });
    t.count++;
    t.totalMs += Math.max(0, Math.round(f.endAt - f.startAt));
    t.variants[f.variant] = (t.variants[f.variant] ?? 0) + 1;
  }
  return out;
}

/**
 * livenessBoundMs is the documented expectation after a heal, L + R + P + reconcile, for a lock of
 * leaseMs (renew deadline 2/3 L, renew period 1/3 L, the agent's defaults) and a reconcile
 * allowance. Reported next to the measured recovery, not asserted.
 */
export function livenessBoundMs(leaseMs: number, reconcileMs: number): number {
  return Math.round(leaseMs + (2 * leaseMs) / 3 + leaseMs / 3 + reconcileMs);
}
