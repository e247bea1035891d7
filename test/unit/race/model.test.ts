/**
 * The race page's model: the story of a freeze, folded from the server's events — with the guard
 * (the stale write refused) and without (it overwrites) — and the drawing's lanes.
 */
import { describe, expect, it } from 'vitest';
import type { RaceEvent } from '../../../hack/race/events.ts';
import { intervals, laneShapes, MIN_WINDOW_MS, WINDOW_MS, windowMs } from '../../../hack/race/page/lanes.ts';
import {
  canFreeze,
  initialView,
  leaseText,
  podText,
  step,
  type Entry,
  type RaceView,
} from '../../../hack/race/page/model.ts';

const PODS = ['worker-a', 'worker-b'];

function fold(events: readonly RaceEvent[]): { view: RaceView; entries: Entry[] } {
  let view = initialView(PODS);
  const entries: Entry[] = [];
  for (const e of events) {
    const r = step(view, e);
    view = r.view;
    if (r.entry !== undefined) entries.push(r.entry);
  }
  return { view, entries };
}

/** story: a round, worker-a granted and writing, frozen, expired, worker-b granted, the thaw. */
const story = (guard: boolean): RaceEvent[] => [
  { type: 'guard', at: 0, on: guard },
  { type: 'grant', at: 100, pod: 'worker-a', token: '7' },
  { type: 'lease', at: 100, pod: 'worker-a', token: '7', expiresAt: 2100 },
  { type: 'round', at: 1000, guard },
  { type: 'agent', at: 1100, pod: 'worker-a', state: 'held', held: true, token: '7' },
  { type: 'agent', at: 1100, pod: 'worker-b', state: 'waiting', held: false },
  { type: 'wrote', at: 1300, pod: 'worker-a', token: '7' },
  { type: 'ledger', at: 1300, value: 'written by worker-a with token 7' },
  { type: 'frozen', at: 2000, pod: 'worker-a', token: '7', seconds: 15 },
  { type: 'expired', at: 4100, pod: 'worker-a', token: '7' },
  { type: 'grant', at: 4200, pod: 'worker-b', token: '8', previous: 'worker-a' },
  { type: 'agent', at: 4300, pod: 'worker-b', state: 'held', held: true, token: '8' },
  { type: 'wrote', at: 4500, pod: 'worker-b', token: '8' },
  { type: 'ledger', at: 4500, value: 'written by worker-b with token 8' },
  { type: 'thawed', at: 17000, pod: 'worker-a', afterSeconds: 15 },
  guard
    ? { type: 'refused', at: 17200, pod: 'worker-a', token: '7', highWater: '8' }
    : { type: 'overwrote', at: 17200, pod: 'worker-a', token: '7', previous: 'written by worker-b with token 8' },
  { type: 'agent', at: 17300, pod: 'worker-a', state: 'lost', held: false },
];

describe('the race model', () => {
  it('tells the freeze with the guard: expiry, a larger token, the wake-up, the refusal', () => {
    const { view, entries } = fold(story(true));
    const texts = entries.map((e) => e.text);
    expect(texts).toContain("worker-a's lease ran out: no renewal for its duration (its agent is frozen).");
    expect(texts).toContain(
      "The controller granted the lock to worker-b with fencing token 8, larger than worker-a's 7.",
    );
    expect(texts).toContain(
      'SIGCONT worker-a after 15.0 s: it still believes it holds token 7 and finishes its write.',
    );
    expect(entries.find((e) => e.tone === 'good')?.text).toMatch(/REFUSED by the Redis guard \(stale token 7 < 8\)/);
    expect(view.ledger).toBe('written by worker-b with token 8');
    expect(view.pods['worker-a']).toMatchObject({ status: 'stepped-down', stale: 'refused' });
    expect(view.pods['worker-b']).toMatchObject({ status: 'holding', token: '8' });
    expect(view.frozen).toBeUndefined();
    expect(entries.at(-1)?.text).toBe('worker-a\'s agent now says "lost": worker-a stops writing.');
  });

  it('tells the same freeze without the guard as an overwrite', () => {
    const { view, entries } = fold(story(false));
    expect(entries.find((e) => e.tone === 'bad')?.text).toMatch(
      /ACCEPTED\. A plain SET cannot tell it is stale: it overwrote "written by worker-b with token 8"/,
    );
    expect(view.pods['worker-a']?.stale).toBe('overwrote');
  });

  it('allows a freeze only while a round runs, nobody is frozen, and the holder writes', () => {
    const events = story(true);
    const upTo = (n: number) => fold(events.slice(0, n)).view;
    expect(canFreeze(upTo(3))).toBe(false); // granted, but no round
    expect(canFreeze(upTo(7))).toBe(true); // worker-a holds and writes
    expect(canFreeze(upTo(9))).toBe(false); // frozen
  });

  it('counts the lease and the freeze down by the server clock', () => {
    const v = fold(story(true).slice(0, 9)).view;
    expect(leaseText(v, 1600)).toBe('worker-a holds it with token 7; runs out in 0.5 s unless renewed.');
    expect(leaseText(v, 3100)).toBe("worker-a's lease (token 7) ran out 1.0 s ago.");
    const a = v.pods['worker-a'];
    expect(a && podText(a, v.frozen?.until, 12_000)).toBe('FROZEN (SIGSTOP), believing in token 7: wakes in 5.0 s.');
  });
});

describe('the lanes', () => {
  it('draws each term until the next grant and each freeze until the thaw', () => {
    const { held, frozen } = intervals(story(true), 20_000);
    expect(held).toEqual([
      { pod: 'worker-a', from: 100, to: 4200, token: '7' },
      { pod: 'worker-b', from: 4200, to: 20_000, token: '8' },
    ]);
    expect(frozen).toEqual([{ pod: 'worker-a', from: 2000, to: 17000, token: '7' }]);
  });

  it('spans everything since the first event, from 20 s up to 45 s', () => {
    expect(windowMs(undefined, 5000)).toBe(MIN_WINDOW_MS);
    expect(windowMs(0, 5000)).toBe(MIN_WINDOW_MS);
    expect(windowMs(0, 30_000)).toBe(32_000);
    expect(windowMs(0, 300_000)).toBe(WINDOW_MS);
  });

  it('places the shapes inside the width, with a dot for the stale write', () => {
    const now = WINDOW_MS;
    const { shapes, height } = laneShapes(story(true), PODS, now, {
      width: 800,
      labelWidth: 80,
      laneHeight: 26,
      gap: 10,
    });
    expect(height).toBeGreaterThan(60);
    for (const s of shapes) {
      const x = Number(s.attrs['x'] ?? s.attrs['cx'] ?? s.attrs['x1'] ?? 0);
      expect(x).toBeGreaterThanOrEqual(0);
      expect(x + Number(s.attrs['width'] ?? 0)).toBeLessThanOrEqual(800);
    }
    expect(shapes.filter((s) => s.tag === 'circle').map((s) => s.attrs['class'])).toEqual(['refused']);
    expect(shapes.filter((s) => s.tag === 'text' && s.text?.startsWith('#')).map((s) => s.text)).toEqual(['#7', '#8']);
  });
});
