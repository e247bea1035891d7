import { describe, expect, it } from 'vitest';
import { resolveTimings, type DistributedLock, type QueuedRequest } from '../../../src/api/v1alpha1/distributedlock.ts';
import {
  decideSemaphore,
  type PermitView,
  type SemaphoreAction,
  type SemaphoreObservation,
} from '../../../src/controllers/distributedlock/decide-semaphore.ts';
import { FENCING_RETRY_MS, type LeaseView } from '../../../src/controllers/distributedlock/decide.ts';
import type { PodSummary } from '../../../src/controllers/distributedlock/pods.ts';
import { sameHolder, type HolderRef } from '../../../src/protocol/holder.ts';
import { podKeys } from '../../../src/protocol/names.ts';
import { mulberry32 } from '../../support/prng.ts';
import {
  aLeaseView,
  aLock,
  aPod,
  createdAt,
  deepFreeze,
  heldBy,
  markedHolderOf,
  neverRecorded,
  observedAt,
  released,
  rv,
  terminated,
  token,
  withAnnotations,
  withLockDelay,
  type LeaseOption,
  type LockOption,
  type PodOption,
} from '../../support/builders.ts';

// The Semaphore `db` has a 10 s lease; every Lease was last seen changing at monotonic 0 unless a
// row says otherwise, so `nowMs` is also the time elapsed since then.
const LEASE_MS = 10_000;
const keys = podKeys('db');

const permits =
  (n: number): LockOption =>
  (d) => {
    d.spec = { ...d.spec, mode: 'Semaphore', permits: n };
  };
const fencingToken =
  (t: bigint): LockOption =>
  (d) => {
    d.status = { ...d.status, fencingToken: t.toString() };
  };
const asked = (at = '2026-01-01T00:00:00.000Z'): PodOption => withAnnotations({ [keys.request]: at });

// Requesters, oldest first.
const a = aPod('web-a', createdAt(1_000), asked());
const b = aPod('web-b', createdAt(2_000), asked());
const c = aPod('web-c', createdAt(3_000), asked());
const d = aPod('web-d', createdAt(4_000), asked());

const permit = (n: number, ...opts: LeaseOption[]): PermitView => deepFreeze({ permit: n, lease: aLeaseView(...opts) });
const vacant = (n: number, ...opts: LeaseOption[]): PermitView => permit(n, token(BigInt(10 + n)), ...opts);
const heldPermit = (n: number, p: PodSummary, t: bigint, ...opts: LeaseOption[]): PermitView =>
  permit(n, heldBy(p), token(t), ...opts);

interface Obs {
  readonly lock?: DistributedLock;
  readonly anchor?: LeaseView | undefined;
  readonly permits?: readonly PermitView[];
  readonly pods?: readonly PodSummary[];
  readonly podsSynced?: boolean;
  readonly fencingReady?: boolean;
  readonly requests?: readonly QueuedRequest[];
  readonly lost?: SemaphoreObservation['lost'];
}

/** obs builds a Semaphore observation: by default `db` with 2 permits, an anchor at token 20, no permit Leases, no pods. */
function obs(o: Obs = {}): SemaphoreObservation {
  const lock = o.lock ?? aLock('db', permits(2));
  return deepFreeze({
    lock,
    timings: resolveTimings(lock.spec),
    anchor: 'anchor' in o ? o.anchor : aLeaseView(token(20n)),
    permits: o.permits ?? [],
    pods: o.pods ?? [],
    podsSynced: o.podsSynced ?? true,
    fencing: { backend: 'Redis', ready: o.fencingReady ?? true },
    ...(o.requests !== undefined ? { requests: o.requests } : {}),
    ...(o.lost !== undefined ? { lost: o.lost } : {}),
  });
}

const leaseActions = (actions: readonly SemaphoreAction[]) =>
  actions.filter((x) => x.type !== 'MarkPermitHolderPod' && x.type !== 'UnmarkPod');
const grants = (actions: readonly SemaphoreAction[]) =>
  actions.flatMap((x) => (x.type === 'GrantPermit' ? [{ permit: x.permit, to: x.to.name }] : []));

