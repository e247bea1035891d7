/**
 * The safety checker: a pure function from one trial's recorded history to its verdict on the
 * invariants S1–S5 of docs/safety.md, plus the dual-belief windows it saw (reported, never a violation:
 * no lease protocol can stop a paused process from believing it still holds the lock).
 *
 * It checks the three recorded sources against each other, not against what the trial meant to
 * do: the Lease's own version history (etcd's order), the store's own execution log, the store's
 * final content, and the clients' reports. A source that contradicts another one is reported
 * as `H` (history inconsistent), so a recorder bug cannot pass as a clean run.
 *
 * - S1: the tokens of successive terms in the Lease history strictly increase, the token
 *   annotation (the etcd high-water mark) never decreases, and every token a client was granted
 *   is one the Lease recorded for that client.
 * - S2: the store applies tokens in non-decreasing order, an equal token only from the same
 *   holder (the same term), and only tokens the Lease granted to the writer.
 * - S3: no applied write carries a token lower than one applied before it.
 * - S4: every write a client saw acknowledged is in the store's final content.
 * - S5: no term of the Lease history reappears after another term began (two terms interleaved).
 */
import type { ClientEvent, LeaseVersion, TrialHistory } from './history.ts';
import { storeValue } from './history.ts';

/**
 * Invariant names a checked property; `H` is a history that contradicts itself. S6 (at most N
 * believing holders of a Semaphore) is checked by semaphore-check.ts.
 */
export type Invariant = 'S1' | 'S2' | 'S3' | 'S4' | 'S5' | 'S6' | 'H';

/** Violation is one broken invariant with a message naming the evidence. */
export interface Violation {
  readonly invariant: Invariant;
  readonly message: string;
}

/** DualBelief is a window in which two different holders both believed they held the lock. */
export interface DualBelief {
  readonly holders: readonly [string, string];
  readonly tokens: readonly [bigint, bigint];
  readonly fromMs: number;
  readonly toMs: number;
  readonly ms: number;
}

/** TrialCounts are the operations and fencing-at-work figures of one trial. */
export interface TrialCounts {
  readonly terms: number;
  readonly grants: number;
  readonly renews: number;
  readonly attempts: number;
  readonly accepted: number;
  /** staleRejected: writes the store refused as stale (the fencing at work). */
  readonly staleRejected: number;
  readonly errors: number;
  /** attemptsAfterValidUntil: writes sent after the sender's own validity deadline had passed. */
  readonly attemptsAfterValidUntil: number;
  readonly storeApplies: number;
}

/** TrialReport is the checker's verdict on one trial. */
export interface TrialReport {
  readonly ok: boolean;
  readonly violations: readonly Violation[];
  readonly dualBelief: readonly DualBelief[];
  readonly counts: TrialCounts;
}

interface Term {
  readonly holder: string;
  readonly token: bigint;
  readonly firstAt: number;
}

const termKey = (holder: string, token: bigint): string => `${holder}#${token.toString()}`;

