import { afterEach, describe, it, expect, vi } from 'vitest';
import { WorkQueue } from '../../../src/runtime/workqueue.ts';
import type { WorkQueueHooks } from '../../../src/runtime/workqueue.ts';
import { itemExponential } from '../../../src/runtime/ratelimiter.ts';
import type { RateLimiter } from '../../../src/runtime/ratelimiter.ts';
import { realClock, sleep } from '../../../src/runtime/clock.ts';
import { FakeClock, flushAsync } from '../../support/fake-clock.ts';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';

type Key = string;

function newQueue(options: { clock?: FakeClock; rateLimiter?: RateLimiter<Key>; hooks?: WorkQueueHooks } = {}): {
  q: WorkQueue<Key>;
  clock: FakeClock;
} {
  const clock = options.clock ?? new FakeClock();
  const q = new WorkQueue<Key>({
    clock,
    ...(options.rateLimiter !== undefined && { rateLimiter: options.rateLimiter }),
    ...(options.hooks !== undefined && { hooks: options.hooks }),
  });
  return { q, clock };
}

/** state reports whether `p` has settled once everything already runnable has run. */
async function state<T>(p: Promise<T>): Promise<{ settled: true; value: T } | { settled: false }> {
  return Promise.race([
    p.then((value) => ({ settled: true as const, value })),
    flushAsync().then(() => ({ settled: false as const })),
  ]);
}

/** drainNow takes every key that can be handed out right now, marking each done. */
async function drainNow(q: WorkQueue<Key>): Promise<Key[]> {
  const out: Key[] = [];
  while (q.len() > 0) {
    const key = await q.get();
    if (key === undefined) break;
    out.push(key);
    q.done(key);
  }
  return out;
}

