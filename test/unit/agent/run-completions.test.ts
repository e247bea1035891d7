/**
 * The run-once record on the Lease (where only the holder of the run's term can write it): the pure
 * annotation functions of lease/record.ts, and RunCompletions (src/agent/run-completions.ts)
 * against an in-memory Lease store that checks resourceVersions like the API server — only the
 * holder of the run's term may complete it, a future completedAt does not count, a conflict reads
 * again.
 */
import { ApiException, type V1Lease } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { hasCompletedRun, NotRunHolderError, RunCompletions } from '../../../src/agent/run-completions.ts';
import type { LeaseClient } from '../../../src/runtime/leaderelection.ts';
import {
  COMPLETED_AT_TOLERANCE_MS,
  completedLease,
  completionVerdict,
  formatCompletedRuns,
  MAX_COMPLETED_RUNS,
  parseCompletedRuns,
  parseLease,
} from '../../../src/lease/record.ts';
import { COMPLETED_RUNS_ANNOTATION, leaseName, TOKEN_ANNOTATION } from '../../../src/protocol/names.ts';
import { aLock } from '../../support/builders.ts';
import { apiClientFor } from '../../support/api-client.ts';
import { FakeClock } from '../../support/fake-clock.ts';

const NOW = new Date('2025-01-01T00:00:00.123Z');
const SELF = { name: 'web-0', uid: 'uid-0' };

const heldLease = (holder: string, token: bigint, runs?: string): V1Lease => ({
  metadata: {
    name: leaseName('db'),
    resourceVersion: '1',
    annotations: {
      [TOKEN_ANNOTATION]: token.toString(),
      ...(runs !== undefined ? { [COMPLETED_RUNS_ANNOTATION]: runs } : {}),
    },
  },
  spec: { holderIdentity: holder },
});

describe('the completed-runs annotation', () => {
  it('round-trips entries, newest last, tokens as decimal strings', () => {
    const entries = [
      { runId: 'a', token: 3n, holder: 'web-0', completedAt: NOW },
      { runId: 'b', token: 9007199254740993n, holder: 'web-1', completedAt: NOW },
    ];
    const text = formatCompletedRuns(entries);
    expect(text).toContain('"token":"9007199254740993"');
    expect(parseCompletedRuns(text)).toEqual(entries);
  });

  it.each([
    { name: 'no annotation', text: undefined },
    { name: 'not JSON', text: '{' },
    { name: 'not a list', text: '{"runId":"a"}' },
    {
      name: 'entries without a run id, with a malformed token or time',
      text: '[{"token":"1","completedAt":"2025-01-01T00:00:00Z"},{"runId":"a","token":"-1","completedAt":"2025-01-01T00:00:00Z"},{"runId":"b","token":"1","completedAt":"soon"},null,3]',
    },
  ])('reads $name as no runs', ({ text }) => {
    expect(parseCompletedRuns(text)).toEqual([]);
  });

  it('appends a run, replaces an earlier entry of the same run id, and keeps the newest 32', () => {
    let l = heldLease('web-0/uid-0', 5n);
    for (let i = 0; i < 40; i++)
      l = completedLease(l, { runId: `r${i}`, token: 5n, holder: 'web-0', completedAt: NOW });
    l = completedLease(l, { runId: 'r39', token: 5n, holder: 'web-1', completedAt: NOW });
    const runs = parseLease(l).completedRuns;
    expect(runs).toHaveLength(MAX_COMPLETED_RUNS);
    expect(runs.at(-1)).toEqual({ runId: 'r39', token: 5n, holder: 'web-1', completedAt: NOW });
    expect(runs[0]?.runId).toBe('r8'); // r0–r7 fell off; r39 moved to the end
  });

  it.each([
    { name: 'an entry of a term of the Lease counts', token: 5n, aheadMs: 0, want: 'ok' },
    { name: 'a completedAt within the tolerance counts', token: 5n, aheadMs: COMPLETED_AT_TOLERANCE_MS, want: 'ok' },
    {
      name: 'a completedAt beyond the tolerance is refused',
      token: 5n,
      aheadMs: COMPLETED_AT_TOLERANCE_MS + 1,
      want: 'future',
    },
    { name: 'a token above the Lease token is refused', token: 6n, aheadMs: 0, want: 'token' },
  ])('$name', ({ token, aheadMs, want }) => {
    const e = { runId: 'r', token, holder: 'web-0', completedAt: new Date(NOW.getTime() + aheadMs) };
    expect(completionVerdict(e, 5n, NOW)).toBe(want);
  });

  it.each([
    { name: 'a lock with no status has no completed runs', status: undefined, want: false },
    { name: 'a run recorded in status.completedRuns is completed', status: ['run-0', 'run-1'], want: true },
    { name: 'a run not recorded is not completed', status: ['run-0'], want: false },
  ])('$name', ({ status, want }) => {
    const lock = aLock('db');
    const withRuns =
      status === undefined
        ? lock
        : { ...lock, status: { completedRuns: status.map((runId) => ({ runId, completedAt: NOW.toISOString() })) } };
    expect(hasCompletedRun(withRuns, 'run-1')).toBe(want);
  });
});

