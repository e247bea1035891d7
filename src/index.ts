/**
 * fencepost — the library entry point: acquire a DistributedLock in-process, and the fencing
 * guards that make a resource refuse stale tokens.
 */
export { acquire, AlreadyDoneError, NotAcquiredError, type AcquireOptions, type HeldLock } from './client/acquire.ts';
export type { LockEvent, LockSnapshot, LockState } from './agent/session.ts';
export { parseToken, TokenError, MAX_TOKEN } from './fencing/token.ts';
export * from './guards/index.ts';
