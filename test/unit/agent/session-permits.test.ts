/**
 * LockSession on a Semaphore: the session follows the permit Lease that names its pod (D3 in the
 * semaphore notes), only between terms, renews and releases that Lease, and never takes up a term
 * that ended here under another Lease. The API server is in-memory (compare-and-swap per Lease),
 * the watch is fed by hand, time is a fake clock.
 */
import { describe, expect, it } from 'vitest';
import type { V1Lease } from '@kubernetes/client-node';
import { LockSession, type LeaseInformer, type LockEvent } from '../../../src/agent/session.ts';
import { grantedLease, newLease, parseLease } from '../../../src/lease/record.ts';
import type { LeaseClient } from '../../../src/runtime/leaderelection.ts';
import { silentLogger } from '../../../src/observability/logger.ts';
import type { HolderRef } from '../../../src/protocol/holder.ts';
import { leaseName, permitLeaseName, TOKEN_ANNOTATION } from '../../../src/protocol/names.ts';
import type { ChangeHandler } from '../../../src/runtime/informer.ts';
import { apiClientFor } from '../../support/api-client.ts';
import { FakeClock, flushAsync } from '../../support/fake-clock.ts';

const LOCK = 'pool';
const SELF: HolderRef = { name: 'web-0', uid: 'uid-0' };
const OTHER: HolderRef = { name: 'web-1', uid: 'uid-1' };
const TIMINGS = { leaseDurationMs: 3000, renewDeadlineMs: 2000, renewPeriodMs: 1000 };
const LOCK_REF = { name: LOCK, uid: 'lock-uid', apiVersion: 'fencepost.io/v1alpha1', kind: 'DistributedLock' };

class World {
  readonly clock = new FakeClock();
  readonly events: LockEvent[] = [];
  readonly session: LockSession;
  readonly writes: string[] = [];
  down = false;
  readonly #leases = new Map<string, V1Lease>();
  #rv = 1;
  readonly #handlers: ChangeHandler<V1Lease>[] = [];

