import { describe, expect, it } from 'vitest';
import type { V1Lease } from '@kubernetes/client-node';
import {
  grantedLease,
  leaseDurationSecondsFor,
  newLease,
  parseLease,
  parseLeaseTolerant,
  raisedAnchor,
  releasedLease,
  renewFingerprint,
  renewedLease,
  tokenFloor,
} from '../../../src/lease/record.ts';
import { aRecord, deepFreeze, heldBy, released, renewedAt, rv, token, transitions } from '../../support/builders.ts';
import { holderIdentity, parseHolderIdentity, sameHolder, type HolderRef } from '../../../src/protocol/holder.ts';
import {
  LAST_HOLDER_ANNOTATION,
  RELEASE_ANNOTATION,
  RENEW_DEADLINE_ANNOTATION,
  RENEW_PERIOD_ANNOTATION,
  TOKEN_ANNOTATION,
  leaseName,
} from '../../../src/protocol/names.ts';
import type { TermTimings } from '../../../src/protocol/timings.ts';
import { MAX_TOKEN, TokenError } from '../../../src/protocol/token.ts';

const A: HolderRef = { name: 'web-a', uid: 'uid-a' };
const B: HolderRef = { name: 'web-b', uid: 'uid-b' };
const TIMINGS: TermTimings = { leaseDurationMs: 10_000, renewDeadlineMs: 6_666, renewPeriodMs: 3_333 };
const T1 = new Date('2025-01-01T00:00:00.123Z');
const T2 = new Date('2025-01-01T00:00:04.456Z');

/** aKubeLease is a lock's Lease as the API server returns it (frozen: builders must not mutate it). */
function aKubeLease(
  spec: V1Lease['spec'] = {},
  annotations?: Record<string, string>,
  resourceVersion = '100',
): V1Lease {
  return deepFreeze({
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: {
      name: leaseName('db'),
      namespace: 'default',
      resourceVersion,
      labels: { 'fencepost.io/lock': 'db' },
      ...(annotations !== undefined ? { annotations } : {}),
    },
    spec,
  });
}
const fresh = aKubeLease();

/** roundTrip serialises a body as JSON and back, as the API server would store it. */
const roundTrip = (l: V1Lease): V1Lease => JSON.parse(JSON.stringify(l)) as V1Lease;

describe('parseHolderIdentity', () => {
  it.each<{ name: string; id: string | undefined; want: HolderRef | undefined }>([
    { name: 'name/uid is a holder', id: 'web-a/uid-a', want: A },
    {
      name: 'only the first slash separates, the rest is the uid',
      id: 'web-a/u/v',
      want: { name: 'web-a', uid: 'u/v' },
    },
    { name: 'undefined is nobody', id: undefined, want: undefined },
    { name: 'the empty string is nobody', id: '', want: undefined },
    // Someone else's spelling is still somebody: held (by no pod of ours) until it expires.
    {
      name: 'a bare name (not our spelling) is a holder that matches no pod',
      id: 'web-a',
      want: { name: 'web-a', uid: '' },
    },
    { name: 'an empty name is a holder that matches no pod', id: '/uid-a', want: { name: '/uid-a', uid: '' } },
    { name: 'an empty uid is a holder that matches no pod', id: 'web-a/', want: { name: 'web-a/', uid: '' } },
  ])('$name', ({ id, want }) => {
    expect(parseHolderIdentity(id)).toEqual(want);
  });

  it('reverses holderIdentity', () => {
    expect(holderIdentity(A)).toBe('web-a/uid-a');
    expect(parseHolderIdentity(holderIdentity(A))).toEqual(A);
  });

  it('sameHolder compares name and uid, and nobody is never the same as anybody', () => {
    expect(sameHolder(A, { ...A })).toBe(true);
    expect(sameHolder(A, { ...A, uid: 'uid-a2' })).toBe(false);
    expect(sameHolder(A, B)).toBe(false);
    expect(sameHolder(undefined, A)).toBe(false);
    expect(sameHolder(undefined, undefined)).toBe(false);
  });
});

