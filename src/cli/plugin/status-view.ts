/**
 * `kubectl fencepost status`: who holds each lock, with which token, when the holder's lease runs
 * out, who waits (Mutex), and the last transitions. Pure: a snapshot and the wall clock in, a view
 * (the `-o json` document) and its table out.
 *
 * The expiry countdown is the Lease's renewTime + leaseDurationSeconds against this machine's
 * clock: an estimate for people. The controller never compares clocks; it expires a holder a full
 * lease duration after it last *saw* the Lease change, by its own monotonic clock (docs/design.md
 * "The protocol"), so a holder shown a few seconds overdue here may still hold the lock.
 */
import { ConditionType, findCondition } from '../../api/v1alpha1/conditions.ts';
import { DEFAULT_MODE, type DistributedLock } from '../../api/v1alpha1/distributedlock.ts';
import { parseLease, type LockRecord } from '../../lease/record.ts';
import { TOKEN_ANNOTATION } from '../../protocol/names.ts';
import { termTimingsOf } from '../../protocol/timings.ts';
import { tokenOrUndefined } from '../../protocol/token.ts';
import { ageOf, countdown, fields, humanDuration, NONE, table } from './format.ts';
import type { LockSnapshot } from './snapshot.ts';
import { transitions, type Transition } from './transitions.ts';

/** LAST_TRANSITIONS: how many of the newest transitions status shows per lock. */
export const LAST_TRANSITIONS = 5;

/** LockStatusView is one lock's status as `-o json` prints it (times RFC 3339, tokens decimal strings). */
export interface LockStatusView {
  readonly namespace: string;
  readonly name: string;
  readonly mode: string;
  /** holder: the pod holding the lock per its Lease, or null. */
  readonly holder: { readonly name: string; readonly uid: string } | null;
  /** token: the holder's fencing token (the Lease's), or null when nobody holds the lock. */
  readonly token: string | null;
  /** lastToken: the highest token issued so far (status.fencingToken, else the Lease's), or null before the first grant. */
  readonly lastToken: string | null;
  readonly acquireTime: string | null;
  readonly renewTime: string | null;
  readonly leaseDurationSeconds: number | null;
  /** expireTime: renewTime + leaseDurationSeconds (an estimate; see the module comment), or null. */
  readonly expireTime: string | null;
  /** expiresInSeconds: expireTime − now on this machine's clock; negative when overdue; null when not held. */
  readonly expiresInSeconds: number | null;
  /** candidates: eligible candidate pods as the controller last counted them (status.candidates). */
  readonly candidates: number | null;
  /** queue: Mutex mode, the waiting requests in grant order (status.queue). */
  readonly queue: readonly { readonly pod: string; readonly since: string }[];
  /** held: the Held condition (status, reason, message), or null before the controller reported one. */
  readonly held: { readonly status: string; readonly reason: string; readonly message: string } | null;
  /** leaseTransitions: how many grants the Lease has seen. */
  readonly leaseTransitions: number | null;
  /** lastTransitions: the newest of the lock's Events, newest first, at most LAST_TRANSITIONS. */
  readonly lastTransitions: readonly Transition[];
  /** problem: why the Lease could not be read (a malformed token annotation), or null. */
  readonly problem: string | null;
}

/** readRecord parses the lock's Lease, or says why it cannot (someone wrote a malformed token). */
export function readRecord(s: LockSnapshot): { record: LockRecord | undefined; problem: string | null } {
  if (s.lease === undefined) return { record: undefined, problem: null };
  try {
    return { record: parseLease(s.lease), problem: null };
  } catch (err) {
    return { record: undefined, problem: err instanceof Error ? err.message : String(err) };
  }
}

/** statusView computes one lock's view at wall-clock time nowMs. */
export function statusView(s: LockSnapshot, nowMs: number): LockStatusView {
  const lock: DistributedLock = s.lock;
  const { record, problem } = readRecord(s);
  const holder = record?.holder;
  const renew = record?.renewTime;
  const leaseSeconds =
    record !== undefined && holder !== undefined ? termTimingsOf(record, lock.spec).leaseDurationMs / 1000 : undefined;
  const expire = renew !== undefined && leaseSeconds !== undefined ? renew.getTime() + leaseSeconds * 1000 : undefined;
  const held = findCondition(lock.status?.conditions, ConditionType.Held);
  const statusToken = lock.status?.fencingToken;
  const leaseToken = record?.token?.toString() ?? s.lease?.metadata?.annotations?.[TOKEN_ANNOTATION];
  const all = transitions(s.events);
  return {
    namespace: lock.metadata.namespace ?? '',
    name: lock.metadata.name ?? '',
    mode: lock.spec.mode ?? DEFAULT_MODE,
    holder: holder !== undefined ? { name: holder.name, uid: holder.uid } : null,
    token: holder !== undefined ? (record?.token?.toString() ?? null) : null,
    lastToken: larger(statusToken, leaseToken) ?? null,
    acquireTime: holder !== undefined ? (record?.acquireTime?.toISOString() ?? null) : null,
    renewTime: holder !== undefined ? (renew?.toISOString() ?? null) : null,
    leaseDurationSeconds: leaseSeconds ?? null,
    expireTime: expire !== undefined ? new Date(expire).toISOString() : null,
    expiresInSeconds: expire !== undefined ? Math.round((expire - nowMs) / 1000) : null,
    candidates: lock.status?.candidates ?? null,
    queue: (lock.status?.queue ?? []).map((q) => ({ pod: q.pod, since: q.since })),
    held: held !== undefined ? { status: held.status, reason: held.reason, message: held.message } : null,
    leaseTransitions: record?.transitions ?? null,
    lastTransitions: all.slice(-LAST_TRANSITIONS).reverse(),
    problem,
  };
}