  constructor() {
    const informer: LeaseInformer = {
      start: () => Promise.resolve(),
      get: (_ns, name) => this.#leases.get(name),
      stop: () => Promise.resolve(),
      onChange: (h) => {
        this.#handlers.push(h);
      },
    };
    const fail = (): Promise<never> => Promise.reject(new Error('connect ECONNREFUSED'));
    const leases: LeaseClient = {
      get: (_ns, name) => (this.down ? fail() : Promise.resolve(this.#leases.get(name))),
      replace: (_ns, name, body) => {
        if (this.down) return fail();
        const current = this.#leases.get(name);
        if (current === undefined || body.metadata?.resourceVersion !== current.metadata?.resourceVersion)
          return Promise.reject(Object.assign(new Error('the object has been modified'), { statusCode: 409 }));
        this.writes.push(name);
        return Promise.resolve(this.store(name, body));
      },
      create: () => Promise.reject(new Error('agents do not create Leases')),
    };
    this.session = new LockSession({
      api: apiClientFor('http://127.0.0.1:9'),
      namespace: 'default',
      lock: LOCK,
      self: SELF,
      clock: this.clock,
      log: silentLogger,
      leases,
      leaseInformer: informer,
      random: () => 0,
    });
    this.session.onEvent((e) => {
      this.events.push(e);
    });
    this.store(leaseName(LOCK), newLease(LOCK_REF, undefined));
  }

  lease(name: string): V1Lease {
    const l = this.#leases.get(name);
    if (l === undefined) throw new Error(`no Lease ${name}`);
    return l;
  }

  store(name: string, body: V1Lease): V1Lease {
    this.#rv++;
    const stored = {
      ...body,
      metadata: { ...body.metadata, name, namespace: 'default', resourceVersion: String(this.#rv) },
    };
    this.#leases.set(name, stored);
    return stored;
  }

  /** anchorAt raises the anchor's token, as the controller does before each grant, and delivers it. */
  async anchorAt(token: bigint): Promise<void> {
    const a = this.lease(leaseName(LOCK));
    this.store(leaseName(LOCK), {
      ...a,
      metadata: { ...a.metadata, annotations: { ...a.metadata?.annotations, [TOKEN_ANNOTATION]: token.toString() } },
    });
    await this.deliver(leaseName(LOCK));
  }

  /** grantPermit is the controller's grant of permit `permit` to `to` with `token` (the Lease created first if missing). */
  async grantPermit(permit: number, to: HolderRef, token: bigint): Promise<void> {
    const name = permitLeaseName(LOCK, permit);
    const current = this.#leases.get(name) ?? this.store(name, newLease(LOCK_REF, undefined, permit));
    this.store(name, grantedLease(current, to, token, TIMINGS, this.clock.now()));
    await this.deliver(name);
  }

  async deliver(name: string): Promise<void> {
    const l = this.lease(name);
    for (const h of this.#handlers) h(l, 'update');
    await flushAsync();
    await flushAsync();
  }

  types(): string[] {
    return this.events.map((e) => `${e.type} ${e.token}`);
  }
}

describe('LockSession on a Semaphore', () => {
  it('takes up the permit Lease that names its pod, renews that Lease and reports the permit', async () => {
    const w = new World();
    await w.session.start();
    // A relist may deliver the anchor (raised by a later grant) before the permit that names us.
    await w.anchorAt(21n);
    await w.grantPermit(1, OTHER, 21n);
    await w.grantPermit(0, SELF, 20n);
    expect(w.session.heldToken()).toBe(20n);
    expect(w.session.snapshot()).toMatchObject({ held: true, token: '20', permit: 0, holder: 'web-0' });
    expect(w.writes).toEqual(['dlock.pool.0']); // the confirming renew
    await w.clock.advanceAsync(1000);
    expect(w.writes).toEqual(['dlock.pool.0', 'dlock.pool.0']);
    expect(w.lease(permitLeaseName(LOCK, 1)).spec?.holderIdentity).toBe('web-1/uid-1'); // never touched
  });

  it('ignores another permit Lease that names its pod while it holds a term', async () => {
    const w = new World();
    await w.session.start();
    await w.grantPermit(0, SELF, 5n);
    await w.grantPermit(1, SELF, 6n); // a stale or forged second permit
    expect(w.session.heldToken()).toBe(5n);
    expect(w.session.snapshot().permit).toBe(0);
    expect(w.writes.every((n) => n === 'dlock.pool.0')).toBe(true);
  });

  it('after losing its permit takes up a later permit with a larger token, and never an ended one', async () => {
    const w = new World();
    await w.session.start();
    await w.grantPermit(0, SELF, 5n);
    w.down = true;
    await w.clock.advanceAsync(2100); // past the renew deadline: lost
    w.down = false;
    expect(w.session.heldToken()).toBeUndefined();
    await w.grantPermit(1, SELF, 5n); // the ended token again, on another Lease: not taken up
    expect(w.session.heldToken()).toBeUndefined();
    await w.grantPermit(2, SELF, 9n);
    expect(w.session.heldToken()).toBe(9n);
    expect(w.session.snapshot().permit).toBe(2);
    expect(w.types()).toEqual(['granted 5', 'lost 5', 'granted 9']);
  });

  it('releases the permit Lease it holds', async () => {
    const w = new World();
    await w.session.start();
    await w.grantPermit(3, SELF, 7n);
    await w.session.release();
    expect(parseLease(w.lease(permitLeaseName(LOCK, 3))).holder).toBeUndefined();
    expect(parseLease(w.lease(permitLeaseName(LOCK, 3))).released).toBe('Released');
    expect(w.types()).toEqual(['granted 7', 'released 7']);
  });

  it('on an Election or Mutex lock follows the lock Lease as before, with no permit', async () => {
    const w = new World();
    await w.session.start();
    const a = w.lease(leaseName(LOCK));
    w.store(leaseName(LOCK), grantedLease(a, SELF, 3n, TIMINGS, w.clock.now()));
    await w.deliver(leaseName(LOCK));
    expect(w.session.heldToken()).toBe(3n);
    expect(w.session.snapshot()).not.toHaveProperty('permit');
  });
});