describe('parseLease', () => {
  it('reads a Lease never granted as vacant with no token, zero transitions and its resourceVersion', () => {
    expect(parseLease(fresh)).toEqual({
      holder: undefined,
      token: undefined,
      renewDeadlineMs: undefined,
      renewPeriodMs: undefined,
      acquireTime: undefined,
      renewTime: undefined,
      leaseDurationSeconds: undefined,
      transitions: 0,
      released: undefined,
      lastHolder: undefined,
      completedRuns: [],
      resourceVersion: '100',
    });
  });

  it('reads a held Lease', () => {
    const lease = aKubeLease(
      { holderIdentity: 'web-a/uid-a', acquireTime: T1, renewTime: T2, leaseDurationSeconds: 10, leaseTransitions: 4 },
      {
        [TOKEN_ANNOTATION]: '9007199254740993',
        [RENEW_DEADLINE_ANNOTATION]: '6666',
        [RENEW_PERIOD_ANNOTATION]: '3333',
      },
      '812',
    );
    expect(parseLease(lease)).toEqual({
      holder: A,
      token: 9_007_199_254_740_993n,
      renewDeadlineMs: 6_666,
      renewPeriodMs: 3_333,
      acquireTime: T1,
      renewTime: T2,
      leaseDurationSeconds: 10,
      transitions: 4,
      released: undefined,
      lastHolder: undefined,
      completedRuns: [],
      resourceVersion: '812',
    });
  });

  it('ignores the last-holder annotation while someone holds the Lease', () => {
    const lease = aKubeLease(
      { holderIdentity: 'web-b/uid-b' },
      { [TOKEN_ANNOTATION]: '3', [LAST_HOLDER_ANNOTATION]: 'web-a/uid-a' },
    );
    expect(parseLease(lease).lastHolder).toBeUndefined();
  });

  it('ignores unknown release values and malformed timing annotations', () => {
    const lease = aKubeLease(
      {},
      { [RELEASE_ANNOTATION]: 'Stolen', [RENEW_DEADLINE_ANNOTATION]: '0', [RENEW_PERIOD_ANNOTATION]: '1.5' },
    );
    expect(parseLease(lease)).toMatchObject({
      released: undefined,
      renewDeadlineMs: undefined,
      renewPeriodMs: undefined,
    });
  });

  it('accepts the largest token', () => {
    expect(parseLease(aKubeLease({}, { [TOKEN_ANNOTATION]: MAX_TOKEN.toString() })).token).toBe(MAX_TOKEN);
  });

  it.each([
    { name: 'a leading zero', text: '007' },
    { name: 'a sign', text: '-1' },
    { name: 'a plus sign', text: '+1' },
    { name: 'an exponent', text: '1e3' },
    { name: 'hex', text: '0x10' },
    { name: 'a fraction', text: '1.0' },
    { name: 'spaces', text: ' 1' },
    { name: 'the empty string', text: '' },
    { name: 'a value above the maximum', text: (MAX_TOKEN + 1n).toString() },
  ])('throws a TokenError on a token annotation with $name, rather than grant from an unreadable floor', ({ text }) => {
    const lease = aKubeLease({ holderIdentity: 'web-a/uid-a' }, { [TOKEN_ANNOTATION]: text });
    expect(() => parseLease(lease)).toThrow(TokenError);
    expect(() => parseLease(lease)).toThrow(TOKEN_ANNOTATION);
  });

  it('parseLeaseTolerant (the controller) reads such a Lease as if it had no token, and returns the text found', () => {
    const lease = aKubeLease({ holderIdentity: 'web-a/uid-a' }, { [TOKEN_ANNOTATION]: 'abc' });
    const { record, malformedToken } = parseLeaseTolerant(lease);
    expect(malformedToken).toBe('abc');
    expect(record.token).toBeUndefined();
    expect(record.holder?.name).toBe('web-a');
    expect(parseLeaseTolerant(aKubeLease({}, { [TOKEN_ANNOTATION]: '7' }))).toEqual({
      record: expect.objectContaining({ token: 7n }) as unknown,
    });
  });
});

