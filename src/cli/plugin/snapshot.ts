/**
 * LockSnapshot: everything the plugin's commands know of one lock, read once from the API server
 * (read.ts) and then only formatted or explained by pure functions (status-view.ts,
 * history-view.ts, explain.ts). Objects are plain JSON as the API server sent them: times are
 * strings.
 */
import type { CoreV1Event, V1Lease, V1Pod } from '@kubernetes/client-node';
import type { DistributedLock } from '../../api/v1alpha1/distributedlock.ts';

/** LockSnapshot is one lock with what the controller reads to decide on it, and its Events. */
export interface LockSnapshot {
  readonly lock: DistributedLock;
  /** lease: the lock's Lease (`dlock-<lock>`), undefined when it does not exist. */
  readonly lease: V1Lease | undefined;
  /** pods: the pods of the lock's namespace that its selector selects or that carry its holder marks. */
  readonly pods: readonly V1Pod[];
  /** events: the Events recorded about the lock (involvedObject), in any order. */
  readonly events: readonly CoreV1Event[];
}

/**
 * ControllerLeaseView: what the plugin found of the controller's leader-election Lease —
 * `found` (with the Lease), `absent` (no Lease of that name where it looked), or `unknown` (it
 * could not look, e.g. RBAC forbids listing Leases; `detail` says why).
 */
export type ControllerLeaseView =
  | { readonly state: 'found'; readonly lease: V1Lease }
  | { readonly state: 'absent'; readonly where: string }
  | { readonly state: 'unknown'; readonly detail: string };