/** Store is one Lease with resourceVersion checks, as the API server does them. */
class Store implements LeaseClient {
  lease: V1Lease | undefined;
  writes = 0;
  /** conflictsLeft: replaces answered 409 first (someone else wrote in between). */
  conflictsLeft = 0;
  constructor(lease: V1Lease | undefined) {
    this.lease = lease;
  }
  get(): Promise<V1Lease | undefined> {
    return Promise.resolve(this.lease === undefined ? undefined : structuredClone(this.lease));
  }
  create(): Promise<V1Lease> {
    return Promise.reject(new Error('not used'));
  }
  replace(_ns: string, _name: string, body: V1Lease): Promise<V1Lease> {
    const rv = this.lease?.metadata?.resourceVersion;
    if (this.conflictsLeft > 0 || body.metadata?.resourceVersion !== rv) {
      this.conflictsLeft = Math.max(0, this.conflictsLeft - 1);
      return Promise.reject(new ApiException(409, 'Conflict', { reason: 'Conflict', code: 409 }, {}));
    }
    this.writes++;
    this.lease = { ...body, metadata: { ...body.metadata, resourceVersion: String(Number(rv) + 1) } };
    return this.get() as Promise<V1Lease>;
  }
}

const completions = (store: Store, clock = new FakeClock({ wall: NOW })): RunCompletions =>
  new RunCompletions({
    api: apiClientFor('http://127.0.0.1:9'),
    namespace: 'ns',
    lock: 'db',
    self: SELF,
    clock,
    leases: store,
  });

describe('RunCompletions', () => {
  it('records the run on the Lease while the Lease names this pod with the run token', async () => {
    const store = new Store(heldLease('web-0/uid-0', 5n));
    await completions(store).complete('run-1', 5n);
    expect(parseLease(store.lease ?? {}).completedRuns).toEqual([
      { runId: 'run-1', token: 5n, holder: 'web-0', completedAt: NOW },
    ]);
    await completions(store).complete('run-1', 5n); // the same report again writes nothing
    expect(store.writes).toBe(1);
  });

  it.each([
    { name: 'another pod holds the Lease', lease: heldLease('web-1/uid-1', 6n), says: 'names pod web-1 with token 6' },
    { name: 'this pod holds a later term', lease: heldLease('web-0/uid-0', 6n), says: 'names pod web-0 with token 6' },
    {
      name: 'an older incarnation of this pod holds it',
      lease: heldLease('web-0/uid-old', 5n),
      says: 'names pod web-0',
    },
    { name: 'nobody holds the Lease', lease: { ...heldLease('x', 5n), spec: {} }, says: 'nobody holds the Lease' },
    { name: 'there is no Lease', lease: undefined, says: 'nobody holds the Lease' },
  ])("refuses when $name: only the holder of the run's term may complete it", async ({ lease, says }) => {
    const store = new Store(lease);
    const err = await completions(store)
      .complete('run-1', 5n)
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(NotRunHolderError);
    expect((err as Error).message).toContain("only the holder of the run's term may complete it");
    expect((err as Error).message).toContain(says);
    expect(store.writes).toBe(0);
  });

  it('reads the Lease again after a conflict and still records the run', async () => {
    const store = new Store(heldLease('web-0/uid-0', 5n));
    store.conflictsLeft = 2;
    await completions(store).complete('run-1', 5n);
    expect(parseLease(store.lease ?? {}).completedRuns.map((e) => e.runId)).toEqual(['run-1']);
  });

  it('counts a run on the Lease as completed, but not one whose completedAt is in the future', async () => {
    const ahead = new Date(NOW.getTime() + COMPLETED_AT_TOLERANCE_MS + 1_000);
    const runs = formatCompletedRuns([
      { runId: 'done', token: 4n, holder: 'web-1', completedAt: NOW },
      { runId: 'forged', token: 5n, holder: 'web-0', completedAt: ahead },
    ]);
    const r = completions(new Store(heldLease('web-0/uid-0', 5n, runs)));
    expect(await r.runCompleted('done')).toBe(true);
    // 'forged' is not on the Lease as a completion, and the lock (no API server here) cannot be read: the read fails.
    await expect(r.runCompleted('forged')).rejects.toThrow();
  });
});
