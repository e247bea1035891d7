/**
 * The controller's work queue: a port of client-go's rate-limiting, delaying work queue.
 *
 * The model is level-triggered and key-based. Event sources never hand the controller an event or an
 * object, only a key ("namespace/name"), and the reconciler reads the current state of the world for
 * that key. That is what makes deduplication safe: ten changes to one lock while it waits are one
 * reconcile of its latest state, and a reconcile that crashes half-way is simply run again.
 *
 * A key is in at most one of three places at a time for the purpose of hand-out:
 * - *queued*: waiting in FIFO order to be handed to a worker (also *dirty*);
 * - *processing*: handed out by `get()` and not yet `done()`; if it is added again meanwhile it is
 *   *dirty* but not queued, and is queued when `done()` is called;
 * - *waiting*: scheduled by `addAfter` for a later time (independently of the other two).
 */
import { defaultControllerRateLimiter } from './ratelimiter.ts';
import type { Timer, TimerClock } from './clock.ts';
import type { RateLimiter } from './ratelimiter.ts';

/**
 * WorkQueueHooks receives queue metrics (client-go's workqueue metric vocabulary). Every hook
 * is optional and must be cheap and must not throw: they run synchronously inside queue operations.
 */
export interface WorkQueueHooks {
  /** onAdd is called when a key becomes pending that was not already pending (`adds_total`). */
  onAdd?(): void;
  /**
   * onDepth reports the number of pending keys after every change (`depth`). It counts keys re-added
   * while in flight, which {@link WorkQueue.len} does not, because they cannot be handed out yet.
   */
  onDepth?(depth: number): void;
  /**
   * onRetry is called for every accepted `addAfter`, including those made by `addRateLimited`
   * (`retries_total`, counted where client-go counts it).
   */
  onRetry?(): void;
  /** onLatency reports how long a key waited, from becoming pending to being handed out (`queue_duration`). */
  onLatency?(ms: number): void;
  /** onWorkDuration reports how long a key was processed, from `get()` to `done()` (`work_duration`). */
  onWorkDuration?(ms: number): void;
}

/** WorkQueueOptions configures a {@link WorkQueue}. */
export interface WorkQueueOptions<K> {
  /** clock supplies monotonic time for delays and metrics, and the timers for `addAfter`. */
  readonly clock: TimerClock;
  /** rateLimiter decides `addRateLimited` delays. Defaults to `defaultControllerRateLimiter(clock)`. */
  readonly rateLimiter?: RateLimiter<K>;
  /** hooks receive metrics; see {@link WorkQueueHooks}. Defaults to none. */
  readonly hooks?: WorkQueueHooks;
}

/** Due is one entry of the delay heap: `key` becomes pending at monotonic `readyAt`. */
interface Due<K> {
  readonly readyAt: number;
  readonly key: K;
}

/**
 * WorkQueue is a keyed work queue with client-go semantics, for any number of concurrent workers.
 *
 * Guarantees:
 * - Dedupe: a key added any number of times before it is handed out is handed out once.
 * - Exclusion: a key is never handed to two workers at once; a key added while it is processing is
 *   handed out again exactly once, after `done(key)`.
 * - Order: keys are handed out first-in first-out; a key re-added while processing joins the back
 *   of the queue when it is done.
 * - `addAfter` keeps the earliest pending deadline for a key.
 *
 * Usage: each worker loops `const key = await q.get(); if (key === undefined) return;` then
 * reconciles, then calls `q.forget(key)` on success or `q.addRateLimited(key)` on failure (or
 * `q.addAfter` for time-driven work), and always `q.done(key)` in a `finally`.
 *
 * Caveats: forgetting `done(key)` wedges that key forever (it stays "processing"). Keys are compared
 * with SameValueZero, so use strings. After `shutDown()`, `get()` still hands out keys that were
 * already queued (client-go semantics, so workers can drain); a worker that must stop at once should
 * stop calling `get()`. Delayed adds that have not fired by shutdown are dropped.
 */
