/**
 * Term timings: how long one holder's term lasts without renewal, by when its holder must have
 * renewed, and how often it renews. The controller fixes them at grant (the Lease's
 * leaseDurationSeconds and its renew-deadline-ms / renew-period-ms annotations) and judges expiry
 * by them; the holder's agent renews and gives up by them. Both read them with
 * {@link termTimingsOf}, so they cannot disagree. Pure and free of imports.
 */

/** DEFAULT_LEASE_DURATION_SECONDS is the lease duration when neither the Lease nor the lock says (the CRD's schema default). */
export const DEFAULT_LEASE_DURATION_SECONDS = 15;

/** TermTimings are fixed for one holder's term and written on the Lease at grant (milliseconds). */
export interface TermTimings {
  readonly leaseDurationMs: number;
  readonly renewDeadlineMs: number;
  readonly renewPeriodMs: number;
}

/** TermSpec is what a lock's spec says of its timings (whole seconds, each optional); a DistributedLockSpec is one. */
export interface TermSpec {
  readonly leaseDurationSeconds?: number | undefined;
  readonly renewDeadlineSeconds?: number | undefined;
  readonly renewPeriodSeconds?: number | undefined;
}

/** TermRecord is what a Lease says of its current term (a LockRecord is one); undefined fields were not written. */
export interface TermRecord {
  readonly leaseDurationSeconds: number | undefined;
  readonly renewDeadlineMs: number | undefined;
  readonly renewPeriodMs: number | undefined;
}

/**
 * termTimingsOf is the current term's timings: what the Lease records, else what the lock's spec
 * says, else the defaults —
 * - leaseDurationMs: the Lease's leaseDurationSeconds, else spec.leaseDurationSeconds, else 15 s.
 * - renewDeadlineMs: the Lease's annotation, else spec.renewDeadlineSeconds, else floor(2/3 of
 *   the lease above) (1 s → 666 ms, 15 s → 10 s).
 * - renewPeriodMs: the Lease's annotation, else spec.renewPeriodSeconds, else
 *   floor(min(lease / 3, renewDeadline / 2)) (1 s → 333 ms, 15 s → 5 s; an explicit 4 s deadline
 *   on a 15 s lease → 2 s), which leaves at least two renewal attempts per deadline.
 *
 * With no record it is the lock's timings for its next grant (resolveTimings); the agent, which
 * does not read the lock, passes no spec. Defaults are computed in milliseconds so that short test
 * leases do not round to zero. Pure; does not validate (the CRD does, and parseLease reads only
 * positive annotations).
 */
export function termTimingsOf(record: TermRecord | undefined, spec: TermSpec = {}): TermTimings {
  const leaseDurationMs =
    (record?.leaseDurationSeconds ?? spec.leaseDurationSeconds ?? DEFAULT_LEASE_DURATION_SECONDS) * 1000;
  const renewDeadlineMs =
    record?.renewDeadlineMs ??
    (spec.renewDeadlineSeconds !== undefined
      ? spec.renewDeadlineSeconds * 1000
      : Math.floor((leaseDurationMs * 2) / 3));
  const renewPeriodMs =
    record?.renewPeriodMs ??
    (spec.renewPeriodSeconds !== undefined
      ? spec.renewPeriodSeconds * 1000
      : Math.floor(Math.min(leaseDurationMs / 3, renewDeadlineMs / 2)));
  return { leaseDurationMs, renewDeadlineMs, renewPeriodMs };
}

/**
 * timingsContradiction says why `t` cannot be one term's timings, or undefined when they can:
 * every field finite and positive, and renewPeriod < renewDeadline < leaseDuration. The controller
 * never writes other timings (it derives them so); anyone else who can update the Lease can. An
 * agent that trusted a renew deadline at or above the lease duration would believe after the
 * controller expired its term, so the agent trusts no term whose timings contradict each other.
 */
export function timingsContradiction(t: TermTimings): string | undefined {
  const fields: [string, number][] = [
    ['lease duration', t.leaseDurationMs],
    ['renew deadline', t.renewDeadlineMs],
    ['renew period', t.renewPeriodMs],
  ];
  for (const [name, ms] of fields)
    if (!Number.isFinite(ms) || ms <= 0) return `the ${name} ${String(ms)} ms is not positive`;
  if (t.renewDeadlineMs >= t.leaseDurationMs)
    return `renew deadline ${t.renewDeadlineMs} ms is not below the lease duration ${t.leaseDurationMs} ms`;
  if (t.renewPeriodMs >= t.renewDeadlineMs)
    return `renew period ${t.renewPeriodMs} ms is not below the renew deadline ${t.renewDeadlineMs} ms`;
  return undefined;
}

/**
 * tighterTimings is the most conservative reading of two readings of one term's timings: each
 * field the shorter (a NaN reading wins, so that it is reported by timingsContradiction). A term
 * whose Lease changes its timings mid-term keeps the shortest each has said.
 */
export function tighterTimings(a: TermTimings, b: TermTimings): TermTimings {
  const shorter = (x: number, y: number): number => (Number.isNaN(x) || Number.isNaN(y) ? NaN : Math.min(x, y));
  return {
    leaseDurationMs: shorter(a.leaseDurationMs, b.leaseDurationMs),
    renewDeadlineMs: shorter(a.renewDeadlineMs, b.renewDeadlineMs),
    renewPeriodMs: shorter(a.renewPeriodMs, b.renewPeriodMs),
  };
}
