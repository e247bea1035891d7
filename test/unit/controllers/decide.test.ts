import type { V1ContainerStatus, V1PodSpec } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { mulberry32 } from '../../support/prng.ts';
import { RESYNC_MS, decide, unactionable } from '../../../src/controllers/distributedlock/decide.ts';
import type { Action, Decision, Observation } from '../../../src/controllers/distributedlock/decide.ts';
import { isCandidate } from '../../../src/controllers/distributedlock/pods.ts';
import type { PodSummary } from '../../../src/controllers/distributedlock/pods.ts';
import type { QueuedRequest } from '../../../src/api/v1alpha1/distributedlock.ts';
import {
  aLeaseView,
  aLock,
  aPod,
  anObservation,
  createdAt,
  deepFreeze,
  fencingBackend,
  fencingDown,
  fencingNotConfigured,
  finalized,
  fromKubelet,
  heldBy,
  grantedRequest,
  lastHolder,
  leaseSeconds,
  lockVersion,
  markedHolderOf,
  neverRecorded,
  noLease,
  observedAt,
  podsNotSynced,
  released,
  rv,
  terminated,
  terminating,
  token,
  transitions,
  unready,
  withAnnotations,
  withHandoff,
  withLabels,
  withLease,
  withLeaseSeconds,
  withLock,
  withLockDelay,
  withPods,
  withPriority,
  withSelector,
  withUid,
  type LeaseOption,
  type LockOption,
  type ObservationOption,
  type PodOption,
} from '../../support/builders.ts';
import { sameHolder, type HolderRef } from '../../../src/protocol/holder.ts';
import { podKeys } from '../../../src/protocol/names.ts';

// The lock `db` has a 10 s lease; the controller saw the Lease's fingerprint change at monotonic 0
// unless a row says otherwise, so `nowMs` is also the time elapsed since then.
const LEASE_MS = 10_000;
const keys = podKeys('db');

// Candidates, oldest first: a (1 s), b (2 s), c (3 s).
const a = aPod('web-a', createdAt(1_000));
const b = aPod('web-b', createdAt(2_000));
const c = aPod('web-c', createdAt(3_000));
const pod = (p: PodSummary, ...opts: PodOption[]): PodSummary => aPod(p.ref.name, createdAt(p.createdAt), ...opts);
const marked = (p: PodSummary, t: bigint, ...opts: PodOption[]): PodSummary => pod(p, markedHolderOf('db', t), ...opts);

// What the API server may show of the holder pod `a` (its agent a native sidecar): the kubelet's
// reports, and the pod GC's mark on the pod of a deleted node (phase and condition only).
const T0 = new Date('2025-01-01T00:00:00Z');
const WITH_SIDECAR: V1PodSpec = {
  initContainers: [{ name: 'fencepost-agent', restartPolicy: 'Always' }],
  containers: [{ name: 'app' }],
};
const status = (name: string, state: 'running' | 'terminated'): V1ContainerStatus => ({
  name,
  image: `${name}:1`,
  imageID: '',
  ready: state === 'running',
  restartCount: 0,
  state:
    state === 'running'
      ? { running: { startedAt: T0 } }
      : { terminated: { exitCode: 137, startedAt: T0, finishedAt: T0 } },
});
/** failedByPodGc: phase Failed and DisruptionTarget/DeletionByPodGC, containers still reported running. */
const failedByPodGc = (): PodOption =>
  fromKubelet(WITH_SIDECAR, {
    phase: 'Failed',
    conditions: [{ type: 'DisruptionTarget', status: 'True', reason: 'DeletionByPodGC' }],
    initContainerStatuses: [status('fencepost-agent', 'running')],
    containerStatuses: [status('app', 'running')],
  });
/** appStoppedAgentRunning: the application container terminated, the native sidecar agent still runs. */
const appStoppedAgentRunning = (): PodOption =>
  fromKubelet(WITH_SIDECAR, {
    phase: 'Running',
    initContainerStatuses: [status('fencepost-agent', 'running')],
    containerStatuses: [status('app', 'terminated')],
  });
/** allStopped: the kubelet reports every container, the native sidecar too, terminated. */
const allStopped = (): PodOption =>
  fromKubelet(WITH_SIDECAR, {
    phase: 'Failed',
    initContainerStatuses: [status('fencepost-agent', 'terminated')],
    containerStatuses: [status('app', 'terminated')],
  });

/** heldByA is a Lease held by a with token 5. */
const heldByA = (...opts: LeaseOption[]): ObservationOption =>
  withLease(aLeaseView(heldBy(a), token(5n), transitions(3), ...opts));
const obs = (...opts: ObservationOption[]): Observation => anObservation(...opts);
const lockWith = (...opts: LockOption[]): ObservationOption => withLock(aLock('db', ...opts));

const unmark = (p: PodSummary): Action => ({ type: 'UnmarkPod', pod: p.ref });
const mark = (p: PodSummary, t: bigint): Action => ({ type: 'MarkHolderPod', pod: p.ref, token: t });

interface Row {
  readonly name: string;
  readonly obs: Observation;
  readonly nowMs: number;
  /** want is matched with toMatchObject: listed keys must match, arrays exactly (length and order). */
  readonly want: Partial<Decision>;
  /** requeue: inclusive bounds on requeueAfterMs, when its exact margin is not the point. */
  readonly requeue?: readonly [number, number];
}

