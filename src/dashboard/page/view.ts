/**
 * The page's pure parts: countdown text, filters, the permits/queue column. Runs in the browser
 * (served as a module by the dashboard) and under Node in the unit tests; it touches no DOM.
 */
import type { LockView } from '../wire.ts';

/** Filter is what the list's filter controls hold; empty strings mean "any". */
export interface Filter {
  readonly namespace: string;
  /** state: '' | 'Held' | 'Free' | 'Degraded'. */
  readonly state: string;
  /** text: a substring of the lock's name or holder (case-insensitive). */
  readonly text: string;
}

/** matches says whether a lock passes the filter. */
export function matches(lock: LockView, f: Filter): boolean {
  if (f.namespace !== '' && lock.namespace !== f.namespace) return false;
  if (f.state === 'Degraded' ? !lock.degraded : f.state !== '' && lock.state !== f.state) return false;
  const text = f.text.trim().toLowerCase();
  if (text === '') return true;
  return (
    lock.name.toLowerCase().includes(text) ||
    (lock.holder?.toLowerCase().includes(text) ?? false) ||
    lock.holders.some((h) => h.holder.toLowerCase().includes(text))
  );
}

const two = (n: number): string => String(n).padStart(2, '0');

/** durationText renders a non-negative duration in ms, to the second: `9s`, `4m05s`, `2h03m`. */
export function durationText(ms: number): string {
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${two(s % 60)}s`;
  return `${Math.floor(s / 3600)}h${two(Math.floor((s % 3600) / 60))}m`;
}

/**
 * countdownText: how long until `expireTime` at `nowMs` (the browser's clock corrected by the
 * server's offset): `12s`, or `expired 3s ago` once passed, or `—` without an expiry. Rounded up
 * while running, so it reads `1s` until the last moment rather than `0s` a second early.
 */
export function countdownText(expireTime: string | undefined, nowMs: number): string {
  if (expireTime === undefined) return '—';
  const left = Date.parse(expireTime) - nowMs;
  if (!Number.isFinite(left)) return '—';
  return left > 0 ? durationText(Math.ceil(left / 1000) * 1000) : `expired ${durationText(-left)} ago`;
}

/** permitsText: the permits/queue column: `2/3 permits` (Semaphore), `3 queued` (Mutex), else `—`. */
export function permitsText(lock: LockView): string {
  if (lock.mode === 'Semaphore') return `${lock.heldPermits ?? 0}/${lock.permits ?? 0} permits`;
  if (lock.queue.length > 0) return `${lock.queue.length} queued`;
  return lock.mode === 'Mutex' ? '0 queued' : '—';
}

/** stateText: `Held`, `Free`, with ` · Degraded` when it is; the reason of a free or degraded lock in parentheses. */
export function stateText(lock: LockView): string {
  const state = lock.degraded ? `${lock.state} · Degraded` : lock.state;
  return lock.reason !== '' ? `${state} (${lock.reason})` : state;
}

/** clockText renders an RFC 3339 time as the browser's local time of day, `14:03:07`. */
export function clockText(time: string): string {
  const d = new Date(time);
  return Number.isFinite(d.getTime()) ? `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}` : time;
}

/** parseLockKey reads `namespace/name` (the `lock` query parameter); undefined when malformed. */
export function parseLockKey(key: string | null): { namespace: string; name: string } | undefined {
  if (key === null) return undefined;
  const m = /^([a-z0-9][-a-z0-9.]*)\/([a-z0-9][-a-z0-9.]*)$/.exec(key);
  return m !== null ? { namespace: m[1] ?? '', name: m[2] ?? '' } : undefined;
}
