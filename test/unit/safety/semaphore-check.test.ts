import { describe, expect, it } from 'vitest';
import { checkSemaphore, OVERLAP_SLACK_MS, peakBelievers } from '../../../test/safety/semaphore-check.ts';
import {
  storeValue,
  type ClientEvent,
  type LeaseVersion,
  type StoreApply,
  type TrialHistory,
} from '../../../test/safety/history.ts';
import { leaseName, permitLeaseName } from '../../../src/protocol/names.ts';

const A = 'pod-a/uid-a';
const B = 'pod-b/uid-b';
const C = 'pod-c/uid-c';
const LOCK = 'sem';
const ANCHOR = leaseName(LOCK);
const P0 = permitLeaseName(LOCK, 0);
const P1 = permitLeaseName(LOCK, 1);
const P2 = permitLeaseName(LOCK, 2);

let rv = 100n;
function lease(at: number, name: string, holder: string | undefined, token: bigint | undefined): LeaseVersion {
  rv += 1n;
  return { at, name, resourceVersion: rv, holder, token, renewTime: undefined, transitions: 0, release: undefined };
}
const write = (at: number, holder: string, token: bigint, writeId: string): ClientEvent[] => [
  { kind: 'attempt', at, holder, token, writeId, afterValidUntil: false },
  { kind: 'outcome', at: at + 1, holder, token, writeId, result: 'accepted' },
];
const apply = (at: number, writer: string, token: bigint, writeId: string): StoreApply => ({
  at,
  writeId,
  token,
  writer,
});

/**
 * twoPermits: permits 2. A holds permit 0 (token 5), B permit 1 (token 6); A releases; C gets
 * permit 0 (token 7). Everyone writes once per term.
 */
function twoPermits(): TrialHistory {
  return {
    lock: LOCK,
    leaseDurationMs: 2000,
    leases: [
      lease(0, ANCHOR, undefined, 5n),
      lease(1, P0, A, 5n),
      lease(2, ANCHOR, undefined, 6n),
      lease(3, P1, B, 6n),
      lease(1000, P0, undefined, 5n),
      lease(1001, ANCHOR, undefined, 7n),
      lease(1002, P0, C, 7n),
    ],
    clients: [
      { kind: 'granted', at: 10, holder: A, token: 5n },
      { kind: 'granted', at: 11, holder: B, token: 6n },
      ...write(20, A, 5n, 'a1'),
      ...write(30, B, 6n, 'b1'),
      { kind: 'released', at: 999, holder: A, token: 5n },
      { kind: 'granted', at: 1010, holder: C, token: 7n },
      ...write(1020, C, 7n, 'c1'),
      ...write(1030, B, 6n, 'b2'),
    ],
    store: [apply(21, A, 5n, 'a1'), apply(31, B, 6n, 'b1'), apply(1021, C, 7n, 'c1'), apply(1031, B, 6n, 'b2')],
    finalStore: new Map([
      ['a1', storeValue('a1', 5n, A)],
      ['b1', storeValue('b1', 6n, B)],
      ['c1', storeValue('c1', 7n, C)],
      ['b2', storeValue('b2', 6n, B)],
    ]),
  };
}

const invariants = (h: TrialHistory, permits = 2): string[] =>
  [...new Set(checkSemaphore(h, permits).violations.map((v) => v.invariant))].sort();