const rows: readonly Row[] = [
  // ----- Creating the Lease; waiting for the pod cache -----
  {
    name: 'a new lock (no Lease recorded in status) gets its Lease created and nothing else',
    obs: obs(noLease(), withPods(a, b), lockWith(neverRecorded())),
    nowMs: 0,
    want: { actions: [{ type: 'CreateLease', lost: undefined }], holder: undefined, waiting: undefined },
  },
  {
    name: 'a new lock whose finalizer this reconcile added is granted by creating its Lease already granted, the floor its own resourceVersion',
    obs: obs(noLease(), withPods(a, b), lockWith(neverRecorded(), lockVersion('500')), finalized('now')),
    nowMs: 0,
    want: {
      actions: [{ type: 'Grant', create: true, to: a.ref, previous: undefined, cause: 'Vacant', floor: 500n }],
      waiting: undefined,
    },
  },
  {
    name: 'a new lock with no candidate yet gets an empty Lease, as before',
    obs: obs(noLease(), lockWith(neverRecorded(), lockVersion('500')), finalized('now')),
    nowMs: 0,
    want: { actions: [{ type: 'CreateLease', lost: undefined }] },
  },
  {
    name: 'a new lock while fencing is down gets an empty Lease, no grant',
    obs: obs(noLease(), withPods(a), lockWith(neverRecorded(), lockVersion('500')), finalized('now'), fencingDown()),
    nowMs: 0,
    want: { actions: [{ type: 'CreateLease', lost: undefined }] },
  },
  {
    name: 'a lock whose finalizer was already there and whose Lease is missing: created as Lost, although status records nothing (a Lease may have been created and granted before status was written)',
    obs: obs(noLease(), withPods(a, b), lockWith(neverRecorded(), lockVersion('500')), finalized('before')),
    nowMs: 0,
    want: { actions: [{ type: 'CreateLease', lost: { holder: undefined, leaseDurationSeconds: 10 } }] },
  },
  {
    name: 'the finalizer is the record of the Lease: the first grant does not wait for status to record it',
    obs: obs(withPods(a, b), lockWith(neverRecorded()), finalized('before')),
    nowMs: 0,
    want: { actions: [{ type: 'Grant', to: a.ref, previous: undefined, cause: 'Vacant', floor: 100n }] },
  },
  // ----- The Lease deleted while held (a former holder may still believe) -----
  {
    name: "a lock whose status names a holder but whose Lease is gone gets a Lease created as Lost, with that term's length",
    obs: obs(
      noLease(),
      withPods(a, b),
      withLock({
        ...aLock('db'),
        status: { holder: a.ref, acquireTime: '2025-01-01T00:00:00.000Z', leaseDurationSeconds: 30 },
      }),
    ),
    nowMs: 0,
    want: { actions: [{ type: 'CreateLease', lost: { holder: a.ref, leaseDurationSeconds: 30 } }] },
  },
  {
    name: "a missing Lease with status lagging but a pod still marked as holder: created as Lost, the spec's lease length",
    obs: obs(noLease(), withPods(marked(a, 7n), b)),
    nowMs: 0,
    want: { actions: [{ type: 'CreateLease', lost: { holder: a.ref, leaseDurationSeconds: 10 } }] },
  },
  {
    name: 'a lock whose status records a Lease that is missing, with no holder named anywhere: created as Lost all the same (status may have lagged a grant)',
    obs: obs(noLease(), withPods(a, b)),
    nowMs: 0,
    want: { actions: [{ type: 'CreateLease', lost: { holder: undefined, leaseDurationSeconds: 10 } }] },
  },
  {
    name: 'the first grant of a new lock waits until status records its Lease',
    obs: obs(withPods(a, b), lockWith(neverRecorded())),
    nowMs: 0,
    want: { actions: [], holder: undefined, waiting: 'LeaseNotRecorded', requeueAfterMs: 0 },
  },
  {
    name: 'a missing Lease is not created before the pod cache has synced (its marks say whether it was held)',
    obs: obs(noLease(), podsNotSynced(), withPods(a)),
    nowMs: 0,
    want: { actions: [], waiting: 'CacheNotSynced' },
  },
  {
    name: 'a Lease created as Lost grants nobody for a full lease duration from first sight',
    obs: obs(withLease(aLeaseView(released('Lost'), lastHolder(a), leaseSeconds(10))), withPods(a, b)),
    nowMs: LEASE_MS - 1,
    want: { actions: [], holder: undefined, waiting: 'LeaseLost' },
    requeue: [1, 20],
  },
  {
    name: 'a Lease created as Lost waits the lock-delay on top of the lease duration',
    obs: obs(
      withLease(aLeaseView(released('Lost'), lastHolder(a), leaseSeconds(10))),
      withPods(a, b),
      lockWith(withLockDelay(5)),
    ),
    nowMs: LEASE_MS + 4_000,
    want: { actions: [], waiting: 'LeaseLost' },
    requeue: [1_000, 1_020],
  },
  {
    name: 'a Lease created as Lost is granted after a full lease duration, to another pod than the lost holder',
    obs: obs(withLease(aLeaseView(released('Lost'), lastHolder(a), leaseSeconds(10))), withPods(a, b)),
    nowMs: LEASE_MS + 1,
    want: {
      actions: [{ type: 'Grant', to: b.ref, previous: undefined, cause: 'Expired', floor: 100n }],
      waiting: undefined,
    },
  },
  {
    name: 'while the pod cache is not synced a vacant lock with a Ready candidate is not granted',
    obs: obs(podsNotSynced(), withPods(a)),
    nowMs: 0,
    want: { actions: [], waiting: 'CacheNotSynced' },
    requeue: [1, 5_000],
  },
  {
    name: 'while the pod cache is not synced an expired holder is neither revoked nor replaced',
    obs: obs(podsNotSynced(), heldByA(), withPods(marked(a, 5n), b)),
    nowMs: 3 * LEASE_MS,
    want: { actions: [], waiting: 'CacheNotSynced' },
  },
  {
    name: 'while the pod cache is not synced a holder absent from it is not revoked after expiry',
    obs: obs(podsNotSynced(), heldByA(), withPods()),
    nowMs: 3 * LEASE_MS,
    want: { actions: [], waiting: 'CacheNotSynced' },
  },
  {
    name: 'while the pod cache is not synced a terminated holder is not handed off',
    obs: obs(podsNotSynced(), heldByA(), withPods(marked(a, 5n, terminated()), b)),
    nowMs: 1_000,
    want: { actions: [], waiting: 'CacheNotSynced' },
  },
  {
    name: 'while the pod cache is not synced neither a stale-marked pod is unmarked nor the holder marked',
    obs: obs(podsNotSynced(), heldByA(), withPods(a, marked(b, 4n))),
    nowMs: 1_000,
    want: { actions: [], waiting: 'CacheNotSynced' },
  },

  // ----- A vacant Lease -----
  {
    name: 'a Lease never granted goes to the oldest Ready candidate with its resourceVersion as the floor',
    obs: obs(withLease(aLeaseView(rv('7340032'))), withPods(c, a, b)),
    nowMs: 0,
    want: {
      actions: [{ type: 'Grant', to: a.ref, previous: undefined, cause: 'Vacant', floor: 7_340_032n }],
      holder: undefined,
      waiting: undefined,
      candidates: [a, b, c],
    },
  },
  {
    name: 'a vacant Lease with a recorded token uses the token as the floor, even below the resourceVersion',
    obs: obs(withLease(aLeaseView(token(41n), rv('9000'))), withPods(b, c)),
    nowMs: 0,
    want: { actions: [{ type: 'Grant', to: b.ref, previous: undefined, cause: 'Vacant', floor: 41n }] },
  },
  {
    name: 'candidates of the same age are ordered by name',
    obs: obs(withPods(aPod('web-z', createdAt(5)), aPod('web-m', createdAt(5)))),
    nowMs: 0,
    want: {
      actions: [
        { type: 'Grant', to: { name: 'web-m', uid: 'web-m-uid' }, previous: undefined, cause: 'Vacant', floor: 100n },
      ],
    },
  },
  {
    name: 'unready, terminating, terminated and unselected pods are passed over for a younger Ready candidate',
    obs: obs(
      withPods(
        aPod('old-unready', createdAt(1), unready()),
        aPod('old-terminating', createdAt(2), terminating()),
        aPod('old-terminated', createdAt(3), terminated()),
        aPod('old-unselected', createdAt(4), withLabels({ app: 'api' })),
        aPod('old-unlabelled', createdAt(5), withLabels({ app: undefined })),
        c,
      ),
    ),
    nowMs: 0,
    want: {
      actions: [{ type: 'Grant', to: c.ref, previous: undefined, cause: 'Vacant', floor: 100n }],
      candidates: [c],
    },
  },
  {
    name: 'a vacant lock with only unready, terminating, terminated or unselected pods waits for a candidate',
    obs: obs(
      withPods(
        pod(a, unready()),
        pod(b, terminating()),
        pod(c, terminated()),
        aPod('api-0', withLabels({ app: 'api' })),
      ),
    ),
    nowMs: 0,
    want: { actions: [], waiting: 'NoCandidates', requeueAfterMs: RESYNC_MS, candidates: [] },
  },
  {
    name: 'a pod selected through matchExpressions is a candidate, one excluded by them is not',
    obs: obs(
      lockWith(
        withSelector({
          matchExpressions: [
            { key: 'tier', operator: 'In', values: ['db'] },
            { key: 'canary', operator: 'DoesNotExist' },
          ],
        }),
      ),
      withPods(
        pod(a, withLabels({ tier: 'db', canary: 'yes' })),
        pod(b, withLabels({ tier: 'db' })),
        pod(c, withLabels({ tier: 'web' })),
      ),
    ),
    nowMs: 0,
    want: { actions: [{ type: 'Grant', to: b.ref, previous: undefined, cause: 'Vacant', floor: 100n }] },
  },

  // ----- A held Lease: renewal and expiry -----
  {
    name: 'a holder renewed recently keeps the lock and the requeue comes at about its expiry',
    obs: obs(heldByA(), withPods(marked(a, 5n), b)),
    nowMs: 4_000,
    want: { actions: [], holder: a.ref, expiresInMs: 6_000, waiting: undefined },
    requeue: [6_000, 7_000],
  },
  {
    name: 'a holder not renewed for exactly the lease duration is still held (expiry is strictly after)',
    obs: obs(heldByA(), withPods(marked(a, 5n), b)),
    nowMs: LEASE_MS,
    want: { actions: [], holder: a.ref, expiresInMs: 0 },
    requeue: [0, 1_000],
  },
  {
    name: 'a holder not renewed for the lease duration plus 1 ms is replaced by another candidate, cause Expired',
    obs: obs(heldByA(), withPods(marked(a, 5n), b)),
    nowMs: LEASE_MS + 1,
    want: {
      actions: [unmark(a), { type: 'Grant', to: b.ref, previous: a.ref, cause: 'Expired', floor: 5n }],
      holder: undefined,
      expiresInMs: undefined,
      waiting: undefined,
    },
  },
  {
    name: 'expiry is counted from when the controller saw the renewal, not from monotonic zero',
    obs: obs(heldByA(observedAt(50_000)), withPods(marked(a, 5n), b)),
    nowMs: 50_000 + LEASE_MS,
    want: { actions: [], holder: a.ref, expiresInMs: 0 },
  },
  {
    name: 'the lease duration written on the Lease for this term wins over a shortened spec',
    obs: obs(lockWith(withLeaseSeconds(5)), heldByA(leaseSeconds(10)), withPods(marked(a, 5n), b)),
    nowMs: 5_000 + 1,
    want: { actions: [], holder: a.ref },
  },
  {
    name: 'a longer spec wins over the Lease: a Lease whose leaseDurationSeconds a co-tenant shortened does not expire its holder early',
    obs: obs(lockWith(withLeaseSeconds(60)), heldByA(leaseSeconds(10)), withPods(marked(a, 5n), b)),
    nowMs: LEASE_MS + 1,
    want: { actions: [], holder: a.ref },
  },
  {
    name: '… and expires it after the longer one',
    obs: obs(lockWith(withLeaseSeconds(60)), heldByA(leaseSeconds(10)), withPods(marked(a, 5n), b)),
    nowMs: 60_000 + 1,
    want: { actions: [unmark(a), { type: 'Grant', to: b.ref, previous: a.ref, cause: 'Expired', floor: 5n }] },
  },
  // ----- A Lease token lowered by someone (a co-tenant with `leases update`) -----
  {
    // Before: no grant (TokenRegressed) until a person set the annotation back — a lock wedged by
    // anyone with `leases update` (a co-tenant's leader-election Role), while Ready said True.
    name: 'a vacant Lease whose token was lowered below status.fencingToken is granted above status (Redis backend: the counter is above its own tokens)',
    obs: obs(
      withLease(aLeaseView(token(5n), released('Released'), lastHolder(a), rv('7'))),
      withPods(a, b),
      lockWith((d) => {
        d.status = { ...d.status, fencingToken: '9' };
      }),
    ),
    nowMs: 0,
    want: {
      actions: [{ type: 'Grant', to: b.ref, previous: undefined, cause: 'Released', floor: 9n }],
      waiting: undefined,
      tampered: { leaseToken: 5n, statusToken: 9n, revision: undefined, floor: 9n },
    },
  },
  {
    name: 'with the Lease backend the floor of a lowered Lease is also its resourceVersion: tokens issued after status was last written are below it',
    obs: obs(
      withLease(aLeaseView(token(5n), released('Released'), lastHolder(a), rv('40'))),
      withPods(a, b),
      fencingBackend('Lease'),
      lockWith((d) => {
        d.status = { ...d.status, fencingToken: '9' };
      }),
    ),
    nowMs: 0,
    want: {
      actions: [{ type: 'Grant', to: b.ref, previous: undefined, cause: 'Released', floor: 40n }],
      tampered: { leaseToken: 5n, statusToken: 9n, revision: 40n, floor: 40n },
    },
  },
  {
    // Found by the safety suite's co-tenant fault (seed 1392478744: delete-lease, patch-status,
    // lower-token): the Lease re-created as Lost has no token, status.fencingToken was raised to
    // 2^63−1, and the grant after the Lost wait went out with token 2^63, above every guard's range.
    name: 'a vacant Lease whose floor is the largest token (status raised to 2^63−1) is not granted: no token above it',
    obs: obs(
      withLease(aLeaseView(released('Lost'), observedAt(0))),
      withPods(a, b),
      lockWith((d) => {
        d.status = { ...d.status, leaseName: 'dlock-db', fencingToken: '9223372036854775807' };
      }),
    ),
    nowMs: 10 * LEASE_MS,
    want: { actions: [], holder: undefined, waiting: 'TokenRegressed' },
  },
  {
    // Before: parseLease threw on it in every reconcile — no grant and no status write, for good.
    name: 'a Lease token annotation that is no token (someone wrote "abc") is granted above status and the resourceVersion, whatever the backend',
    obs: {
      ...obs(
        withLease(aLeaseView(released('Released'), lastHolder(a), rv('40'))),
        withPods(a, b),
        lockWith((d) => {
          d.status = { ...d.status, fencingToken: '9' };
        }),
      ),
      malformedToken: 'abc',
    },
    nowMs: 0,
    want: {
      actions: [{ type: 'Grant', to: b.ref, previous: undefined, cause: 'Released', floor: 40n }],
      tampered: { leaseToken: undefined, malformed: 'abc', statusToken: 9n, revision: 40n, floor: 40n },
    },
  },
  {
    name: 'a Lease lowered and vacated while status last recorded a holder waits a full lease duration of its term (it may still believe)',
    obs: obs(
      withLease(aLeaseView(token(5n), observedAt(0))),
      withPods(a, b),
      lockWith((d) => {
        d.status = {
          ...d.status,
          fencingToken: '9',
          holder: { name: a.ref.name, uid: a.ref.uid },
          leaseDurationSeconds: 10,
        };
      }),
    ),
    nowMs: 1_000,
    want: {
      actions: [],
      waiting: 'TamperedTerm',
      tampered: { leaseToken: 5n, statusToken: 9n, revision: undefined, floor: 9n },
    },
  },
  {
    // Found by co-tenant-token.test.ts: the status written for the wait drops status.holder, and
    // the next reconcile granted at once (the wait lasted one status write).
    name: '… and keeps waiting once status no longer names the holder, while Held says LeaseTampered',
    obs: obs(
      withLease(aLeaseView(token(5n), observedAt(0))),
      withPods(a, b),
      lockWith((d) => {
        d.status = {
          ...d.status,
          fencingToken: '9',
          conditions: [
            {
              type: 'Held',
              status: 'False',
              reason: 'LeaseTampered',
              message: '',
              lastTransitionTime: '2026-01-01T00:00:00Z',
            },
          ],
        };
      }),
    ),
    nowMs: 1_000,
    want: { actions: [], waiting: 'TamperedTerm' },
  },
  {
    name: '… and then grants above status.fencingToken',
    obs: obs(
      withLease(aLeaseView(token(5n), observedAt(0))),
      withPods(a, b),
      lockWith((d) => {
        d.status = {
          ...d.status,
          fencingToken: '9',
          holder: { name: a.ref.name, uid: a.ref.uid },
          leaseDurationSeconds: 10,
        };
      }),
    ),
    nowMs: LEASE_MS + 1,
    want: {
      actions: [{ type: 'Grant', to: a.ref, previous: undefined, cause: 'Vacant', floor: 9n }],
      waiting: undefined,
    },
  },
  {
    name: 'an expired holder whose Lease token was lowered is followed by a grant above status.fencingToken',
    obs: obs(
      heldByA(),
      withPods(marked(a, 5n), b),
      lockWith((d) => {
        d.status = { ...d.status, fencingToken: '9' };
      }),
    ),
    nowMs: LEASE_MS + 1,
    want: {
      actions: [unmark(a), { type: 'Grant', to: b.ref, previous: a.ref, cause: 'Expired', floor: 9n }],
      waiting: undefined,
      tampered: { leaseToken: 5n, statusToken: 9n, revision: undefined, floor: 9n },
    },
  },
  {
    name: 'a holder whose Lease token was lowered keeps its term to its end (its agent steps down by itself), unmarked, and the decision says tampered',
    obs: obs(
      heldByA(),
      withPods(marked(a, 9n), b),
      lockWith((d) => {
        d.status = { ...d.status, fencingToken: '9' };
      }),
    ),
    nowMs: 1_000,
    want: {
      actions: [unmark(a)],
      holder: a.ref,
      waiting: undefined,
      tampered: { leaseToken: 5n, statusToken: 9n, revision: undefined, floor: 9n },
    },
  },
  {
    name: 'a Lease token at or above status.fencingToken is no tampering',
    obs: obs(
      heldByA(),
      withPods(marked(a, 5n), b),
      lockWith((d) => {
        d.status = { ...d.status, fencingToken: '5' };
      }),
    ),
    nowMs: 1_000,
    want: { actions: [], holder: a.ref },
  },
  {
    name: 'a Lease never granted takes its floor from status.fencingToken when that is above its resourceVersion',
    obs: obs(
      withLease(aLeaseView(rv('100'))),
      withPods(a),
      lockWith((d) => {
        d.status = { ...d.status, fencingToken: '500' };
      }),
    ),
    nowMs: 0,
    want: { actions: [{ type: 'Grant', to: a.ref, previous: undefined, cause: 'Vacant', floor: 500n }] },
  },
  {
    name: 'an expired holder that is the only candidate is granted a new term',
    obs: obs(heldByA(), withPods(marked(a, 5n))),
    nowMs: LEASE_MS + 1,
    want: { actions: [unmark(a), { type: 'Grant', to: a.ref, previous: a.ref, cause: 'Expired', floor: 5n }] },
  },
  {
    name: 'an expired holder is replaced by the oldest other candidate even when the holder is older and still Ready',
    obs: obs(heldByA(), withPods(c, marked(a, 5n), b)),
    nowMs: LEASE_MS + 1,
    want: { actions: [unmark(a), { type: 'Grant', to: b.ref, previous: a.ref, cause: 'Expired', floor: 5n }] },
  },
  {
    name: 'an expired holder with no candidate is revoked',
    obs: obs(heldByA(), withPods(marked(a, 5n, unready()))),
    nowMs: LEASE_MS + 1,
    want: {
      actions: [unmark(a), { type: 'Revoke', holder: a.ref, cause: 'Expired' }],
      holder: undefined,
      waiting: 'NoCandidates',
    },
  },

  // ----- Handoff on termination; vanished pods -----
  {
    name: 'a holder whose containers terminated is replaced before expiry (handoff defaults to on), cause HolderTerminated',
    obs: obs(heldByA(), withPods(marked(a, 5n, terminated()), b)),
    nowMs: 1_000,
    want: {
      actions: [unmark(a), { type: 'Grant', to: b.ref, previous: a.ref, cause: 'HolderTerminated', floor: 5n }],
      holder: undefined,
    },
  },
  {
    name: 'a holder the pod GC marked Failed (node deleted) whose containers still run keeps the lock: the phase is no proof',
    obs: obs(heldByA(), withPods(marked(a, 5n, failedByPodGc()), b)),
    nowMs: 1_000,
    want: { actions: [], holder: a.ref, expiresInMs: 9_000 },
  },
  {
    name: 'a holder the pod GC marked Failed is replaced only after expiry, cause Expired',
    obs: obs(heldByA(), withPods(marked(a, 5n, failedByPodGc()), b)),
    nowMs: LEASE_MS + 1,
    want: { actions: [unmark(a), { type: 'Grant', to: b.ref, previous: a.ref, cause: 'Expired', floor: 5n }] },
  },
  {
    name: 'a holder whose application terminated but whose native sidecar agent still runs keeps the lock',
    obs: obs(heldByA(), withPods(marked(a, 5n, appStoppedAgentRunning()), b)),
    nowMs: 1_000,
    want: { actions: [], holder: a.ref, expiresInMs: 9_000 },
  },
  {
    name: 'a holder whose every container, native sidecar included, the kubelet reported terminated is replaced at once',
    obs: obs(heldByA(), withPods(marked(a, 5n, allStopped()), b)),
    nowMs: 1_000,
    want: { actions: [unmark(a), { type: 'Grant', to: b.ref, previous: a.ref, cause: 'HolderTerminated', floor: 5n }] },
  },
  {
    name: 'with handoff on explicitly a terminated holder is replaced before expiry',
    obs: obs(lockWith(withHandoff(true)), heldByA(), withPods(marked(a, 5n, terminated()), b)),
    nowMs: 1_000,
    want: { actions: [unmark(a), { type: 'Grant', to: b.ref, previous: a.ref, cause: 'HolderTerminated', floor: 5n }] },
  },
  {
    name: 'a terminated holder with nobody to take over is revoked at once',
    obs: obs(heldByA(), withPods(marked(a, 5n, terminated()))),
    nowMs: 1_000,
    want: {
      actions: [unmark(a), { type: 'Revoke', holder: a.ref, cause: 'HolderTerminated' }],
      waiting: 'NoCandidates',
    },
  },
  {
    name: 'with handoff off a terminated holder keeps the lock until it expires',
    obs: obs(lockWith(withHandoff(false)), heldByA(), withPods(marked(a, 5n, terminated()), b)),
    nowMs: 1_000,
    want: { actions: [], holder: a.ref, expiresInMs: 9_000 },
  },
  {
    name: 'with handoff off a terminated holder is replaced after expiry, cause Expired',
    obs: obs(lockWith(withHandoff(false)), heldByA(), withPods(marked(a, 5n, terminated()), b)),
    nowMs: LEASE_MS + 1,
    want: { actions: [unmark(a), { type: 'Grant', to: b.ref, previous: a.ref, cause: 'Expired', floor: 5n }] },
  },
  {
    name: 'a holder that is merely unready or terminating keeps the lock until it expires',
    obs: obs(heldByA(), withPods(marked(a, 5n, unready(), terminating()), b)),
    nowMs: 9_999,
    want: { actions: [], holder: a.ref },
  },
  {
    name: 'a holder pod missing from the cache (vanished) waits for expiry',
    obs: obs(heldByA(), withPods(b)),
    nowMs: 9_000,
    want: { actions: [], holder: a.ref, expiresInMs: 1_000 },
  },
  {
    name: 'a vanished holder is replaced after expiry',
    obs: obs(heldByA(), withPods(b)),
    nowMs: LEASE_MS + 1,
    want: { actions: [{ type: 'Grant', to: b.ref, previous: a.ref, cause: 'Expired', floor: 5n }] },
  },
  {
    name: 'a new incarnation of the holder (same name, new uid) is not the holder, even if its predecessor terminated',
    obs: obs(heldByA(), withPods(pod(a, withUid('web-a-uid-2')))),
    nowMs: 9_000,
    want: { actions: [], holder: a.ref },
  },
  {
    name: 'after expiry the new incarnation of the holder counts as another candidate',
    obs: obs(heldByA(), withPods(pod(a, withUid('web-a-uid-2')))),
    nowMs: LEASE_MS + 1,
    want: {
      actions: [
        { type: 'Grant', to: { name: 'web-a', uid: 'web-a-uid-2' }, previous: a.ref, cause: 'Expired', floor: 5n },
      ],
    },
  },

  // ----- Lock delay -----
  {
    name: 'with a lock delay an expired holder is revoked, not replaced',
    obs: obs(lockWith(withLockDelay(5)), heldByA(), withPods(marked(a, 5n), b)),
    nowMs: LEASE_MS + 1,
    want: {
      actions: [unmark(a), { type: 'Revoke', holder: a.ref, cause: 'Expired' }],
      holder: undefined,
      waiting: 'LockDelay',
    },
  },
  {
    name: 'within the lock delay after a revocation nothing is granted and the requeue lands at its end',
    obs: obs(
      lockWith(withLockDelay(5)),
      withLease(aLeaseView(heldBy(a), token(5n), released('Expired'), observedAt(20_000))),
      withPods(a, b),
    ),
    nowMs: 22_000,
    want: { actions: [], waiting: 'LockDelay', holder: undefined },
    requeue: [3_000, 3_500],
  },
  {
    name: 'once the lock delay has passed the lock is granted, cause Expired, preferring someone other than the lost holder',
    obs: obs(
      lockWith(withLockDelay(5)),
      withLease(aLeaseView(heldBy(a), token(5n), released('Expired'), observedAt(20_000))),
      withPods(a, b),
    ),
    nowMs: 25_000,
    want: {
      actions: [{ type: 'Grant', to: b.ref, previous: undefined, cause: 'Expired', floor: 5n }],
      waiting: undefined,
    },
  },
  {
    name: 'with a lock delay a terminated holder is revoked at once, not replaced',
    obs: obs(lockWith(withLockDelay(5)), heldByA(), withPods(marked(a, 5n, terminated()), b)),
    nowMs: 1_000,
    want: {
      actions: [unmark(a), { type: 'Revoke', holder: a.ref, cause: 'HolderTerminated' }],
      holder: undefined,
      waiting: 'LockDelay',
    },
  },
  {
    name: 'within the lock delay after revoking a terminated holder nothing is granted and the requeue lands at its end',
    obs: obs(
      lockWith(withLockDelay(5)),
      withLease(aLeaseView(heldBy(a), token(5n), released('Terminated'), observedAt(20_000))),
      withPods(a, b),
    ),
    nowMs: 22_000,
    want: { actions: [], waiting: 'LockDelay', holder: undefined },
    requeue: [3_000, 3_500],
  },
  {
    name: 'once the lock delay after a terminated holder has passed the lock is granted, cause HolderTerminated',
    obs: obs(
      lockWith(withLockDelay(5)),
      withLease(aLeaseView(heldBy(a), token(5n), released('Terminated'), observedAt(20_000))),
      withPods(a, b),
    ),
    nowMs: 25_000,
    want: {
      actions: [{ type: 'Grant', to: b.ref, previous: undefined, cause: 'HolderTerminated', floor: 5n }],
      waiting: undefined,
    },
  },
  {
    name: 'a lock delay does not apply after a voluntary release',
    obs: obs(
      lockWith(withLockDelay(5)),
      withLease(aLeaseView(heldBy(a), token(5n), released('Released'), observedAt(20_000))),
      withPods(a, b),
    ),
    nowMs: 20_001,
    want: { actions: [{ type: 'Grant', to: b.ref, previous: undefined, cause: 'Released', floor: 5n }] },
  },
  {
    name: 'without a lock delay a revoked Lease is granted at once',
    obs: obs(withLease(aLeaseView(heldBy(a), token(5n), released('Expired'), observedAt(20_000))), withPods(b)),
    nowMs: 20_000,
    want: { actions: [{ type: 'Grant', to: b.ref, previous: undefined, cause: 'Expired', floor: 5n }] },
  },

  // ----- Release -----
  {
    name: 'a released Lease goes to a candidate other than the last holder, although the last holder is older',
    obs: obs(withLease(aLeaseView(heldBy(a), token(5n), released('Released'))), withPods(a, c, b)),
    nowMs: 0,
    want: { actions: [{ type: 'Grant', to: b.ref, previous: undefined, cause: 'Released', floor: 5n }] },
  },
  {
    name: 'a released Lease goes back to the last holder when it is the only candidate',
    obs: obs(withLease(aLeaseView(heldBy(a), token(5n), released('Released'))), withPods(a)),
    nowMs: 0,
    want: { actions: [{ type: 'Grant', to: a.ref, previous: undefined, cause: 'Released', floor: 5n }] },
  },
  {
    name: 'a released Lease with no candidate waits and unmarks its last holder',
    obs: obs(withLease(aLeaseView(heldBy(a), token(5n), released('Released'))), withPods(marked(a, 5n, terminating()))),
    nowMs: 0,
    want: { actions: [unmark(a)], waiting: 'NoCandidates', requeueAfterMs: RESYNC_MS },
  },

  // ----- Fencing unavailable -----
  {
    name: 'without a working fencing backend a vacant lock is not granted',
    obs: obs(fencingDown(), withPods(a, b)),
    nowMs: 0,
    want: { actions: [], waiting: 'FencingUnavailable', holder: undefined },
    requeue: [1, 5_000], // a waiting grant is retried soon, not at the safety resync
  },
  {
    name: 'without a working fencing backend a released lock is not granted',
    obs: obs(fencingDown(), withLease(aLeaseView(heldBy(a), token(5n), released('Released'))), withPods(a, b)),
    nowMs: 0,
    want: { actions: [], waiting: 'FencingUnavailable' },
    requeue: [1, 5_000],
  },
  {
    name: 'without a working fencing backend a holder that renews stays holder',
    obs: obs(fencingDown(), heldByA(), withPods(marked(a, 5n), b)),
    nowMs: 9_000,
    want: { actions: [], holder: a.ref, waiting: undefined, expiresInMs: 1_000 },
  },
  {
    name: 'without a working fencing backend an expired holder is revoked but not replaced',
    obs: obs(fencingDown(), heldByA(), withPods(marked(a, 5n), b)),
    nowMs: LEASE_MS + 1,
    want: { actions: [unmark(a), { type: 'Revoke', holder: a.ref, cause: 'Expired' }], waiting: 'FencingUnavailable' },
  },
  {
    name: 'without a working fencing backend a terminated holder is revoked but not replaced',
    obs: obs(fencingDown(), heldByA(), withPods(marked(a, 5n, terminated()), b)),
    nowMs: 1_000,
    want: {
      actions: [unmark(a), { type: 'Revoke', holder: a.ref, cause: 'HolderTerminated' }],
      waiting: 'FencingUnavailable',
    },
  },

  // ----- Pod marks -----
  {
    name: 'a holder pod without the label and the annotation is marked with its token',
    obs: obs(heldByA(), withPods(a, b)),
    nowMs: 1_000,
    want: { actions: [mark(a, 5n)], holder: a.ref },
  },
  {
    name: 'a holder pod with the label but no token annotation is marked',
    obs: obs(heldByA(), withPods(pod(a, withLabels({ [keys.holder]: 'true' })))),
    nowMs: 1_000,
    want: { actions: [mark(a, 5n)] },
  },
  {
    name: 'a holder pod with the token annotation but no label is marked',
    obs: obs(heldByA(), withPods(pod(a, withAnnotations({ [keys.token]: '5' })))),
    nowMs: 1_000,
    want: { actions: [mark(a, 5n)] },
  },
  {
    name: 'a holder pod carrying a stale token is marked again with the current one',
    obs: obs(heldByA(), withPods(marked(a, 4n))),
    nowMs: 1_000,
    want: { actions: [mark(a, 5n)] },
  },
  {
    name: 'a holder pod whose label is not "true" is marked again',
    obs: obs(heldByA(), withPods(marked(a, 5n, withLabels({ [keys.holder]: 'false' })))),
    nowMs: 1_000,
    want: { actions: [mark(a, 5n)] },
  },
  {
    name: 'a non-holder pod carrying the marks is unmarked',
    obs: obs(heldByA(), withPods(marked(a, 5n), marked(b, 4n))),
    nowMs: 1_000,
    want: { actions: [unmark(b)], holder: a.ref },
  },
  {
    name: 'a non-holder pod carrying only the token annotation is unmarked',
    obs: obs(heldByA(), withPods(marked(a, 5n), pod(b, withAnnotations({ [keys.token]: '4' })))),
    nowMs: 1_000,
    want: { actions: [unmark(b)] },
  },
  {
    name: "marks on a re-created pod of the holder's name (a new uid) are removed",
    obs: obs(heldByA(), withPods(marked(a, 5n, withUid('web-a-uid-2')))),
    nowMs: 1_000,
    want: { actions: [{ type: 'UnmarkPod', pod: { name: 'web-a', uid: 'web-a-uid-2' } }], holder: a.ref },
  },
  {
    name: 'marks of another lock are left alone',
    obs: obs(heldByA(), withPods(marked(a, 5n), pod(b, markedHolderOf('other', 9n)))),
    nowMs: 1_000,
    want: { actions: [] },
  },
  {
    name: 'an already correctly marked holder needs nothing',
    obs: obs(heldByA(), withPods(marked(a, 5n), b, c)),
    nowMs: 1_000,
    want: { actions: [], holder: a.ref },
  },
];

