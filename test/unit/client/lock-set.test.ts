/**
 * acquireSet (src/client/lock-set.ts) over a stand-in single-lock acquire: the order locks are
 * taken and released in, the whole-set wait bound, what is released when the k-th lock is not
 * granted, and a set lost when any of its locks is. The single-lock acquire itself runs against
 * the real API server in test/integration/cli/exec-multilock.test.ts.
 */
import { describe, expect, it } from 'vitest';
import type { AcquireOptions, HeldLock } from '../../../src/client/acquire.ts';
import { LockHeldError, NotAcquiredError } from '../../../src/client/errors.ts';
import { acquireSet, type SetScope } from '../../../src/client/lock-set.ts';
import type { LockEvent } from '../../../src/agent/session.ts';
import { apiClientFor } from '../../support/api-client.ts';
import { FakeClock } from '../../support/fake-clock.ts';

const TIMINGS = { leaseDurationMs: 3000, renewDeadlineMs: 2000, renewPeriodMs: 1000 };

/** Stand-in: grants every lock (after `takesMs` on the fake clock) but those in `refuse`, and records what happens. */
class World {
  readonly clock = new FakeClock();
  readonly api = apiClientFor('http://127.0.0.1:1');
  readonly log: string[] = [];
  readonly asked: { lock: string; waitMs: number | undefined; ns: string | undefined }[] = [];
  readonly lost = new Map<string, AbortController>();
  readonly listeners = new Map<string, (e: LockEvent) => void>();
  readonly refuse: ReadonlyMap<string, Error>;
  readonly takesMs: number;
  constructor(refuse: ReadonlyMap<string, Error> = new Map(), takesMs = 0) {
    this.refuse = refuse;
    this.takesMs = takesMs;
  }

  opts(o: Partial<AcquireOptions> = {}): AcquireOptions {
    return { kubeconfig: this.api, namespace: 'ns', pod: { name: 'p', uid: 'u' }, clock: this.clock, ...o };
  }

  /** closed: how often the set's scope was closed (once per set, granted and released or not). */
  closed = 0;
  scope = (): SetScope => ({
    namespace: 'ns',
    shared: { namespace: 'ns' },
    close: () => {
      this.closed++;
    },
  });

  one = (lock: string, o: AcquireOptions): Promise<HeldLock> => {
    this.asked.push({ lock, waitMs: o.waitMs, ns: o.namespace });
    this.clock.advance(this.takesMs);
    const refused = this.refuse.get(lock);
    if (refused !== undefined) return Promise.reject(refused);
    const ac = new AbortController();
    this.lost.set(lock, ac);
    this.log.push(`acquired ${lock}`);
    const token = BigInt(this.log.length);
    const held: HeldLock = {
      lock,
      token,
      permit: undefined,
      timings: TIMINGS,
      signal: ac.signal,
      isHeld: () => !ac.signal.aborted,
      onEvent: (l) => {
        this.listeners.set(lock, l);
        return () => this.listeners.delete(lock);
      },
      onHandover: () => () => undefined,
      draining: () => undefined,
      drained: () => Promise.resolve(false),
      complete: () => Promise.resolve(),
      release: () => {
        this.log.push(`released ${lock}`);
        ac.abort(new Error('released'));
        return Promise.resolve();
      },
      [Symbol.asyncDispose]: () => held.release(),
    };
    return Promise.resolve(held);
  };
}

