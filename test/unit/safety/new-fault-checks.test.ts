/**
 * The checks of the multi-key and co-tenant fault types (test/safety/faults/multi-key.ts,
 * test/safety/faults/co-tenant.ts) on hand-made histories: what each must catch, and what it must
 * let through.
 */
import { describe, expect, it } from 'vitest';
import { checkMultiKey } from '../../../test/safety/faults/multi-key.ts';
import { sanitize } from '../../../test/safety/faults/co-tenant.ts';
import { checkHistory } from '../../../test/safety/checker.ts';
import {
  storeValue,
  type ClientEvent,
  type LeaseVersion,
  type StoreApply,
  type TrialHistory,
} from '../../../test/safety/history.ts';

const A = 'pod-a/uid-a';
const B = 'pod-b/uid-b';
const K1 = 'safety:t:k:1';
const K2 = 'safety:t:k:2';

let rv = 100n;
function lease(holder: string | undefined, token: bigint | undefined): LeaseVersion {
  rv += 1n;
  return {
    at: Number(rv),
    resourceVersion: rv,
    holder,
    token,
    renewTime: undefined,
    transitions: 0,
    release: undefined,
  };
}
const op = (
  at: number,
  holder: string,
  token: bigint,
  writeId: string,
  key: string,
  kind: 'set' | 'del',
): { events: ClientEvent[]; apply: StoreApply } => ({
  events: [
    { kind: 'attempt', at, holder, token, writeId, afterValidUntil: false },
    { kind: 'outcome', at: at + 1, holder, token, writeId, result: 'accepted' },
  ],
  apply: { at: at + 1, writeId, token, writer: holder, key, op: kind },
});

function history(ops: ReturnType<typeof op>[]): TrialHistory {
  return {
    lock: 't',
    leaseDurationMs: 1000,
    leases: [lease(A, 5n), lease(B, 6n)],
    clients: [
      { kind: 'granted', at: 1, holder: A, token: 5n },
      { kind: 'granted', at: 2, holder: B, token: 6n },
      ...ops.flatMap((o) => o.events),
    ],
    store: ops.map((o) => o.apply),
    finalStore: new Map(),
  };
}

describe('checkMultiKey', () => {
  it('passes writes and deletes in token order, with the final content the last op left', () => {
    const ops = [op(10, A, 5n, 'a1', K1, 'set'), op(20, B, 6n, 'b1', K1, 'del'), op(30, B, 6n, 'b2', K2, 'set')];
    const { report, counters } = checkMultiKey(history(ops), new Map([[K2, storeValue('b2', 6n, B)]]));
    expect(report.violations).toEqual([]);
    expect(counters).toEqual({ staleOnOtherKey: 0, resurrected: 0, deletesApplied: 1 });
  });

  it('reports an older token applied on another key (S3) and counts it', () => {
    const ops = [op(10, B, 6n, 'b1', K1, 'set'), op(20, A, 5n, 'a1', K2, 'set')];
    const final = new Map([
      [K1, storeValue('b1', 6n, B)],
      [K2, storeValue('a1', 5n, A)],
    ]);
    const { report, counters } = checkMultiKey(history(ops), final);
    expect(report.violations.map((v) => v.invariant)).toEqual(['S3']);
    expect(report.violations[0]?.message).toContain(`[SET ${K2}]`);
    expect(counters.staleOnOtherKey).toBe(1);
  });

  it('reports a deleted key brought back by an older token (S3, resurrected)', () => {
    const ops = [op(10, A, 5n, 'a1', K1, 'set'), op(20, B, 6n, 'b1', K1, 'del'), op(30, A, 5n, 'a2', K1, 'set')];
    const { report, counters } = checkMultiKey(history(ops), new Map([[K1, storeValue('a2', 5n, A)]]));
    expect(report.violations.map((v) => v.invariant)).toEqual(['S3']);
    expect(counters.resurrected).toBe(1);
  });

  it('reports a key whose content is not what the last applied op left (S4)', () => {
    const ops = [op(10, A, 5n, 'a1', K1, 'set'), op(20, B, 6n, 'b1', K1, 'del')];
    const { report } = checkMultiKey(history(ops), new Map([[K1, storeValue('a1', 5n, A)]]));
    expect(report.violations.map((v) => v.invariant)).toEqual(['S4']);
  });
});

describe('co-tenant: sanitize', () => {
  it("replaces a lowered token the attacker wrote, so that only the controller's grants are judged", () => {
    const before = lease(A, 5n);
    const attacked = lease(A, 4n);
    const revoked = lease(undefined, 4n);
    const next = lease(B, 6n);
    const leases = [lease(undefined, undefined), before, attacked, revoked, next];
    const h: TrialHistory = {
      lock: 't',
      leaseDurationMs: 1000,
      leases,
      clients: [
        { kind: 'granted', at: 1, holder: A, token: 5n },
        { kind: 'granted', at: 2, holder: B, token: 6n },
      ],
      store: [],
      finalStore: new Map(),
    };
    expect(checkHistory(h).violations.map((v) => v.invariant)).toContain('S1');
    const bogus = [{ token: 4n, rv: attacked.resourceVersion, replaced: 5n }];
    expect(checkHistory({ ...h, leases: sanitize(leases, bogus) }).violations).toEqual([]);
  });

  it('keeps a grant that re-issues the token the attacker lowered from (the calibration case)', () => {
    const before = lease(A, 5n);
    const attacked = lease(A, 4n);
    const reissued = lease(B, 5n);
    const leases = [before, attacked, reissued];
    const bogus = [{ token: 4n, rv: attacked.resourceVersion, replaced: 5n }];
    const h: TrialHistory = {
      lock: 't',
      leaseDurationMs: 1000,
      leases: sanitize(leases, bogus),
      clients: [],
      store: [],
      finalStore: new Map(),
    };
    expect(checkHistory(h).violations.map((v) => v.message)).toContain(
      `term ${B} got token 5, not above the previous term's 5 (${A})`,
    );
  });
});