describe('decide', () => {
  it.each(rows)('$name', ({ obs: o, nowMs, want, requeue }) => {
    const d = decide(o, nowMs);
    expect(d).toMatchObject(want);
    if (requeue !== undefined) {
      expect(d.requeueAfterMs).toBeGreaterThanOrEqual(requeue[0]);
      expect(d.requeueAfterMs).toBeLessThanOrEqual(requeue[1]);
    }
  });

  // Idempotence (each action follows from the observation alone): applying the actions and deciding again, with time standing still,
  // reaches a world that needs nothing within a few passes — and then decide keeps saying so.
  it.each(rows)('the world after its actions needs nothing more: $name', ({ obs: o, nowMs }) => {
    const { final, decisions } = runToFixpoint(o, nowMs);
    expect(decisions.length).toBeLessThanOrEqual(4);
    expect(decide(final, nowMs).actions).toEqual([]);
  });

  it('the holder keeps the lock across renewals: each new sighting restarts the expiry clock', () => {
    let view = aLeaseView(heldBy(a), token(5n), observedAt(0));
    for (let t = 9_000; t <= 90_000; t += 9_000) {
      expect(decide(obs(withLease(view), withPods(marked(a, 5n), b)), t)).toMatchObject({ actions: [], holder: a.ref });
      view = aLeaseView(heldBy(a), token(5n), observedAt(t));
    }
  });

  // Whether a candidate was Ready at the moment the holder terminated does not decide whether the
  // lock delay applies: it follows every involuntary end of a term, and the next Grant keeps the cause.
  it('a lock revoked from a terminated holder is held back by the lock delay, also once a candidate appears', () => {
    const lock = withLock(aLock('db', withLockDelay(5)));
    const first = obs(lock, heldByA(), withPods(marked(a, 5n, terminated())));
    const revoked = decide(first, 1_000);
    expect(revoked.actions).toEqual([unmark(a), { type: 'Revoke', holder: a.ref, cause: 'HolderTerminated' }]);
    const after = applyActions(first, revoked.actions, 1_000);
    const withB = deepFreeze({ ...after, pods: [...after.pods, b] });
    expect(decide(withB, 2_000)).toMatchObject({ actions: [], waiting: 'LockDelay' });
    expect(decide(withB, 6_000).actions).toMatchObject([
      { type: 'Grant', to: b.ref, floor: 5n, cause: 'HolderTerminated' },
    ]);
  });

  it('a full cycle: grant, mark, expire, regrant with a larger token, unmark the old holder', () => {
    let world = obs(withPods(a, b));
    const grants: bigint[] = [];
    let now = 0;
    for (const step of [0, 1, LEASE_MS + 1, 1, LEASE_MS + 1]) {
      now += step;
      const { final, decisions } = runToFixpoint(world, now);
      for (const d of decisions) for (const act of d.actions) if (act.type === 'Grant') grants.push(act.floor + 1n);
      world = final;
    }
    expect(grants).toEqual([101n, 102n, 103n]);
    expect(grants.every((t, i) => i === 0 || t > (grants[i - 1] ?? 0n))).toBe(true);
    const holder = world.lease?.record.holder;
    expect(holder).toBeDefined();
    const markedPods = world.pods.filter(
      (p) => p.labels[keys.holder] !== undefined || p.annotations[keys.token] !== undefined,
    );
    expect(markedPods.map((p) => p.ref)).toEqual([holder]);
  });
});

