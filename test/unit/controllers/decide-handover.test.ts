/**
 * Planned handover, the controller's pure side (decide-handover.ts and its place in decide):
 * requests refused naming why, the Lease marked once, the lapse after drain + grace, the grant to
 * the target after a HandedOver release, and completion.
 */
import { describe, expect, it } from 'vitest';
import { decide, type Observation } from '../../../src/controllers/distributedlock/decide.ts';
import type { PodSummary } from '../../../src/controllers/distributedlock/pods.ts';
import {
  FORCE_RELEASE_REQUEST_ANNOTATION,
  HANDOVER_REQUEST_ANNOTATION,
  formatForceReleaseRequest,
  formatHandoverRequest,
} from '../../../src/protocol/handover.ts';
import { podKeys } from '../../../src/protocol/names.ts';
import {
  aLeaseView,
  aLock,
  aPod,
  anObservation,
  createdAt,
  handoverTo,
  heldBy,
  markedHolderOf,
  preferredHolder,
  released,
  token,
  unready,
  withAnnotations,
  withHandoverMarkSeen,
  withLease,
  withLock,
  withPods,
  withPriority,
  type PodOption,
  type LeaseOption,
  type ObservationOption,
} from '../../support/builders.ts';
import type { DistributedLock } from '../../../src/api/v1alpha1/distributedlock.ts';

const a = aPod('web-a', createdAt(1_000), markedHolderOf('db', 5n));
const b = aPod('web-b', createdAt(2_000));
const c = aPod('web-c', createdAt(3_000));
const LEASE_MS = 10_000;

const request = (to: string, t: bigint, extra: { drainSeconds?: number } = {}): string =>
  formatHandoverRequest({ to, token: t, requestedAt: '2025-01-01T00:00:00Z', ...extra });
const lockWith = (raw: string | undefined, over: Partial<DistributedLock['spec']> = {}): ObservationOption => {
  const l = aLock('db');
  return withLock({
    ...l,
    metadata: { ...l.metadata, annotations: raw !== undefined ? { [HANDOVER_REQUEST_ANNOTATION]: raw } : {} },
    spec: { ...l.spec, ...over },
  });
};
const heldByA = (...opts: LeaseOption[]): ObservationOption => withLease(aLeaseView(heldBy(a), token(5n), ...opts));
const obs = (...opts: ObservationOption[]): Observation => anObservation(...opts);
const withMarkSeen = withHandoverMarkSeen;
const answerOf = (o: Observation, now = 1_000) => decide(o, now).actions.find((x) => x.type === 'AnswerHandover');