describe('grantedLease', () => {
  it('hands a fresh Lease to the holder: parse gives holder, token, timings and transitions 1', () => {
    const r = parseLease(roundTrip(grantedLease(fresh, A, 101n, TIMINGS, T1)));
    expect(r).toEqual({
      holder: A,
      token: 101n,
      renewDeadlineMs: 6_666,
      renewPeriodMs: 3_333,
      acquireTime: T1,
      renewTime: T1,
      leaseDurationSeconds: 10,
      transitions: 1,
      released: undefined,
      lastHolder: undefined,
      completedRuns: [],
      resourceVersion: '100',
    });
  });

  it('takes over a released Lease: transitions+1, release marks cleared, other metadata kept', () => {
    const releasedBody = aKubeLease(
      { leaseDurationSeconds: 10, leaseTransitions: 4 },
      {
        [TOKEN_ANNOTATION]: '41',
        [RELEASE_ANNOTATION]: 'Released',
        [LAST_HOLDER_ANNOTATION]: 'web-a/uid-a',
        'example.com/keep': 'me',
      },
      '900',
    );
    const body = grantedLease(releasedBody, B, 42n, TIMINGS, T2);
    const r = parseLease(roundTrip(body));
    expect(r).toMatchObject({
      holder: B,
      token: 42n,
      transitions: 5,
      released: undefined,
      lastHolder: undefined,
      acquireTime: T2,
      renewTime: T2,
    });
    expect(body.metadata?.annotations).toEqual({
      [TOKEN_ANNOTATION]: '42',
      [RENEW_DEADLINE_ANNOTATION]: '6666',
      [RENEW_PERIOD_ANNOTATION]: '3333',
      'example.com/keep': 'me',
    });
    expect(body.metadata?.resourceVersion).toBe('900'); // the CAS precondition
    expect(body.metadata?.labels).toEqual({ 'fencepost.io/lock': 'db' });
  });

  it('rounds the lease duration up to whole seconds, at least 1', () => {
    expect(
      parseLease(grantedLease(fresh, A, 1n, { ...TIMINGS, leaseDurationMs: 1_500 }, T1)).leaseDurationSeconds,
    ).toBe(2);
    expect(leaseDurationSecondsFor(1)).toBe(1);
    expect(leaseDurationSecondsFor(0)).toBe(1);
    expect(leaseDurationSecondsFor(15_000)).toBe(15);
  });

  it('writes microsecond times that survive JSON with millisecond precision', () => {
    const json = JSON.parse(JSON.stringify(grantedLease(fresh, A, 1n, TIMINGS, T1))) as {
      spec: { acquireTime: string; renewTime: string };
    };
    expect(json.spec.acquireTime).toMatch(/^2025-01-01T00:00:00\.123\d{3}Z$/);
    expect(new Date(json.spec.renewTime).getTime()).toBe(T1.getTime());
  });
});

describe('renewedLease', () => {
  it('changes only renewTime', () => {
    const held = grantedLease(fresh, A, 7n, TIMINGS, T1);
    const renewed = renewedLease(held, T2);
    const { renewTime: r1, ...spec1 } = held.spec ?? {};
    const { renewTime: r2, ...spec2 } = renewed.spec ?? {};
    expect(spec2).toEqual(spec1);
    expect(renewed.metadata).toEqual(held.metadata);
    expect(new Date(r1 ?? 0).getTime()).toBe(T1.getTime());
    expect(new Date(r2 ?? 0).getTime()).toBe(T2.getTime());
    expect(parseLease(roundTrip(renewed))).toEqual({ ...parseLease(roundTrip(held)), renewTime: T2 });
  });
});

describe('releasedLease', () => {
  it.each(['Released', 'Expired'] as const)(
    '%s: clears holder and times, keeps the token, records how and who, keeps transitions',
    (how) => {
      const held = deepFreeze(grantedLease(aKubeLease({ leaseTransitions: 2 }), A, 7n, TIMINGS, T1));
      const r = parseLease(roundTrip(releasedLease(held, how)));
      expect(r).toMatchObject({
        holder: undefined,
        token: 7n,
        acquireTime: undefined,
        renewTime: undefined,
        transitions: 3,
        released: how,
        lastHolder: A,
        leaseDurationSeconds: 10,
      });
      expect(releasedLease(held, how).spec).not.toHaveProperty('holderIdentity');
    },
  );

  it('releasing a vacant Lease records no last holder', () => {
    const r = parseLease(releasedLease(fresh, 'Expired'));
    expect(r.lastHolder).toBeUndefined();
    expect(r.released).toBe('Expired');
    expect(r.token).toBeUndefined();
  });

  it('grant, release, grant: tokens and transitions accumulate on the same Lease', () => {
    const one = grantedLease(fresh, A, 101n, TIMINGS, T1);
    const two = grantedLease(releasedLease(one, 'Released'), B, 102n, TIMINGS, T2);
    expect(parseLease(roundTrip(two))).toMatchObject({
      holder: B,
      token: 102n,
      transitions: 2,
      released: undefined,
      lastHolder: undefined,
    });
  });
});

