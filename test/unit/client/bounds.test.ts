/**
 * The bounds of HeldLock.release() and complete() (src/client/bounds.ts): one signal for every
 * request of the call, aborted by the caller's signal or a timeout on the injected clock; the call
 * then rejects with that reason, not with whatever error the aborted request produced.
 */
import { describe, expect, it } from 'vitest';
import { bounded, RequestTimeoutError, waitBounded } from '../../../src/client/bounds.ts';
import { FakeClock, flushAsync } from '../../support/fake-clock.ts';

/** hangUntilAborted is a request that ends only when its signal aborts (with a transport error). */
const hangUntilAborted =
  (seen: (AbortSignal | undefined)[]) =>
  (signal: AbortSignal | undefined): Promise<void> => {
    seen.push(signal);
    return new Promise<void>((_resolve, reject) => {
      // As fetch does: an already aborted signal fails the request at once.
      if (signal?.aborted === true) reject(new Error('socket hang up'));
      signal?.addEventListener('abort', () => {
        reject(new Error('socket hang up'));
      });
    });
  };

describe('bounded', () => {
  it('without bounds passes no signal and sets no timer', async () => {
    const clock = new FakeClock();
    const seen: (AbortSignal | undefined)[] = [];
    await bounded(undefined, clock, 'release(db)', (s) => {
      seen.push(s);
      return Promise.resolve();
    });
    expect(seen).toEqual([undefined]);
    expect(clock.pendingTimers()).toBe(0);
  });

  it('aborts the requests after timeoutMs and rejects with RequestTimeoutError', async () => {
    const clock = new FakeClock();
    const seen: (AbortSignal | undefined)[] = [];
    const p = bounded({ timeoutMs: 500 }, clock, 'release(db)', hangUntilAborted(seen));
    p.catch(() => undefined);
    await clock.advanceAsync(499);
    expect(seen[0]?.aborted).toBe(false);
    await clock.advanceAsync(1);
    expect(seen[0]?.aborted).toBe(true);
    await expect(p).rejects.toBeInstanceOf(RequestTimeoutError);
    await expect(p).rejects.toThrow('release(db): gave up after 500 ms');
  });

  it("aborts the requests when the caller's signal aborts and rejects with its reason", async () => {
    const clock = new FakeClock();
    const seen: (AbortSignal | undefined)[] = [];
    const ac = new AbortController();
    const reason = new Error('window over');
    const p = bounded({ signal: ac.signal, timeoutMs: 10_000 }, clock, 'complete(db)', hangUntilAborted(seen));
    p.catch(() => undefined);
    ac.abort(reason);
    await expect(p).rejects.toBe(reason);
    expect(seen[0]?.aborted).toBe(true);
    expect(clock.pendingTimers()).toBe(0); // the timeout was cancelled
  });

  it('an already aborted signal aborts the requests before they start', async () => {
    const seen: (AbortSignal | undefined)[] = [];
    const reason = new Error('too late');
    const p = bounded({ signal: AbortSignal.abort(reason) }, new FakeClock(), 'release(db)', hangUntilAborted(seen));
    await expect(p).rejects.toBe(reason);
    expect(seen[0]?.aborted).toBe(true);
  });

  it("work done in time resolves, cancels the timer and keeps the request's own errors", async () => {
    const clock = new FakeClock();
    await bounded({ timeoutMs: 500 }, clock, 'release(db)', () => Promise.resolve());
    expect(clock.pendingTimers()).toBe(0);
    await expect(
      bounded({ timeoutMs: 500 }, clock, 'release(db)', () => Promise.reject(new Error('Forbidden'))),
    ).rejects.toThrow('Forbidden');
  });
});

describe('waitBounded', () => {
  it('stops waiting for a release already under way when its own bounds end, without cancelling it', async () => {
    const clock = new FakeClock();
    const first = Promise.withResolvers<void>();
    const p = waitBounded(first.promise, { timeoutMs: 100 }, clock, 'release(db)');
    p.catch(() => undefined);
    await clock.advanceAsync(100);
    await expect(p).rejects.toBeInstanceOf(RequestTimeoutError);
    first.resolve();
    await flushAsync();
  });

  it('resolves with the release under way when it ends first', async () => {
    const clock = new FakeClock();
    const first = Promise.withResolvers<void>();
    const p = waitBounded(first.promise, { timeoutMs: 100 }, clock, 'release(db)');
    first.resolve();
    await expect(p).resolves.toBeUndefined();
    expect(clock.pendingTimers()).toBe(0);
  });
});