describe('WorkQueue', () => {
  describe('dedupe and order', () => {
    const cases: { name: string; adds: Key[]; want: Key[] }[] = [
      { name: 'a single add is handed out once', adds: ['a'], want: ['a'] },
      { name: 'a key added twice before processing is handed out once', adds: ['a', 'a'], want: ['a'] },
      { name: 'distinct keys come out first-in first-out', adds: ['a', 'b', 'c'], want: ['a', 'b', 'c'] },
      {
        name: 're-adding a pending key does not move it to the back',
        adds: ['a', 'b', 'a', 'c'],
        want: ['a', 'b', 'c'],
      },
    ];
    it.each(cases)('$name', async ({ adds, want }) => {
      const { q } = newQueue();
      for (const k of adds) q.add(k);
      expect(q.len()).toBe(want.length);
      expect(await drainNow(q)).toEqual(want);
      expect(q.len()).toBe(0);
    });
  });

  describe('one worker per key', () => {
    it('does not hand out a key that is processing when it is added again', async () => {
      const { q } = newQueue();
      q.add('a');
      expect(await q.get()).toBe('a');
      q.add('a');
      expect(q.len()).toBe(0);
      expect(await state(q.get())).toEqual({ settled: false });
    });

    it('hands a key re-added during processing to the next worker after done', async () => {
      const { q } = newQueue();
      q.add('a');
      expect(await q.get()).toBe('a');
      q.add('a');
      const second = q.get();
      expect(await state(second)).toEqual({ settled: false });
      q.done('a');
      expect(await second).toBe('a');
    });

    it('processes a key re-added many times during processing exactly once more', async () => {
      const { q } = newQueue();
      q.add('a');
      expect(await q.get()).toBe('a');
      q.add('a');
      q.add('a');
      q.add('a');
      q.done('a');
      expect(await drainNow(q)).toEqual(['a']);
      expect(await state(q.get())).toEqual({ settled: false });
    });

    it('queues a re-added key behind keys that were added while it was processing', async () => {
      const { q } = newQueue();
      q.add('a');
      expect(await q.get()).toBe('a');
      q.add('a');
      q.add('b');
      q.done('a');
      expect(await drainNow(q)).toEqual(['b', 'a']);
    });

    it('gives two concurrent getters different keys, in call order', async () => {
      const { q } = newQueue();
      const first = q.get();
      const second = q.get();
      q.add('a');
      q.add('b');
      expect(await first).toBe('a');
      expect(await second).toBe('b');
    });

    it('gives one key to only one of two concurrent getters', async () => {
      const { q } = newQueue();
      const getters = [q.get(), q.get()];
      q.add('a');
      const states = await Promise.all(getters.map((g) => state(g)));
      expect(states.filter((s) => s.settled)).toEqual([{ settled: true, value: 'a' }]);
    });

    it('never hands a key to two workers at once under concurrent load', async () => {
      const { q } = newQueue();
      const inFlight = new Set<Key>();
      const processed = new Map<Key, number>();
      const violations: Key[] = [];
      let seed = 42;
      const random = (n: number): number => {
        seed = (seed * 1103515245 + 12345) % 2 ** 31;
        return seed % n;
      };
      const keys = ['a', 'b', 'c', 'd', 'e'];

      const worker = async (): Promise<void> => {
        for (let key = await q.get(); key !== undefined; key = await q.get()) {
          if (inFlight.has(key)) violations.push(key);
          inFlight.add(key);
          for (let i = random(3); i >= 0; i--) await flushAsync();
          // Events keep arriving for the key being processed, as they do from informers.
          if (random(2) === 0) q.add(key);
          inFlight.delete(key);
          processed.set(key, (processed.get(key) ?? 0) + 1);
          q.done(key);
        }
      };
      const workers = [worker(), worker(), worker(), worker()];
      for (let i = 0; i < 200; i++) {
        q.add(keys[random(keys.length)] ?? 'a');
        if (random(3) === 0) await flushAsync();
      }
      await q.shutDownWithDrain();
      q.shutDown();
      await Promise.all(workers);

      expect(violations).toEqual([]);
      expect(inFlight.size).toBe(0);
      for (const k of keys) expect(processed.get(k) ?? 0).toBeGreaterThan(0);
    });

    it('ignores done for a key that is not processing', async () => {
      const { q } = newQueue();
      q.add('a');
      q.done('a');
      q.done('never-added');
      expect(await drainNow(q)).toEqual(['a']);
    });
  });

  describe('addAfter', () => {
    const cases: { name: string; delays: number[]; readyAt: number }[] = [
      { name: 'adds the key once its delay has passed', delays: [500], readyAt: 500 },
      { name: 'keeps the earlier deadline when the second is earlier', delays: [1000, 200], readyAt: 200 },
      { name: 'keeps the earlier deadline when the second is later', delays: [200, 1000], readyAt: 200 },
      { name: 'keeps the earliest of many deadlines', delays: [900, 300, 600, 400], readyAt: 300 },
    ];
    it.each(cases)('$name', async ({ delays, readyAt }) => {
      const { q, clock } = newQueue();
      for (const d of delays) q.addAfter('a', d);
      clock.advance(readyAt - 1);
      expect(q.len()).toBe(0);
      clock.advance(1);
      expect(q.len()).toBe(1);
      expect(await drainNow(q)).toEqual(['a']);
      // The superseded deadline must not add the key a second time.
      expect(clock.pendingTimers()).toBe(0);
      clock.advance(10_000);
      expect(q.len()).toBe(0);
    });

    it('waits on one timer however many keys wait, and adds each key at its earliest deadline', async () => {
      const { q, clock } = newQueue();
      let seed = 7;
      const rand = (n: number): number => {
        seed = (seed * 1103515245 + 12345) % 2 ** 31;
        return seed % n;
      };
      const due = new Map<string, number>();
      for (let i = 0; i < 2000; i++) {
        const key = `k${rand(300)}`;
        const at = clock.monotonicMs() + 1 + rand(500);
        q.addAfter(key, at - clock.monotonicMs());
        due.set(key, Math.min(due.get(key) ?? Number.POSITIVE_INFINITY, at));
      }
      expect(clock.pendingTimers()).toBe(1);
      while (due.size > 0) {
        for (const key of await drainNow(q)) {
          expect(due.get(key), key).toBe(clock.monotonicMs());
          due.delete(key);
        }
        clock.advance(1);
      }
      expect(clock.pendingTimers()).toBe(0);
    });

    it('measures an earlier deadline from when it was requested', () => {
      const { q, clock } = newQueue();
      q.addAfter('a', 1000);
      clock.advance(700);
      q.addAfter('a', 200); // due at 900, earlier than 1000
      clock.advance(199);
      expect(q.len()).toBe(0);
      clock.advance(1);
      expect(q.len()).toBe(1);
    });

    it.each([
      { name: 'zero', delay: 0 },
      { name: 'negative', delay: -5 },
      { name: 'NaN', delay: Number.NaN },
    ])('adds at once when the delay is $name', ({ delay }) => {
      const { q, clock } = newQueue();
      q.addAfter('a', delay);
      expect(q.len()).toBe(1);
      expect(clock.pendingTimers()).toBe(0);
    });

    it('adds keys with different delays in deadline order', async () => {
      const { q, clock } = newQueue();
      q.addAfter('late', 300);
      q.addAfter('early', 100);
      q.addAfter('middle', 200);
      clock.advance(300);
      expect(await drainNow(q)).toEqual(['early', 'middle', 'late']);
    });

    it('dedupes with a pending add when the delay ends', async () => {
      const { q, clock } = newQueue();
      q.addAfter('a', 100);
      q.add('a');
      clock.advance(100);
      expect(await drainNow(q)).toEqual(['a']);
    });

    it('is independent of an add that was processed meanwhile', async () => {
      const { q, clock } = newQueue();
      q.addAfter('a', 100);
      q.add('a');
      expect(await drainNow(q)).toEqual(['a']);
      clock.advance(100);
      expect(await drainNow(q)).toEqual(['a']);
    });

    it('re-queues a key that comes due while it is processing after done', async () => {
      const { q, clock } = newQueue();
      q.add('a');
      expect(await q.get()).toBe('a');
      q.addAfter('a', 100);
      clock.advance(100);
      expect(q.len()).toBe(0);
      q.done('a');
      expect(await drainNow(q)).toEqual(['a']);
    });

    it('works with the real clock and its timers', async () => {
      const q = new WorkQueue<Key>({ clock: realClock });
      q.addAfter('a', 20);
      expect(q.len()).toBe(0);
      await sleep(realClock, 60);
      expect(q.len()).toBe(1);
      q.shutDown();
    });

    it('does not keep the process alive while a key waits', async () => {
      const workqueue = fileURLToPath(new URL('../../../src/runtime/workqueue.ts', import.meta.url));
      const clock = fileURLToPath(new URL('../../../src/runtime/clock.ts', import.meta.url));
      const script = [
        `import { WorkQueue } from ${JSON.stringify(workqueue)};`,
        `import { realClock } from ${JSON.stringify(clock)};`,
        `new WorkQueue({ clock: realClock }).addAfter('a', 60_000);`,
      ].join('\n');
      // A ref'd timer would hold the child for 60 s; the 3 s kill makes execFile reject instead.
      await expect(
        promisify(execFile)(process.execPath, ['--input-type=module', '--eval', script], { timeout: 3000 }),
      ).resolves.toBeDefined();
    });
  });

  describe('addRateLimited, forget and numRequeues', () => {
    it('delays each retry by the rate limiter and counts requeues', async () => {
      const { q, clock } = newQueue({ rateLimiter: itemExponential(100, 1000) });
      const readyAfter: number[] = [];
      for (let i = 0; i < 5; i++) {
        q.addRateLimited('a');
        const start = clock.monotonicMs();
        while (q.len() === 0) clock.advance(10);
        readyAfter.push(clock.monotonicMs() - start);
        expect(await drainNow(q)).toEqual(['a']);
      }
      expect(readyAfter).toEqual([100, 200, 400, 800, 1000]);
      expect(q.numRequeues('a')).toBe(5);
    });

    it('resets the backoff after forget', () => {
      const { q, clock } = newQueue({ rateLimiter: itemExponential(100, 1000) });
      q.addRateLimited('a');
      q.addRateLimited('a');
      expect(q.numRequeues('a')).toBe(2);
      q.forget('a');
      expect(q.numRequeues('a')).toBe(0);
      clock.advance(100);
      expect(q.len()).toBe(1);
    });

    it('keeps backoff per key', () => {
      const { q } = newQueue({ rateLimiter: itemExponential(100, 1000) });
      q.addRateLimited('a');
      q.addRateLimited('a');
      q.addRateLimited('b');
      expect([q.numRequeues('a'), q.numRequeues('b'), q.numRequeues('c')]).toEqual([2, 1, 0]);
    });

    it('uses the default controller rate limiter when none is given', () => {
      const { q, clock } = newQueue();
      q.addRateLimited('a');
      clock.advance(99);
      expect(q.len()).toBe(0);
      clock.advance(1);
      expect(q.len()).toBe(1);
    });
  });

  describe('shutDown', () => {
    it('resolves a blocked get with undefined', async () => {
      const { q } = newQueue();
      const blocked = [q.get(), q.get()];
      q.shutDown();
      expect(await Promise.all(blocked)).toEqual([undefined, undefined]);
      expect(q.shuttingDown()).toBe(true);
    });

    it('resolves get with undefined at once when nothing is queued', async () => {
      const { q } = newQueue();
      q.shutDown();
      expect(await state(q.get())).toEqual({ settled: true, value: undefined });
    });

    it('still hands out keys queued before shutdown so workers can drain', async () => {
      const { q } = newQueue();
      q.add('a');
      q.add('b');
      q.shutDown();
      expect(await q.get()).toBe('a');
      expect(await q.get()).toBe('b');
      expect(await q.get()).toBeUndefined();
    });

    it('drops adds, delayed adds and rate-limited adds after shutdown', async () => {
      const limiter = itemExponential<Key>(100, 1000);
      const { q, clock } = newQueue({ rateLimiter: limiter });
      q.shutDown();
      q.add('a');
      q.addAfter('b', 0);
      q.addAfter('c', 100);
      q.addRateLimited('d');
      clock.advance(1000);
      expect(q.len()).toBe(0);
      expect(clock.pendingTimers()).toBe(0);
      expect(limiter.retries('d')).toBe(0);
      expect(await q.get()).toBeUndefined();
    });

    it('cancels delayed adds that have not fired', () => {
      const { q, clock } = newQueue();
      q.addAfter('a', 100);
      q.addAfter('b', 200);
      expect(clock.pendingTimers()).toBe(1); // one timer for every waiting key, armed for the earliest
      q.shutDown();
      expect(clock.pendingTimers()).toBe(0);
      clock.advance(1000);
      expect(q.len()).toBe(0);
    });

    it('still re-queues a key re-added before shutdown when it is done', async () => {
      const { q } = newQueue();
      q.add('a');
      expect(await q.get()).toBe('a');
      q.add('a');
      q.shutDown();
      q.done('a');
      expect(await q.get()).toBe('a');
      q.done('a');
      expect(await q.get()).toBeUndefined();
    });

    it('is idempotent', async () => {
      const { q } = newQueue();
      q.shutDown();
      q.shutDown();
      expect(await q.get()).toBeUndefined();
    });
  });

  describe('shutDownWithDrain', () => {
    it('resolves at once when nothing is processing or queued', async () => {
      const { q } = newQueue();
      expect(await state(q.shutDownWithDrain())).toEqual({ settled: true, value: undefined });
    });

    it('waits for in-flight keys to be done', async () => {
      const { q } = newQueue();
      q.add('a');
      q.add('b');
      expect(await q.get()).toBe('a');
      expect(await q.get()).toBe('b');
      const drained = q.shutDownWithDrain();
      expect(await state(drained)).toEqual({ settled: false });
      q.done('a');
      expect(await state(drained)).toEqual({ settled: false });
      q.done('b');
      expect(await state(drained)).toEqual({ settled: true, value: undefined });
    });

    it('waits for keys that were queued before shutdown to be processed', async () => {
      const { q } = newQueue();
      q.add('a');
      q.add('b');
      expect(await q.get()).toBe('a');
      const drained = q.shutDownWithDrain();
      q.done('a');
      expect(await state(drained)).toEqual({ settled: false });
      expect(await q.get()).toBe('b');
      q.done('b');
      expect(await state(drained)).toEqual({ settled: true, value: undefined });
    });

    it('waits for a key re-added during processing to be processed once more', async () => {
      const { q } = newQueue();
      q.add('a');
      expect(await q.get()).toBe('a');
      q.add('a');
      const drained = q.shutDownWithDrain();
      q.done('a');
      expect(await state(drained)).toEqual({ settled: false });
      expect(await q.get()).toBe('a');
      q.done('a');
      expect(await state(drained)).toEqual({ settled: true, value: undefined });
    });

    it('unblocks idle workers while it waits', async () => {
      const { q } = newQueue();
      q.add('a');
      expect(await q.get()).toBe('a');
      const idle = q.get();
      const drained = q.shutDownWithDrain();
      expect(await idle).toBeUndefined();
      q.done('a');
      await drained;
    });

    it('stops waiting when shutDown is called, so a drain can be bounded', async () => {
      const { q } = newQueue();
      q.add('a');
      expect(await q.get()).toBe('a');
      const drained = q.shutDownWithDrain();
      expect(await state(drained)).toEqual({ settled: false });
      q.shutDown();
      expect(await state(drained)).toEqual({ settled: true, value: undefined });
    });
  });

  describe('hooks', () => {
    function recorder(): { hooks: Required<WorkQueueHooks>; events: string[] } {
      const events: string[] = [];
      return {
        events,
        hooks: {
          onAdd: () => events.push('add'),
          onDepth: (n) => events.push(`depth=${n}`),
          onRetry: () => events.push('retry'),
          onLatency: (ms) => events.push(`latency=${ms}`),
          onWorkDuration: (ms) => events.push(`work=${ms}`),
        },
      };
    }

    it('reports adds, depth, queue latency and work duration', async () => {
      const { hooks, events } = recorder();
      const { q, clock } = newQueue({ hooks });
      q.add('a');
      q.add('a'); // deduped: no event
      q.add('b');
      clock.advance(30);
      expect(await q.get()).toBe('a');
      clock.advance(5);
      q.done('a');
      expect(events).toEqual(['add', 'depth=1', 'add', 'depth=2', 'latency=30', 'depth=1', 'work=5']);
    });

    it('counts a key re-added during processing as pending depth but not as queued', async () => {
      const { hooks, events } = recorder();
      const { q } = newQueue({ hooks });
      q.add('a');
      expect(await q.get()).toBe('a');
      events.length = 0;
      q.add('a');
      expect(events).toEqual(['add', 'depth=1']);
      expect(q.len()).toBe(0);
    });

    it('measures depth and the work in flight for the scrape-time gauges', async () => {
      const { q, clock } = newQueue();
      expect(q.unfinishedWork()).toEqual({ totalMs: 0, longestMs: 0 });
      q.add('a');
      q.add('b');
      q.add('c');
      expect(q.depth()).toBe(3);
      expect(await q.get()).toBe('a');
      clock.advance(40);
      expect(await q.get()).toBe('b');
      clock.advance(10);
      q.add('a'); // re-added while processing: pending, so part of the depth
      expect(q.depth()).toBe(2);
      expect(q.unfinishedWork()).toEqual({ totalMs: 60, longestMs: 50 });
      q.done('a');
      q.done('b');
      expect(q.unfinishedWork()).toEqual({ totalMs: 0, longestMs: 0 });
    });

    it('counts every accepted addAfter as a retry, as client-go does', () => {
      const { hooks, events } = recorder();
      const { q } = newQueue({ hooks, rateLimiter: itemExponential(100, 1000) });
      q.addAfter('a', 50);
      q.addRateLimited('b');
      q.shutDown();
      q.addAfter('c', 50);
      expect(events.filter((e) => e === 'retry')).toHaveLength(2);
    });
  });
});