describe('decide: planned handover requests', () => {
  it('a valid request marks the Lease (once) with the target, the token and the spec drain period', () => {
    const d = decide(obs(lockWith(request('web-b', 5n)), heldByA(), withPods(a, b)), 1_000);
    expect(d.holder).toEqual(a.ref);
    expect(d.actions).toContainEqual({
      type: 'MarkHandover',
      mark: { to: b.ref, token: 5n, drainMs: 30_000 },
      to: 'web-b',
      why: expect.stringContaining('fencepost.io/handover') as unknown,
    });
  });

  it('the request may ask for its own drain period; spec.handover.drainSeconds is the default', () => {
    const own = decide(obs(lockWith(request('web-b', 5n, { drainSeconds: 2 })), heldByA(), withPods(a, b)), 1);
    const drainOf = (d: ReturnType<typeof decide>): number | undefined => {
      const m = d.actions.find((x) => x.type === 'MarkHandover');
      return m?.type === 'MarkHandover' ? m.mark?.drainMs : undefined;
    };
    expect(drainOf(own)).toBe(2_000);
    const spec = decide(
      obs(lockWith(request('web-b', 5n), { handover: { drainSeconds: 7 } }), heldByA(), withPods(a, b)),
      1,
    );
    expect(drainOf(spec)).toBe(7_000);
  });

  it.each<{ name: string; o: Observation; message: RegExp }>([
    {
      name: 'a token that moved on (stale request)',
      o: obs(lockWith(request('web-b', 4n)), heldByA(), withPods(a, b)),
      message: /token moved on.*token 4/,
    },
    {
      name: 'a target that is not Ready',
      o: obs(lockWith(request('web-b', 5n)), heldByA(), withPods(a, aPod('web-b', unready()))),
      message: /web-b is not a candidate: it is not Ready/,
    },
    {
      name: 'a target that does not exist',
      o: obs(lockWith(request('web-z', 5n)), heldByA(), withPods(a, b)),
      message: /web-z is not a candidate/,
    },
    {
      name: 'the holder itself',
      o: obs(lockWith(request('web-a', 5n)), heldByA(), withPods(a, b)),
      message: /already holds/,
    },
    { name: 'an unreadable request', o: obs(lockWith('{"to":"web-b"}'), heldByA(), withPods(a, b)), message: /token/ },
    {
      name: 'a drain period out of bounds',
      o: obs(lockWith('{"to":"web-b","token":"5","drainSeconds":99999}'), heldByA(), withPods(a, b)),
      message: /drainSeconds/,
    },
    {
      name: 'a Semaphore',
      o: obs(lockWith(request('web-b', 5n), { mode: 'Semaphore', permits: 2 }), heldByA(), withPods(a, b)),
      message: /Semaphore/,
    },
    {
      name: 'a Mutex target that never asked',
      o: obs(lockWith(request('web-b', 5n), { mode: 'Mutex' }), heldByA(), withPods(a, b)),
      message: /has not asked/,
    },
    {
      name: 'a vacant lock',
      o: obs(
        lockWith(request('web-b', 5n)),
        withLease(aLeaseView(heldBy(a), token(5n), released('Released'))),
        withPods(a, b),
      ),
      message: /nobody holds/,
    },
  ])('refuses $name, naming why, and marks nothing', ({ o, message }) => {
    const d = decide(o, 1_000);
    const ans = d.actions.find((x) => x.type === 'AnswerHandover');
    expect(ans).toMatchObject({ answer: { outcome: 'Refused' } });
    expect(ans?.type === 'AnswerHandover' ? ans.answer.message : '').toMatch(message);
    expect(d.actions.some((x) => x.type === 'MarkHandover' && x.mark !== undefined)).toBe(false);
  });

  it('a Mutex target with a pending request is marked', () => {
    const asked = aPod('web-b', createdAt(2_000), withAnnotations({ [podKeys('db').request]: '2025-01-01T00:00:00Z' }));
    const d = decide(obs(lockWith(request('web-b', 5n), { mode: 'Mutex' }), heldByA(), withPods(a, asked)), 1);
    expect(d.actions).toContainEqual(expect.objectContaining({ type: 'MarkHandover' }));
  });

  it('while the mark is in flight nothing more is done, and the reconcile comes back when it would lapse', () => {
    const d = decide(
      obs(lockWith(request('web-b', 5n)), heldByA(handoverTo(b, 5n, 2_000)), withPods(a, b), withMarkSeen(0)),
      1_000,
    );
    expect(d.actions.filter((x) => x.type === 'MarkHandover' || x.type === 'AnswerHandover')).toEqual([]);
    expect(d.requeueAfterMs).toBeLessThanOrEqual(2_000 + LEASE_MS - 1_000); // or the expiry check, if sooner
  });

  it('a holder that has not released by drain + one lease duration: the handover lapses, the mark goes, nothing is revoked', () => {
    const o = obs(lockWith(request('web-b', 5n)), heldByA(handoverTo(b, 5n, 2_000)), withPods(a, b), withMarkSeen(0));
    // Renewing holder (the controller saw it renew at 11 s): the lease is not expired.
    const renewed = { ...o, lease: o.lease !== undefined ? { ...o.lease, observedAtMs: 11_000 } : undefined };
    const d = decide(renewed, 12_001);
    expect(d.holder).toEqual(a.ref);
    expect(d.actions.some((x) => x.type === 'MarkHandover')).toBe(false); // the answer first; the mark goes next pass
    expect(answerOf(renewed, 12_001)).toMatchObject({ answer: { outcome: 'TimedOut' } });
    expect(d.actions.some((x) => x.type === 'Grant' || x.type === 'Revoke')).toBe(false);
  });

  it('a mark without a request (withdrawn or answered) is removed from the held Lease', () => {
    const d = decide(obs(lockWith(undefined), heldByA(handoverTo(b, 5n)), withPods(a, b)), 1_000);
    expect(d.actions).toContainEqual({ type: 'MarkHandover', mark: undefined });
  });

  it('after the HandedOver release the target is granted next, even when another pod comes first in order', () => {
    const lease = withLease(aLeaseView(heldBy(a), token(5n), handoverTo(c, 5n), released('HandedOver')));
    const d = decide(obs(lockWith(request('web-c', 5n)), lease, withPods(a, b, c)), 1_000);
    expect(d.actions).toContainEqual(
      expect.objectContaining({ type: 'Grant', to: c.ref, cause: 'HandedOver', floor: 5n }),
    );
    expect(answerOf(obs(lockWith(request('web-c', 5n)), lease, withPods(a, b, c)))).toBeUndefined();
  });

  it('after the HandedOver release a target no longer Ready is not granted: the usual order applies', () => {
    const lease = withLease(aLeaseView(heldBy(a), token(5n), handoverTo(c, 5n), released('HandedOver')));
    const d = decide(
      obs(lockWith(request('web-c', 5n)), lease, withPods(a, b, aPod('web-c', createdAt(3_000), unready()))),
      1,
    );
    expect(d.actions).toContainEqual(expect.objectContaining({ type: 'Grant', to: b.ref, cause: 'Released' }));
  });

  it('a HandedOver release skips the lock delay (it is voluntary)', () => {
    const lease = withLease(aLeaseView(heldBy(a), token(5n), handoverTo(b, 5n), released('HandedOver')));
    const d = decide(obs(lockWith(request('web-b', 5n), { lockDelaySeconds: 60 }), lease, withPods(a, b)), 1);
    expect(d.actions).toContainEqual(expect.objectContaining({ type: 'Grant', to: b.ref }));
  });

  it('the target holding with a larger token completes the request', () => {
    const bHolds = aPod('web-b', createdAt(2_000), markedHolderOf('db', 6n));
    const lease = withLease(aLeaseView(heldBy(bHolds), token(6n)));
    expect(
      answerOf(obs(lockWith(request('web-b', 5n)), lease, withPods(aPod('web-a', createdAt(1_000)), bHolds))),
    ).toMatchObject({
      answer: { outcome: 'Completed', newToken: 6n },
    });
  });

  it('no request, no mark: no handover actions at all', () => {
    const d = decide(obs(lockWith(undefined), heldByA(), withPods(a, b)), 1);
    expect(d.actions.filter((x) => x.type === 'MarkHandover' || x.type === 'AnswerHandover')).toEqual([]);
  });
});

