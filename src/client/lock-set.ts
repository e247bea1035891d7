/**
 * All-or-nothing acquisition of several locks: `acquire(['a', 'b'])`, and `fencepost exec --lock a
 * --lock b`. The set is taken one lock at a time, each through the single-lock acquire (one
 * session per lock, as ever), in the global order of client/lock-order.ts, so that sets that
 * overlap cannot deadlock:
 *
 * - waitMs bounds the whole set: each lock waits for what is left of it;
 * - when a lock is not granted (the bound ran out, the wait was aborted, it is held under ifHeld
 *   `fail`, another session of the pod holds it), the locks already held are released, in reverse
 *   order, and acquire throws that lock's error; so they are when a lock taken earlier was lost
 *   while a later one was awaited (NotAcquiredError naming it): every lock is held when the set
 *   is returned;
 * - once held, the set is lost when any of its locks is: the set's signal aborts, and isHeld() is
 *   false. The other locks stay held (and renewed) until the set is released, so that the work
 *   can stop before anyone else is granted them; release gives every lock up, in reverse order.
 */
import { waitBounded, type RequestBounds } from './bounds.ts';
import type { AcquireOptions, HeldLock } from './acquire.ts';
import { NotAcquiredError } from './errors.ts';
import { firstDuplicate, lockOrder } from './lock-order.ts';
import type { LockEvent } from '../agent/session.ts';
import { realClock } from '../runtime/clock.ts';

/** HeldLockSet is a granted set of locks. Dispose it (or call release) when done. */
export interface HeldLockSet extends AsyncDisposable {
  /** locks: every lock of the set, in the order they were acquired (the global order). */
  readonly locks: readonly HeldLock[];
  /** token is the fencing token of one lock of the set; throws for a lock not in it. */
  token(lock: string): bigint;
  /** signal aborts when any lock of the set is lost, or the set is released: stop writing then. */
  readonly signal: AbortSignal;
  /** isHeld: every lock of the set is held (checked against the clock now). */
  isHeld(): boolean;
  /** onEvent subscribes to the renewed/lost/released events of every lock of the set. */
  onEvent(listener: (e: LockEvent) => void): () => void;
  /**
   * release releases every lock, in reverse order of acquisition, each with `bounds`; a failure
   * to release one does not stop the others (the first failure is thrown at the end, and that
   * lock's Lease expires on the server). Idempotent, as HeldLock.release.
   */
  release(bounds?: RequestBounds): Promise<void>;
}

/** AcquireOne acquires one lock (acquire.ts's single-lock acquire, passed in to keep the modules acyclic). */
export type AcquireOne = (lock: string, opts: AcquireOptions) => Promise<HeldLock>;

/**
 * SetScope is what the locks of one set share: their namespace (for the global order), options
 * every lock's acquire gets (a Lease set: the pod identity and one API client), and how to close
 * what was opened for the set, once it is released or not granted.
 */
export interface SetScope {
  readonly namespace: string;
  readonly shared: Partial<AcquireOptions>;
  readonly close: () => void;
}

/** acquireSet takes every lock of `locks` or none (see the module comment). */
export async function acquireSet(
  locks: readonly string[],
  opts: AcquireOptions,
  one: AcquireOne,
  scope: () => SetScope,
): Promise<HeldLockSet> {
  const what = `acquire([${locks.join(', ')}])`;
  if (locks.length === 0) throw new TypeError(`${what}: no lock given`);
  const twice = firstDuplicate(locks);
  if (twice !== undefined) throw new TypeError(`${what}: lock ${twice} is given twice`);
  if (opts.runId !== undefined && locks.length > 1)
    throw new TypeError(`${what}: options.runId is for one lock; a run is recorded on one lock's Lease`);
  // Made after the checks above, so that a bad set is named before a missing identity.
  const { namespace, shared, close: closeOwn } = scope();
  const clock = opts.clock ?? realClock;
  const order = lockOrder(locks.map((name) => ({ namespace, name }))).map((r) => r.name);
  const deadline = opts.waitMs !== undefined ? clock.monotonicMs() + opts.waitMs : undefined;
  const held: HeldLock[] = [];
  for (const name of order) {
    try {
      held.push(
        await one(name, {
          ...opts,
          ...shared,
          // The first lock waits the whole bound (to the ms, as one lock always did), each next what is left.
          ...(deadline !== undefined
            ? { waitMs: held.length === 0 ? opts.waitMs : Math.max(0, Math.ceil(deadline - clock.monotonicMs())) }
            : {}),
        }),
      );
    } catch (err) {
      // Nothing is kept of a set not granted whole; a release that fails leaves its Lease to expire.
      for (const h of [...held].reverse()) await h.release().catch(() => undefined);
      closeOwn();
      // The bound is the set's: say so, rather than report the few ms left for this lock.
      if (locks.length > 1 && err instanceof NotAcquiredError && err.constructor === NotAcquiredError)
        throw new NotAcquiredError(
          `${what}: lock ${name} ${
            deadline !== undefined && clock.monotonicMs() >= deadline
              ? `not granted within ${opts.waitMs} ms (the bound of the whole set)`
              : 'not granted'
          }${held.length > 0 ? `; released ${held.map((h) => h.lock).join(', ')}` : ''}`,
        );
      throw err;
    }
  }
  // All or none when the set is handed over: a lock taken first may have been lost while a later
  // one was awaited (its Lease deleted, a pause past its deadline). Such a set was never held
  // whole, so it is not handed over (before, it was, with its signal already aborted).
  const lost = held.filter((h) => !h.isHeld());
  if (lost.length > 0) {
    for (const h of [...held].reverse()) await h.release().catch(() => undefined);
    closeOwn();
    throw new NotAcquiredError(
      `${what}: lock ${lost.map((h) => h.lock).join(', ')} lost before the set was held whole; released ${held.map((h) => h.lock).join(', ')}`,
    );
  }
  const signal = AbortSignal.any(held.map((h) => h.signal));
  let released: Promise<void> | undefined;
  const release = (bounds?: RequestBounds): Promise<void> => {
    if (released !== undefined) return waitBounded(released, bounds, clock, `release of ${what}`);
    released = (async () => {
      let failure: { err: unknown } | undefined;
      for (const h of [...held].reverse()) {
        try {
          await h.release(bounds);
        } catch (err) {
          failure ??= { err };
        }
      }
      closeOwn();
      if (failure !== undefined) throw failure.err;
    })();
    return released;
  };
  return {
    locks: held,
    token: (lock) => {
      const h = held.find((l) => l.lock === lock);
      if (h === undefined) throw new TypeError(`${what}: lock ${lock} is not in the set`);
      return h.token;
    },
    signal,
    isHeld: () => held.every((h) => h.isHeld()),
    onEvent: (listener) => {
      const offs = held.map((h) => h.onEvent(listener));
      return () => {
        for (const off of offs) off();
      };
    },
    release,
    [Symbol.asyncDispose]: () => release(),
  };
}