/** leaseTerms walks the Lease history in resourceVersion order: the terms, and S1/S5/H findings. */
function leaseTerms(leases: readonly LeaseVersion[], out: Violation[]): Term[] {
  const byRv = [...leases].sort((a, b) =>
    a.resourceVersion < b.resourceVersion ? -1 : a.resourceVersion > b.resourceVersion ? 1 : 0,
  );
  const terms: Term[] = [];
  const ended = new Set<string>();
  let mark: bigint | undefined;
  let previous: LeaseVersion | undefined;
  for (const v of byRv) {
    if (previous !== undefined && previous.resourceVersion === v.resourceVersion) {
      if (previous.holder !== v.holder || previous.token !== v.token) {
        out.push({
          invariant: 'H',
          message: `Lease resourceVersion ${v.resourceVersion} seen with two contents (${String(previous.holder)}#${String(previous.token)} and ${String(v.holder)}#${String(v.token)})`,
        });
      }
      continue;
    }
    previous = v;
    if (v.token !== undefined) {
      if (mark !== undefined && v.token < mark) {
        out.push({
          invariant: 'S1',
          message: `Lease token annotation went down from ${mark} to ${v.token} at resourceVersion ${v.resourceVersion}`,
        });
      }
      if (mark === undefined || v.token > mark) mark = v.token;
    }
    if (v.holder === undefined) continue;
    if (v.token === undefined) {
      out.push({
        invariant: 'S1',
        message: `Lease resourceVersion ${v.resourceVersion} names holder ${v.holder} without a token`,
      });
      continue;
    }
    const last = terms.at(-1);
    if (last !== undefined && last.holder === v.holder && last.token === v.token) continue;
    const key = termKey(v.holder, v.token);
    if (ended.has(key)) {
      out.push({
        invariant: 'S5',
        message: `term ${v.holder} token ${v.token} reappears at resourceVersion ${v.resourceVersion} after term ${last?.holder ?? '?'} token ${String(last?.token)} began`,
      });
      continue;
    }
    if (last !== undefined) {
      ended.add(termKey(last.holder, last.token));
      if (v.token <= last.token) {
        out.push({
          invariant: 'S1',
          message: `term ${v.holder} got token ${v.token}, not above the previous term's ${last.token} (${last.holder})`,
        });
      }
    }
    terms.push({ holder: v.holder, token: v.token, firstAt: v.at });
  }
  return terms;
}

/** BeliefInterval is one holder's belief in one term: from its first granted/renewed report to its end (undefined: to the end of the trial). */
export interface BeliefInterval {
  readonly holder: string;
  readonly token: bigint;
  readonly from: number;
  to: number | undefined;
}

/** beliefIntervals: per holder and token, from its granted/renewed report to its lost/released/killed/left report. */
export function beliefIntervals(clients: readonly ClientEvent[]): BeliefInterval[] {
  const sorted = [...clients].sort((a, b) => a.at - b.at);
  const all: BeliefInterval[] = [];
  const open = new Map<string, BeliefInterval>();
  for (const e of sorted) {
    if (e.kind === 'granted' || e.kind === 'renewed') {
      const key = termKey(e.holder, e.token);
      if (!open.has(key)) {
        const o: BeliefInterval = { holder: e.holder, token: e.token, from: e.at, to: undefined };
        open.set(key, o);
        all.push(o);
      }
    } else if (e.kind === 'lost' || e.kind === 'released') {
      const o = open.get(termKey(e.holder, e.token));
      if (o !== undefined) o.to = e.at;
      open.delete(termKey(e.holder, e.token));
    } else if (e.kind === 'killed' || e.kind === 'left') {
      for (const [key, o] of open)
        if (o.holder === e.holder) {
          o.to = e.at;
          open.delete(key);
        }
    }
  }
  return all;
}

/** beliefWindows: the windows in which two holders believed at once (from {@link beliefIntervals}). */
function beliefWindows(clients: readonly ClientEvent[]): DualBelief[] {
  const endAt = clients.reduce((m, e) => Math.max(m, e.at), 0);
  const intervals = beliefIntervals(clients);
  const windows: DualBelief[] = [];
  for (let i = 0; i < intervals.length; i++) {
    for (let j = i + 1; j < intervals.length; j++) {
      const a = intervals[i];
      const b = intervals[j];
      if (a === undefined || b === undefined || a.holder === b.holder) continue;
      const from = Math.max(a.from, b.from);
      const to = Math.min(a.to ?? endAt, b.to ?? endAt);
      if (to > from)
        windows.push({
          holders: [a.holder, b.holder],
          tokens: [a.token, b.token],
          fromMs: from,
          toMs: to,
          ms: to - from,
        });
    }
  }
  return windows;
}