describe('checkSemaphore', () => {
  it('passes two permits with a handoff; an older token of another permit written later is no regression', () => {
    const r = checkSemaphore(twoPermits(), 2);
    expect(r.violations).toEqual([]);
    expect(r.counts).toMatchObject({ terms: 3, grants: 3, accepted: 4, storeApplies: 4 });
    expect(peakBelievers(twoPermits().clients, 2000)).toBe(2);
  });

  it('reports S6 when a third holder believes alongside two, on a third permit Lease (an over-granting controller)', () => {
    const h = twoPermits();
    const over: TrialHistory = {
      ...h,
      leases: [...h.leases, lease(500, ANCHOR, undefined, 8n), lease(501, P2, C, 8n)],
      clients: [...h.clients, { kind: 'granted', at: 510, holder: C, token: 8n }],
    };
    const r = checkSemaphore(over, 2);
    expect(r.violations.map((v) => v.invariant)).toEqual(['S6']);
    expect(r.violations[0]?.message).toMatch(/^3 holders believed at once for 489 ms with 2 permits/);
    // With three permits the same history is fine.
    expect(checkSemaphore(over, 3).violations).toEqual([]);
  });

  it('excuses a paused holder until a lease duration after it resumed, and no longer', () => {
    const h = twoPermits();
    // A is paused before it released; its permit is granted to C (token 7) meanwhile; A releases late.
    const clients = (resumedAt: number, releasedAt: number): ClientEvent[] => [
      ...h.clients.filter((e) => !(e.kind === 'released' && e.holder === A)),
      { kind: 'paused', at: 100, holder: A },
      { kind: 'resumed', at: resumedAt, holder: A },
      { kind: 'released', at: releasedAt, holder: A, token: 5n },
    ];
    expect(invariants({ ...h, clients: clients(1500, 1600) })).toEqual([]);
    // Still believing more than a lease duration after it resumed: no longer the pause's doing.
    expect(invariants({ ...h, clients: clients(1500, 4000) })).toEqual(['S6']);
  });

  it(`takes an excess of at most ${OVERLAP_SLACK_MS} ms as the order the reports arrived in`, () => {
    const h = twoPermits();
    const late = (at: number): ClientEvent[] =>
      h.clients.map((e) => (e.kind === 'released' && e.holder === A ? { ...e, at } : e));
    expect(invariants({ ...h, clients: late(1010 + OVERLAP_SLACK_MS) })).toEqual([]);
    expect(invariants({ ...h, clients: late(1010 + OVERLAP_SLACK_MS + 5) })).toEqual(['S6']);
  });

  it('reports S1 when a permit grants a token not above one another permit granted before', () => {
    const h = twoPermits();
    // Permit 1's next term gets token 7 again, after permit 0 granted 7.
    const r = checkSemaphore(
      {
        ...h,
        leases: [...h.leases, lease(1100, P1, undefined, 6n), lease(1101, P1, A, 7n)],
        clients: [...h.clients, { kind: 'released', at: 1090, holder: B, token: 6n }],
      },
      2,
    );
    expect(r.violations.map((v) => v.invariant)).toContain('S1');
    expect(r.violations.map((v) => v.message).join('\n')).toContain(`${P1} granted ${A} token 7 at resourceVersion`);
  });

  it("reports S3 per permit: a permit's older token applied after its newer one", () => {
    const h = twoPermits();
    const stale = {
      ...h,
      store: [...h.store, apply(1040, A, 5n, 'a2')],
      clients: [...h.clients, ...write(1039, A, 5n, 'a2')],
    };
    const r = checkSemaphore({ ...stale, finalStore: new Map([...h.finalStore, ['a2', storeValue('a2', 5n, A)]]) }, 2);
    expect(r.violations.map((v) => v.invariant)).toEqual(['S3']);
    expect(r.violations[0]?.message).toMatch(/^permit 0: store applied write a2 with token 5/);
  });

  it('reports the anchor naming a holder or its token going down, and tokens no permit granted', () => {
    const h = twoPermits();
    expect(invariants({ ...h, leases: [...h.leases, lease(1200, ANCHOR, B, 7n)] })).toEqual(['S1']);
    expect(invariants({ ...h, leases: [...h.leases, lease(1200, ANCHOR, undefined, 6n)] })).toEqual(['S1']);
    expect(
      invariants({
        ...h,
        clients: [...h.clients, ...write(1300, B, 9n, 'b9')],
        store: [...h.store, apply(1301, B, 9n, 'b9')],
        finalStore: new Map([...h.finalStore, ['b9', storeValue('b9', 9n, B)]]),
      }),
    ).toEqual(['S1', 'S2']);
    expect(invariants({ ...h, leases: [...h.leases, lease(1200, 'dlock-other', undefined, 1n)] })).toEqual(['H']);
  });
});
