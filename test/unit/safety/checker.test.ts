import { describe, expect, it } from 'vitest';
import { checkHistory, type Invariant } from '../../../test/safety/checker.ts';
import {
  storeValue,
  type ClientEvent,
  type LeaseVersion,
  type StoreApply,
  type TrialHistory,
} from '../../../test/safety/history.ts';

const A = 'pod-a/uid-a';
const B = 'pod-b/uid-b';

let rv = 100n;
function lease(
  at: number,
  holder: string | undefined,
  token: bigint | undefined,
  extra: Partial<LeaseVersion> = {},
): LeaseVersion {
  rv += 1n;
  return { at, resourceVersion: rv, holder, token, renewTime: undefined, transitions: 0, release: undefined, ...extra };
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

/** aCleanHistory: A holds token 5 and writes, is paused, B gets 6 and writes, A's late write is refused. */
function aCleanHistory(): TrialHistory {
  const clients: ClientEvent[] = [
    { kind: 'granted', at: 10, holder: A, token: 5n },
    ...write(20, A, 5n, 'a1'),
    { kind: 'paused', at: 30, holder: A },
    { kind: 'granted', at: 2100, holder: B, token: 6n },
    ...write(2200, B, 6n, 'b1'),
    { kind: 'resumed', at: 4000, holder: A },
    { kind: 'attempt', at: 4001, holder: A, token: 5n, writeId: 'a2', afterValidUntil: true },
    { kind: 'outcome', at: 4002, holder: A, token: 5n, writeId: 'a2', result: 'stale' },
    { kind: 'lost', at: 4003, holder: A, token: 5n },
  ];
  return {
    lock: 'l',
    leaseDurationMs: 2000,
    leases: [lease(0, undefined, undefined), lease(9, A, 5n), lease(700, A, 5n), lease(2090, B, 6n)],
    clients,
    store: [apply(21, A, 5n, 'a1'), apply(2201, B, 6n, 'b1')],
    finalStore: new Map([
      ['a1', storeValue('a1', 5n, A)],
      ['b1', storeValue('b1', 6n, B)],
    ]),
  };
}

const invariants = (h: TrialHistory): Invariant[] =>
  [...new Set(checkHistory(h).violations.map((v) => v.invariant))].sort();

describe('checkHistory', () => {
  it('passes a clean history and reports its dual-belief window separately', () => {
    const r = checkHistory(aCleanHistory());
    expect(r.violations).toEqual([]);
    expect(r.ok).toBe(true);
    expect(r.dualBelief).toHaveLength(1);
    expect(r.dualBelief[0]?.ms).toBe(4003 - 2100);
    expect(r.counts).toMatchObject({
      terms: 2,
      grants: 2,
      attempts: 3,
      accepted: 2,
      staleRejected: 1,
      attemptsAfterValidUntil: 1,
      storeApplies: 2,
    });
  });

  it('catches S1: a successor granted a token not above the previous term', () => {
    const h = aCleanHistory();
    const leases = [lease(0, undefined, undefined), lease(9, A, 5n), lease(2090, B, 5n)];
    expect(invariants({ ...h, leases })).toContain('S1');
  });

  it('catches S1: the token annotation going down (a lost high-water mark)', () => {
    const h = aCleanHistory();
    const leases = [...h.leases, lease(2500, undefined, 3n, { release: 'Released' })];
    expect(invariants({ ...h, leases })).toEqual(['S1']);
  });

  it('catches S1: a client acting on a token the Lease never recorded for it', () => {
    const h = aCleanHistory();
    expect(invariants({ ...h, clients: [...h.clients, { kind: 'granted', at: 3000, holder: B, token: 9n }] })).toEqual([
      'S1',
    ]);
  });

  it('catches S3: the store applying a lower token after a higher one (a stale write accepted)', () => {
    const h = aCleanHistory();
    const clients = h.clients.map((e) =>
      e.kind === 'outcome' && e.writeId === 'a2' ? { ...e, result: 'accepted' as const } : e,
    );
    const r = checkHistory({
      ...h,
      clients,
      store: [...h.store, apply(4001, A, 5n, 'a2')],
      finalStore: new Map([...h.finalStore, ['a2', storeValue('a2', 5n, A)]]),
    });
    expect(r.violations.map((v) => v.invariant)).toEqual(['S3']);
    expect(r.violations[0]?.message).toContain('token 5 (pod-a/uid-a) after token 6 (pod-b/uid-b)');
  });

  it('catches S2: an equal token applied from a different holder', () => {
    const h = aCleanHistory();
    // B forges A's token 5 (the Lease granted 5 to A only): both S2 findings name it.
    const clients = [...h.clients, ...write(100, B, 5n, 'b0')];
    const store = [apply(21, A, 5n, 'a1'), apply(101, B, 5n, 'b0'), apply(2201, B, 6n, 'b1')];
    const r = checkHistory({
      ...h,
      clients,
      store,
      finalStore: new Map([...h.finalStore, ['b0', storeValue('b0', 5n, B)]]),
    });
    expect(r.violations.map((v) => v.invariant)).toEqual(['S2', 'S2']);
  });

  it('catches S4: an acknowledged write missing from the store at the end', () => {
    const h = aCleanHistory();
    expect(invariants({ ...h, finalStore: new Map([['b1', storeValue('b1', 6n, B)]]) })).toEqual(['S4']);
  });

  it('catches S4: an acknowledged write overwritten with another value', () => {
    const h = aCleanHistory();
    expect(invariants({ ...h, finalStore: new Map([...h.finalStore, ['a1', 'something else']]) })).toEqual(['S4']);
  });

  it('catches S5: an old term renewing after the successor was granted (interleaved terms)', () => {
    const h = aCleanHistory();
    // The stale renew also carries the old token annotation back (S1); the interleaving itself is S5.
    expect(invariants({ ...h, leases: [...h.leases, lease(2300, A, 5n)] })).toEqual(['S1', 'S5']);
  });

  it('reports a store log that contradicts the clients as H, not as a pass', () => {
    const h = aCleanHistory();
    expect(
      invariants({ ...h, store: [h.store[0] as StoreApply, apply(50, A, 5n, 'ghost'), h.store[1] as StoreApply] }),
    ).toEqual(['H']);
    expect(invariants({ ...h, store: [h.store[1] as StoreApply] })).toEqual(['H']); // an acknowledged write the log lacks
  });

  it('ends a killed holder belief at the kill, so no window is reported after it', () => {
    const h = aCleanHistory();
    const clients = h.clients
      .filter((e) => e.at < 30)
      .concat([
        { kind: 'killed', at: 30, holder: A },
        { kind: 'granted', at: 2100, holder: B, token: 6n },
      ]);
    expect(
      checkHistory({
        ...h,
        clients,
        store: [h.store[0] as StoreApply],
        finalStore: new Map([...h.finalStore].slice(0, 1)),
      }).dualBelief,
    ).toEqual([]);
  });
});
