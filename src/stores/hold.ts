/**
 * Holding a store lock, the same for single Redis and Redlock: wait for the grant (release
 * notifications first, jittered exponential backoff as the fallback), then keep it with a
 * watchdog that renews every third of the TTL while the holder runs, and declare it lost the
 * moment its validity cannot be vouched for. The held term is the holder core's
 * (runtime/holder.ts: validity from the send time, renews retried until the deadline, step-down,
 * release) on its shell (runtime/holder-loop.ts: the timers), with the store's timings
 * (stores/redis/timing.ts storeTimings) and a renew that is the backend's compare-and-expire; the
 * waiter and its backoff (timing.ts) are this module's.
 *
 * The validity is the hold's own reckoning, from the moment each acquire or renew request was sent
 * (stores/redis/timing.ts validUntil), read on one conservativeClock (runtime/clock.ts) over the
 * caller's clock from before the acquire was sent: a VM pause that stops the monotonic clock —
 * also while the acquire is out — must still end the term when the wall clock says it has.
 */
import type { LockEvent } from '../protocol/lock-event.ts';
import type { Logger } from '../observability/logger.ts';
import type { TermTimings } from '../protocol/timings.ts';
import { conservativeClock, type TimerClock } from '../runtime/clock.ts';
import {
  heldTerm,
  holderTransition,
  initialHolder,
  type DeadlineCause,
  type HolderPolicy,
  type HolderState,
} from '../runtime/holder.ts';
import { HolderLoop } from '../runtime/holder-loop.ts';
import { RENEW_RETRY_MS, retryDelayMs, storeTimings, WAIT_BACKOFF, type Backoff } from './redis/timing.ts';
import type { HolderRef } from '../protocol/holder.ts';
import { newOwnerId } from './owner.ts';
import type { Attempt, Grant, LockBackend } from './store.ts';

/** StoreHold is a granted store lock. */
export interface StoreHold {
  readonly token: bigint;
  /** counterMissing: see Grant.counterMissing (stores/store.ts). */
  readonly counterMissing: boolean;
  /** clockFloored: see Grant.clockFloored (stores/store.ts). */
  readonly clockFloored: boolean;
  readonly timings: TermTimings;
  /** signal aborts when the lock is lost or released. */
  readonly signal: AbortSignal;
  /** isHeld: not lost, not released, and the validity has not passed on the clock now. */
  isHeld(): boolean;
  /**
   * validForMs: how long the validity has left now, counted from when the request that granted or
   * last renewed the lock was sent, on the hold's clock (so a slow reply shows as less); 0 once
   * the lock is lost or released or the validity has passed. What the agent reports as expiresInMs.
   */
  validForMs(): number;
  onEvent(listener: (e: LockEvent) => void): () => void;
  /** release stops the watchdog and gives the lock up (compare-and-delete). Idempotent. */
  release(): Promise<void>;
}

/** SUBSCRIBE_WAIT_MS: how long the first attempt waits for the release subscription. */
const SUBSCRIBE_WAIT_MS = 250;

/** HoldOptions configures {@link holdLock}. */
export interface HoldOptions {
  readonly lock: string;
  readonly ttlMs: number;
  readonly clock: TimerClock;
  readonly log: Logger;
  readonly signal?: AbortSignal | undefined;
  /** waitMs: give up after this long; undefined waits until signal aborts. */
  readonly waitMs?: number | undefined;
  /** ifHeld `fail`: give up at the first refusal by another owner. */
  readonly ifHeld: 'wait' | 'fail';
  /** floor: the lowest token the grant may be issued above (default 0; see docs/stores.md). */
  readonly floor: () => bigint | Promise<bigint>;
  /** backoff: the waiter's retry delays when no release is notified; default WAIT_BACKOFF (stores/redis/timing.ts). */
  readonly backoff?: Backoff;
  /** random: [0, 1), for the backoff's jitter; default Math.random. */
  readonly random?: () => number;
  /** holderPod: the pod this holder runs in, named in its owner ids (stores/owner.ts) so that the controller can show it. */
  readonly holderPod?: HolderRef | undefined;
  /** newOwner: a fresh owner id per attempt; default stores/owner.ts newOwnerId(holderPod). */
  readonly newOwner?: () => string;
}

/** HoldResult: held, or why not. */
export type HoldResult =
  | { readonly kind: 'held'; readonly hold: StoreHold }
  | { readonly kind: 'timedOut' | 'aborted' | 'heldByAnother'; readonly reason: string };

/**
 * holdLock waits for the lock and returns it held, or says why not. The first attempt goes out at
 * once (a free lock costs one round trip, like SET NX PX alone); after the first refusal it
 * subscribes to release notifications and tries again before it waits, so that a release between
 * a refusal and the subscription is not missed. Failures to reach the store are retried with the
 * same backoff until the wait ends; the last reason is reported.
 */
