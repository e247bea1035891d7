/**
 * DashboardModel: what the page shows of a lock, folded from hand-made watch events — the Lease's
 * holder, token and expiry over the status's; renewals folded into one timeline entry per term;
 * Events (with the agent's LockLost on its pod) in the timeline; a lock held in a Redis store
 * counted down from its status; Semaphore permits; deletion.
 */
import type { CoreV1Event, V1Lease } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { DistributedLock, DistributedLockStatus } from '../../../src/api/v1alpha1/distributedlock.ts';
import { DashboardModel, MAX_EVENTS } from '../../../src/dashboard/model.ts';

function lock(name: string, status: DistributedLockStatus = {}, spec: Partial<DistributedLock['spec']> = {}) {
  return {
    apiVersion: 'fencepost.io/v1alpha1',
    kind: 'DistributedLock',
    metadata: { namespace: 'ns', name },
    spec: { candidates: { selector: { matchLabels: { app: 'a' } } }, ...spec },
    status,
  } satisfies DistributedLock;
}

function lease(o: {
  name: string;
  lock: string;
  holder?: string;
  token?: string;
  renewTime?: string;
  acquireTime?: string;
  duration?: number;
  permit?: number;
}): V1Lease {
  return {
    metadata: {
      namespace: 'ns',
      name: o.name,
      labels: { 'fencepost.io/lock': o.lock },
      annotations: o.token !== undefined ? { 'fencepost.io/fencing-token': o.token } : {},
    },
    spec: {
      ...(o.holder !== undefined ? { holderIdentity: `${o.holder}/uid-${o.holder}` } : {}),
      ...(o.renewTime !== undefined ? { renewTime: o.renewTime as unknown as Date } : {}),
      ...(o.acquireTime !== undefined ? { acquireTime: o.acquireTime as unknown as Date } : {}),
      leaseDurationSeconds: o.duration ?? 10,
    },
  };
}

function event(o: {
  uid: string;
  lock: string;
  reason: string;
  message: string;
  time: string;
  type?: string;
  pod?: string;
}): CoreV1Event {
  return {
    metadata: { namespace: 'ns', name: o.uid, uid: o.uid },
    involvedObject:
      o.pod !== undefined ? { kind: 'Pod', name: o.pod, namespace: 'ns' } : { kind: 'DistributedLock', name: o.lock },
    reason: o.reason,
    message: o.message,
    type: o.type ?? 'Normal',
    lastTimestamp: o.time as unknown as Date,
    count: 1,
  };
}

