import { describe, expect, it } from 'vitest';
import { ConditionType, Reason, findCondition } from '../../../src/api/v1alpha1/conditions.ts';
import type { Condition, DistributedLockStatus, QueuedRequest } from '../../../src/api/v1alpha1/distributedlock.ts';
import { decide, type Observation } from '../../../src/controllers/distributedlock/decide.ts';
import { computeStatus, refusedCompletions } from '../../../src/controllers/distributedlock/status.ts';
import {
  aLeaseView,
  aLock,
  aPod,
  acquiredAt,
  anObservation,
  completedRun,
  createdAt,
  deepFreeze,
  fencingDown,
  fencingNotConfigured,
  heldBy,
  markedHolderOf,
  noLease,
  observedAt,
  podsNotSynced,
  released,
  renewedAt,
  token,
  transitions,
  unready,
  withAnnotations,
  withGeneration,
  withLease,
  withLock,
  withLockDelay,
  withPods,
  type LeaseOption,
  type ObservationOption,
} from '../../support/builders.ts';
import { leaseName, podKeys } from '../../../src/protocol/names.ts';

const LEASE_MS = 10_000;
const NOW = new Date('2025-01-01T00:01:00.500Z');
const NOW_META = '2025-01-01T00:01:00Z';
const EARLIER_META = '2024-12-31T23:00:00Z';
const T0 = new Date('2025-01-01T00:00:00.000Z');
const at = (ms: number): Date => new Date(T0.getTime() + ms);

const a = aPod('web-a', createdAt(1_000), markedHolderOf('db', 5n));
const b = aPod('web-b', createdAt(2_000));

const heldByA = (...opts: LeaseOption[]): ObservationOption =>
  withLease(aLeaseView(heldBy(a), token(5n), transitions(3), acquiredAt(T0), renewedAt(T0), ...opts));

/** statusOf decides at monotonic nowMs and computes the status against prev. */
function statusOf(o: Observation, prev?: DistributedLockStatus, nowMs = 1_000): DistributedLockStatus {
  return computeStatus(o, decide(o, nowMs), prev === undefined ? undefined : deepFreeze(prev), NOW);
}
const cond = (s: DistributedLockStatus, type: string): Condition | undefined => findCondition(s.conditions, type);