describe('tokenFloor', () => {
  it.each<{ name: string; record: ReturnType<typeof aRecord>; want: bigint }>([
    { name: 'is the recorded token when there is one', record: aRecord(token(41n), rv('900')), want: 41n },
    { name: 'is the resourceVersion before the first grant', record: aRecord(rv('7340032')), want: 7_340_032n },
    {
      name: 'handles resourceVersions above 2^53 exactly',
      record: aRecord(rv('9007199254740993')),
      want: 9_007_199_254_740_993n,
    },
    {
      name: 'is the token of a released Lease (the high-water mark stays)',
      record: aRecord(heldBy(A), token(9n), released('Released')),
      want: 9n,
    },
  ])('$name', ({ record, want }) => {
    expect(tokenFloor(record)).toBe(want);
  });

  it.each(['', 'abc', '12a', '-5', '1.5'])(
    'throws before the first grant when the resourceVersion %j is not an integer',
    (text) => {
      expect(() => tokenFloor(aRecord(rv(text)))).toThrow(/resourceVersion/);
    },
  );
});

describe('renewFingerprint', () => {
  const held = aRecord(heldBy(A), token(7n), transitions(1));
  it.each([
    { name: 'a renewal (new renewTime)', next: aRecord(heldBy(A), token(7n), transitions(1), renewedAt(T2)) },
    { name: 'a new holder', next: aRecord(heldBy(B), token(8n), transitions(2)) },
    {
      name: 'a new incarnation of the same pod',
      next: aRecord(heldBy({ ...A, uid: 'uid-a2' }), token(7n), transitions(1)),
    },
    {
      name: 'a new term for the same holder (same renewTime, next transition and token)',
      next: aRecord(heldBy(A), token(8n), transitions(2)),
    },
    { name: 'a release', next: aRecord(heldBy(A), token(7n), transitions(1), released('Released')) },
  ])('changes on $name', ({ next }) => {
    expect(renewFingerprint(next)).not.toBe(renewFingerprint(held));
  });

  it('does not change when nothing the holder writes changed', () => {
    expect(renewFingerprint(aRecord(heldBy(A), token(7n), transitions(1), rv('999')))).toBe(renewFingerprint(held));
  });

  it('changes when an agent renews a real Lease', () => {
    const body = grantedLease(fresh, A, 7n, TIMINGS, T1);
    expect(renewFingerprint(parseLease(renewedLease(body, T2)))).not.toBe(renewFingerprint(parseLease(body)));
    expect(renewFingerprint(parseLease(renewedLease(body, T1)))).toBe(renewFingerprint(parseLease(body)));
  });
});

describe('Semaphore Lease bodies', () => {
  const lockRef = { name: 'workers', uid: 'lock-uid', apiVersion: 'fencepost.io/v1alpha1', kind: 'DistributedLock' };

  it('newLease with a permit is dlock.<lock>.<permit>, labelled with its lock and permit, owned by the lock', () => {
    const body = newLease(lockRef, undefined, 3);
    expect(body.metadata?.name).toBe('dlock.workers.3');
    expect(body.metadata?.labels).toEqual({ 'fencepost.io/lock': 'workers', 'fencepost.io/permit': '3' });
    expect(body.metadata?.ownerReferences?.[0]).toMatchObject({ name: 'workers', uid: 'lock-uid', controller: true });
    expect(newLease(lockRef, undefined).metadata?.name).toBe(leaseName('workers'));
  });

  it('newLease with a permit lost while held is released Lost, so that its next grant waits a lease', () => {
    const body = newLease(lockRef, { holder: A, leaseDurationSeconds: 12 }, 0);
    const r = parseLease({ ...body, metadata: { ...body.metadata, resourceVersion: '5' } });
    expect(r.released).toBe('Lost');
    expect(r.leaseDurationSeconds).toBe(12);
    expect(sameHolder(r.lastHolder, A)).toBe(true);
  });

  it('raisedAnchor raises the lock-wide high-water mark and keeps everything else', () => {
    const anchor = aKubeLease({}, { [TOKEN_ANNOTATION]: '41' });
    const raised = raisedAnchor(anchor, 42n);
    expect(raised.metadata?.annotations?.[TOKEN_ANNOTATION]).toBe('42');
    expect(raised.metadata?.resourceVersion).toBe(anchor.metadata?.resourceVersion);
    expect(raised.spec).toEqual(anchor.spec);
    expect(raisedAnchor(aKubeLease(), 7n).metadata?.annotations?.[TOKEN_ANNOTATION]).toBe('7');
  });

  it.each([41n, 40n])('raisedAnchor refuses to lower or repeat the high-water mark (%s against 41)', (t) => {
    expect(() => raisedAnchor(aKubeLease({}, { [TOKEN_ANNOTATION]: '41' }), t)).toThrow(/not above/);
  });
});