describe('decideSemaphore', () => {
  it('creates the anchor Lease first', () => {
    expect(decideSemaphore(obs({ anchor: undefined, pods: [a] }), 0).actions).toEqual([{ type: 'CreateAnchor' }]);
  });

  it('does nothing while the pod cache is still filling', () => {
    const dec = decideSemaphore(obs({ pods: [a], podsSynced: false }), 0);
    expect(dec.actions).toEqual([]);
    expect(dec.waiting).toBe('CacheNotSynced');
  });

  it('creates one permit Lease per waiter, up to the permits, and no more', () => {
    const dec = decideSemaphore(obs({ pods: [a, b, c] }), 0);
    expect(dec.actions).toEqual([
      { type: 'CreatePermit', permit: 0, lost: undefined },
      { type: 'CreatePermit', permit: 1, lost: undefined },
    ]);
    expect(dec.queue).toBe(1);
    expect(dec.requeueAfterMs).toBe(0);
  });

  it('grants vacant permits to the first waiters, each with the floor of every token the lock knows', () => {
    const dec = decideSemaphore(
      obs({ lock: aLock('db', permits(2), fencingToken(15n)), permits: [vacant(0), vacant(1)], pods: [c, b, a] }),
      0,
    );
    expect(leaseActions(dec.actions)).toEqual([
      { type: 'GrantPermit', permit: 0, to: a.ref, previous: undefined, cause: 'Vacant', floor: 20n },
      { type: 'GrantPermit', permit: 1, to: b.ref, previous: undefined, cause: 'Vacant', floor: 20n },
    ]);
    expect(dec.queue).toBe(1);
    expect(dec.waiting).toBe('AllPermitsHeld');
  });

  it('takes the floor from the anchor, the lock-wide high-water mark, above every permit token and status', () => {
    const dec = decideSemaphore(
      obs({
        lock: aLock('db', permits(2), fencingToken(15n)),
        anchor: aLeaseView(token(30n)),
        permits: [permit(0, token(12n))],
        pods: [a],
      }),
      0,
    );
    expect(dec.actions).toContainEqual(expect.objectContaining({ type: 'GrantPermit', floor: 30n }));
  });

  // Before: no grant (TokenRegressed) until a person repaired the anchor — a wedge anyone with
  // `leases update` could cause.
  it("grants above status's token when the anchor is below it (someone lowered it)", () => {
    const dec = decideSemaphore(
      obs({ lock: aLock('db', permits(2), fencingToken(25n)), permits: [vacant(0)], pods: [a] }),
      0,
    );
    expect(dec.actions).toContainEqual(expect.objectContaining({ type: 'GrantPermit', floor: 25n }));
    expect(dec.waiting).toBeUndefined();
  });

  it('grants above a permit token when the anchor is below it, and with the Lease backend above the anchor resourceVersion', () => {
    const below = { anchor: aLeaseView(token(8n), rv('90')), permits: [vacant(0)], pods: [a] };
    expect(decideSemaphore(obs(below), 0).actions).toContainEqual(
      expect.objectContaining({ type: 'GrantPermit', floor: 10n }),
    );
    expect(decideSemaphore({ ...obs(below), fencing: { backend: 'Lease', ready: true } }, 0).actions).toContainEqual(
      expect.objectContaining({ type: 'GrantPermit', floor: 90n }),
    );
  });

  it('seeds the first floor from the anchor resourceVersion when no token was ever issued', () => {
    const dec = decideSemaphore(obs({ anchor: aLeaseView(rv('4242')), permits: [permit(0)], pods: [a] }), 0);
    expect(dec.actions).toContainEqual(expect.objectContaining({ type: 'GrantPermit', floor: 4242n }));
  });

  it('lets the holders keep their permits while the third waiter waits, and looks again at the first expiry', () => {
    const dec = decideSemaphore(
      obs({
        permits: [heldPermit(0, a, 11n), heldPermit(1, b, 12n, observedAt(3_000))],
        pods: [pod(a, markedHolderOf('db', 11n)), pod(b, markedHolderOf('db', 12n)), c],
      }),
      4_000,
    );
    expect(dec.actions).toEqual([]);
    expect(dec.holders.map((h) => [h.permit, h.holder.name, h.token])).toEqual([
      [0, 'web-a', 11n],
      [1, 'web-b', 12n],
    ]);
    expect(dec.waiting).toBe('AllPermitsHeld');
    expect(dec.queue).toBe(1);
    expect(dec.requeueAfterMs).toBe(LEASE_MS - 4_000 + 10);
  });

  it('grants a released permit to the waiter, and never a second permit to a holder that asks again', () => {
    const dec = decideSemaphore(
      obs({
        permits: [heldPermit(0, a, 11n), vacant(1, released('Released'))],
        pods: [pod(a, markedHolderOf('db', 11n)), c],
      }),
      0,
    );
    expect(leaseActions(dec.actions)).toEqual([
      { type: 'GrantPermit', permit: 1, to: c.ref, previous: undefined, cause: 'Released', floor: 20n },
    ]);
  });

  it('hands an expired permit to the next waiter directly', () => {
    const dec = decideSemaphore(
      obs({ permits: [heldPermit(0, a, 11n), heldPermit(1, b, 12n, observedAt(5_000))], pods: [a, b, c] }),
      LEASE_MS + 1,
    );
    expect(leaseActions(dec.actions)).toEqual([
      { type: 'GrantPermit', permit: 0, to: c.ref, previous: a.ref, cause: 'Expired', floor: 20n },
    ]);
  });

  it('hands over the permit of a holder whose containers all terminated, without waiting for expiry', () => {
    const gone = pod(a, terminated());
    const dec = decideSemaphore(obs({ permits: [heldPermit(0, a, 11n)], pods: [gone, c] }), 1);
    expect(grants(dec.actions)).toEqual([{ permit: 0, to: 'web-c' }]);
    expect(dec.actions).toContainEqual(expect.objectContaining({ type: 'GrantPermit', cause: 'HolderTerminated' }));
  });

  it('with a lock-delay, revokes an expired permit and counts it as taken until the delay has passed', () => {
    const lock = aLock('db', permits(1), withLockDelay(5));
    const expired = decideSemaphore(obs({ lock, permits: [heldPermit(0, a, 11n)], pods: [a, c] }), LEASE_MS + 1);
    expect(leaseActions(expired.actions)).toEqual([
      { type: 'RevokePermit', permit: 0, holder: a.ref, cause: 'Expired' },
    ]);
    const delayed = decideSemaphore(
      obs({ lock, permits: [vacant(0, released('Expired'), observedAt(LEASE_MS + 1))], pods: [a, c] }),
      LEASE_MS + 1_000,
    );
    expect(grants(delayed.actions)).toEqual([]);
    expect(delayed.waiting).toBe('LockDelay');
    expect(delayed.requeueAfterMs).toBe(4_001 + 10);
  });

  describe('when permits shrink', () => {
    const three = [heldPermit(0, a, 11n), heldPermit(1, b, 12n), heldPermit(2, c, 13n)];
    const pods = [a, b, c, d];

    it('revokes nobody and grants nothing while more than permits pods hold it', () => {
      const dec = decideSemaphore(obs({ lock: aLock('db', permits(1)), permits: three, pods }), 1_000);
      expect(leaseActions(dec.actions)).toEqual([]);
      expect(dec.occupied).toBe(3);
      expect(dec.waiting).toBe('AllPermitsHeld');
    });

    it('deletes a vacated permit at or above permits and grants nothing while permits pods still hold it', () => {
      const dec = decideSemaphore(
        obs({
          lock: aLock('db', permits(2)),
          permits: [heldPermit(0, a, 11n), heldPermit(1, b, 12n), vacant(2, released('Released'))],
          pods,
        }),
        1_000,
      );
      expect(leaseActions(dec.actions)).toEqual([{ type: 'DeletePermit', permit: 2 }]);
    });

    it('grants a permit below permits once fewer than permits pods hold it, never one above', () => {
      const dec = decideSemaphore(
        obs({
          lock: aLock('db', permits(2)),
          permits: [vacant(0, released('Released')), vacant(1, released('Released')), heldPermit(2, c, 13n)],
          pods,
        }),
        1_000,
      );
      expect(grants(dec.actions)).toEqual([{ permit: 0, to: 'web-a' }]);
    });

    it('revokes an expired holder above permits instead of handing its permit over', () => {
      const dec = decideSemaphore(
        obs({ lock: aLock('db', permits(1)), permits: [vacant(0, released('Released')), heldPermit(1, b, 12n)], pods }),
        LEASE_MS + 1,
      );
      expect(leaseActions(dec.actions)).toEqual([
        { type: 'RevokePermit', permit: 1, holder: b.ref, cause: 'Expired' },
        { type: 'GrantPermit', permit: 0, to: a.ref, previous: undefined, cause: 'Released', floor: 20n },
      ]);
    });
  });

  it('grants first come first served by the controller record, not by pod age or request time', () => {
    const record: QueuedRequest[] = [c, a].map((p) => ({
      pod: p.ref.name,
      uid: p.ref.uid,
      since: '2026-01-01T00:00:00.000Z',
      requestTime: '2026-01-01T00:00:00.000Z',
    }));
    const dec = decideSemaphore(
      obs({ lock: aLock('db', permits(1)), permits: [vacant(0)], pods: [a, b, c], requests: record }),
      0,
    );
    expect(grants(dec.actions)).toEqual([{ permit: 0, to: 'web-c' }]);
  });

  it('grants only pods that asked', () => {
    const quiet = aPod('web-q', createdAt(500));
    const dec = decideSemaphore(obs({ permits: [vacant(0), vacant(1)], pods: [quiet] }), 0);
    expect(grants(dec.actions)).toEqual([]);
    expect(dec.waiting).toBe('NoCandidates');
  });

  it('waits for the fencing backend, and for status to record the anchor, before the first grant', () => {
    const down = decideSemaphore(obs({ permits: [vacant(0)], pods: [a], fencingReady: false }), 0);
    expect(grants(down.actions)).toEqual([]);
    expect(down.waiting).toBe('FencingUnavailable');
    expect(down.requeueAfterMs).toBe(FENCING_RETRY_MS);
    const unrecorded = decideSemaphore(
      obs({ lock: aLock('db', permits(2), neverRecorded()), permits: [vacant(0)], pods: [a] }),
      0,
    );
    expect(grants(unrecorded.actions)).toEqual([]);
    expect(unrecorded.waiting).toBe('LeaseNotRecorded');
  });

  it('counts an anchor that names a renewing holder as a permit', () => {
    const dec = decideSemaphore(
      obs({
        lock: aLock('db', permits(1)),
        anchor: aLeaseView(heldBy(a), token(20n)),
        permits: [vacant(0)],
        pods: [a, b],
      }),
      1_000,
    );
    expect(grants(dec.actions)).toEqual([]);
    expect(dec.occupied).toBe(1);
  });

  it('re-creates a permit Lease lost while held as Lost, and counts it as taken', () => {
    const lost = [{ permit: 0, holder: a.ref, leaseDurationSeconds: 10 }];
    const dec = decideSemaphore(obs({ lock: aLock('db', permits(1)), pods: [b], lost }), 0);
    expect(leaseActions(dec.actions)).toEqual([{ type: 'CreatePermit', permit: 0, lost: lost[0] }]);
    expect(dec.occupied).toBe(1);
    const waiting = decideSemaphore(
      obs({ lock: aLock('db', permits(1)), permits: [vacant(0, released('Lost'))], pods: [b] }),
      LEASE_MS - 1,
    );
    expect(grants(waiting.actions)).toEqual([]);
    expect(waiting.waiting).toBe('LeaseLost');
  });

  it('marks each holder pod with its own token and unmarks a pod that holds nothing', () => {
    const dec = decideSemaphore(
      obs({
        permits: [heldPermit(0, a, 11n), heldPermit(1, b, 12n)],
        pods: [pod(a, markedHolderOf('db', 11n)), b, pod(c, markedHolderOf('db', 9n))],
      }),
      0,
    );
    expect(dec.actions).toEqual([
      { type: 'MarkPermitHolderPod', pod: b.ref, permit: 1, token: 12n },
      { type: 'UnmarkPod', pod: c.ref },
    ]);
  });

  it('neither grants to nor revokes for a terminated pod that holds nothing', () => {
    const dec = decideSemaphore(
      obs({ permits: [heldPermit(0, a, 11n), vacant(1)], pods: [a, pod(c, terminated())] }),
      0,
    );
    expect(leaseActions(dec.actions)).toEqual([]);
  });
});

