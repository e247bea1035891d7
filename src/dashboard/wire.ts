/**
 * What the dashboard's server sends its page: the JSON of `GET /api/locks`, `GET /api/locks/NS/NAME`
 * and the Server-Sent Events of `GET /events`. Types only, so that the page (page/app.ts) imports
 * them without loading anything. Times are absolute (RFC 3339, UTC), never countdowns: the page
 * computes countdowns itself, so that they move without server traffic.
 */

/** LockState: `Held` while a pod holds the lock (any permit, for a Semaphore), `Free` otherwise. */
export type LockState = 'Held' | 'Free';

/** PermitView is one Semaphore permit's holder, from its permit Lease. */
export interface PermitView {
  readonly permit: number;
  readonly holder: string;
  readonly token: string | undefined;
  /** expireTime: the permit Lease's renewTime + leaseDurationSeconds. */
  readonly expireTime: string | undefined;
}

/** TimelineEntry is one thing that happened to a lock, oldest first in a timeline. */
export interface TimelineEntry {
  /** time: when it (last) happened. */
  readonly time: string;
  /** kind: the Event reason (EventReason), or `Renewed` for renewals seen on the Lease's watch. */
  readonly kind: string;
  /** warning: a Warning Event (expiry, step-down, re-floored counter…). */
  readonly warning: boolean;
  readonly message: string;
  /** count: occurrences folded into this entry (an Event's count; consecutive renewals of one term). */
  readonly count: number;
  readonly holder?: string;
  readonly token?: string;
}

/** LockView is one lock as the list shows it. */
export interface LockView {
  /** key: `namespace/name`. */
  readonly key: string;
  readonly namespace: string;
  readonly name: string;
  readonly mode: string;
  /** store: spec.store (`Lease`, `Redis`, `Redlock`). */
  readonly store: string;
  readonly state: LockState;
  /** degraded: the Degraded condition is True (e.g. the fencing backend is down); reason in `reason`. */
  readonly degraded: boolean;
  /** reason: the Held condition's reason when free, else the Degraded one's when degraded, else ''. */
  readonly reason: string;
  readonly holder: string | undefined;
  readonly holderUid: string | undefined;
  /** token: the current (or last) fencing token, a decimal string. */
  readonly token: string | undefined;
  readonly acquireTime: string | undefined;
  /** expireTime: when the current grant runs out unless renewed (earliest permit for a Semaphore). */
  readonly expireTime: string | undefined;
  readonly leaseDurationSeconds: number | undefined;
  readonly leaseName: string | undefined;
  readonly permits: number | undefined;
  readonly heldPermits: number | undefined;
  readonly holders: readonly PermitView[];
  readonly queue: readonly string[];
  readonly transitions: number | undefined;
  /** recent: the last few timeline entries, newest last (renewals left out). */
  readonly recent: readonly TimelineEntry[];
}

/** LockDetail is one lock with its whole (capped) timeline: `GET /api/locks/NS/NAME`. */
export interface LockDetail {
  readonly lock: LockView;
  readonly timeline: readonly TimelineEntry[];
}

/** Snapshot is the list: `GET /api/locks`, and the first `snapshot` event of `GET /events`. */
export interface Snapshot {
  /** now: the server's wall clock when it sent this, so the page can allow for its own clock's offset. */
  readonly now: string;
  /** synced: every watch has delivered its first list. */
  readonly synced: boolean;
  readonly locks: readonly LockView[];
}

/** Delta is one `delta` event of `GET /events`: locks changed or added, and keys removed. */
export interface Delta {
  readonly now: string;
  readonly upsert: readonly LockView[];
  readonly remove: readonly string[];
}

/** DetailEvent is the `detail` event of `GET /events?lock=NS/NAME`: the lock's whole state, or null once deleted. */
export interface DetailEvent {
  readonly now: string;
  readonly detail: LockDetail | null;
}