describe('computeStatus', () => {
  it('reports a held lock: holder, token, times, counts, and Held/Ready True with Degraded False', () => {
    const s = statusOf(
      anObservation(withLock(aLock('db', withGeneration(4))), heldByA(renewedAt(at(4_000))), withPods(a, b)),
    );
    expect(s).toEqual({
      holder: { name: 'web-a', uid: 'web-a-uid' },
      fencingToken: '5',
      acquireTime: '2025-01-01T00:00:00.000Z',
      leaseDurationSeconds: 10,
      leaseTransitions: 3,
      leaseName: leaseName('db'),
      candidates: 2,
      queueLength: 0,
      observedGeneration: 4,
      conditions: [
        {
          type: 'Degraded',
          status: 'False',
          reason: 'AsExpected',
          message: expect.any(String) as string,
          observedGeneration: 4,
          lastTransitionTime: NOW_META,
        },
        {
          type: 'Held',
          status: 'True',
          reason: 'Granted',
          message: expect.stringMatching(/web-a.*5/) as string,
          observedGeneration: 4,
          lastTransitionTime: NOW_META,
        },
        {
          type: 'Ready',
          status: 'True',
          reason: 'AsExpected',
          message: expect.any(String) as string,
          observedGeneration: 4,
          lastTransitionTime: NOW_META,
        },
      ],
    });
  });

  it('renders tokens above 2^53 exactly', () => {
    const s = statusOf(anObservation(withLease(aLeaseView(heldBy(a), token(9_007_199_254_740_993n))), withPods(a)));
    expect(s.fencingToken).toBe('9007199254740993');
  });

  it('leaves observedGeneration out everywhere when the lock has no generation', () => {
    const s = statusOf(anObservation(withLock(aLock('db', withGeneration(undefined))), heldByA(), withPods(a)));
    expect(s).not.toHaveProperty('observedGeneration');
    for (const c of s.conditions ?? []) expect(c).not.toHaveProperty('observedGeneration');
  });

  it('reports fencing trouble as Degraded True and Ready False, both RedisUnavailable, with the detail in the message', () => {
    const s = statusOf(anObservation(fencingDown('connect ECONNREFUSED'), withPods(b)));
    expect(cond(s, ConditionType.Degraded)).toMatchObject({
      status: 'True',
      reason: Reason.RedisUnavailable,
      message: expect.stringContaining('ECONNREFUSED') as string,
    });
    expect(cond(s, ConditionType.Ready)).toMatchObject({ status: 'False', reason: Reason.RedisUnavailable });
    expect(cond(s, ConditionType.Held)).toMatchObject({ status: 'False', reason: Reason.RedisUnavailable });
  });

  it('reports Redis asked for without --redis-url as Ready False InvalidSpec, and Degraded True RedisUnavailable', () => {
    const s = statusOf(anObservation(fencingNotConfigured(), withPods(b)));
    expect(cond(s, ConditionType.Ready)).toMatchObject({
      status: 'False',
      reason: Reason.InvalidSpec,
      message: expect.stringContaining('--redis-url') as string,
    });
    expect(cond(s, ConditionType.Degraded)).toMatchObject({ status: 'True', reason: Reason.RedisUnavailable });
  });

  // Before: Ready stayed True (it read the fencing backend alone) while the lock could not be
  // granted — a lowered Lease token, a token at 2^63-1, a grant that kept failing.
  it('reports Ready False LeaseTampered while a held Lease carries a lowered token, naming the annotation and both values', () => {
    const lowered = withLock(aLock('db', (d) => void (d.status = { ...d.status, fencingToken: '9' })));
    const s = statusOf(anObservation(heldByA(), withPods(a, b), lowered), { fencingToken: '9' });
    expect(cond(s, ConditionType.Ready)).toMatchObject({
      status: 'False',
      reason: Reason.LeaseTampered,
      message: expect.stringMatching(
        /annotation fencepost\.io\/fencing-token is 5, below status\.fencingToken 9/,
      ) as string,
    });
    expect(s.fencingToken).toBe('9');
  });

  it('reports Ready False LeaseTampered when no token is left to issue (status.fencingToken at 2^63-1)', () => {
    const max = '9223372036854775807';
    const raised = withLock(
      aLock('db', (d) => void (d.status = { ...d.status, leaseName: 'dlock-db', fencingToken: max })),
    );
    const s = statusOf(anObservation(withLease(aLeaseView(released('Released'), token(5n))), withPods(b), raised));
    expect(cond(s, ConditionType.Ready)).toMatchObject({
      status: 'False',
      reason: Reason.LeaseTampered,
      message: expect.stringContaining(`status.fencingToken is ${max}`) as string,
    });
  });

  it('reports Ready False GrantFailed with the error while the last grant attempt failed, and True again once none did', () => {
    const o = anObservation(withLease(aLeaseView(released('Released'), token(5n))), withPods(b));
    const failed = statusOf({ ...o, grantFailure: 'admission webhook denied the request' });
    expect(cond(failed, ConditionType.Ready)).toMatchObject({
      status: 'False',
      reason: Reason.GrantFailed,
      message: 'The last grant failed: admission webhook denied the request',
    });
    expect(cond(statusOf(o, failed), ConditionType.Ready)).toMatchObject({ status: 'True' });
  });

  it('keeps a renewing holder Held while fencing is down', () => {
    const s = statusOf(anObservation(fencingDown(), heldByA(), withPods(a, b)));
    expect(cond(s, ConditionType.Held)).toMatchObject({ status: 'True', reason: Reason.Granted });
    expect(cond(s, ConditionType.Degraded)?.status).toBe('True');
    expect(s.holder).toEqual(a.ref);
  });

  it.each<{ name: string; obs: Observation; nowMs?: number; reason: string }>([
    {
      name: 'no candidate: WaitingForCandidate',
      obs: anObservation(withPods(aPod('web-a', unready()))),
      reason: Reason.Waiting,
    },
    {
      name: 'within the lock delay: LockDelay',
      obs: anObservation(
        withLock(aLock('db', withLockDelay(5))),
        withLease(aLeaseView(heldBy(a), token(5n), released('Expired'))),
        withPods(b),
      ),
      reason: Reason.LockDelay,
    },
    {
      name: 'pod cache not synced on a vacant lock: CacheNotSynced',
      obs: anObservation(podsNotSynced(), withPods(b)),
      reason: Reason.CacheNotSynced,
    },
    {
      name: 'fencing unavailable: RedisUnavailable',
      obs: anObservation(fencingDown(), withPods(b)),
      reason: Reason.RedisUnavailable,
    },
    {
      name: 'released and about to be granted again: Released',
      obs: anObservation(withLease(aLeaseView(heldBy(a), token(5n), released('Released'))), withPods(b)),
      reason: Reason.Released,
    },
    {
      name: 'never granted and about to be: WaitingForCandidate',
      obs: anObservation(withPods(b)),
      reason: Reason.Waiting,
    },
  ])('an unheld lock says why in Held False: $name', ({ obs: o, nowMs, reason }) => {
    const s = statusOf(o, undefined, nowMs);
    expect(cond(s, ConditionType.Held)).toMatchObject({ status: 'False', reason });
    expect(s).not.toHaveProperty('holder');
  });

  it('a lock without a Lease yet has no leaseName, no token and zero transitions', () => {
    const s = statusOf(anObservation(noLease(), withPods(b)));
    expect(s).not.toHaveProperty('leaseName');
    expect(s).not.toHaveProperty('fencingToken');
    expect(s.leaseTransitions).toBe(0);
    expect(cond(s, ConditionType.Held)?.status).toBe('False');
  });

  it('removes holder, acquireTime and leaseDurationSeconds when the lock is released, and keeps the token', () => {
    const prev = statusOf(anObservation(heldByA(), withPods(a, b)));
    expect(prev).toMatchObject({
      holder: a.ref,
      acquireTime: expect.any(String) as string,
      leaseDurationSeconds: 10,
    });
    const s = statusOf(
      anObservation(
        withLease(aLeaseView(heldBy(a), token(5n), transitions(3), released('Released'))),
        withPods(aPod('web-a', unready())),
      ),
      prev,
    );
    for (const k of ['holder', 'acquireTime', 'leaseDurationSeconds'] as const) expect(s).not.toHaveProperty(k);
    expect(s).toMatchObject({ fencingToken: '5', leaseTransitions: 3, leaseName: leaseName('db') });
  });

  it('keeps lastTransitionTime of unchanged conditions and moves it for changed ones', () => {
    const prev: DistributedLockStatus = {
      conditions: [
        { type: 'Degraded', status: 'False', reason: 'AsExpected', message: '', lastTransitionTime: EARLIER_META },
        { type: 'Held', status: 'True', reason: 'Granted', message: '', lastTransitionTime: EARLIER_META },
        { type: 'Ready', status: 'True', reason: 'AsExpected', message: '', lastTransitionTime: EARLIER_META },
      ],
    };
    const stillHeld = statusOf(anObservation(heldByA(), withPods(a)), prev);
    expect(stillHeld.conditions?.map((c) => c.lastTransitionTime)).toEqual([EARLIER_META, EARLIER_META, EARLIER_META]);
    const lost = statusOf(
      anObservation(fencingDown(), withLease(aLeaseView(heldBy(a), token(5n), released('Released'))), withPods(b)),
      prev,
    );
    expect(lost.conditions?.map((c) => [c.type, c.lastTransitionTime])).toEqual([
      ['Degraded', NOW_META],
      ['Held', NOW_META],
      ['Ready', NOW_META],
    ]);
  });

  it('is a fixpoint: computing again from its own output gives the same status', () => {
    const o = anObservation(heldByA(renewedAt(at(3_000))), withPods(a, b));
    const first = statusOf(o);
    expect(statusOf(o, first)).toEqual(first);
  });

  describe('renewals (status records transitions, not renewals: no API write per renewal)', () => {
    it.each<{ name: string; renew: Date }>([
      { name: 'a renewal a moment later', renew: at(2_000) },
      { name: 'a renewal exactly a lease duration later', renew: at(LEASE_MS) },
      { name: 'a renewal many lease durations later', renew: at(7 * LEASE_MS) },
      { name: 'a renewTime earlier than before (a holder whose clock stepped back)', renew: at(500) },
    ])('leave the status of a held lock unchanged: $name', ({ renew }) => {
      const before = statusOf(anObservation(heldByA(renewedAt(at(1_000))), withPods(a)));
      const after = statusOf(anObservation(heldByA(renewedAt(renew)), withPods(a)), before);
      expect(after).toEqual(before);
    });

    it('shows the lease duration of the Lease, not of the lock spec', () => {
      const o = anObservation(withLease(aLeaseView(heldBy(a), token(5n), observedAt(0))), withPods(a));
      const short = deepFreeze({
        ...o,
        lease:
          o.lease === undefined ? undefined : { ...o.lease, record: { ...o.lease.record, leaseDurationSeconds: 3 } },
      });
      expect(statusOf(short).leaseDurationSeconds).toBe(3);
    });

    it('a new term of the same holder shows its own acquireTime', () => {
      const oldTerm = statusOf(anObservation(heldByA(acquiredAt(T0), renewedAt(at(2_000))), withPods(a)));
      const newTerm = statusOf(
        anObservation(
          withLease(aLeaseView(heldBy(a), token(6n), transitions(4), acquiredAt(at(5_000)), renewedAt(at(5_000)))),
          withPods(a),
        ),
        oldTerm,
      );
      expect(newTerm.acquireTime).toBe(at(5_000).toISOString());
      expect(newTerm.fencingToken).toBe('6');
    });
  });

  describe('queue (Mutex mode: the controller’s record of the requests, status.queue)', () => {
    const qKeys = podKeys('db');
    const mutex = withLock(aLock('db', (d) => (d.spec = { ...d.spec, mode: 'Mutex' })));
    const asking = (name: string, at: string, created: number) =>
      aPod(name, createdAt(created), withAnnotations({ [qKeys.request]: at }));
    const early = asking('early', '2025-01-01T00:00:10.000Z', 2_000);
    const late = asking('late', '1970-01-01T00:00:00.000Z', 1_000);
    const recorded: QueuedRequest = {
      pod: 'early',
      uid: 'early-uid',
      since: '2025-01-01T00:00:10.100Z',
      requestTime: '2025-01-01T00:00:10.000Z',
    };

    it('records a request it sees for the first time at the back, since now, keeping the recorded ones', () => {
      const o = deepFreeze({ ...anObservation(mutex, heldByA(), withPods(a, early, late)), requests: [recorded] });
      expect(statusOf(o).queue).toEqual([
        recorded,
        { pod: 'late', uid: 'late-uid', since: NOW.toISOString(), requestTime: '1970-01-01T00:00:00.000Z' },
      ]);
    });

    it('keeps the record as it was while the pod cache is still filling', () => {
      const o = deepFreeze({ ...anObservation(mutex, heldByA(), withPods(a), podsNotSynced()), requests: [recorded] });
      expect(statusOf(o).queue).toEqual([recorded]);
    });

    it('has no queue when nobody waits, nor in Election mode', () => {
      expect(statusOf(anObservation(mutex, heldByA(), withPods(a))).queue).toBeUndefined();
      expect(statusOf(anObservation(heldByA(), withPods(a, early, late))).queue).toBeUndefined();
    });
  });
});