// ----- A tiny world: what the reconciler's actions do to the observation -----

/** applyActions is what the reconciler's writes would make the next observation look like. */
function applyActions(o: Observation, actions: readonly Action[], nowMs: number): Observation {
  let lease = o.lease;
  let pods = o.pods;
  const setPod = (ref: HolderRef, f: (p: PodSummary) => PodSummary): void => {
    pods = pods.map((p) => (sameHolder(p.ref, ref) ? f(p) : p));
  };
  for (const act of actions) {
    switch (act.type) {
      case 'CreateLease':
        lease = aLeaseView(rv('1'), observedAt(nowMs));
        break;
      case 'Grant': {
        const r = lease?.record;
        lease = aLeaseView(
          heldBy(act.to),
          token(act.floor + 1n),
          transitions((r?.transitions ?? 0) + 1),
          leaseSeconds(Math.ceil(o.timings.leaseDurationMs / 1000)),
          rv(r?.resourceVersion ?? '1'),
          observedAt(nowMs),
        );
        break;
      }
      case 'Revoke': {
        const r = lease?.record;
        if (r === undefined) throw new Error('Revoke without a Lease');
        lease = aLeaseView(
          heldBy(act.holder),
          ...(r.token !== undefined ? [token(r.token)] : []),
          transitions(r.transitions),
          released(act.cause === 'Expired' ? 'Expired' : 'Terminated'),
          rv(r.resourceVersion),
          observedAt(nowMs),
        );
        break;
      }
      case 'MarkHolderPod':
        setPod(act.pod, (p) => ({
          ...p,
          labels: { ...p.labels, [keys.holder]: 'true' },
          annotations: { ...p.annotations, [keys.token]: act.token.toString() },
        }));
        break;
      case 'UnmarkPod':
        setPod(act.pod, (p) => {
          const { [keys.holder]: _l, ...labels } = p.labels;
          const { [keys.token]: _t, ...annotations } = p.annotations;
          return { ...p, labels, annotations };
        });
        break;
    }
  }
  return deepFreeze({ ...o, lease, pods });
}

