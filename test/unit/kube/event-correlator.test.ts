/**
 * The Event correlator (client-go's EventCorrelator semantics): identical Events are counted on
 * one Event, similar ones combined after ten in ten minutes, and each object's Events pass a
 * token bucket of 25 refilled one per 5 minutes.
 */
import { describe, expect, it } from 'vitest';
import { COMBINED_PREFIX, EventCorrelator, type EventFacts, type Write } from '../../../src/kube/event-correlator.ts';

const T0 = new Date('2025-01-01T00:00:00Z');
const at = (ms: number): Date => new Date(T0.getTime() + ms);
const lock = { apiVersion: 'fencepost.io/v1alpha1', kind: 'DistributedLock', namespace: 'ns', name: 'db', uid: 'u1' };
const facts = (over: Partial<EventFacts> = {}): EventFacts => ({
  component: 'fencepost-controller',
  host: 'ctrl-0',
  target: lock,
  type: 'Warning',
  reason: 'HolderExpired',
  message: 'Pod a stopped renewing',
  ...over,
});
const MIN = 60_000;

/** writeAll correlates and records each Event at the given monotonic ms, naming created Events ev-1, ev-2, ... */
function writeAll(c: EventCorrelator, events: readonly [EventFacts, number][]): Write[] {
  let made = 0;
  return events.map(([f, ms]) => {
    const w = c.correlate(f, ms, at(ms));
    c.recorded(w, w.kind === 'patch' ? w.name : `ev-${++made}`);
    return w;
  });
}

describe('EventCorrelator counting', () => {
  it('creates the first Event and PATCHes it for every identical one, keeping its firstTimestamp', () => {
    const ws = writeAll(new EventCorrelator(), [
      [facts(), 0],
      [facts(), 1000],
      [facts(), 50 * MIN],
    ]);
    expect(ws).toEqual([
      { kind: 'create', key: ws[0]?.key, message: 'Pod a stopped renewing', count: 1, firstTimestamp: at(0) },
      {
        kind: 'patch',
        key: ws[0]?.key,
        name: 'ev-1',
        message: 'Pod a stopped renewing',
        count: 2,
        firstTimestamp: at(0),
      },
      {
        kind: 'patch',
        key: ws[0]?.key,
        name: 'ev-1',
        message: 'Pod a stopped renewing',
        count: 3,
        firstTimestamp: at(0),
      },
    ]);
  });

  it.each([
    { name: 'another object', other: facts({ target: { ...lock, name: 'cache', uid: 'u2' } }) },
    { name: 'the same name with another uid (a recreated object)', other: facts({ target: { ...lock, uid: 'u2' } }) },
    { name: 'another reason', other: facts({ reason: 'HolderTerminated' }) },
    { name: 'another type', other: facts({ type: 'Normal' }) },
    { name: 'another source instance', other: facts({ host: 'ctrl-1' }) },
    { name: 'another message', other: facts({ message: 'Pod b stopped renewing' }) },
  ])('keeps an Event about $name apart', ({ other }) => {
    const [, w] = writeAll(new EventCorrelator(), [
      [facts(), 0],
      [other, 1],
    ]);
    expect(w).toMatchObject({ kind: 'create', count: 1 });
  });

  it('does not count a write that failed: the next identical Event is created again', () => {
    const c = new EventCorrelator();
    expect(c.correlate(facts(), 0, at(0))).toMatchObject({ kind: 'create' }); // never recorded
    expect(c.correlate(facts(), 1, at(1))).toMatchObject({ kind: 'create', count: 1 });
  });

  it('forgets the least recently used key beyond cacheSize', () => {
    const c = new EventCorrelator({ cacheSize: 2 });
    const ws = writeAll(c, [
      [facts({ message: 'a' }), 0],
      [facts({ message: 'b' }), 1],
      [facts({ message: 'a' }), 2],
      [facts({ message: 'c' }), 3],
      [facts({ message: 'b' }), 4],
      [facts({ message: 'a' }), 5],
    ]);
    expect(ws.map((w) => `${w.kind}:${w.count}`)).toEqual([
      'create:1',
      'create:1',
      'patch:2',
      'create:1',
      'create:1',
      'create:1',
    ]);
  });
});