describe('status.completedRuns', () => {
  const runs = (s: DistributedLockStatus): string[] => (s.completedRuns ?? []).map((r) => r.runId);

  it('copies the runs recorded on the Lease, in the order recorded, with holder and token', () => {
    const s = statusOf(
      anObservation(
        heldByA(completedRun('run-2', 4n, at(2_000), 'web-b'), completedRun('run-1', 5n, at(1_000))),
        withPods(a, b),
      ),
    );
    expect(s.completedRuns).toEqual([
      { runId: 'run-2', completedAt: at(2_000).toISOString(), holder: 'web-b', token: '4' },
      { runId: 'run-1', completedAt: at(1_000).toISOString(), holder: 'web-a', token: '5' },
    ]);
  });

  it('keeps the runs already in status when the Lease no longer has them (a re-created Lease), one entry per run id', () => {
    const prev: DistributedLockStatus = { completedRuns: [{ runId: 'run-0', completedAt: T0.toISOString() }] };
    const s = statusOf(
      anObservation(
        heldByA(completedRun('run-0', 5n, at(9_000)), completedRun('run-1', 5n, at(1_000))),
        withPods(a, b),
      ),
      prev,
    );
    expect(runs(s)).toEqual(['run-0', 'run-1']);
    expect(s.completedRuns?.[0]?.completedAt).toBe(T0.toISOString());
  });

  it('keeps the newest 32', () => {
    const many = Array.from({ length: 40 }, (_, i) => completedRun(`run-${i}`, 5n, at(i)));
    const s = statusOf(anObservation(heldByA(...many), withPods(a, b)));
    expect(runs(s)).toEqual(Array.from({ length: 32 }, (_, i) => `run-${i + 8}`));
  });

  it.each([
    {
      name: 'a completedAt more than 30 s ahead of the controller clock',
      entry: completedRun('run-x', 5n, new Date(NOW.getTime() + 31_000)),
      verdict: 'future',
    },
    { name: 'a token above every token of the Lease', entry: completedRun('run-x', 6n, at(1_000)), verdict: 'token' },
  ])('refuses $name', ({ entry, verdict }) => {
    const o = anObservation(
      heldByA(entry, completedRun('run-ok', 5n, new Date(NOW.getTime() + 29_000))),
      withPods(a, b),
    );
    expect(runs(statusOf(o))).toEqual(['run-ok']);
    expect(refusedCompletions(o, NOW).map((r) => [r.entry.runId, r.verdict])).toEqual([['run-x', verdict]]);
  });
});
