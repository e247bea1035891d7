/**
 * fencepost — the library entry point (`import { acquire } from 'fencepost'`): acquire a
 * DistributedLock in-process, and the fencing guards that make a resource refuse stale tokens.
 * This entry loads no Kubernetes client package (acquire() speaks to the API server through
 * src/transport/, and logs through observability/logger.ts, which needs no package either; js-yaml
 * is loaded on the first YAML kubeconfig); a service that only guards a resource imports
 * `fencepost/guards` (src/guards/index.ts), which loads nothing but its own files.
 *
 * acquire() with a `store` (Redis, Redlock: docs/stores.md) loads the stores and ioredis then,
 * not before: this entry provides them as a lazy import (client/store-loader.ts).
 */
import { provideStores } from './client/store-loader.ts';

provideStores(() => import('./stores/open.ts'));

export {
  acquire,
  AlreadyDoneError,
  HandingOverError,
  LockHeldError,
  NotAcquiredError,
  RequestTimeoutError,
  SessionInUseError,
  type AcquireOptions,
  type HeldLock,
  type HeldLockSet,
  type IfHeld,
  type RequestBounds,
} from './client/acquire.ts';
export { connectStore, StoreLockHeldError, type StoreConnection } from './client/store-acquire.ts';
export { StoreUrlError } from './stores/url.ts';
export type { HandoverNotice, LockEvent, LockSnapshot, LockState } from './agent/session.ts';
export * from './guards/index.ts';
