/**
 * What the demo measured, printed as text at the end or as JSON with --json (the integration
 * test reads the JSON). Tokens are decimal strings.
 */
import type { Paint } from './timeline.ts';

/** Grant is one fencing token issued by the controller, as the Lease recorded it. */
export interface Grant {
  readonly token: string;
  readonly holder: string;
  /** at: seconds since the demo started. */
  readonly at: number;
}

/** DemoWrite is one write to the ledger, in the order the demo received the outcomes. */
export interface DemoWrite {
  readonly at: number;
  readonly pod: string;
  readonly token: string;
  readonly accepted: boolean;
  /** stale: the token is below a token whose write was accepted earlier in the same act. */
  readonly stale: boolean;
  /** highWater: for a refused write, the mark that refused it. */
  readonly highWater?: string;
  /** previous: for a plain SET, the value it overwrote. */
  readonly previous?: string | null;
}

/** ActSummary is one pause and its consequences. */
export interface ActSummary {
  readonly guard: boolean;
  readonly pausedPod: string;
  readonly pausedToken: string;
  readonly newHolder: string;
  readonly newToken: string;
  readonly pauseSeconds: number;
  /** latestToken: the newest token issued by the end of the act. */
  readonly latestToken: string;
  readonly writes: readonly DemoWrite[];
  /** acceptedPerToken counts accepted writes by token. */
  readonly acceptedPerToken: Readonly<Record<string, number>>;
  /** staleRejected: stale writes the guard refused. */
  readonly staleRejected: number;
  /** staleAccepted: stale writes that went through (the corruption). */
  readonly staleAccepted: number;
  /** overwritten: the values that stale writes destroyed. */
  readonly overwritten: readonly string[];
  /** ledgerAfterWake: the ledger right after the paused worker's write. */
  readonly ledgerAfterWake: string | null;
  /** finalLedger: the ledger at the end of the act, after its workers stopped. */
  readonly finalLedger: string | null;
}

/** DemoSummary is the whole run. */
export interface DemoSummary {
  readonly namespace: string;
  readonly lock: string;
  readonly tokensIssued: readonly Grant[];
  readonly withGuard: ActSummary;
  readonly withoutGuard: ActSummary;
  readonly elapsedSeconds: number;
}

/** actSummary derives the counts of an act from its writes. */
export function actSummary(
  base: Omit<ActSummary, 'acceptedPerToken' | 'staleRejected' | 'staleAccepted' | 'overwritten'>,
): ActSummary {
  const acceptedPerToken: Record<string, number> = {};
  for (const w of base.writes) if (w.accepted) acceptedPerToken[w.token] = (acceptedPerToken[w.token] ?? 0) + 1;
  const stale = base.writes.filter((w) => w.stale);
  return {
    ...base,
    acceptedPerToken,
    staleRejected: stale.filter((w) => !w.accepted).length,
    staleAccepted: stale.filter((w) => w.accepted).length,
    overwritten: stale.flatMap((w) => (w.accepted && typeof w.previous === 'string' ? [w.previous] : [])),
  };
}

const q = (v: string | null): string => (v === null ? '(empty)' : `"${v}"`);

/** formatSummary renders the summary for a person. */
export function formatSummary(s: DemoSummary, p: Paint): string {
  const per = (a: ActSummary): string =>
    Object.entries(a.acceptedPerToken)
      .map(([t, n]) => `token ${t}: ${n}`)
      .join(', ');
  const g = s.withGuard;
  const u = s.withoutGuard;
  const lines = [
    '',
    p.bold('Summary'),
    `  Tokens issued, in order:   ${s.tokensIssued.map((t) => `${t.token} (${p.pod(t.holder)})`).join(' → ')}`,
    '',
    `  ${p.bold('With the guard')}      ${p.pod(g.pausedPod)} paused with token ${g.pausedToken}; ${p.pod(g.newHolder)} took over with token ${g.newToken}`,
    `    accepted writes        ${per(g)}`,
    `    stale writes           ${p.green(`${g.staleRejected} rejected`)}, ${g.staleAccepted} accepted`,
    `    ledger after the wake  ${q(g.ledgerAfterWake)}`,
    `    final ledger           ${q(g.finalLedger)}`,
    '',
    `  ${p.bold('Without the guard')}   ${p.pod(u.pausedPod)} paused with token ${u.pausedToken}; ${p.pod(u.newHolder)} took over with token ${u.newToken}`,
    `    accepted writes        ${per(u)}`,
    `    stale writes           ${u.staleRejected} rejected, ${p.red(`${u.staleAccepted} accepted`)}${u.overwritten.length > 0 ? ` (overwrote ${u.overwritten.map((v) => q(v)).join(', ')})` : ''}`,
    `    ledger after the wake  ${q(u.ledgerAfterWake)}`,
    `    final ledger           ${q(u.finalLedger)}${u.finalLedger !== u.ledgerAfterWake ? p.dim(` (${u.newHolder} wrote again later; the overwritten write stays lost)`) : ''}`,
    '',
    '  Both times the frozen worker woke up believing it held the lock: no lease can prevent that.',
    '  With the guard, the ledger refused its stale token; without it, a newer write was silently lost.',
    '',
  ];
  return lines.join('\n');
}