/** larger: the larger of two decimal token strings (either may be absent or malformed: then the other). */
function larger(a: string | undefined, b: string | undefined): string | undefined {
  const x = tokenOrUndefined(a);
  const y = tokenOrUndefined(b);
  if (x === undefined) return y?.toString();
  return (y !== undefined && y > x ? y : x).toString();
}

/** expiresCell: `in 12s`, `3s ago` (overdue), or empty when nobody holds the lock. */
function expiresCell(v: LockStatusView, nowMs: number): string {
  return v.expireTime !== null ? countdown(Date.parse(v.expireTime), nowMs) : '';
}

/** stateCell: the Held condition's reason (`Granted`, `WaitingForCandidate`, …), or `Unknown`. */
function stateCell(v: LockStatusView): string {
  return v.problem !== null ? 'LeaseUnreadable' : (v.held?.reason ?? 'Unknown');
}

function lastCell(v: LockStatusView, nowMs: number): string {
  const t = v.lastTransitions[0];
  if (t === undefined) return '';
  return `${t.reason} (${ageOf(t.time, nowMs) ?? '?'} ago)`;
}

/**
 * statusTable: one row per lock, kubectl-style — NAME, MODE, HOLDER, TOKEN (the holder's, else
 * the last one issued in parentheses), EXPIRES, QUEUE (waiting Mutex requests), STATE (the Held
 * condition's reason), LAST TRANSITION; NAMESPACE first with -A.
 */
export function statusTable(views: readonly LockStatusView[], nowMs: number, withNamespace: boolean): string {
  const headers = ['NAME', 'MODE', 'HOLDER', 'TOKEN', 'EXPIRES', 'QUEUE', 'STATE', 'LAST TRANSITION'];
  const rows = views.map((v) => [
    v.name,
    v.mode,
    v.holder?.name ?? '',
    v.token ?? (v.lastToken !== null ? `(${v.lastToken})` : ''),
    expiresCell(v, nowMs),
    String(v.queue.length),
    stateCell(v),
    lastCell(v, nowMs),
  ]);
  return withNamespace
    ? table(
        ['NAMESPACE', ...headers],
        rows.map((r, i) => [views[i]?.namespace ?? '', ...r]),
      )
    : table(headers, rows);
}

/** statusDetail: one lock in full, kubectl-describe style. */
export function statusDetail(v: LockStatusView, nowMs: number): string {
  const when = (t: string | null): string | undefined =>
    t !== null ? `${t} (${ageOf(t, nowMs) ?? '?'} ago)` : undefined;
  const expires =
    v.expireTime !== null
      ? `${countdown(Date.parse(v.expireTime), nowMs)} (renewTime + ${v.leaseDurationSeconds ?? '?'}s by this machine's clock; the controller judges by its own)`
      : undefined;
  let out = fields([
    ['Name', v.name],
    ['Namespace', v.namespace],
    ['Mode', v.mode],
    ['Holder', v.holder !== null ? `${v.holder.name} (uid ${v.holder.uid})` : undefined],
    ['Token', v.token ?? undefined],
    ['Last token issued', v.lastToken ?? undefined],
    ['Acquired', when(v.acquireTime)],
    ['Renewed', when(v.renewTime)],
    ['Expires', expires],
    ['Candidates', v.candidates !== null ? String(v.candidates) : undefined],
    ['Grants', v.leaseTransitions !== null ? String(v.leaseTransitions) : undefined],
    ['State', v.held !== null ? `${v.held.reason}: ${v.held.message}` : 'Unknown (no Held condition yet)'],
    ...(v.problem !== null ? ([['Problem', v.problem]] as const) : []),
  ]);
  out += `Queue:${v.queue.length === 0 ? `  ${NONE}\n` : '\n'}`;
  if (v.queue.length > 0)
    out += indent(
      table(
        ['#', 'POD', 'WAITING'],
        v.queue.map((q, i) => [String(i + 1), q.pod, humanDuration(nowMs - Date.parse(q.since))]),
      ),
    );
  out += `Last transitions:${v.lastTransitions.length === 0 ? `  ${NONE}\n` : '\n'}`;
  if (v.lastTransitions.length > 0)
    out += indent(
      table(
        ['AGE', 'TYPE', 'REASON', 'MESSAGE'],
        v.lastTransitions.map((t) => [
          ageOf(t.time, nowMs) ?? '',
          t.type,
          t.reason,
          t.count > 1 ? `${t.message} (x${t.count})` : t.message,
        ]),
      ),
    );
  return out;
}

function indent(text: string): string {
  return text
    .split('\n')
    .map((l) => (l === '' ? l : `  ${l}`))
    .join('\n');
}