/** runToFixpoint decides and applies until a decision has no actions (at most 8 passes). */
function runToFixpoint(start: Observation, nowMs: number): { final: Observation; decisions: Decision[] } {
  let world = start;
  const decisions: Decision[] = [];
  for (let pass = 0; pass < 8; pass++) {
    const d = decide(world, nowMs);
    decisions.push(d);
    if (d.actions.length === 0) return { final: world, decisions };
    world = applyActions(world, d.actions, nowMs);
  }
  throw new Error(`no fixpoint after 8 passes: ${JSON.stringify(decisions.map((d) => d.actions.map((x) => x.type)))}`);
}

// ----- Property-style: random observations, invariants -----

interface Sample {
  readonly obs: Observation;
  readonly nowMs: number;
}

function randomSample(rnd: () => number): Sample {
  const int = (lo: number, hi: number): number => lo + Math.floor(rnd() * (hi - lo + 1));
  const pick = <T>(xs: readonly T[]): T => {
    const x = xs[Math.floor(rnd() * xs.length)];
    if (x === undefined) throw new Error('pick from an empty list');
    return x;
  };
  const leaseS = pick([1, 2, 10]);
  const lock = aLock(
    'db',
    withLeaseSeconds(leaseS),
    withLockDelay(pick([0, 0, 1, 3])),
    ...(rnd() < 0.4 ? [withHandoff(rnd() < 0.5)] : []),
  );
  const held = rnd() < 0.6;
  const recordToken = held || rnd() < 0.6 ? BigInt(int(1, 1_000)) : undefined;

  const pods: PodSummary[] = [];
  for (let i = 0, n = int(0, 5); i < n; i++) {
    const opts: PodOption[] = [createdAt(int(0, 4) * 1_000)];
    if (rnd() < 0.25) opts.push(unready());
    if (rnd() < 0.15) opts.push(terminating());
    if (rnd() < 0.15) opts.push(terminated());
    if (rnd() < 0.2) opts.push(withLabels({ app: 'other' }));
    // Pods only ever carry tokens from earlier or current grants: never above the Lease's mark.
    if (recordToken !== undefined && rnd() < 0.4) {
      const t = recordToken - BigInt(int(0, 2));
      opts.push(markedHolderOf('db', t < 0n ? 0n : t));
    }
    pods.push(aPod(`p${i}`, ...opts));
  }
  const someone = (): HolderRef =>
    pods.length > 0 && rnd() < 0.8
      ? pick(pods).ref
      : pick([
          { name: 'gone', uid: 'gone-uid' },
          { name: 'p0', uid: 'p0-old-uid' },
        ]);

  const nowMs = 1_000_000;
  const leaseOpts: LeaseOption[] = [rv(String(int(1, 2_000))), observedAt(nowMs - int(0, 3 * leaseS * 1_000 + 10))];
  if (recordToken !== undefined) leaseOpts.push(token(recordToken));
  if (held) {
    leaseOpts.push(leaseSeconds(rnd() < 0.8 ? leaseS : pick([1, 2, 10])), heldBy(someone()));
  } else {
    const how = pick(['Vacant', 'Released', 'Expired'] as const);
    if (how !== 'Vacant') leaseOpts.push(heldBy(someone()), released(how));
    else if (rnd() < 0.3) leaseOpts.push(lastHolder(someone()));
  }
  const opts: ObservationOption[] = [withLock(lock), withPods(...pods)];
  opts.push(rnd() < 0.05 ? noLease() : withLease(aLeaseView(...leaseOpts)));
  if (rnd() < 0.2) opts.push(podsNotSynced());
  if (rnd() < 0.25) opts.push(fencingDown());
  return { obs: anObservation(...opts), nowMs };
}