/** checkHistory returns the verdict on one trial's history. Pure. */
export function checkHistory(h: TrialHistory): TrialReport {
  const violations: Violation[] = [];
  const terms = leaseTerms(h.leases, violations);
  const granted = new Set(terms.map((t) => termKey(t.holder, t.token)));

  // S1 (clients): a client acting on a token the Lease never recorded for it.
  for (const e of h.clients) {
    if ((e.kind === 'granted' || e.kind === 'renewed') && !granted.has(termKey(e.holder, e.token))) {
      violations.push({
        invariant: 'S1',
        message: `${e.holder} reported ${e.kind} with token ${e.token}, which the Lease history never granted to it`,
      });
    }
  }

  // S2/S3: the store's execution order.
  const attempts = new Map<string, Extract<ClientEvent, { kind: 'attempt' }>>();
  for (const e of h.clients) if (e.kind === 'attempt') attempts.set(e.writeId, e);
  let max: { token: bigint; writer: string } | undefined;
  for (const a of h.store) {
    const attempt = attempts.get(a.writeId);
    if (attempt === undefined)
      violations.push({
        invariant: 'H',
        message: `store applied write ${a.writeId} that no client reported attempting`,
      });
    else if (attempt.token !== a.token || attempt.holder !== a.writer) {
      violations.push({
        invariant: 'H',
        message: `store applied write ${a.writeId} as ${a.writer}#${a.token}, the client attempted it as ${attempt.holder}#${attempt.token}`,
      });
    }
    if (!granted.has(termKey(a.writer, a.token))) {
      violations.push({
        invariant: 'S2',
        message: `store applied write ${a.writeId} with token ${a.token} that the Lease never granted to ${a.writer}`,
      });
    }
    if (max !== undefined && a.token < max.token) {
      violations.push({
        invariant: 'S3',
        message: `store applied write ${a.writeId} with token ${a.token} (${a.writer}) after token ${max.token} (${max.writer})`,
      });
      continue;
    }
    if (max !== undefined && a.token === max.token && a.writer !== max.writer) {
      violations.push({
        invariant: 'S2',
        message: `store applied write ${a.writeId} with token ${a.token} from ${a.writer}, already applied from ${max.writer}`,
      });
      continue;
    }
    max = { token: a.token, writer: a.writer };
  }

  // S4: acknowledged writes survive; and every applied write was recorded consistently.
  const applied = new Set(h.store.map((a) => a.writeId));
  for (const e of h.clients) {
    if (e.kind !== 'outcome' || e.result !== 'accepted') continue;
    const value = h.finalStore.get(e.writeId);
    if (value === undefined)
      violations.push({
        invariant: 'S4',
        message: `write ${e.writeId} (${e.holder}#${e.token}) was acknowledged but is missing from the store`,
      });
    else if (value !== storeValue(e.writeId, e.token, e.holder))
      violations.push({
        invariant: 'S4',
        message: `write ${e.writeId} was acknowledged but the store holds ${JSON.stringify(value)}`,
      });
    if (!applied.has(e.writeId))
      violations.push({
        invariant: 'H',
        message: `write ${e.writeId} was acknowledged but is not in the store's command log`,
      });
  }

  const count = (pred: (e: ClientEvent) => boolean): number => h.clients.filter(pred).length;
  const counts: TrialCounts = {
    terms: terms.length,
    grants: count((e) => e.kind === 'granted'),
    renews: count((e) => e.kind === 'renewed'),
    attempts: count((e) => e.kind === 'attempt'),
    accepted: count((e) => e.kind === 'outcome' && e.result === 'accepted'),
    staleRejected: count((e) => e.kind === 'outcome' && e.result === 'stale'),
    errors: count((e) => e.kind === 'outcome' && e.result === 'error'),
    attemptsAfterValidUntil: count((e) => e.kind === 'attempt' && e.afterValidUntil),
    storeApplies: h.store.length,
  };
  return { ok: violations.length === 0, violations, dualBelief: beliefWindows(h.clients), counts };
}