export class WorkQueue<K extends NonNullable<unknown>> {
  readonly #clock: TimerClock;
  readonly #limiter: RateLimiter<K>;
  readonly #hooks: WorkQueueHooks;

  /**
   * #queue holds the keys that may be handed out, in order, from index #head on (taking one is
   * O(1), not an O(n) `shift()` of a 10,000-key array); every one is also in #dirty.
   */
  #queue: K[] = [];
  #head = 0;
  /** #dirty maps each pending key to the monotonic time it became pending (for onLatency). */
  readonly #dirty = new Map<K, number>();
  /** #processing maps each in-flight key to the monotonic time it was handed out. */
  readonly #processing = new Map<K, number>();
  /**
   * #waiting maps each key waiting on `addAfter` to its deadline; #heap orders the deadlines
   * (a binary min-heap, client-go's delaying queue), and one timer, #timer, is armed for the
   * earliest, so that 10,000 waiting locks cost 10,000 small entries, not 10,000 timers and
   * closures. A deadline replaced by an earlier one stays in the heap until it comes up and is
   * skipped then (it no longer matches #waiting); #compact drops such entries when they pile up.
   */
  readonly #waiting = new Map<K, number>();
  #heap: Due<K>[] = [];
  #timer: Timer | undefined;
  #timerAt = Number.POSITIVE_INFINITY;
  #getters: ((key: K | undefined) => void)[] = [];
  #drainers: (() => void)[] = [];
  #shuttingDown = false;

  constructor(options: WorkQueueOptions<K>) {
    this.#clock = options.clock;
    this.#limiter = options.rateLimiter ?? defaultControllerRateLimiter<K>(options.clock);
    this.#hooks = options.hooks ?? {};
  }