describe('decide: forced release (fencepost.io/force-release)', () => {
  const force = (t: bigint): ObservationOption => {
    const l = aLock('db');
    return withLock({
      ...l,
      metadata: {
        ...l.metadata,
        annotations: {
          [FORCE_RELEASE_REQUEST_ANNOTATION]: formatForceReleaseRequest({ token: t, requestedAt: 'x', by: 'alice' }),
        },
      },
    });
  };
  it("ends the named grant (the Lease released as Revoked), naming who asked, whatever the holder's renewals", () => {
    const d = decide(obs(force(5n), heldByA(), withPods(a, b)), 1_000);
    expect(d.holder).toBeUndefined();
    expect(d.actions).toContainEqual({ type: 'ForceRelease', holder: a.ref, by: 'alice' });
  });
  it('a stale request (the token moved on) is refused and ends nothing', () => {
    const d = decide(obs(force(4n), heldByA(), withPods(a, b)), 1_000);
    expect(d.holder).toEqual(a.ref);
    expect(d.actions.some((x) => x.type === 'ForceRelease')).toBe(false);
    expect(d.actions.find((x) => x.type === 'AnswerHandover')).toMatchObject({
      answer: { kind: 'forceRelease', outcome: 'Refused' },
    });
  });
  it('once the Lease shows the release, the request is answered before the next grant (which moves the token on)', () => {
    const lease = withLease(aLeaseView(heldBy(a), token(5n), released('Revoked')));
    const d = decide(obs(force(5n), lease, withPods(a, b)), 1);
    expect(d.actions.some((x) => x.type === 'Grant')).toBe(false);
    expect(d.actions.find((x) => x.type === 'AnswerHandover')).toMatchObject({ answer: { outcome: 'Completed' } });
    // Answered (the request gone): the next candidate is granted, with the cause named.
    const next = decide(obs(lockWith(undefined), lease, withPods(a, b)), 1);
    expect(next.actions).toContainEqual(expect.objectContaining({ type: 'Grant', to: b.ref, cause: 'ForceReleased' }));
  });
  it('the lock-delay follows a forced release (the released holder may still run)', () => {
    const lease = withLease(aLeaseView(heldBy(a), token(5n), released('Revoked')));
    const d = decide(obs(lockWith(undefined, { lockDelaySeconds: 5 }), lease, withPods(a, b)), 1);
    expect(d.waiting).toBe('LockDelay');
  });
});

