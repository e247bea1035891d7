import { describe, expect, it } from 'vitest';
import type { LockEvent, LockSnapshot } from '../../../src/agent/session.ts';
import { EventJournal, formatSse } from '../../../src/agent/sse.ts';

const snap: LockSnapshot = { lock: 'a', held: true, token: '7', holder: 'p', expiresInMs: 100, state: 'held' };
const ev = (type: LockEvent['type'], token = '7'): LockEvent => ({ type, lock: 'a', token });

// The agent's SSE stream: ids, the opening of a stream, and Last-Event-ID replay.
describe('the SSE event journal', () => {
  it('writes an id, an event and one data line per frame', () => {
    expect(formatSse([{ id: 's-1', event: 'granted', data: ev('granted') }])).toBe(
      'id: s-1\nevent: granted\ndata: {"type":"granted","lock":"a","token":"7"}\n\n',
    );
  });

  it("opens a fresh stream with state only, whose id is the last event's", () => {
    const j = new EventJournal('s');
    expect(j.opening(snap, undefined)).toEqual([{ id: 's-0', event: 'state', data: snap }]);
    j.record(ev('granted'));
    j.record(ev('renewed'));
    expect(j.opening(snap, undefined)).toEqual([{ id: 's-2', event: 'state', data: snap }]);
    expect(j.lastId()).toBe('s-2');
  });

  it('replays the events after Last-Event-ID, then state', () => {
    const j = new EventJournal('s');
    for (const t of ['granted', 'renewed', 'lost'] as const) j.record(ev(t));
    expect(j.opening(snap, 's-1').map((f) => `${f.id} ${f.event}`)).toEqual(['s-2 renewed', 's-3 lost', 's-3 state']);
    expect(j.opening(snap, 's-3').map((f) => `${f.id} ${f.event}`)).toEqual(['s-3 state']);
  });

  it.each([
    ['an id of another agent process', 'other-1'],
    ['an id older than the journal remembers', 's-1'],
    ['an id from the future', 's-9'],
    ['a malformed id', 's-x'],
  ])('replays nothing for %s', (_case, id) => {
    const j = new EventJournal('s', 2);
    for (const t of ['granted', 'renewed', 'renewed', 'lost'] as const) j.record(ev(t));
    expect(j.opening(snap, id).map((f) => f.event)).toEqual(['state']);
  });

  it('replays from the oldest remembered event when the id is just before it', () => {
    const j = new EventJournal('s', 2);
    for (const t of ['granted', 'renewed', 'released'] as const) j.record(ev(t));
    expect(j.opening(snap, 's-1').map((f) => `${f.id} ${f.event}`)).toEqual([
      's-2 renewed',
      's-3 released',
      's-3 state',
    ]);
  });
});