function shuffled<T>(xs: readonly T[], rnd: () => number): T[] {
  const out = [...xs];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    const x = out[i] as T;
    out[i] = out[j] as T;
    out[j] = x;
  }
  return out;
}

describe('unactionable', () => {
  const a1 = aPod('web-a', createdAt(1_000));
  const b1 = aPod('web-b', createdAt(2_000));
  const heldByA1 = withLease(aLeaseView(heldBy(a1), token(5n), observedAt(0), leaseSeconds(10)));
  it.each<{ name: string; obs: Observation; nowMs: number; stuck: boolean }>([
    {
      name: 'Redis asked for without --redis-url, vacant: stuck',
      obs: anObservation(fencingNotConfigured(), withPods(a1, b1)),
      nowMs: 0,
      stuck: true,
    },
    {
      name: 'Redis asked for without --redis-url, no candidate: stuck',
      obs: anObservation(fencingNotConfigured(), withPods(aPod('web-a', unready()))),
      nowMs: 0,
      stuck: true,
    },
    {
      name: 'Redis asked for without --redis-url, holder renewing: watched to expiry',
      obs: anObservation(fencingNotConfigured(), heldByA1, withPods(a1, b1)),
      nowMs: 5_000,
      stuck: false,
    },
    {
      name: 'Redis asked for without --redis-url, holder expired: revoked, then stuck',
      obs: anObservation(fencingNotConfigured(), heldByA1, withPods(a1, b1)),
      nowMs: 11_000,
      stuck: true,
    },
    {
      name: 'Redis asked for without --redis-url, pod cache not synced: retried',
      obs: anObservation(fencingNotConfigured(), podsNotSynced(), withPods(b1)),
      nowMs: 0,
      stuck: false,
    },
    {
      name: 'Redis configured but down: retried',
      obs: anObservation(fencingDown(), withPods(a1, b1)),
      nowMs: 0,
      stuck: false,
    },
    { name: 'fencing working: nothing to report', obs: anObservation(withPods(a1, b1)), nowMs: 0, stuck: false },
  ])('$name', ({ obs: o, nowMs, stuck }) => {
    const reason = unactionable(o, decide(o, nowMs));
    if (stuck) expect(reason).toContain('--redis-url');
    else expect(reason).toBeUndefined();
  });
});

/** show is JSON.stringify that spells bigints as decimal strings. */
const show = (v: unknown): string => JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? x.toString() : x));

