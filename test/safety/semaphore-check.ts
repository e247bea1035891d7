/**
 * The safety checker for a Semaphore lock: a pure function from one trial's history to its verdict.
 * A Semaphore has one anchor Lease (`dlock-<lock>`, the lock-wide token high-water mark, never a
 * holder) and one Lease per permit (`dlock.<lock>.<i>`); the guards fence it per permit (fence key
 * `<lock>/<permit>`), because N holders write at once with N different tokens.
 *
 * - Per permit: S1–S5 of checker.ts on that permit's own history (its Lease's versions, the client
 *   events and store writes made with the tokens it granted): each permit is a lock of its own.
 * - Lock-wide S1: every new term, on whichever permit, carries a token strictly above every token
 *   granted before it on any permit (etcd's resourceVersion orders all the lock's Leases), the
 *   anchor's token never decreases, the anchor never names a holder, and every token a client used
 *   was granted on some permit.
 * - S6, the bound: at no instant do more than N pod incarnations believe they hold a permit,
 *   leaving out a holder from the moment it was paused until one lease duration after it resumed
 *   (a paused process keeps believing: no lease protocol can stop that; the guards do).
 *   Beliefs are stamped by the runner as the reports arrive, from N+1 pipes read in one event loop:
 *   a release reported before the next grant can still be read a moment after it, so an excess
 *   shorter than OVERLAP_SLACK_MS is not a violation (an over-granting controller makes excesses
 *   of seconds: the `permits` calibration).
 */
import { beliefIntervals, checkHistory, type TrialCounts, type TrialReport, type Violation } from './checker.ts';
import type { ClientEvent, LeaseVersion, StoreApply, TrialHistory } from './history.ts';
import { leaseName, permitOfLease } from '../../src/protocol/names.ts';

/** OVERLAP_SLACK_MS: the longest excess over N believers taken as report-arrival order (see above). */
export const OVERLAP_SLACK_MS = 50;

/** Excess is a window in which more than N holders believed. */
export interface Excess {
  readonly fromMs: number;
  readonly toMs: number;
  readonly holders: readonly string[];
}

const key = (holder: string, token: bigint): string => `${holder}#${token.toString()}`;
const byRv = (a: LeaseVersion, b: LeaseVersion): number =>
  a.resourceVersion < b.resourceVersion ? -1 : a.resourceVersion > b.resourceVersion ? 1 : 0;

/** pausedSpans: per holder, [paused, resumed + leaseMs] (to the end when never resumed). */
function pausedSpans(clients: readonly ClientEvent[], leaseMs: number): Map<string, [number, number][]> {
  const spans = new Map<string, [number, number][]>();
  for (const e of [...clients].sort((a, b) => a.at - b.at)) {
    const list = spans.get(e.holder) ?? [];
    if (e.kind === 'paused') {
      list.push([e.at, Infinity]);
      spans.set(e.holder, list);
    } else if (e.kind === 'resumed') {
      const last = list.at(-1);
      if (last !== undefined && last[1] === Infinity) last[1] = e.at + leaseMs;
    }
  }
  return spans;
}

/** peakBelievers: the most holders (not excused by a pause) that believed at one instant. */
export function peakBelievers(clients: readonly ClientEvent[], leaseMs: number): number {
  return beliefProfile(clients, 0, leaseMs).peak;
}

/** excesses: the windows in which more than `permits` holders (not excused by a pause) believed. */
export function excesses(clients: readonly ClientEvent[], permits: number, leaseMs: number): Excess[] {
  return beliefProfile(clients, permits, leaseMs).excesses;
}

/** beliefProfile sweeps the belief intervals: the peak count, and the windows above `permits`. */
function beliefProfile(
  clients: readonly ClientEvent[],
  permits: number,
  leaseMs: number,
): { peak: number; excesses: Excess[] } {
  const all = beliefIntervals(clients);
  const endAt = clients.reduce((m, e) => Math.max(m, e.at), 0);
  const paused = pausedSpans(clients, leaseMs);
  const excused = (holder: string, at: number): boolean =>
    (paused.get(holder) ?? []).some(([from, to]) => at >= from && at < to);
  // The count changes only where a belief or a pause span starts or ends: evaluate each segment.
  const cuts = new Set<number>();
  for (const b of all) {
    cuts.add(b.from);
    cuts.add(b.to ?? endAt);
  }
  for (const list of paused.values())
    for (const [from, to] of list) {
      cuts.add(from);
      if (Number.isFinite(to)) cuts.add(to);
    }
  const points = [...cuts].sort((a, b) => a - b);
  const out: Excess[] = [];
  let peak = 0;
  let current: { from: number; to: number; holders: Set<string> } | undefined;
  for (let i = 0; i + 1 < points.length; i++) {
    const from = points[i] ?? 0;
    const to = points[i + 1] ?? 0;
    const mid = (from + to) / 2;
    const holders = new Set(
      all.filter((b) => b.from <= mid && mid < (b.to ?? endAt) && !excused(b.holder, mid)).map((b) => b.holder),
    );
    peak = Math.max(peak, holders.size);
    if (holders.size > permits) {
      if (current !== undefined && current.to === from) {
        current.to = to;
        for (const h of holders) current.holders.add(h);
      } else {
        if (current !== undefined) out.push({ fromMs: current.from, toMs: current.to, holders: [...current.holders] });
        current = { from, to, holders };
      }
    }
  }
  if (current !== undefined) out.push({ fromMs: current.from, toMs: current.to, holders: [...current.holders] });
  return { peak, excesses: out };
}

