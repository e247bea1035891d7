/**
 * The lock's Events read back as transitions: when, which reason, and — for a grant — which pod
 * got which token. The controller writes those Events (reconciler.ts; reasons in EventReason,
 * api/v1alpha1/conditions.ts); this module is their reader. Pure.
 */
import type { CoreV1Event } from '@kubernetes/client-node';
import { EventReason } from '../../api/v1alpha1/conditions.ts';
import { COMBINED_PREFIX } from '../../kube/event-correlator.ts';
import { tokenOrUndefined } from '../../protocol/token.ts';
import { timeMs } from './format.ts';

/** Transition is one Event about a lock. */
export interface Transition {
  /** time: when it last happened (RFC 3339): the Event's lastTimestamp, else eventTime, else firstTimestamp, else its creation. */
  readonly time: string | undefined;
  /** firstTime: when it first happened, when the Event says (it may count several occurrences). */
  readonly firstTime: string | undefined;
  readonly type: string;
  readonly reason: string;
  readonly message: string;
  /** count: how many times the Event occurred (client-go's recorder counts identical Events in one). */
  readonly count: number;
  /** holder and token: for a grant (LeaseGranted), the pod granted and its fencing token. */
  readonly holder?: string;
  readonly token?: string;
  /** cause: for a grant, why (as the controller wrote it: "the previous holder released it"…). */
  readonly cause?: string;
  /** combined: the Event stands for several similar ones; only the latest's message is kept. */
  readonly combined: boolean;
}

/** GRANTED matches the controller's LeaseGranted message (lease-lock.ts). */
const GRANTED = /^Granted to pod (\S+) with fencing token (\d+) \((.*)\)$/;

/** LOCK_REASONS: the Event reasons the controller records on a lock (LockLost goes on the agent's pod). */
const LOCK_REASONS: ReadonlySet<string> = new Set(Object.values(EventReason).filter((r) => r !== EventReason.LockLost));

/** timeOf: an Event time as RFC 3339 (UTC, milliseconds), or undefined. */
function timeOf(t: unknown): string | undefined {
  const ms = timeMs(t);
  return ms !== undefined ? new Date(ms).toISOString() : undefined;
}

/** transitionOf reads one Event. */
export function transitionOf(e: CoreV1Event): Transition {
  const raw = e.message ?? '';
  const combined = raw.startsWith(COMBINED_PREFIX);
  const message = combined ? raw.slice(COMBINED_PREFIX.length) : raw;
  const granted = e.reason === EventReason.LeaseGranted ? GRANTED.exec(message) : null;
  const first = timeOf(e.firstTimestamp) ?? timeOf(e.eventTime) ?? timeOf(e.metadata.creationTimestamp);
  return {
    time: timeOf(e.lastTimestamp) ?? timeOf(e.eventTime) ?? first,
    firstTime: first,
    type: e.type ?? '',
    reason: e.reason ?? '',
    message: raw,
    count: e.count ?? 1,
    ...(granted !== null ? { holder: granted[1] ?? '', token: granted[2] ?? '', cause: granted[3] ?? '' } : {}),
    combined,
  };
}

/**
 * byTokenOrder orders two entries that name tokens by their tokens (decimal strings; the larger
 * was granted later), and leaves any other pair as it is (0).
 */
export function byTokenOrder(a: string | null | undefined, b: string | null | undefined): number {
  const x = tokenOrUndefined(a ?? undefined);
  const y = tokenOrUndefined(b ?? undefined);
  if (x === undefined || y === undefined) return 0;
  return x < y ? -1 : x > y ? 1 : 0;
}

/**
 * byWriteOrder orders two Events by the API server's write order, their resourceVersions — etcd
 * revisions, comparable as integers since Kubernetes 1.35 — and leaves them as they are (0) when
 * either is not an integer.
 */
function byWriteOrder(a: CoreV1Event, b: CoreV1Event): number {
  return byTokenOrder(a.metadata.resourceVersion, b.metadata.resourceVersion);
}

/**
 * transitions reads the controller's Events about a lock, oldest first. Event times have whole
 * seconds only, and a handoff writes its Events within one, so ties are broken by the tokens two
 * grants name, then by write order (resourceVersion), then by first time and reason. Events of
 * other reasons (another tool's) are left out.
 */
export function transitions(events: readonly CoreV1Event[]): Transition[] {
  return events
    .filter((e) => LOCK_REASONS.has(e.reason ?? ''))
    .map((e) => ({ e, t: transitionOf(e) }))
    .sort(
      (x, y) =>
        (x.t.time ?? '').localeCompare(y.t.time ?? '') ||
        byTokenOrder(x.t.token, y.t.token) ||
        byWriteOrder(x.e, y.e) ||
        (x.t.firstTime ?? '').localeCompare(y.t.firstTime ?? '') ||
        x.t.reason.localeCompare(y.t.reason),
    )
    .map(({ t }) => t);
}