describe('decide: Lease.spec.preferredHolder (KEP-4355) as a handover request', () => {
  it('a candidate named as <pod>/<uid> is marked as the successor of the current grant, with the spec drain period', () => {
    const d = decide(obs(lockWith(undefined), heldByA(preferredHolder('web-b/web-b-uid')), withPods(a, b)), 1);
    expect(d.holder).toEqual(a.ref);
    expect(d.actions).toContainEqual({
      type: 'MarkHandover',
      mark: { to: b.ref, token: 5n, drainMs: 30_000 },
      to: 'web-b',
      why: "the Lease's spec.preferredHolder names pod web-b",
    });
  });
  it('a bare pod name names that candidate too', () => {
    const d = decide(obs(lockWith(undefined), heldByA(preferredHolder('web-b')), withPods(a, b)), 1);
    expect(d.actions).toContainEqual(expect.objectContaining({ type: 'MarkHandover', to: 'web-b' }));
  });
  it('once marked, nothing more (and no lapse: the writer withdraws by clearing the field)', () => {
    const d = decide(
      obs(lockWith(undefined), heldByA(preferredHolder('web-b'), handoverTo(b, 5n)), withPods(a, b), withMarkSeen(0)),
      9_000,
    );
    expect(d.actions.filter((x) => x.type === 'MarkHandover' || x.type === 'AnswerHandover')).toEqual([]);
  });
  it.each([
    ['the holder itself', 'web-a'],
    ['a pod that is not Ready', 'web-c'],
    ['another incarnation (uid) of a candidate', 'web-b/other-uid'],
    ['a name no pod has', 'somebody-else'],
  ])('names nobody when it is %s: no mark', (_why, value) => {
    const d = decide(
      obs(
        lockWith(undefined),
        heldByA(preferredHolder(value)),
        withPods(a, b, aPod('web-c', createdAt(3_000), unready())),
      ),
      1,
    );
    expect(d.actions.some((x) => x.type === 'MarkHandover')).toBe(false);
  });
  it('after the holder releases (HandedOver), the preferred pod is granted', () => {
    const lease = withLease(
      aLeaseView(heldBy(a), token(5n), preferredHolder('web-c'), handoverTo(c, 5n), released('HandedOver')),
    );
    const d = decide(obs(lockWith(undefined), lease, withPods(a, b, c)), 1);
    expect(d.actions).toContainEqual(expect.objectContaining({ type: 'Grant', to: c.ref, cause: 'HandedOver' }));
  });
});

describe('decide: preemption (spec.preemption HigherPriority)', () => {
  const NOW = Date.parse('2025-01-01T00:10:00Z');
  const readyFor =
    (ms: number): PodOption =>
    (d) => {
      (d as { readySinceMs?: number }).readySinceMs = NOW - ms;
    };
  const at = (o: Observation): Observation => ({ ...o, wallNowMs: NOW });
  const preempting = lockWith(undefined, { preemption: 'HigherPriority' });
  const high = (ms: number) => aPod('web-b', createdAt(2_000), withPriority('10'), readyFor(ms));
  it('a candidate of higher priority, Ready for 10 s, gets the holder marked for a handover to it', () => {
    const d = decide(at(obs(preempting, heldByA(), withPods(a, high(10_000)))), 1);
    expect(d.holder).toEqual(a.ref);
    expect(d.actions).toContainEqual(
      expect.objectContaining({
        type: 'MarkHandover',
        to: 'web-b',
        why: "pod web-b has priority 10, above the holder's 0 (spec.preemption: HigherPriority)",
      }),
    );
  });
  it('not yet Ready for 10 s: no mark, and a look again when it will have been', () => {
    const d = decide(at(obs(preempting, heldByA(), withPods(a, high(4_000)))), 1);
    expect(d.actions.some((x) => x.type === 'MarkHandover')).toBe(false);
    expect(d.requeueAfterMs).toBe(6_000);
  });
  it('equal priority never preempts (no turns); nor does anything with preemption Never (the default)', () => {
    const same = aPod('web-b', createdAt(2_000), readyFor(60_000));
    expect(
      decide(at(obs(preempting, heldByA(), withPods(a, same))), 1).actions.some((x) => x.type === 'MarkHandover'),
    ).toBe(false);
    expect(
      decide(at(obs(lockWith(undefined), heldByA(), withPods(a, high(60_000)))), 1).actions.some(
        (x) => x.type === 'MarkHandover',
      ),
    ).toBe(false);
  });
  it('the new holder is not preempted back by the lower-priority former holder', () => {
    const bHolds = aPod('web-b', createdAt(2_000), withPriority('10'), markedHolderOf('db', 6n), readyFor(60_000));
    const lease = withLease(aLeaseView(heldBy(bHolds), token(6n)));
    const aNow = aPod('web-a', createdAt(1_000), readyFor(60_000));
    expect(
      decide(at(obs(preempting, lease, withPods(aNow, bHolds))), 1).actions.some((x) => x.type === 'MarkHandover'),
    ).toBe(false);
  });
  it('Mutex ignores preemption', () => {
    const d = decide(
      at(
        obs(lockWith(undefined, { preemption: 'HigherPriority', mode: 'Mutex' }), heldByA(), withPods(a, high(60_000))),
      ),
      1,
    );
    expect(d.actions.some((x) => x.type === 'MarkHandover')).toBe(false);
  });
});

export type { PodSummary };