export async function holdLock(backend: LockBackend, o: HoldOptions): Promise<HoldResult> {
  const random = o.random ?? Math.random;
  const newOwner = o.newOwner ?? (() => newOwnerId(o.holderPod));
  // The hold's clock, from before the first request: the time a request is out counts against its
  // grant's validity by the larger of the monotonic and the wall clock's progress (a VM paused
  // while the acquire was out has the wall clock set forward on resume, the monotonic one not).
  const holdClock = conservativeClock(o.clock);
  const deadline = o.waitMs !== undefined ? o.clock.monotonicMs() + o.waitMs : undefined;
  let wake: (() => void) | undefined;
  // A release notified while an attempt was out is not lost: the next wait is skipped.
  let notified = false;
  let subscription: Promise<() => void> | undefined;
  // This waiter's own owner ids: a failed attempt that took part of a Redlock gives it back, and
  // that release is published too; hearing its own give-back as a release would make it retry at
  // once, every time (the last few suffice: older attempts' messages have long arrived).
  const mine: string[] = [];
  // Listening before waiting, but for SUBSCRIBE_WAIT_MS at most: a store slow to answer must not
  // hold up the next attempt (the backoff finds a release it missed).
  const listen = async (): Promise<void> => {
    const s = backend
      .subscribe((owner) => {
        if (mine.includes(owner)) return;
        notified = true;
        wake?.();
      })
      .catch((err: unknown) => {
        o.log.warn({ err }, 'Failed to subscribe to release notifications');
        return () => undefined;
      });
    subscription = s;
    await new Promise<void>((resolve) => {
      const timer = o.clock.setTimeout(resolve, SUBSCRIBE_WAIT_MS);
      void s.then(() => {
        timer.cancel();
        resolve();
      });
    });
  };
  try {
    let lastReason = 'not tried';
    for (let waits = 0; ;) {
      if (o.signal?.aborted === true) return { kind: 'aborted', reason: lastReason };
      const owner = newOwner();
      mine.push(owner);
      if (mine.length > 8) mine.shift();
      let a: Attempt;
      // Before the request: the key's TTL starts no earlier than this (stores/redis/timing.ts).
      let sentAt = holdClock.monotonicMs();
      try {
        const floor = await o.floor();
        sentAt = holdClock.monotonicMs();
        a = await backend.tryAcquire(owner, o.ttlMs, floor);
      } catch (err) {
        a = { granted: false, held: false, reason: err instanceof Error ? err.message : String(err) };
        o.log.debug({ err }, 'Failed to try the lock');
      }
      if (a.granted) {
        const term = holderTransition(
          initialHolder<TermTimings>(),
          { type: 'Granted', request: { token: a.token, sentAtMs: sentAt, timings: storeTimings(o.ttlMs) } },
          holdClock.monotonicMs(),
          storePolicy(o.ttlMs),
        );
        if (heldTerm(term.state) !== undefined)
          return { kind: 'held', hold: keep(backend, owner, a, term.state, holdClock, o) };
        // A grant answered after its own validity (a slow reply, a pause) is worth nothing: given back.
        await backend.release(owner).catch(() => undefined);
        a = { granted: false, held: false, reason: `granted token ${a.token} too late: its validity had passed` };
      }
      lastReason = a.reason;
      if (a.held && o.ifHeld === 'fail') return { kind: 'heldByAnother', reason: a.reason };
      const left = deadline !== undefined ? deadline - o.clock.monotonicMs() : undefined;
      if (left !== undefined && left <= 0) return { kind: 'timedOut', reason: lastReason };
      if (subscription === undefined) {
        await listen(); // then try again at once: the release may have come before the subscription
        continue;
      }
      if (notified) {
        notified = false;
        continue;
      }
      const delay = retryDelayMs(waits++, o.backoff ?? WAIT_BACKOFF, random, a.heldForMs, left);
      await new Promise<void>((resolve) => {
        const done = (): void => {
          timer.cancel();
          wake = undefined;
          notified = false;
          o.signal?.removeEventListener('abort', done);
          resolve();
        };
        const timer = o.clock.setTimeout(done, o.signal?.aborted === true ? 0 : delay);
        wake = done;
        o.signal?.addEventListener('abort', done, { once: true });
      });
    }
  } finally {
    void subscription?.then((unsubscribe) => {
      unsubscribe();
    });
  }
}

/**
 * stacklessError: an Error without a captured stack, for the signal's reason at a release — a
 * normal end, on the hot path of every acquire and release (capturing a stack cost more than the
 * rest of the hold's bookkeeping, measured in bench/redis-locks.ts).
 */
function stacklessError(message: string): Error {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return new Error(message);
  } finally {
    Error.stackTraceLimit = limit;
  }
}