const isLeaseAction = (x: Action): boolean => x.type === 'Grant' || x.type === 'Revoke' || x.type === 'CreateLease';

describe('decide on 2000 random observations (seeded)', () => {
  const SEED = 0x5eed_f00d;
  const rnd = mulberry32(SEED);
  const samples = Array.from({ length: 2_000 }, () => randomSample(rnd));

  const check = (name: string, property: (s: Sample, d: Decision) => string | undefined): void => {
    it(name, () => {
      const failures: string[] = [];
      samples.forEach((s, i) => {
        const why = property(s, decide(s.obs, s.nowMs));
        if (why !== undefined && failures.length < 5) failures.push(`sample #${i} (seed ${SEED}): ${why}`);
      });
      expect(failures).toEqual([]);
    });
  };

  it('covers the interesting cases', () => {
    const kinds = new Set<string>();
    for (const s of samples)
      for (const x of decide(s.obs, s.nowMs).actions) kinds.add(x.type === 'Grant' ? `Grant:${x.cause}` : x.type);
    expect([...kinds].sort()).toEqual([
      'CreateLease',
      'Grant:Expired',
      'Grant:HolderTerminated',
      'Grant:Released',
      'Grant:Vacant',
      'MarkHolderPod',
      'Revoke',
      'UnmarkPod',
    ]);
  });

  check('never grants, revokes or (un)marks while the pod cache is not synced', ({ obs: o }, d) =>
    !o.podsSynced && d.actions.some((x) => x.type !== 'CreateLease')
      ? `acted before sync: ${JSON.stringify(d.actions.map((x) => x.type))}`
      : undefined,
  );

  check('every Grant goes to an eligible candidate of the observation', ({ obs: o }, d) => {
    for (const x of d.actions) {
      if (x.type !== 'Grant') continue;
      const p = o.pods.find((q) => sameHolder(q.ref, x.to));
      if (p === undefined || !isCandidate(p, o.lock.spec.candidates.selector))
        return `granted to non-candidate ${x.to.name}/${x.to.uid}`;
      if (!d.candidates.some((q) => sameHolder(q.ref, x.to)))
        return `granted to ${x.to.name} outside decision.candidates`;
    }
    return undefined;
  });

  check('every Grant floor is at least every token in the observation', ({ obs: o }, d) => {
    const tokens = [
      ...(o.lease?.record.token !== undefined ? [o.lease.record.token] : []),
      ...o.pods.flatMap((p) => {
        const t = p.annotations[keys.token];
        return t !== undefined ? [BigInt(t)] : [];
      }),
    ];
    for (const x of d.actions) {
      if (x.type === 'Grant' && tokens.some((t) => x.floor < t))
        return `floor ${x.floor} below a token in ${tokens.join(',')}`;
    }
    return undefined;
  });

  check('never a Lease action while the holder is unexpired and not terminated', ({ obs: o, nowMs }, d) => {
    const r = o.lease?.record;
    if (r?.holder === undefined || o.lease === undefined) return undefined;
    const leaseMs = (r.leaseDurationSeconds ?? o.timings.leaseDurationMs / 1000) * 1000;
    const handoff = o.lock.spec.handoff?.onPodTerminated ?? true;
    const dead = handoff && o.pods.some((p) => sameHolder(p.ref, r.holder) && p.terminated);
    const alive = nowMs - o.lease.observedAtMs <= leaseMs && !dead;
    return alive && d.actions.some(isLeaseAction)
      ? `took the lock from a live holder: ${JSON.stringify(d.actions.map((x) => x.type))}`
      : undefined;
  });

  check(
    'never grants without a working fencing backend, nor within the lock delay after a revocation',
    ({ obs: o, nowMs }, d) => {
      const grant = d.actions.find((x) => x.type === 'Grant');
      if (grant === undefined || o.lease === undefined) return undefined;
      if (!o.fencing.ready) return 'granted without fencing';
      const r = o.lease.record;
      const involuntary = r.released === 'Expired' || r.released === 'Terminated';
      const inDelay = r.holder === undefined && involuntary && nowMs - o.lease.observedAtMs < o.timings.lockDelayMs;
      const expiring = r.holder !== undefined && o.timings.lockDelayMs > 0;
      return inDelay || expiring ? 'granted within the lock delay' : undefined;
    },
  );

  check('at most one Lease action, which comes last, and marks only pods in the observation', ({ obs: o }, d) => {
    const lease = d.actions.filter(isLeaseAction);
    if (lease.length > 1) return `several Lease actions: ${JSON.stringify(d.actions.map((x) => x.type))}`;
    if (lease.length === 1 && d.actions.at(-1) !== lease[0]) return 'Lease action not last';
    for (const x of d.actions) {
      if ((x.type === 'MarkHolderPod' || x.type === 'UnmarkPod') && !o.pods.some((p) => sameHolder(p.ref, x.pod)))
        return `touched unknown pod ${x.pod.name}`;
      if (x.type === 'MarkHolderPod' && !sameHolder(x.pod, o.lease?.record.holder))
        return `marked non-holder ${x.pod.name}`;
    }
    return undefined;
  });

  check('the requeue is finite and not negative', (_s, d) =>
    Number.isFinite(d.requeueAfterMs) && d.requeueAfterMs >= 0 ? undefined : `requeueAfterMs ${d.requeueAfterMs}`,
  );

  check('the decision does not depend on the order of the pods', ({ obs: o, nowMs }, d) => {
    const other = decide(deepFreeze({ ...o, pods: shuffled(o.pods, rnd) }), nowMs);
    const key = (x: Decision): string =>
      show({
        lease: x.actions.filter(isLeaseAction),
        marks: x.actions
          .filter((y) => !isLeaseAction(y))
          .map(show)
          .sort(),
        holder: x.holder,
        waiting: x.waiting,
        candidates: x.candidates.map((p) => p.ref),
      });
    return key(d) === key(other) ? undefined : 'pod order changed the decision';
  });

  check('applying the actions reaches a world that needs nothing within four passes', ({ obs: o, nowMs }) => {
    try {
      const { decisions } = runToFixpoint(o, nowMs);
      return decisions.length <= 4 ? undefined : `${decisions.length} passes`;
    } catch (err) {
      return String(err);
    }
  });
});

