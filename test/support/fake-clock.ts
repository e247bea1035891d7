/**
 * A manually driven clock for unit tests of code that takes a `Clock` or `TimerClock`.
 */
import { clampDelay } from '../../src/runtime/clock.ts';
import type { Timer, TimerClock } from '../../src/runtime/clock.ts';

/** FakeClockOptions sets where a {@link FakeClock} starts. */
export interface FakeClockOptions {
  /** wall is the initial wall-clock time. Defaults to 2025-01-01T00:00:00Z. */
  readonly wall?: Date;
  /** monotonicMs is the initial monotonic reading. Defaults to 0. */
  readonly monotonicMs?: number;
}

interface PendingTimer {
  readonly id: number;
  readonly dueAt: number;
  readonly callback: () => void;
}

/**
 * FakeClock is a {@link TimerClock} whose time moves only when a test moves it.
 *
 * Contract: `advance(ms)` runs every timer due within the window in deadline order (ties in the order
 * they were scheduled), with the clock reading exactly each timer's deadline while its callback runs,
 * and also runs timers that those callbacks schedule inside the window. Wall and monotonic time move
 * together, except through {@link FakeClock.setWall}, which models a wall-clock step.
 *
 * Caveat: callbacks run synchronously inside `advance`; promise continuations they start run only
 * after the test yields. Use {@link FakeClock.advanceAsync} when a timer's work is asynchronous and
 * schedules the next timer from a continuation (retry loops).
 */
export class FakeClock implements TimerClock {
  #wallMs: number;
  #monotonicMs: number;
  #nextId = 0;
  #timers: PendingTimer[] = [];

  constructor(options: FakeClockOptions = {}) {
    this.#wallMs = (options.wall ?? new Date('2025-01-01T00:00:00Z')).getTime();
    this.#monotonicMs = options.monotonicMs ?? 0;
  }

  now(): Date {
    return new Date(this.#wallMs);
  }

  monotonicMs(): number {
    return this.#monotonicMs;
  }

  setTimeout(callback: () => void, delayMs: number): Timer {
    const timer: PendingTimer = {
      id: this.#nextId++,
      dueAt: this.#monotonicMs + clampDelay(delayMs),
      callback,
    };
    this.#timers.push(timer);
    const handle: Timer = {
      cancel: () => {
        this.#timers = this.#timers.filter((t) => t !== timer);
      },
      unref: () => handle,
    };
    return handle;
  }

  /** pendingTimers is the number of scheduled, not yet fired or cancelled, timers. */
  pendingTimers(): number {
    return this.#timers.length;
  }

  /** advance moves time forward by `ms` (≥ 0), firing due timers in order; see the class contract. */
  advance(ms: number): void {
    const target = this.#startAdvance(ms);
    for (let t = this.#takeNextDue(target); t !== undefined; t = this.#takeNextDue(target)) {
      t.callback();
    }
    this.#moveTo(target);
  }

  /**
   * advanceAsync is {@link FakeClock.advance} that lets pending promise continuations and I/O
   * callbacks run (one `setImmediate` turn) after each fired timer and at the end, so async work
   * started by a timer can schedule follow-up timers that still fall inside the window.
   */
  async advanceAsync(ms: number): Promise<void> {
    const target = this.#startAdvance(ms);
    for (let t = this.#takeNextDue(target); t !== undefined; t = this.#takeNextDue(target)) {
      t.callback();
      await flushAsync();
    }
    this.#moveTo(target);
    await flushAsync();
  }

  /**
   * setWall steps the wall clock to `wall` without moving monotonic time or firing timers, the way
   * NTP or `faketime` steps a real clock.
   */
  setWall(wall: Date): void {
    this.#wallMs = wall.getTime();
  }

  #startAdvance(ms: number): number {
    if (!(ms >= 0) || !Number.isFinite(ms)) throw new RangeError(`advance needs a finite ms ≥ 0, got ${ms}`);
    return this.#monotonicMs + ms;
  }

  #takeNextDue(target: number): PendingTimer | undefined {
    let next: PendingTimer | undefined;
    for (const t of this.#timers) {
      if (t.dueAt > target) continue;
      if (next === undefined || t.dueAt < next.dueAt || (t.dueAt === next.dueAt && t.id < next.id)) next = t;
    }
    if (next === undefined) return undefined;
    this.#timers = this.#timers.filter((t) => t !== next);
    this.#moveTo(next.dueAt);
    return next;
  }

  #moveTo(monotonicMs: number): void {
    if (monotonicMs <= this.#monotonicMs) return;
    this.#wallMs += monotonicMs - this.#monotonicMs;
    this.#monotonicMs = monotonicMs;
  }
}

/** flushAsync waits one macrotask turn, so already-settled promise chains run to their next await. */
export function flushAsync(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