/** STORE_DEADLINE_REASONS: how a store lock's loss at its validity is reported, by how it was found. */
const STORE_DEADLINE_REASONS: Readonly<Record<DeadlineCause, (err: unknown) => string>> = {
  check: () => 'the validity passed without a renew',
  failed: (err) => `renews failed until the validity passed: ${err instanceof Error ? err.message : String(err)}`,
  late: () => 'the renew was answered after its validity had passed',
  unsent: () => 'the validity passed before the renew was sent',
};

/**
 * storePolicy is the holder core's policy for a store lock: the key is this owner's until a renew
 * says otherwise (the renew script compares the owner), the timings are the TTL's, and a renew
 * that got no answer is tried again within RENEW_RETRY_MS (sooner if the validity ends sooner).
 */
export function storePolicy(ttlMs: number): HolderPolicy<TermTimings> {
  const timings = storeTimings(ttlMs);
  return {
    names: () => true,
    timingsFor: () => timings,
    retryInMs: (_request, leftMs) => Math.max(0, Math.min(RENEW_RETRY_MS, leftMs)),
    deadlineReason: (cause, err) => STORE_DEADLINE_REASONS[cause](err),
  };
}

/** keep runs the watchdog of a grant, held as `granted` (the core's state after the grant) on `clock`, and returns its handle. */
function keep(
  backend: LockBackend,
  owner: string,
  g: Grant,
  granted: HolderState<TermTimings>,
  clock: TimerClock,
  o: HoldOptions,
): StoreHold {
  const timings = storeTimings(o.ttlMs);
  const token = g.token.toString();
  const listeners = new Set<(e: LockEvent) => void>();
  const ended = new AbortController();
  let released: Promise<void> | undefined;

  const emit = (e: Omit<LockEvent, 'lock' | 'token'>): void => {
    for (const l of [...listeners]) l({ ...e, lock: o.lock, token });
  };
  const loop: HolderLoop<TermTimings> = new HolderLoop({
    clock,
    policy: storePolicy(o.ttlMs),
    state: granted,
    renew: async () => {
      try {
        return (await backend.renew(owner, o.ttlMs)) === 'renewed'
          ? { kind: 'renewed' }
          : { kind: 'notOurs', reason: 'the key is gone or held by another owner' };
      } catch (err) {
        return { kind: 'failed', err: err instanceof Error ? err.message : err };
      }
    },
    onEmit: (e) => {
      if (e.event === 'renewed') emit({ type: 'renewed', expiresInMs: validForMs() });
      if (e.event !== 'lost') return;
      const reason = e.reason ?? 'lost';
      o.log.error({ lock: o.lock, token, reason }, 'Lost store lock');
      ended.abort(new Error(`lock ${o.lock} lost: ${reason}`));
      emit({ type: 'lost', reason });
    },
    onReport: (err) => {
      o.log.warn({ lock: o.lock, token, err }, 'Failed to renew store lock; retrying');
    },
  });
  // Whole milliseconds, rounded down: what is reported may only understate the validity.
  const validForMs = (): number => {
    const term = loop.term();
    return term !== undefined ? Math.max(0, Math.floor(term.validUntilMs - clock.monotonicMs())) : 0;
  };
  // The watchdog's timers are armed once the promise chain that hands the grant to the caller has
  // run (process.nextTick runs after the microtasks queued now): a caller that releases at once
  // sends its release first. Nothing depends on them being armed sooner: isHeld() reads the
  // clock, and a timer cannot fire before the event loop turns anyway. A hold released by then
  // arms none.
  process.nextTick(() => {
    loop.arm();
  });
  if (g.counterMissing)
    o.log.warn(
      { lock: o.lock, token },
      "Fencing counter was missing (a new lock, or the store lost its data): the token starts from the Redis server's clock",
    );
  else if (g.clockFloored)
    o.log.warn(
      { lock: o.lock, token },
      "This lock's tokens now come from another Redis process (a failover, a restart, a moved slot): the token was floored at the server's clock",
    );

  return {
    token: g.token,
    counterMissing: g.counterMissing,
    clockFloored: g.clockFloored,
    timings,
    signal: ended.signal,
    isHeld: () => {
      const term = loop.term();
      return term !== undefined && clock.monotonicMs() < term.validUntilMs;
    },
    validForMs,
    onEvent(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    release() {
      released ??= (async () => {
        // The request goes out first (also after a loss: if the key is still ours after all,
        // waiters need not wait out its TTL); the bookkeeping below is done while Redis answers
        // rather than before it is asked. Nothing else in this process runs in between.
        const sent = backend.release(owner);
        const effects = loop.close({ type: 'ReleaseRequested' }, ['Emit', 'Release']);
        ended.abort(stacklessError(`lock ${o.lock} released`));
        try {
          await sent;
        } finally {
          if (effects.some((e) => e.type === 'Emit' && e.event === 'released')) emit({ type: 'released' });
        }
      })();
      return released;
    },
  };
}