describe('decide in Mutex mode', () => {
  const mutexKeys = podKeys('db');
  const requested =
    (at: string) =>
    (p: PodSummary): PodSummary => ({ ...p, annotations: { ...p.annotations, [mutexKeys.request]: at } });
  const mutexObs = (pods: PodSummary[], lease = aLeaseView(rv('100'), observedAt(0))): Observation =>
    deepFreeze({
      ...obs(withPods(...pods)),
      lock: { ...obs(withPods()).lock, spec: { ...obs(withPods()).lock.spec, mode: 'Mutex' as const } },
      lease,
    });

  it('grants nobody while no Ready candidate has asked', () => {
    const d = decide(mutexObs([a, b]), 1);
    expect(d.actions.filter((x) => x.type === 'Grant')).toEqual([]);
    expect(d.waiting).toBe('NoCandidates');
    expect(d.queue).toBe(0);
  });

  const seen = (p: PodSummary, requestTime: string): QueuedRequest => ({
    pod: p.ref.name,
    uid: p.ref.uid,
    since: '2026-01-01T00:00:00.000Z',
    requestTime,
  });
  const withRecord = (o: Observation, requests: QueuedRequest[]): Observation => deepFreeze({ ...o, requests });

  it('grants the first the controller saw ask (its record), not the oldest pod, and counts the others as queued', () => {
    const d = decide(
      withRecord(mutexObs([requested('2026-01-01T00:00:02.000Z')(a), requested('2026-01-01T00:00:01.000Z')(b)]), [
        seen(b, '2026-01-01T00:00:01.000Z'),
        seen(a, '2026-01-01T00:00:02.000Z'),
      ]),
      1,
    );
    expect(d.actions).toContainEqual(expect.objectContaining({ type: 'Grant', to: b.ref }));
    expect(d.candidates.map((p) => p.ref.name)).toEqual(['web-b', 'web-a']);
    expect(d.queue).toBe(2); // nobody holds yet: both wait
  });

  // The pod writes its request time (its agent, the app beside it, anyone with patch on it); the
  // controller's record of when it first saw each request orders the queue.
  it('a later requester that dates its request 1970 is not granted before the one the controller saw first', () => {
    const d = decide(
      withRecord(mutexObs([requested('2026-01-01T00:00:01.000Z')(b), requested('1970-01-01T00:00:00.000Z')(c)]), [
        seen(b, '2026-01-01T00:00:01.000Z'),
        seen(c, '2026-01-01T00:00:02.000Z'),
      ]),
      1,
    );
    expect(d.actions).toContainEqual(expect.objectContaining({ type: 'Grant', to: b.ref }));
    expect(d.candidates.map((p) => p.ref.name)).toEqual(['web-b', 'web-c']);
  });

  it('hands a released lock to the first recorded waiter, not to a request dated 1970 that has no record', () => {
    const releasedByA = aLeaseView(released('Released'), lastHolder(a), token(5n), observedAt(0));
    const d = decide(
      withRecord(
        mutexObs([requested('2026-01-01T00:00:05.000Z')(c), requested('1970-01-01T00:00:00.000Z')(b)], releasedByA),
        [seen(c, '2026-01-01T00:00:05.000Z')],
      ),
      1,
    );
    expect(d.actions).toContainEqual(expect.objectContaining({ type: 'Grant', to: c.ref }));
  });

  // Found in review (test/integration/controller/mutex-regrant.test.ts): the release is seen before
  // the pod watch delivers the withdrawal that preceded it.
  describe('a holder that released, while its pod still shows the request its term answered', () => {
    const answered = '2026-01-01T00:00:03.000Z';
    const releasedByA = aLeaseView(
      released('Released'),
      lastHolder(a),
      grantedRequest(answered),
      token(5n),
      observedAt(0),
    );
    it('is not granted again on it: nobody asks, nobody is granted', () => {
      const d = decide(withRecord(mutexObs([requested(answered)(a)], releasedByA), [seen(a, answered)]), 1);
      expect(d.actions.filter((x) => x.type === 'Grant')).toEqual([]);
      expect(d.waiting).toBe('NoCandidates');
    });
    it('is granted again on a new request (another value)', () => {
      const again = '2026-01-01T00:00:04.000Z';
      const d = decide(withRecord(mutexObs([requested(again)(a)], releasedByA), [seen(a, again)]), 1);
      expect(d.actions).toContainEqual(expect.objectContaining({ type: 'Grant', to: a.ref, request: again }));
    });
    it('an expired holder (it did not withdraw) is still a candidate of last resort', () => {
      const expiredA = aLeaseView(
        released('Expired'),
        lastHolder(a),
        grantedRequest(answered),
        token(5n),
        observedAt(0),
      );
      const d = decide(withRecord(mutexObs([requested(answered)(a)], expiredA), [seen(a, answered)]), 1);
      expect(d.actions).toContainEqual(expect.objectContaining({ type: 'Grant', to: a.ref }));
    });
  });

  // A pod whose agent stalls for seconds can go not Ready while it waits; it keeps its place in
  // the queue (nextQueue). Before: pickNext fell back to the only Ready candidate — the pod that
  // had just released (or expired) and asked again — and handed it the lock straight back.
  describe('a freed lock with another request waiting that cannot be granted right now (its pod not Ready)', () => {
    const again = '2026-01-01T00:00:04.000Z';
    const waitingB = requested('2026-01-01T00:00:02.000Z')(pod(b, unready()));
    it('is not handed back to the pod that released it and asked again', () => {
      const releasedByA = aLeaseView(released('Released'), lastHolder(a), token(5n), observedAt(0));
      const d = decide(
        withRecord(mutexObs([requested(again)(a), waitingB], releasedByA), [seen(b, '2026-01-01T00:00:02.000Z')]),
        1,
      );
      expect(d.actions.filter((x) => x.type === 'Grant')).toEqual([]);
      expect(d.waiting).toBe('NoCandidates');
    });
    it('is not handed back to a holder that expired (a stall) and still asks', () => {
      const expiredA = aLeaseView(heldBy(a), token(5n), observedAt(0));
      const d = decide(
        withRecord(mutexObs([requested(again)(a), waitingB], expiredA), [seen(b, '2026-01-01T00:00:02.000Z')]),
        LEASE_MS + 1,
      );
      expect(d.actions.filter((x) => x.type === 'Grant')).toEqual([]);
      expect(d.actions).toContainEqual(expect.objectContaining({ type: 'Revoke', holder: a.ref }));
    });
    it('goes to the waiter once it is Ready again', () => {
      const releasedByA = aLeaseView(released('Released'), lastHolder(a), token(5n), observedAt(0));
      const readyB = requested('2026-01-01T00:00:02.000Z')(b);
      const d = decide(
        withRecord(mutexObs([requested(again)(a), readyB], releasedByA), [seen(b, '2026-01-01T00:00:02.000Z')]),
        1,
      );
      expect(d.actions).toContainEqual(expect.objectContaining({ type: 'Grant', to: b.ref }));
    });
    it('goes back to the releasing pod when nobody else asks (Election keeps its last resort too)', () => {
      const releasedByA = aLeaseView(released('Released'), lastHolder(a), token(5n), observedAt(0));
      const d = decide(withRecord(mutexObs([requested(again)(a), pod(b, unready())], releasedByA), []), 1);
      expect(d.actions).toContainEqual(expect.objectContaining({ type: 'Grant', to: a.ref }));
    });
  });

  it('with no record (a cold start), grants the oldest pod first, whatever the request times say', () => {
    const d = decide(mutexObs([requested('2026-01-01T00:00:09.000Z')(a), requested('1970-01-01T00:00:00.000Z')(c)]), 1);
    expect(d.actions).toContainEqual(expect.objectContaining({ type: 'Grant', to: a.ref }));
  });

  it('keeps a renewing holder even when others asked earlier, and reports the queue behind it', () => {
    const held = aLeaseView(heldBy(a), token(5n), observedAt(0));
    const d = decide(
      mutexObs([requested('2026-01-01T00:00:05.000Z')(a), requested('2026-01-01T00:00:01.000Z')(b)], held),
      1,
    );
    expect(d.actions.filter((x) => x.type === 'Grant' || x.type === 'Revoke')).toEqual([]);
    expect(d.holder).toEqual(a.ref);
    expect(d.queue).toBe(1);
  });
});

describe('decide with candidate priorities (fencepost.io/priority)', () => {
  it('grants a vacant Election lock to the highest priority, not the oldest pod', () => {
    const d = decide(obs(withPods(a, pod(b, withPriority('5')), c)), 0);
    expect(d.actions).toMatchObject([{ type: 'Grant', to: b.ref }]);
    expect(d.candidates.map((p) => p.ref.name)).toEqual(['web-b', 'web-a', 'web-c']);
  });
  it('ties keep the existing order: oldest first', () => {
    const d = decide(obs(withPods(pod(c, withPriority('5')), pod(b, withPriority('5')), a)), 0);
    expect(d.actions).toMatchObject([{ type: 'Grant', to: b.ref }]);
  });
  it('an invalid priority counts as 0 and moves nobody ahead', () => {
    const d = decide(obs(withPods(a, pod(b, withPriority('999999999999')))), 0);
    expect(d.actions).toMatchObject([{ type: 'Grant', to: a.ref }]);
    expect(d.candidates[1]?.invalidPriority).toBe('999999999999');
  });
  it('a negative priority goes after pods without one', () => {
    const d = decide(obs(withPods(pod(a, withPriority('-1')), b)), 0);
    expect(d.actions).toMatchObject([{ type: 'Grant', to: b.ref }]);
  });
  it('never takes the lock from a renewing holder of lower priority', () => {
    const d = decide(obs(heldByA(), withPods(marked(a, 5n), pod(b, withPriority('100')))), 1_000);
    expect(d).toMatchObject({ actions: [], holder: a.ref });
  });
  it('after an expiry, the next holder is the highest priority other than the departing one', () => {
    const d = decide(
      obs(heldByA(), withPods(marked(a, 5n, withPriority('100')), b, pod(c, withPriority('3')))),
      LEASE_MS + 1,
    );
    expect(d.actions).toContainEqual(expect.objectContaining({ type: 'Grant', to: c.ref, cause: 'Expired' }));
  });
  it('Mutex ignores priorities (first come, first served)', () => {
    const keysDb = podKeys('db');
    const asked = (p: PodSummary, at: string, ...o: PodOption[]): PodSummary =>
      pod(p, withAnnotations({ [keysDb.request]: at }), ...o);
    const mutexLock = withLock({ ...aLock('db'), spec: { ...aLock('db').spec, mode: 'Mutex' as const } });
    const d = decide(
      obs(mutexLock, withPods(asked(a, '2025-01-01T00:00:00Z'), asked(b, '2025-01-01T00:00:01Z', withPriority('9')))),
      0,
    );
    expect(d.actions).toMatchObject([{ type: 'Grant', to: a.ref }]);
  });
});
