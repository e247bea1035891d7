/**
 * Time as an injected dependency, so that tests can drive it.
 *
 * Two readings with different jobs: `now()` is the wall clock, fit only for timestamps that humans or
 * the API server read (conditions, Events); `monotonicMs()` is the only reading that may be used to
 * measure elapsed time, because wall clocks jump (NTP steps, `faketime`, VM resume) and a jump must
 * never make a lease look expired or fresh (DESIGN: no two clocks are ever compared; expiry is
 * judged by our monotonic clock from when we saw the record change).
 *
 * Production code reads time only through these interfaces so tests can drive it with
 * `test/support/fake-clock.ts` instead of sleeping.
 */

/**
 * Clock is the read-only time source for code that measures or timestamps but never waits.
 *
 * Contract: `monotonicMs()` never decreases within one process and has an arbitrary origin, so only
 * differences between two readings mean anything; never persist it or send it to another process.
 * `now()` may jump in either direction at any time.
 */
export interface Clock {
  /** now returns the current wall-clock time; use it for timestamps only, never for durations. */
  now(): Date;
  /** monotonicMs returns milliseconds since an arbitrary origin; it never goes backwards. */
  monotonicMs(): number;
}

/**
 * Timer is a handle to a callback scheduled with {@link TimerClock.setTimeout}.
 *
 * `cancel()` is idempotent and safe to call after the callback has run. `unref()` lets the process
 * exit while the timer is pending (a no-op on fake clocks); it returns the same timer for chaining.
 */
export interface Timer {
  cancel(): void;
  unref(): Timer;
}

/**
 * TimerClock is a {@link Clock} that can also schedule callbacks, for code that waits (the work
 * queue's delayed adds, retry loops). It is a separate interface so that code which only reads the
 * time can keep accepting the smaller {@link Clock}.
 */
export interface TimerClock extends Clock {
  /**
   * setTimeout runs `callback` once, no earlier than `delayMs` of monotonic time from now.
   *
   * A delay that is negative or NaN is treated as 0. Timers are ref'd (keep the process alive) like
   * Node's, unless `unref()` is called on the returned handle. Exceptions thrown by the callback
   * propagate as they would from a Node timer (an uncaught exception), so callbacks must not throw.
   */
  setTimeout(callback: () => void, delayMs: number): Timer;
}

/**
 * MAX_NODE_TIMEOUT_MS is the largest delay Node's setTimeout honours (2^31 − 1 ms, ≈ 24.8 days).
 * Node replaces longer delays with 1 ms and warns, which would turn a "requeue in 30 days" into a
 * hot loop, so {@link realClock} splits longer waits into chained timers.
 */
const MAX_NODE_TIMEOUT_MS = 2 ** 31 - 1;

/**
 * realClock is the process's real time: wall time from `Date`, monotonic time from
 * `performance.now()` (immune to wall-clock steps), timers from Node's `setTimeout`.
 *
 * Caveat: Node timers may fire late (event-loop lag, process paused by SIGSTOP or a frozen cgroup);
 * they never fire early relative to `performance.now()`. Code that cares about lateness must re-read
 * `monotonicMs()` in the callback rather than assume the delay elapsed exactly.
 */
export const realClock: TimerClock = Object.freeze({
  now: () => new Date(),
  monotonicMs: () => performance.now(),
  setTimeout(callback: () => void, delayMs: number): Timer {
    const deadline = performance.now() + clampDelay(delayMs);
    let handle: NodeJS.Timeout | undefined;
    let unrefd = false;
    const arm = (): void => {
      const remaining = deadline - performance.now();
      if (remaining > MAX_NODE_TIMEOUT_MS) {
        handle = globalThis.setTimeout(arm, MAX_NODE_TIMEOUT_MS);
      } else {
        handle = globalThis.setTimeout(
          () => {
            handle = undefined;
            callback();
          },
          Math.max(0, remaining),
        );
      }
      if (unrefd) handle.unref();
    };
    arm();
    const timer: Timer = {
      cancel() {
        if (handle !== undefined) globalThis.clearTimeout(handle);
        handle = undefined;
      },
      unref() {
        unrefd = true;
        handle?.unref();
        return timer;
      },
    };
    return timer;
  },
});

/**
 * sleep resolves after `ms` of the clock's monotonic time, or rejects with `signal.reason` as soon as
 * `signal` aborts (immediately if it already has), cancelling the timer.
 *
 * Caveat: the timer is ref'd, so a pending sleep keeps the process alive; abort it on shutdown.
 */
