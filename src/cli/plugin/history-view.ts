/**
 * `kubectl fencepost history LOCK`: the lock's holders and tokens over time, as far as the
 * cluster still has them. Pure: a snapshot in, a view (the `-o json` document) and its table out.
 *
 * Kubernetes keeps no full history of a lock, and this command invents none. It merges what is
 * retained — the controller's Events about the lock, the Lease's current (or last) grant, and the
 * completed runs in status — and says what is missing ({@link RETENTION}).
 */
import { DEFAULT_MODE } from '../../api/v1alpha1/distributedlock.ts';
import { ageOf, table } from './format.ts';
import type { LockSnapshot } from './snapshot.ts';
import { readRecord } from './status-view.ts';
import { byTokenOrder, transitions } from './transitions.ts';

/** HistoryEntry is one thing that happened to the lock, with where it was read. */
export interface HistoryEntry {
  /** time: when (RFC 3339), or null when the record has no time. */
  readonly time: string | null;
  /** source: `Event` (the controller's Events), `Lease` (its current or last grant), `Status` (status.completedRuns). */
  readonly source: 'Event' | 'Lease' | 'Status';
  readonly type: string;
  readonly reason: string;
  /** holder and token: the pod and fencing token the entry is about, when it names them. */
  readonly holder: string | null;
  readonly token: string | null;
  readonly message: string;
  /** count: occurrences an Event stands for (identical Events are counted in one). */
  readonly count: number;
}

/** HistoryView is what history prints (`-o json` prints it as is). */
export interface HistoryView {
  readonly namespace: string;
  readonly name: string;
  readonly mode: string;
  /** entries: oldest first. */
  readonly entries: readonly HistoryEntry[];
  /** grants: how many grants the Lease has seen (leaseTransitions), or null without a Lease. */
  readonly grants: number | null;
  /** retained: what the cluster keeps of a lock's history and what it does not (the same text as the docs). */
  readonly retained: readonly string[];
}

/** RETENTION says what the cluster keeps of a lock's history, and for how long. */
export const RETENTION: readonly string[] = [
  "Events: kept by the API server for its --event-ttl (1 h by default). Identical Events are counted in one (only the first and last time are kept); after 10 similar ones within 10 minutes they are combined into one (only the latest message is kept); each lock may record 25 at once, then one per 5 minutes. A busy or flapping lock's history has gaps.",
  'The Lease: only the current (or last) grant — holder, token, acquire and renew times, how the last holder left — and the number of grants (leaseTransitions).',
  'Status: the highest token issued, the current holder, and in Mutex mode the last 32 completed runs with their holder and token.',
  'Not kept anywhere: a full list of past holders and tokens. For an audit trail, export Events (or the controller\'s logs, one "Granted Lease" line per grant) to a log store.',
];

/** historyView merges what the cluster retains of the lock's history. */
export function historyView(s: LockSnapshot): HistoryView {
  const lock = s.lock;
  const { record } = readRecord(s);
  const entries: HistoryEntry[] = transitions(s.events).map((t) => ({
    time: t.time ?? null,
    source: 'Event',
    type: t.type,
    reason: t.reason,
    holder: t.holder ?? null,
    token: t.token ?? null,
    message: t.message,
    count: t.count,
  }));
  const tokensSeen = new Set(entries.map((e) => e.token).filter((t) => t !== null));
  // The Lease's grant, when no Event tells of it any more (expired, dropped or combined away).
  const leaseToken = record?.token?.toString();
  if (record !== undefined && leaseToken !== undefined && !tokensSeen.has(leaseToken)) {
    const holder = record.holder ?? record.lastHolder;
    entries.push({
      time: record.acquireTime?.toISOString() ?? null,
      source: 'Lease',
      type: 'Normal',
      reason: record.holder !== undefined ? 'Holding' : 'LastGrant',
      holder: holder?.name ?? null,
      token: leaseToken,
      message:
        record.holder !== undefined
          ? `The Lease names pod ${record.holder.name} with fencing token ${leaseToken} (its grant's Event is no longer retained)`
          : `The last grant on the Lease had fencing token ${leaseToken}${holder !== undefined ? `, to pod ${holder.name}` : ''}; ${record.released !== undefined ? `it ended: ${record.released}` : 'it ended'}`,
      count: 1,
    });
  }
  for (const run of lock.status?.completedRuns ?? []) {
    entries.push({
      time: run.completedAt,
      source: 'Status',
      type: 'Normal',
      reason: 'RunCompleted',
      holder: run.holder ?? null,
      token: run.token ?? null,
      message: `Run ${JSON.stringify(run.runId)} completed`,
      count: 1,
    });
  }
  // Stable: entries of one time keep the Events' order (transitions), except that grants go by token.
  entries.sort((a, b) => (a.time ?? '').localeCompare(b.time ?? '') || byTokenOrder(a.token, b.token));
  return {
    namespace: lock.metadata.namespace ?? '',
    name: lock.metadata.name ?? '',
    mode: lock.spec.mode ?? DEFAULT_MODE,
    entries,
    grants: record?.transitions ?? null,
    retained: RETENTION,
  };
}

/** historyTable: TIME, AGE, REASON, HOLDER, TOKEN, SOURCE, MESSAGE, oldest first, then what is retained. */
export function historyTable(v: HistoryView, nowMs: number): string {
  const rows = v.entries.map((e) => [
    e.time?.replace(/\.\d+Z$/, 'Z') ?? '',
    ageOf(e.time ?? undefined, nowMs) ?? '',
    e.reason,
    e.holder ?? '',
    e.token ?? '',
    e.source,
    e.count > 1 ? `${e.message} (x${e.count})` : e.message,
  ]);
  const head = `History of ${v.namespace}/${v.name} (${v.mode}; ${v.grants ?? 0} grant${v.grants === 1 ? '' : 's'} recorded on the Lease):\n`;
  const note = `\nWhat the cluster keeps:\n${v.retained.map((r) => `  - ${r}`).join('\n')}\n`;
  return head + table(['TIME', 'AGE', 'REASON', 'HOLDER', 'TOKEN', 'SOURCE', 'MESSAGE'], rows) + note;
}