describe('DashboardModel', () => {
  it('shows the Lease holder, token and expiry (renewTime + duration) before the status has caught up', () => {
    const m = new DashboardModel();
    m.applyLock(lock('a', { conditions: [] }), 'add');
    m.applyLease(
      lease({ name: 'dlock-a', lock: 'a', holder: 'p-0', token: '7', renewTime: '2026-01-01T00:00:00.000Z' }),
      'update',
    );
    const v = m.view('ns/a');
    expect(v).toMatchObject({
      state: 'Held',
      holder: 'p-0',
      holderUid: 'uid-p-0',
      token: '7',
      expireTime: '2026-01-01T00:00:10.000Z',
      leaseName: 'dlock-a',
      mode: 'Election',
      store: 'Lease',
    });
  });

  it('says Free with the Held condition reason once the Lease has no holder', () => {
    const m = new DashboardModel();
    m.applyLock(
      lock('a', {
        fencingToken: '7',
        conditions: [
          {
            type: 'Held',
            status: 'False',
            reason: 'HolderExpired',
            message: '',
            lastTransitionTime: '2026-01-01T00:00:00Z',
          },
        ],
      }),
      'add',
    );
    m.applyLease(lease({ name: 'dlock-a', lock: 'a', token: '7' }), 'add');
    expect(m.view('ns/a')).toMatchObject({ state: 'Free', holder: undefined, token: '7', reason: 'HolderExpired' });
  });

  it('folds the renewals of one term into one timeline entry, and starts a new one for the next term', () => {
    const m = new DashboardModel();
    m.applyLock(lock('a'), 'add');
    const at = (s: number) => `2026-01-01T00:00:${String(s).padStart(2, '0')}.000Z`;
    m.applyLease(lease({ name: 'dlock-a', lock: 'a', holder: 'p-0', token: '1', renewTime: at(0) }), 'add');
    for (const s of [3, 6, 9])
      m.applyLease(lease({ name: 'dlock-a', lock: 'a', holder: 'p-0', token: '1', renewTime: at(s) }), 'update');
    m.applyLease(lease({ name: 'dlock-a', lock: 'a', holder: 'p-1', token: '2', renewTime: at(20) }), 'update');
    m.applyLease(lease({ name: 'dlock-a', lock: 'a', holder: 'p-1', token: '2', renewTime: at(23) }), 'update');
    const renewals = m.detail('ns/a')?.timeline.filter((e) => e.kind === 'Renewed');
    expect(renewals?.map((e) => [e.holder, e.token, e.count, e.time])).toEqual([
      ['p-0', '1', 3, at(9)],
      ['p-1', '2', 1, at(23)],
    ]);
  });

  it('reads grants, expiries and an agent’s LockLost on its pod into the timeline, in time order', () => {
    const m = new DashboardModel();
    m.applyLock(lock('a'), 'add');
    m.applyEvent(
      event({
        uid: 'e2',
        lock: 'a',
        reason: 'HolderExpired',
        type: 'Warning',
        message: 'Pod p-0 stopped renewing',
        time: '2026-01-01T00:00:20Z',
      }),
      'add',
    );
    m.applyEvent(
      event({
        uid: 'e1',
        lock: 'a',
        reason: 'LeaseGranted',
        message: 'Granted to pod p-0 with fencing token 41 (it was free)',
        time: '2026-01-01T00:00:01Z',
      }),
      'add',
    );
    m.applyEvent(
      event({
        uid: 'e3',
        lock: 'a',
        pod: 'p-0',
        reason: 'LockLost',
        type: 'Warning',
        message: 'Stepped down from lock a (fencing token 41): renew deadline passed',
        time: '2026-01-01T00:00:15Z',
      }),
      'add',
    );
    // Not about a lock: ignored.
    expect(
      m.applyEvent(event({ uid: 'x', lock: 'a', pod: 'p-9', reason: 'Pulled', message: 'image', time: 'x' }), 'add'),
    ).toBeUndefined();
    const t = m.detail('ns/a')?.timeline ?? [];
    expect(t.map((e) => [e.kind, e.holder, e.token, e.warning])).toEqual([
      ['LeaseGranted', 'p-0', '41', false],
      ['LockLost', 'p-0', '41', true],
      ['HolderExpired', undefined, undefined, true],
    ]);
    expect(m.view('ns/a')?.recent.map((e) => e.kind)).toEqual(['LeaseGranted', 'LockLost', 'HolderExpired']);
  });

  it(`keeps at most ${MAX_EVENTS} Events per lock, the newest`, () => {
    const m = new DashboardModel();
    m.applyLock(lock('a'), 'add');
    for (let i = 0; i < MAX_EVENTS + 10; i++)
      m.applyEvent(
        event({
          uid: `e${i}`,
          lock: 'a',
          reason: 'LeaseGranted',
          message: `Granted to pod p with fencing token ${i} (x)`,
          time: new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString(),
        }),
        'add',
      );
    const t = m.detail('ns/a')?.timeline ?? [];
    expect(t).toHaveLength(MAX_EVENTS);
    expect(t[0]?.token).toBe('10');
  });

  it('counts a Redis store lock down from status.acquireTime + leaseDurationSeconds', () => {
    const m = new DashboardModel();
    m.applyLock(
      lock(
        'r',
        {
          holder: { name: 'p-0', uid: 'u' },
          fencingToken: '3',
          acquireTime: '2026-01-01T00:00:00Z',
          leaseDurationSeconds: 30,
        },
        { store: 'Redis' },
      ),
      'add',
    );
    expect(m.view('ns/r')).toMatchObject({
      state: 'Held',
      store: 'Redis',
      holder: 'p-0',
      token: '3',
      expireTime: '2026-01-01T00:00:30.000Z',
      leaseName: undefined,
    });
  });

  it('lists Semaphore permits from the permit Leases, the earliest expiry as the lock’s', () => {
    const m = new DashboardModel();
    m.applyLock(lock('s', {}, { mode: 'Semaphore', permits: 3 }), 'add');
    m.applyLease(lease({ name: 'dlock-s', lock: 's', token: '9' }), 'add');
    m.applyLease(
      lease({ name: 'dlock.s.1', lock: 's', holder: 'p-1', token: '9', renewTime: '2026-01-01T00:00:05.000Z' }),
      'add',
    );
    m.applyLease(
      lease({ name: 'dlock.s.0', lock: 's', holder: 'p-0', token: '8', renewTime: '2026-01-01T00:00:02.000Z' }),
      'add',
    );
    const v = m.view('ns/s');
    expect(v?.holders.map((p) => [p.permit, p.holder, p.token])).toEqual([
      [0, 'p-0', '8'],
      [1, 'p-1', '9'],
    ]);
    expect(v).toMatchObject({ state: 'Held', heldPermits: 2, permits: 3, token: '9' });
    expect(v?.expireTime).toBe('2026-01-01T00:00:12.000Z');
  });

  it('shows a lock only once the lock itself is seen, and forgets it when it is deleted', () => {
    const m = new DashboardModel();
    expect(m.applyLease(lease({ name: 'dlock-a', lock: 'a', holder: 'p', token: '1' }), 'add')).toBe('ns/a');
    expect(m.view('ns/a')).toBeUndefined();
    expect(m.keys()).toEqual([]);
    m.applyLock(lock('a'), 'add');
    expect(m.view('ns/a')?.holder).toBe('p');
    expect(m.applyLock(lock('a'), 'delete')).toBe('ns/a');
    expect(m.view('ns/a')).toBeUndefined();
    // A Lease of another name, labelled with the lock, is not its Lease.
    expect(m.applyLease(lease({ name: 'unrelated', lock: 'a' }), 'add')).toBeUndefined();
  });
});
