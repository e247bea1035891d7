/**
 * The race's server-side narration: which worker lines and Lease polls become timeline events.
 */
import { describe, expect, it } from 'vitest';
import type { WorkerEvent } from '../../../hack/demo/events.ts';
import { leaseEvents, NOTHING_SEEN, WriteNarrator, type LeasePoll } from '../../../hack/race/narrate.ts';

const write = (pod: string, token: string, o: Partial<Extract<WorkerEvent, { type: 'write' }>> = {}): WorkerEvent => ({
  type: 'write',
  pod,
  seq: 1,
  token,
  fenced: true,
  accepted: true,
  value: `written by ${pod} with token ${token}`,
  ...o,
});

describe('WriteNarrator', () => {
  it('reports the first accepted write of a term and the ledger change, then nothing for the repeats', () => {
    const n = new WriteNarrator(null);
    expect(n.next(write('a', '7'), 1).map((e) => e.type)).toEqual(['wrote', 'ledger']);
    expect(n.next(write('a', '7'), 2)).toEqual([]);
    expect(n.next(write('b', '8'), 3).map((e) => e.type)).toEqual(['wrote', 'ledger']);
  });

  it('does not report a ledger change when the seeded value is written again', () => {
    const n = new WriteNarrator('written by a with token 7');
    expect(n.next(write('a', '7'), 1).map((e) => e.type)).toEqual(['wrote']);
  });

  it('reports a refused write with the mark that refused it', () => {
    const n = new WriteNarrator();
    expect(n.next(write('a', '7', { accepted: false, highWater: '8' }), 5)).toEqual([
      { type: 'refused', at: 5, pod: 'a', token: '7', highWater: '8' },
    ]);
  });

  it('reports an accepted write below an accepted larger token as an overwrite, with what it replaced', () => {
    const n = new WriteNarrator();
    n.next(write('b', '8'), 1);
    const out = n.next(write('a', '7', { fenced: false, previous: 'written by b with token 8' }), 2);
    expect(out).toEqual([
      { type: 'overwrote', at: 2, pod: 'a', token: '7', previous: 'written by b with token 8' },
      { type: 'ledger', at: 2, value: 'written by a with token 7' },
    ]);
  });

  it("passes the agent's answers on and turns a failed write into a failure", () => {
    const n = new WriteNarrator();
    expect(n.next({ type: 'state', pod: 'a', state: 'held', held: true, token: '7' }, 1)).toEqual([
      { type: 'agent', at: 1, pod: 'a', state: 'held', held: true, token: '7' },
    ]);
    expect(n.next({ type: 'checked', pod: 'a', seq: 1, token: '7' }, 1)).toEqual([]);
    expect(n.next({ type: 'error', pod: 'a', seq: 1, message: 'ECONNREFUSED' }, 1)).toEqual([
      { type: 'failed', at: 1, message: "a's write failed: ECONNREFUSED" },
    ]);
  });
});

describe('leaseEvents', () => {
  const poll = (pod: string, token: string, renewTime: number): LeasePoll => ({
    pod,
    token,
    renewTime,
    leaseSeconds: 2,
  });

  it('reports a first grant and its renewal deadline', () => {
    const { events } = leaseEvents(NOTHING_SEEN, poll('a', '7', 1000), 1010);
    expect(events).toEqual([
      { type: 'grant', at: 1010, pod: 'a', token: '7' },
      { type: 'lease', at: 1010, pod: 'a', token: '7', expiresAt: 3000 },
    ]);
  });

  it('reports a renewal only when renewTime moves, and an expiry once when it stops moving', () => {
    let s = leaseEvents(NOTHING_SEEN, poll('a', '7', 1000), 1010).seen;
    let r = leaseEvents(s, poll('a', '7', 1000), 1500);
    expect(r.events).toEqual([]);
    s = r.seen;
    r = leaseEvents(s, poll('a', '7', 1700), 1710);
    expect(r.events).toEqual([{ type: 'lease', at: 1710, pod: 'a', token: '7', expiresAt: 3700 }]);
    s = r.seen;
    r = leaseEvents(s, poll('a', '7', 1700), 3701);
    expect(r.events).toEqual([{ type: 'expired', at: 3701, pod: 'a', token: '7' }]);
    r = leaseEvents(r.seen, poll('a', '7', 1700), 3800);
    expect(r.events).toEqual([]);
  });

  it("reports the old term's expiry, dated when it ran out, when the new grant is seen first", () => {
    const s = leaseEvents(NOTHING_SEEN, poll('a', '7', 1000), 1010).seen;
    const { events } = leaseEvents(s, poll('b', '8', 3050), 3060);
    expect(events.map((e) => [e.type, e.at])).toEqual([
      ['expired', 3000],
      ['grant', 3060],
      ['lease', 3060],
    ]);
  });

  it('reports no expiry for a term that was handed over before it ran out (a release)', () => {
    const s = leaseEvents(NOTHING_SEEN, poll('a', '7', 1000), 1010).seen;
    expect(leaseEvents(s, poll('b', '8', 1500), 1510).events.map((e) => e.type)).toEqual(['grant', 'lease']);
  });

  it('names the previous holder on a handover', () => {
    const s = leaseEvents(NOTHING_SEEN, poll('a', '7', 1000), 1010).seen;
    const { events } = leaseEvents(s, poll('b', '8', 4000), 4010);
    expect(events.find((e) => e.type === 'grant')).toEqual({
      type: 'grant',
      at: 4010,
      pod: 'b',
      token: '8',
      previous: 'a',
    });
  });

  it('ignores a Lease nobody holds', () => {
    const { seen, events } = leaseEvents(
      NOTHING_SEEN,
      { pod: undefined, token: undefined, renewTime: undefined, leaseSeconds: 2 },
      1,
    );
    expect(events).toEqual([]);
    expect(seen).toBe(NOTHING_SEEN);
  });
});