describe('acquireSet', () => {
  it('takes the locks in the global order whatever order they were given in, and releases them in reverse', async () => {
    const w = new World();
    const set = await acquireSet(['c', 'a', 'b'], w.opts(), w.one, w.scope);
    expect(set.locks.map((l) => l.lock)).toEqual(['a', 'b', 'c']);
    expect(w.asked.map((a) => a.ns)).toEqual(['ns', 'ns', 'ns']);
    expect(set.token('b')).toBe(2n);
    expect(() => set.token('d')).toThrow('lock d is not in the set');
    expect(set.isHeld()).toBe(true);
    await set.release();
    await set.release(); // idempotent
    expect(w.log).toEqual(['acquired a', 'acquired b', 'acquired c', 'released c', 'released b', 'released a']);
    expect(w.closed).toBe(1); // the set's scope (one API client, or one store connection), once
  });

  it('bounds the whole set by waitMs: each lock waits for what is left', async () => {
    const w = new World(new Map(), 400);
    await acquireSet(['a', 'b', 'c'], w.opts({ waitMs: 1000 }), w.one, w.scope);
    expect(w.asked.map((a) => a.waitMs)).toEqual([1000, 600, 200]);
  });

  it('releases the locks already held, in reverse, when the k-th times out, and names the set', async () => {
    const w = new World(new Map([['c', new NotAcquiredError('acquire(c): not granted within 200 ms')]]), 400);
    const err = await acquireSet(['c', 'b', 'a'], w.opts({ waitMs: 1000 }), w.one, w.scope).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NotAcquiredError);
    expect((err as Error).message).toBe(
      'acquire([c, b, a]): lock c not granted within 1000 ms (the bound of the whole set); released a, b',
    );
    expect(w.log).toEqual(['acquired a', 'acquired b', 'released b', 'released a']);
    expect(w.closed).toBe(1);
  });

  it("passes a held lock's LockHeldError through after releasing the others (exec --if-held tells skip by its type)", async () => {
    const held = new LockHeldError('b', { name: 'q', uid: 'q1' });
    const w = new World(new Map([['b', held]]));
    await expect(acquireSet(['a', 'b'], w.opts({ ifHeld: 'fail' }), w.one, w.scope)).rejects.toBe(held);
    expect(w.log).toEqual(['acquired a', 'released a']);
  });

  it('one lock: its own error, unchanged', async () => {
    const own = new NotAcquiredError('acquire(a): not granted within 1000 ms');
    const w = new World(new Map([['a', own]]));
    await expect(acquireSet(['a'], w.opts({ waitMs: 1000 }), w.one, w.scope)).rejects.toBe(own);
  });

  it('is not handed over when a lock taken first was lost while a later one was awaited: all released, NotAcquiredError names it', async () => {
    const w = new World();
    const one = w.one;
    // b's grant arrives after a was lost (its Lease deleted while the set waited for b).
    const losingA = (lock: string, o: AcquireOptions): Promise<HeldLock> => {
      if (lock === 'b') w.lost.get('a')?.abort(new Error('lost a'));
      return one(lock, o);
    };
    const err = await acquireSet(['a', 'b'], w.opts(), losingA, w.scope).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NotAcquiredError);
    expect((err as Error).message).toBe('acquire([a, b]): lock a lost before the set was held whole; released a, b');
    expect(w.log).toEqual(['acquired a', 'acquired b', 'released b', 'released a']);
    expect(w.closed).toBe(1);
  });

  it('is lost when any of its locks is: the signal aborts, isHeld is false, the rest stay held until release', async () => {
    const w = new World();
    const set = await acquireSet(['a', 'b'], w.opts(), w.one, w.scope);
    const events: LockEvent[] = [];
    set.onEvent((e) => events.push(e));
    w.lost.get('b')?.abort(new Error('lost b'));
    w.listeners.get('b')?.({ type: 'lost', lock: 'b', token: '2' });
    expect(set.signal.aborted).toBe(true);
    expect(set.isHeld()).toBe(false);
    expect(set.locks[0]?.isHeld()).toBe(true);
    expect(events).toEqual([{ type: 'lost', lock: 'b', token: '2' }]);
    await set.release();
    expect(w.log).toEqual(['acquired a', 'acquired b', 'released b', 'released a']);
  });

  it.each([
    { locks: [], why: 'acquire([]): no lock given' },
    { locks: ['a', 'b', 'a'], why: 'acquire([a, b, a]): lock a is given twice' },
  ])('refuses $locks: $why', async ({ locks, why }) => {
    const w = new World();
    await expect(acquireSet(locks, w.opts(), w.one, w.scope)).rejects.toThrow(why);
    expect(w.asked).toEqual([]);
    expect(w.closed).toBe(0); // refused before the scope (identity, client or store) was made
  });

  it('refuses runId for several locks (a run is recorded on one lock)', async () => {
    const w = new World();
    await expect(acquireSet(['a', 'b'], w.opts({ runId: 'r' }), w.one, w.scope)).rejects.toThrow(
      "acquire([a, b]): options.runId is for one lock; a run is recorded on one lock's Lease",
    );
  });
});