describe('the clocks the queue runs on', () => {
  describe('FakeClock', () => {
    it('fires due timers in deadline order, ties in scheduling order, at their deadlines', () => {
      const clock = new FakeClock({ wall: new Date('2025-01-01T00:00:00Z'), monotonicMs: 1000 });
      const fired: string[] = [];
      const at = (name: string) => () => fired.push(`${name}@${clock.monotonicMs() - 1000}`);
      clock.setTimeout(at('c'), 30);
      clock.setTimeout(at('a'), 10);
      clock.setTimeout(at('b1'), 20);
      clock.setTimeout(at('b2'), 20);
      clock.setTimeout(at('late'), 100);
      clock.advance(50);
      expect(fired).toEqual(['a@10', 'b1@20', 'b2@20', 'c@30']);
      expect(clock.monotonicMs()).toBe(1050);
      expect(clock.now().toISOString()).toBe('2025-01-01T00:00:00.050Z');
      expect(clock.pendingTimers()).toBe(1);
    });

    it('fires timers scheduled by callbacks when they fall inside the window', () => {
      const clock = new FakeClock();
      const fired: number[] = [];
      clock.setTimeout(() => {
        fired.push(clock.monotonicMs());
        clock.setTimeout(() => fired.push(clock.monotonicMs()), 10);
      }, 10);
      clock.advance(25);
      expect(fired).toEqual([10, 20]);
    });

    it('does not fire cancelled timers', () => {
      const clock = new FakeClock();
      let fired = false;
      clock.setTimeout(() => (fired = true), 10).cancel();
      clock.advance(100);
      expect(fired).toBe(false);
      expect(clock.pendingTimers()).toBe(0);
    });

    it('steps the wall clock without moving monotonic time', () => {
      const clock = new FakeClock();
      clock.setWall(new Date('2030-01-01T00:00:00Z'));
      expect(clock.monotonicMs()).toBe(0);
      expect(clock.now().toISOString()).toBe('2030-01-01T00:00:00.000Z');
    });

    it('lets async work started by a timer schedule follow-ups with advanceAsync', async () => {
      const clock = new FakeClock();
      const ticks: number[] = [];
      const loop = async (): Promise<void> => {
        for (let i = 0; i < 3; i++) {
          await sleep(clock, 100);
          ticks.push(clock.monotonicMs());
        }
      };
      const done = loop();
      await clock.advanceAsync(300);
      await done;
      expect(ticks).toEqual([100, 200, 300]);
    });
  });

  describe('sleep', () => {
    it('rejects with the abort reason and cancels its timer', async () => {
      const clock = new FakeClock();
      const controller = new AbortController();
      const slept = sleep(clock, 100, controller.signal);
      controller.abort(new Error('stopping'));
      await expect(slept).rejects.toThrow('stopping');
      expect(clock.pendingTimers()).toBe(0);
    });

    it('rejects at once when the signal has already aborted', async () => {
      const clock = new FakeClock();
      await expect(sleep(clock, 100, AbortSignal.abort(new Error('gone')))).rejects.toThrow('gone');
      expect(clock.pendingTimers()).toBe(0);
    });
  });

  describe('realClock', () => {
    it('reads monotonic time that does not go backwards', () => {
      const a = realClock.monotonicMs();
      const b = realClock.monotonicMs();
      expect(b).toBeGreaterThanOrEqual(a);
    });

    describe('with Node timers faked', () => {
      afterEach(() => {
        vi.useRealTimers();
      });

      it('waits out delays longer than Node setTimeout supports instead of firing after 1 ms', () => {
        vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
        const maxNodeDelay = 2 ** 31 - 1;
        let fired = false;
        realClock.setTimeout(() => (fired = true), maxNodeDelay + 1000);
        vi.advanceTimersByTime(maxNodeDelay);
        expect(fired).toBe(false);
        vi.advanceTimersByTime(999);
        expect(fired).toBe(false);
        vi.advanceTimersByTime(1);
        expect(fired).toBe(true);
      });

      it('cancels a long delay between its chained timers', () => {
        vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
        let fired = false;
        const timer = realClock.setTimeout(() => (fired = true), 2 ** 32);
        vi.advanceTimersByTime(2 ** 31);
        timer.cancel();
        vi.advanceTimersByTime(2 ** 32);
        expect(fired).toBe(false);
        expect(vi.getTimerCount()).toBe(0);
      });
    });

    it('does not fire a cancelled timer', async () => {
      let fired = false;
      realClock.setTimeout(() => (fired = true), 5).cancel();
      await sleep(realClock, 20);
      expect(fired).toBe(false);
    });
  });
});