describe('EventCorrelator aggregation of similar Events', () => {
  const grants = (n: number, everyMs: number): [EventFacts, number][] =>
    Array.from({ length: n }, (_, i) => [
      facts({ type: 'Normal', reason: 'LeaseGranted', message: `Granted with fencing token ${i + 1}` }),
      i * everyMs,
    ]);

  it('writes nine distinct messages as they are, then combines the tenth and later ones into one counted Event', () => {
    const ws = writeAll(new EventCorrelator(), grants(13, 1000));
    expect(ws.slice(0, 9).map((w) => [w.kind, w.message])).toEqual(
      Array.from({ length: 9 }, (_, i) => ['create', `Granted with fencing token ${i + 1}`]),
    );
    expect(ws.slice(9)).toEqual([
      {
        kind: 'create',
        key: ws[9]?.key,
        message: `${COMBINED_PREFIX}Granted with fencing token 10`,
        count: 1,
        firstTimestamp: at(9000),
      },
      {
        kind: 'patch',
        key: ws[9]?.key,
        name: 'ev-10',
        message: `${COMBINED_PREFIX}Granted with fencing token 11`,
        count: 2,
        firstTimestamp: at(9000),
      },
      {
        kind: 'patch',
        key: ws[9]?.key,
        name: 'ev-10',
        message: `${COMBINED_PREFIX}Granted with fencing token 12`,
        count: 3,
        firstTimestamp: at(9000),
      },
      {
        kind: 'patch',
        key: ws[9]?.key,
        name: 'ev-10',
        message: `${COMBINED_PREFIX}Granted with fencing token 13`,
        count: 4,
        firstTimestamp: at(9000),
      },
    ]);
  });

  it('starts a fresh group after more than 10 minutes without a similar Event', () => {
    const ws = writeAll(new EventCorrelator(), grants(20, 10 * MIN + 1));
    expect(ws.every((w) => w.kind === 'create' && !w.message.startsWith(COMBINED_PREFIX))).toBe(true);
  });

  it('keeps a group open while similar Events come within 10 minutes of each other', () => {
    const ws = writeAll(new EventCorrelator(), grants(10, 10 * MIN));
    expect(ws[9]?.message.startsWith(COMBINED_PREFIX)).toBe(true);
  });
});

describe('EventCorrelator spam filter', () => {
  it('admits a burst of 25 Events per object, then one more per 5 minutes', () => {
    const c = new EventCorrelator();
    const burst = Array.from({ length: 30 }, (_, i) => c.admit(facts({ message: `m${i}` }), i));
    expect(burst.filter(Boolean)).toHaveLength(25);
    expect(burst.slice(25)).toEqual([false, false, false, false, false]);
    expect(c.admit(facts(), 5 * MIN - 1)).toBe(false);
    expect(c.admit(facts(), 5 * MIN + 30)).toBe(true);
    expect(c.admit(facts(), 5 * MIN + 31)).toBe(false);
    expect(c.admit(facts(), 15 * MIN + 30)).toBe(true); // two refills, two tokens
    expect(c.admit(facts(), 15 * MIN + 31)).toBe(true);
    expect(c.admit(facts(), 15 * MIN + 32)).toBe(false);
  });

  it('refills to the burst at most', () => {
    const c = new EventCorrelator({ burst: 3 });
    expect([0, 1, 2, 3].map((ms) => c.admit(facts(), ms))).toEqual([true, true, true, false]);
    expect([0, 1, 2, 3].map((ms) => c.admit(facts(), 24 * 60 * MIN + ms))).toEqual([true, true, true, false]);
  });

  it('keeps one bucket per source and object: other reasons share it, other objects and sources do not', () => {
    const c = new EventCorrelator({ burst: 2 });
    expect([
      c.admit(facts(), 0),
      c.admit(facts({ reason: 'LeaseGranted', type: 'Normal' }), 0),
      c.admit(facts({ reason: 'X' }), 0),
    ]).toEqual([true, true, false]);
    expect(c.admit(facts({ target: { ...lock, name: 'cache', uid: 'u2' } }), 0)).toBe(true);
    expect(c.admit(facts({ host: 'ctrl-1' }), 0)).toBe(true);
  });

  it('refuses options that cannot work', () => {
    expect(() => new EventCorrelator({ burst: 0 })).toThrow(RangeError);
    expect(() => new EventCorrelator({ refillMs: 0 })).toThrow(RangeError);
    expect(() => new EventCorrelator({ maxSimilar: 0 })).toThrow(RangeError);
  });
});
