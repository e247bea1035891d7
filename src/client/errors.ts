/**
 * The errors acquire() throws when it does not hand a lock over (acquire.ts, lock-set.ts), in a
 * module of their own so that the single-lock and the lock-set code share them without importing
 * each other. Every one is a NotAcquiredError, so `fencepost exec` knows them by type.
 */
import type { ClaimHolder, SessionClaimedError } from '../agent/session-claim.ts';
import type { HolderRef } from '../protocol/holder.ts';

/** NotAcquiredError: the lock was not granted to this pod within waitMs (or the wait was aborted). */
export class NotAcquiredError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'NotAcquiredError';
  }
}

/**
 * SessionInUseError: another session in this pod holds the lock (the pod is granted the lock, not
 * the session, so a second session would share its term and token). Thrown at once, before
 * anything is requested or withdrawn. A NotAcquiredError, so `fencepost exec` exits 3.
 */
export class SessionInUseError extends NotAcquiredError {
  /** holder is what the other session said about itself (undefined if it did not answer, e.g. paused). */
  readonly holder: ClaimHolder | undefined;
  constructor(lock: string, cause: SessionClaimedError) {
    super(`acquire(${lock}): ${cause.message}`);
    this.name = 'SessionInUseError';
    this.holder = cause.holder;
    this.cause = cause;
  }
}

/**
 * LockHeldError (options.ifHeld `fail`): another pod held the lock when this one asked, or was
 * granted it while this one waited (a Semaphore: other pods held every permit; client/if-held.ts). Nothing of this acquire is left behind: a request it had made
 * was withdrawn before the error was thrown (if withdrawing fails, acquire throws that failure
 * instead). A NotAcquiredError; `fencepost exec --if-held skip` exits 6 on it, `fail` exits 3.
 */
export class LockHeldError extends NotAcquiredError {
  /** lock is the lock that was held. */
  readonly lock: string;
  /** holder is the pod incarnation the lock's Lease named (a Semaphore: the first permit's holder). */
  readonly holder: HolderRef;
  /** permits: for a Semaphore, how many permits it has and the pods holding them (all taken). */
  readonly permits: { readonly of: number; readonly holders: readonly HolderRef[] } | undefined;
  constructor(
    lock: string,
    holder: HolderRef,
    permits?: { readonly of: number; readonly holders: readonly HolderRef[] },
  ) {
    super(
      permits !== undefined
        ? `acquire(${lock}): all ${permits.of} permits held (by pods ${permits.holders.map((h) => h.name).join(', ')})`
        : `acquire(${lock}): held by pod ${holder.name}`,
    );
    this.name = 'LockHeldError';
    this.lock = lock;
    this.holder = holder;
    this.permits = permits;
  }
}

/**
 * HandingOverError is the reason a HeldLock's signal aborts with when a planned handover of its
 * term starts (`kubectl fencepost handover`, the lock's handover annotation, Lease
 * preferredHolder): the lock is still held, and renewed, until the app answers with drained() or
 * the drain period (`drainMs`) runs out; then it is released to `to`. Stop writing, finish or
 * abandon what is in flight, then call drained(). Not a NotAcquiredError: nothing was refused.
 */
export class HandingOverError extends Error {
  readonly lock: string;
  /** to: the successor pod's name. */
  readonly to: string;
  /** drainMs: the drain period in force when the handover started (the release comes at its end at the latest). */
  readonly drainMs: number;
  constructor(lock: string, to: string, drainMs: number) {
    super(
      `lock ${lock} is being handed over to pod ${to}: stop writing, then call drained() (released within ${drainMs} ms otherwise)`,
    );
    this.name = 'HandingOverError';
    this.lock = lock;
    this.to = to;
    this.drainMs = drainMs;
  }
}