// ----- The invariants, on random observations -----

function pod(p: PodSummary, ...opts: PodOption[]): PodSummary {
  return aPod(p.ref.name, createdAt(p.createdAt), withAnnotations(p.annotations), ...opts);
}

describe('decideSemaphore invariants on random observations', () => {
  const seed = Number(process.env['FC_SEED'] ?? 1818);
  const runs = 3_000;
  it(`hold for ${runs} observations (seed ${seed})`, () => {
    const rnd = mulberry32(seed);
    const int = (n: number): number => Math.floor(rnd() * n);
    for (let run = 0; run < runs; run++) {
      const n = 1 + int(4);
      const lock = aLock('db', permits(n), ...(rnd() < 0.3 ? [withLockDelay(int(3))] : []));
      const pods = Array.from({ length: int(7) }, (_, i) =>
        aPod(
          `p${i}`,
          createdAt(1_000 + int(5) * 1_000),
          ...(rnd() < 0.7 ? [asked()] : []),
          ...(rnd() < 0.1 ? [terminated()] : []),
        ),
      );
      const holderPool: HolderRef[] = [...pods.map((p) => p.ref), { name: 'gone', uid: 'gone-uid' }];
      const used = new Set<string>();
      const leases: PermitView[] = [];
      let maxToken = 0n;
      for (let i = 0; i < 6; i++) {
        if (rnd() < 0.4) continue;
        const t = BigInt(1 + int(50));
        maxToken = t > maxToken ? t : maxToken;
        const h = holderPool[int(holderPool.length)];
        const seen = observedAt(int(3) * 6_000);
        if (h !== undefined && !used.has(h.name) && rnd() < 0.6) {
          used.add(h.name);
          leases.push(permit(i, heldBy(h), token(t), seen));
        } else {
          const how = (['Released', 'Expired', 'Terminated', 'Lost'] as const)[int(4)] ?? 'Released';
          leases.push(permit(i, token(t), released(how), seen));
        }
      }
      const anchorToken = maxToken + BigInt(int(3));
      const o = obs({ lock, permits: leases, pods, anchor: aLeaseView(token(anchorToken)) });
      const nowMs = int(4) * 5_000;
      const dec = decideSemaphore(o, nowMs);
      const ctx = JSON.stringify({ run, n, nowMs, actions: dec.actions.map((x) => x.type) });

      const given = dec.actions.filter((x) => x.type === 'GrantPermit');
      const created = dec.actions.filter((x) => x.type === 'CreatePermit');
      // Never more than N believers: grants only into free capacity.
      expect(given.length + created.length, ctx).toBeLessThanOrEqual(Math.max(0, n - dec.occupied));
      expect(dec.holders.length + given.length, ctx).toBeLessThanOrEqual(Math.max(n, dec.holders.length));
      for (const g of given) {
        expect(g.permit, ctx).toBeLessThan(n);
        expect(g.floor, ctx).toBeGreaterThanOrEqual(anchorToken);
        // Never a pod that a Lease names, nor one pod twice.
        expect(
          leases.some((l) => sameHolder(l.lease.record.holder, g.to)),
          ctx,
        ).toBe(false);
        expect(given.filter((x) => sameHolder(x.to, g.to)).length, ctx).toBe(1);
      }
      // First come, first served: the grantees are the first candidates.
      expect(
        given.map((g) => g.to.name),
        ctx,
      ).toEqual(dec.candidates.slice(0, given.length).map((p) => p.ref.name));
      // A holder that renews is never revoked nor replaced.
      for (const x of dec.actions) {
        if (x.type !== 'RevokePermit' && !(x.type === 'GrantPermit' && x.previous !== undefined)) continue;
        const l = leases.find((v) => v.permit === x.permit);
        const holderPod = pods.find((p) => sameHolder(p.ref, l?.lease.record.holder));
        const expired = l !== undefined && nowMs - l.lease.observedAtMs > LEASE_MS;
        expect(expired || holderPod?.terminated === true, ctx).toBe(true);
      }
    }
  });
});