  /**
   * add makes `key` pending. It is a no-op if the key is already pending or the queue is shutting
   * down; if the key is processing, it is queued again when `done(key)` is called.
   */
  add(key: K): void {
    if (this.#shuttingDown || this.#dirty.has(key)) return;
    this.#dirty.set(key, this.#clock.monotonicMs());
    this.#hooks.onAdd?.();
    this.#hooks.onDepth?.(this.#dirty.size);
    if (this.#processing.has(key)) return;
    this.#queue.push(key);
    this.#dispatch();
  }

  /**
   * addAfter adds `key` once `delayMs` of monotonic time has passed (at once if `delayMs` ≤ 0 or
   * NaN). If the key is already waiting, the earlier of the two deadlines is kept, so a long safety
   * requeue never postpones a short one. The wait is independent of the key being pending or
   * processing meanwhile: when it ends, `add(key)` is called with its usual dedupe.
   *
   * No-op once shutting down. Real timers are unref'd, so a waiting key never keeps the process
   * alive, and shutdown cancels them.
   */
  addAfter(key: K, delayMs: number): void {
    if (this.#shuttingDown) return;
    this.#hooks.onRetry?.();
    if (!(delayMs > 0)) {
      this.add(key);
      return;
    }
    const readyAt = this.#clock.monotonicMs() + delayMs;
    const existing = this.#waiting.get(key);
    if (existing !== undefined && existing <= readyAt) return;
    this.#waiting.set(key, readyAt);
    this.#push({ readyAt, key });
    if (this.#heap.length > 2 * this.#waiting.size + 64) this.#compact();
    this.#arm();
  }

  /** #arm (re)arms the one timer for the earliest deadline, unless it is already armed for it. */
  #arm(): void {
    // Deadlines replaced by earlier ones go first: no timer is armed for a key no longer waiting.
    for (let top = this.#heap[0]; top !== undefined && this.#waiting.get(top.key) !== top.readyAt; top = this.#heap[0])
      this.#pop();
    const first = this.#heap[0];
    if (first === undefined) {
      this.#timer?.cancel();
      this.#timer = undefined;
      this.#timerAt = Number.POSITIVE_INFINITY;
      return;
    }
    if (this.#timer !== undefined && this.#timerAt <= first.readyAt) return;
    this.#timer?.cancel();
    this.#timerAt = first.readyAt;
    this.#timer = this.#clock
      .setTimeout(() => {
        this.#timer = undefined;
        this.#timerAt = Number.POSITIVE_INFINITY;
        this.#fire();
      }, first.readyAt - this.#clock.monotonicMs())
      .unref();
  }

  /** #fire adds every key whose deadline has come, then arms the timer for the next one. */
  #fire(): void {
    const now = this.#clock.monotonicMs();
    for (let top = this.#heap[0]; top !== undefined && top.readyAt <= now; top = this.#heap[0]) {
      this.#pop();
      if (this.#waiting.get(top.key) !== top.readyAt) continue; // replaced by an earlier deadline
      this.#waiting.delete(top.key);
      this.add(top.key);
    }
    // A timer that fired a fraction of a millisecond early finds nothing due and is armed again.
    this.#arm();
  }

  #push(d: Due<K>): void {
    const h = this.#heap;
    h.push(d);
    for (let i = h.length - 1; i > 0;) {
      const parent = (i - 1) >> 1;
      const p = h[parent] as Due<K>;
      if (p.readyAt <= d.readyAt) break;
      h[i] = p;
      h[parent] = d;
      i = parent;
    }
  }

  #pop(): void {
    const h = this.#heap;
    const last = h.pop();
    if (last === undefined || h.length === 0) return;
    h[0] = last;
    for (let i = 0; ;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < h.length && (h[l] as Due<K>).readyAt < (h[m] as Due<K>).readyAt) m = l;
      if (r < h.length && (h[r] as Due<K>).readyAt < (h[m] as Due<K>).readyAt) m = r;
      if (m === i) break;
      const t = h[i] as Due<K>;
      h[i] = h[m] as Due<K>;
      h[m] = t;
      i = m;
    }
  }

  /** #compact rebuilds the heap from #waiting alone, dropping replaced deadlines. */
  #compact(): void {
    this.#heap = [];
    for (const [key, readyAt] of this.#waiting) this.#push({ readyAt, key });
  }

  /**
   * addRateLimited adds `key` after the delay its rate limiter assigns, recording one more failure.
   * Call it when processing `key` failed; call {@link WorkQueue.forget} when it succeeds.
   */
  addRateLimited(key: K): void {
    if (this.#shuttingDown) return;
    this.addAfter(key, this.#limiter.when(key));
  }

  /**
   * forget clears the rate limiter's failure history for `key`, resetting its backoff. It does not
   * remove the key from the queue or cancel an `addAfter`.
   */
  forget(key: K): void {
    this.#limiter.forget(key);
  }

  /** numRequeues is the number of failures the rate limiter has recorded for `key` since the last `forget`. */
  numRequeues(key: K): number {
    return this.#limiter.retries(key);
  }

  /**
   * get resolves with the next key to process and marks it processing; the caller owns it until it
   * calls `done(key)`. It waits while nothing is queued. It resolves `undefined` once the queue is
   * shutting down and nothing is queued, which is the worker's signal to exit.
   *
   * Concurrent callers are served in call order, each with a different key.
   */
  get(): Promise<K | undefined> {
    const key = this.#take();
    if (key !== undefined || this.#shuttingDown) return Promise.resolve(key);
    return new Promise((resolve) => this.#getters.push(resolve));
  }

  /**
   * done marks `key` as no longer processing. If it was added while processing, it is queued now.
   * Calling it for a key that is not processing is a no-op (as in client-go).
   */
  done(key: K): void {
    const startedAt = this.#processing.get(key);
    if (startedAt === undefined) return;
    this.#processing.delete(key);
    this.#hooks.onWorkDuration?.(this.#clock.monotonicMs() - startedAt);
    if (this.#dirty.has(key)) {
      this.#queue.push(key);
      this.#dispatch();
    }
    if (this.#shuttingDown) this.#resolveDrainersIfDrained();
  }

  /** len is the number of keys that could be handed out now; it excludes keys processing or waiting. */
  len(): number {
    return this.#queue.length - this.#head;
  }

  /**
   * depth is the number of pending keys: those that could be handed out now plus those re-added
   * while processing (client-go's `workqueue_depth`). It excludes keys only waiting on `addAfter`.
   */
  depth(): number {
    return this.#dirty.size;
  }

  /**
   * unfinishedWork measures the keys being processed now, in monotonic ms: `totalMs` sums how long
   * each has been processing, `longestMs` is the longest (client-go's `unfinished_work_seconds` and
   * `longest_running_processor_seconds`). Both are 0 when nothing is processing.
   */
  unfinishedWork(): { readonly totalMs: number; readonly longestMs: number } {
    const now = this.#clock.monotonicMs();
    let totalMs = 0;
    let longestMs = 0;
    for (const startedAt of this.#processing.values()) {
      const ms = now - startedAt;
      totalMs += ms;
      longestMs = Math.max(longestMs, ms);
    }
    return { totalMs, longestMs };
  }

  /** shuttingDown reports whether `shutDown` or `shutDownWithDrain` has been called. */
  shuttingDown(): boolean {
    return this.#shuttingDown;
  }

  /**
   * shutDown stops accepting keys: later adds are dropped, waiting `addAfter` timers are cancelled,
   * and blocked `get()` calls resolve `undefined`. It does not wait for in-flight keys, and it ends
   * the wait of any pending `shutDownWithDrain` (client-go semantics; use it to bound a drain).
   * Idempotent.
   */
  shutDown(): void {
    this.#beginShutdown();
    this.#resolveDrainers();
  }

  /**
   * shutDownWithDrain shuts down like {@link WorkQueue.shutDown}, then resolves once the queue is
   * drained: nothing is processing and nothing is queued (keys queued before shutdown, and keys
   * re-added while processing, are still handed out by `get()` and must be finished first). Callers
   * use it to finish in-flight reconciles before releasing leadership.
   *
   * Hazard: it never resolves while a worker holds a key without calling `done`, or while keys are
   * queued and no worker calls `get()` any more (client-go has the same requirement); bound it by
   * calling `shutDown()` after a timeout.
   */
  shutDownWithDrain(): Promise<void> {
    this.#beginShutdown();
    if (this.#isDrained()) return Promise.resolve();
    return new Promise((resolve) => this.#drainers.push(resolve));
  }

  #beginShutdown(): void {
    if (this.#shuttingDown) return;
    this.#shuttingDown = true;
    this.#waiting.clear();
    this.#heap = [];
    this.#arm(); // cancels the timer
    // Blocked getters exist only while nothing is queued, so all of them get `undefined`.
    const getters = this.#getters;
    this.#getters = [];
    for (const resolve of getters) resolve(undefined);
  }

  #isDrained(): boolean {
    return this.#processing.size === 0 && this.#queue.length === this.#head;
  }

  #resolveDrainersIfDrained(): void {
    if (this.#isDrained()) this.#resolveDrainers();
  }

  #resolveDrainers(): void {
    const drainers = this.#drainers;
    this.#drainers = [];
    for (const resolve of drainers) resolve();
  }

  /** #dispatch hands queued keys to blocked getters; the bookkeeping happens before they resume. */
  #dispatch(): void {
    while (this.#getters.length > 0 && this.#queue.length > this.#head) {
      const resolve = this.#getters.shift();
      resolve?.(this.#take());
    }
  }

  #take(): K | undefined {
    if (this.#head >= this.#queue.length) return undefined;
    const key = this.#queue[this.#head] as K;
    this.#head++;
    if (this.#head === this.#queue.length) {
      this.#queue = [];
      this.#head = 0;
    } else if (this.#head >= 1024 && this.#head * 2 >= this.#queue.length) {
      this.#queue = this.#queue.slice(this.#head);
      this.#head = 0;
    }
    const now = this.#clock.monotonicMs();
    const addedAt = this.#dirty.get(key);
    this.#dirty.delete(key);
    this.#processing.set(key, now);
    if (addedAt !== undefined) this.#hooks.onLatency?.(now - addedAt);
    this.#hooks.onDepth?.(this.#dirty.size);
    return key;
  }
}