export function sleep(clock: TimerClock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted === true) {
      reject(abortReason(signal));
      return;
    }
    const onAbort = (): void => {
      timer.cancel();
      reject(abortReason(signal));
    };
    const timer = clock.setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** clampDelay maps negative and NaN delays to 0 and keeps the rest, including Infinity. */
export function clampDelay(delayMs: number): number {
  return delayMs > 0 ? delayMs : 0;
}

function abortReason(signal: AbortSignal | undefined): Error {
  const reason: unknown = signal?.reason;
  return reason instanceof Error ? reason : new Error('Aborted', { cause: reason });
}

/**
 * CONSERVATIVE_TIMER_SLICE_MS bounds how long a {@link conservativeClock} timer waits on the wrapped
 * clock before it re-reads the conservative time: after a VM resume, when the wrapped monotonic
 * clock lost the pause, a timer whose time has passed by the wall clock fires within this slice.
 */
export const CONSERVATIVE_TIMER_SLICE_MS = 250;

/**
 * conservativeClock is `clock` with an elapsed-time reading that never runs slower than either of
 * its clocks: between two readings, `monotonicMs()` advances by the larger of the wrapped clock's
 * monotonic and wall-clock progress (never backwards). For code that must stop trusting something
 * after a duration — a holder's term — where too little elapsed time is unsafe and too much only
 * costs availability.
 *
 * Why: on Linux `performance.now()` is CLOCK_MONOTONIC, which does not advance while a VM is paused
 * or suspended (and libuv timers, on the same clock, fire late by the pause), while the wall clock
 * is set right after resume by NTP or the hypervisor's clock source. Measured by the monotonic
 * clock alone, a holder would trust its term for the pause beyond its deadline while the
 * controller, on another machine, has already expired it and granted the next term.
 *
 * Guarantees: readings never decrease; the time between two readings is at least the monotonic
 * time between them and at least the wall time between them (the sum over readings of the larger
 * progress, so reading more often can only make it larger). A wall step forward makes time jump
 * forward (a term ends early: safe); a wall step back is ignored (the monotonic progress wins).
 * `setTimeout` fires no earlier than `delayMs` of this clock's time, waiting on the wrapped clock
 * in slices of at most {@link CONSERVATIVE_TIMER_SLICE_MS} and re-reading in between.
 * `now()` is the wrapped wall clock, unchanged.
 *
 * Caveat: the readings are taken only when someone reads or a timer fires; a process whose
 * monotonic clock stands still while it keeps running (no VM pause does that, the tests' clock shim
 * does) runs no timers, so it notices the wall clock only when it reads (every API read does).
 */
export function conservativeClock(clock: TimerClock): TimerClock {
  let lastMonotonic = clock.monotonicMs();
  let lastWall = clock.now().getTime();
  let elapsed = lastMonotonic;
  const read = (): number => {
    const monotonic = clock.monotonicMs();
    const wall = clock.now().getTime();
    const progress = Math.max(monotonic - lastMonotonic, wall - lastWall, 0);
    // A NaN wall reading (an invalid Date) counts as no wall progress.
    if (Number.isFinite(progress)) elapsed += progress;
    else elapsed += Math.max(monotonic - lastMonotonic, 0);
    lastMonotonic = monotonic;
    if (Number.isFinite(wall)) lastWall = wall;
    return elapsed;
  };
  const self: TimerClock = {
    now: () => clock.now(),
    monotonicMs: read,
    setTimeout(callback: () => void, delayMs: number): Timer {
      const deadline = read() + clampDelay(delayMs);
      let inner: Timer | undefined;
      let unrefd = false;
      const arm = (): void => {
        const remaining = deadline - read();
        if (remaining <= 0) {
          inner = undefined;
          callback();
          return;
        }
        inner = clock.setTimeout(arm, Math.min(remaining, CONSERVATIVE_TIMER_SLICE_MS));
        if (unrefd) inner.unref();
      };
      inner = clock.setTimeout(arm, Math.min(clampDelay(delayMs), CONSERVATIVE_TIMER_SLICE_MS));
      const timer: Timer = {
        cancel() {
          inner?.cancel();
          inner = undefined;
        },
        unref() {
          unrefd = true;
          inner?.unref();
          return timer;
        },
      };
      return timer;
    },
  };
  return Object.freeze(self);
}