/** lockWideTokens: S1 across permits in etcd's order, and the anchor's own rules. */
function lockWideTokens(lock: string, leases: readonly LeaseVersion[], out: Violation[]): void {
  const anchor = leaseName(lock);
  let mark: bigint | undefined;
  let highest: { token: bigint; lease: string } | undefined;
  const last = new Map<string, string>();
  for (const v of [...leases].sort(byRv)) {
    const name = v.name ?? '';
    if (name === anchor) {
      if (v.holder !== undefined)
        out.push({
          invariant: 'S1',
          message: `the anchor Lease ${anchor} names holder ${v.holder} at resourceVersion ${v.resourceVersion}`,
        });
      if (v.token !== undefined && mark !== undefined && v.token < mark)
        out.push({
          invariant: 'S1',
          message: `anchor token went down from ${mark} to ${v.token} at resourceVersion ${v.resourceVersion}`,
        });
      if (v.token !== undefined && (mark === undefined || v.token > mark)) mark = v.token;
      continue;
    }
    if (v.holder === undefined || v.token === undefined) continue;
    const term = key(v.holder, v.token);
    if (last.get(name) === term) continue;
    last.set(name, term);
    if (highest !== undefined && v.token <= highest.token)
      out.push({
        invariant: 'S1',
        message: `${name} granted ${v.holder} token ${v.token} at resourceVersion ${v.resourceVersion}, not above token ${highest.token} granted before on ${highest.lease}`,
      });
    if (highest === undefined || v.token > highest.token) highest = { token: v.token, lease: name };
  }
}

const sum = (reports: readonly TrialReport[], f: keyof TrialCounts): number =>
  reports.reduce((n, r) => n + r.counts[f], 0);

/** checkSemaphore returns the verdict on a Semaphore trial's history (lock `h.lock`, `permits` N). Pure. */
export function checkSemaphore(h: TrialHistory, permits: number): TrialReport {
  const violations: Violation[] = [];
  const anchor = leaseName(h.lock);
  const byPermit = new Map<number, LeaseVersion[]>();
  for (const v of h.leases) {
    if (v.name === anchor) continue;
    const p = v.name !== undefined ? permitOfLease(h.lock, v.name) : undefined;
    if (p === undefined) {
      violations.push({
        invariant: 'H',
        message: `Lease version ${v.resourceVersion} (${String(v.name)}) is not a Lease of lock ${h.lock}`,
      });
      continue;
    }
    byPermit.set(p, [...(byPermit.get(p) ?? []), v]);
  }
  lockWideTokens(h.lock, h.leases, violations);

  // Which permit granted each token (tokens are unique lock-wide when the lock-wide S1 holds).
  const permitOf = new Map<bigint, number>();
  for (const [p, versions] of byPermit)
    for (const v of versions) if (v.holder !== undefined && v.token !== undefined) permitOf.set(v.token, p);
  for (const e of h.clients)
    if ('token' in e && !permitOf.has(e.token))
      violations.push({
        invariant: 'S1',
        message: `${e.holder} reported ${e.kind} with token ${e.token}, which no permit Lease of ${h.lock} granted`,
      });
  for (const a of h.store)
    if (!permitOf.has(a.token))
      violations.push({
        invariant: 'S2',
        message: `store applied write ${a.writeId} with token ${a.token}, which no permit Lease of ${h.lock} granted`,
      });

  // Per permit: the single-Lease invariants on that permit's share of the history.
  const reports: TrialReport[] = [];
  for (const [p, leases] of [...byPermit].sort((a, b) => a[0] - b[0])) {
    const mine = (token: bigint): boolean => permitOf.get(token) === p;
    const clients = h.clients.filter((e) => !('token' in e) || mine(e.token));
    const store: StoreApply[] = h.store.filter((a) => mine(a.token));
    const r = checkHistory({ ...h, leases, clients, store });
    reports.push(r);
    for (const v of r.violations) violations.push({ invariant: v.invariant, message: `permit ${p}: ${v.message}` });
  }

  for (const x of excesses(h.clients, permits, h.leaseDurationMs))
    if (x.toMs - x.fromMs > OVERLAP_SLACK_MS)
      violations.push({
        invariant: 'S6',
        message: `${x.holders.length} holders believed at once for ${Math.round(x.toMs - x.fromMs)} ms with ${permits} permits: ${x.holders.join(', ')}`,
      });

  const counts: TrialCounts = {
    terms: sum(reports, 'terms'),
    grants: h.clients.filter((e) => e.kind === 'granted').length,
    renews: h.clients.filter((e) => e.kind === 'renewed').length,
    attempts: sum(reports, 'attempts'),
    accepted: sum(reports, 'accepted'),
    staleRejected: sum(reports, 'staleRejected'),
    errors: sum(reports, 'errors'),
    attemptsAfterValidUntil: sum(reports, 'attemptsAfterValidUntil'),
    storeApplies: h.store.length,
  };
  return {
    ok: violations.length === 0,
    violations,
    dualBelief: reports.flatMap((r) => r.dualBelief),
    counts,
  };
}
