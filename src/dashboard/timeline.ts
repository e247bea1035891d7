/**
 * A lock's Events read as timeline entries. The controller records them on the lock (reasons in
 * EventReason, api/v1alpha1/conditions.ts); the agent records `LockLost` on its own pod, naming
 * the lock in its message (src/cli/agent.ts). Pure.
 *
 * The kubectl plugin has its own reader of the same Events (cli/plugin/transitions.ts); this layer
 * may not import cli/, and needs less of it (no sorting of whole-second ties by token: the page
 * shows Events in the order of their times, ties in the order they arrived).
 */
import type { CoreV1Event } from '@kubernetes/client-node';
import { EventReason } from '../api/v1alpha1/conditions.ts';
import { COMBINED_PREFIX } from '../kube/event-correlator.ts';
import type { TimelineEntry } from './wire.ts';

/** GRANTED matches the controller's LeaseGranted message (controllers/distributedlock/lease-lock.ts). */
const GRANTED = /^Granted to pod (\S+) with fencing token (\d+)/;

/** STEPPED_DOWN matches the agent's LockLost message: `Stepped down from lock L (fencing token N): why`. */
const STEPPED_DOWN = /^Stepped down from lock (\S+) \(fencing token (\d+)\)/;

/** TOKEN finds a token in any other message (`… token 42 …`), for StoreGranted and FencingRefloored. */
const TOKEN = /\btoken (\d+)/;

/** timeOf: a Kubernetes time (Date from a list, string from a watch) as RFC 3339, or undefined. */
export function timeOf(t: unknown): string | undefined {
  const ms = t instanceof Date ? t.getTime() : typeof t === 'string' ? Date.parse(t) : NaN;
  return Number.isFinite(ms) ? new Date(ms).toISOString() : undefined;
}

/** lockKeyOfEvent says which lock an Event is about: `namespace/name`, or undefined when none. */
export function lockKeyOfEvent(e: CoreV1Event): string | undefined {
  const ns = e.metadata.namespace ?? e.involvedObject.namespace ?? '';
  if (e.involvedObject.kind === 'DistributedLock') return `${ns}/${e.involvedObject.name ?? ''}`;
  if (e.reason === EventReason.LockLost && e.involvedObject.kind === 'Pod') {
    const m = STEPPED_DOWN.exec(stripCombined(e.message ?? ''));
    if (m !== null) return `${ns}/${m[1] ?? ''}`;
  }
  return undefined;
}

function stripCombined(message: string): string {
  return message.startsWith(COMBINED_PREFIX) ? message.slice(COMBINED_PREFIX.length) : message;
}

/** entryOfEvent reads one Event as a timeline entry; the LockLost entry names the pod that stepped down. */
export function entryOfEvent(e: CoreV1Event): TimelineEntry {
  const message = stripCombined(e.message ?? '');
  const reason = e.reason ?? '';
  const time =
    timeOf(e.lastTimestamp) ??
    timeOf(e.eventTime) ??
    timeOf(e.firstTimestamp) ??
    timeOf(e.metadata.creationTimestamp) ??
    new Date(0).toISOString();
  const granted = reason === EventReason.LeaseGranted ? GRANTED.exec(message) : null;
  const lost = reason === EventReason.LockLost ? STEPPED_DOWN.exec(message) : null;
  const holder = granted?.[1] ?? (lost !== null ? e.involvedObject.name : undefined);
  const token = granted?.[2] ?? lost?.[2] ?? TOKEN.exec(message)?.[1];
  return {
    time,
    kind: reason,
    warning: e.type === 'Warning',
    message,
    count: e.count ?? 1,
    ...(holder !== undefined ? { holder } : {}),
    ...(token !== undefined ? { token } : {}),
  };
}
