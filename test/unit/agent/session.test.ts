/**
 * LockSession after a term ends (a step-down is final): "after step-down the agent never resumes
 * writes with the old token — a new term needs a new token". The API server here is an in-memory
 * Lease with compare-and-swap writes that can be made to fail, the watch is fed by hand, time is a
 * fake clock.
 */
import { describe, expect, it } from 'vitest';
import type { V1Lease } from '@kubernetes/client-node';
import { LockSession, type LeaseInformer, type LockEvent } from '../../../src/agent/session.ts';
import { grantedLease, parseLease } from '../../../src/lease/record.ts';
import { silentLogger } from '../../../src/observability/logger.ts';
import type { LeaseClient } from '../../../src/runtime/leaderelection.ts';
import type { ChangeHandler } from '../../../src/runtime/informer.ts';
import { apiClientFor } from '../../support/api-client.ts';
import { FakeClock, flushAsync } from '../../support/fake-clock.ts';
import type { HolderRef } from '../../../src/protocol/holder.ts';
import { leaseName, LOCK_LABEL } from '../../../src/protocol/names.ts';

const LOCK = 'db';
const SELF: HolderRef = { name: 'web-0', uid: 'uid-0' };
const OTHER: HolderRef = { name: 'web-1', uid: 'uid-1' };
/** L = 3 s: renew deadline 2 s, renew period 1 s. */
const TIMINGS = { leaseDurationMs: 3000, renewDeadlineMs: 2000, renewPeriodMs: 1000 };

/** World: one Lease on a fake API server that can be made unreachable, and one session on it. */
class World {
  readonly clock = new FakeClock();
  readonly events: LockEvent[] = [];
  readonly session: LockSession;
  /** down: every request fails, as when the API server cannot be reached. */
  down = false;
  /** holdReplies: Lease writes are applied at once but answered only by `answerHeld` (a slow reply). */
  holdReplies = false;
  readonly #held: (() => void)[] = [];
  writes = 0;
  #lease: V1Lease = {
    metadata: { name: leaseName(LOCK), namespace: 'default', resourceVersion: '1', labels: { [LOCK_LABEL]: LOCK } },
    spec: {},
  };
  #rv = 1;
  readonly #handlers: ChangeHandler<V1Lease>[] = [];

  constructor() {
    const informer: LeaseInformer = {
      start: () => Promise.resolve(),
      get: () => this.#lease,
      stop: () => Promise.resolve(),
      onChange: (h) => {
        this.#handlers.push(h);
      },
    };
    const unreachable = (): Promise<never> => Promise.reject(new Error('connect ECONNREFUSED'));
    const leases: LeaseClient = {
      get: () => (this.down ? unreachable() : Promise.resolve(this.#lease)),
      replace: (_ns, _name, body) => {
        if (this.down) return unreachable();
        if (body.metadata?.resourceVersion !== this.#lease.metadata?.resourceVersion) {
          return Promise.reject(Object.assign(new Error('the object has been modified'), { statusCode: 409 }));
        }
        this.writes++;
        const stored = this.#store(body);
        if (!this.holdReplies) return Promise.resolve(stored);
        // The reply is already on its way: the session's abort at its deadline does not stop it.
        return new Promise<V1Lease>((resolve) => {
          this.#held.push(() => {
            resolve(stored);
          });
        });
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
  }

  /** holding: a started session that was granted `token` and confirmed it (at t = 0: valid until 2000). */
  static async holding(token: bigint): Promise<World> {
    const w = new World();
    await w.session.start();
    await w.grant(SELF, token);
    return w;
  }

  /** loseAtDeadline: the API server cannot be reached past the renew deadline, then answers again. */
  async loseAtDeadline(): Promise<void> {
    this.down = true;
    await this.clock.advanceAsync(2100);
    this.down = false;
  }

  get lease(): V1Lease {
    return this.#lease;
  }

  /** answerHeld delivers the held replies. */
  async answerHeld(): Promise<void> {
    this.holdReplies = false;
    for (const answer of this.#held.splice(0)) answer();
    await flushAsync();
    await flushAsync();
  }

  /** #store writes the Lease with the next resourceVersion (the watch is delivered by `deliver`). */
  #store(body: V1Lease): V1Lease {
    this.#rv++;
    this.#lease = { ...body, metadata: { ...body.metadata, resourceVersion: String(this.#rv) } };
    return this.#lease;
  }

  /** grant is the controller's grant write, delivered on the watch. */
  async grant(to: HolderRef, token: bigint): Promise<void> {
    this.#store(grantedLease(this.#lease, to, token, TIMINGS, this.clock.now()));
    await this.deliver();
  }

  /** deliver sends the current Lease to the session's watch (an event, or a relist after a reconnect). */
  async deliver(): Promise<void> {
    for (const h of this.#handlers) h(this.#lease, 'update');
    await flushAsync();
    await flushAsync();
  }

  types(): string[] {
    return this.events.map((e) => `${e.type} ${e.token}`);
  }
}

describe('LockSession after its term ended', () => {
  it('steps down at the renew deadline and does not take the same token up again when the API server answers', async () => {
    const w = await World.holding(7n);
    expect(w.session.heldToken()).toBe(7n);

    w.down = true;
    await w.clock.advanceAsync(2100); // past the deadline of the last renew
    expect(w.session.heldToken()).toBeUndefined();
    expect(w.types()).toEqual(['granted 7', 'lost 7']);

    // The API server answers again before the controller expired the Lease: it still names us with 7.
    w.down = false;
    await w.deliver();
    await w.clock.advanceAsync(3000);
    expect(w.types()).toEqual(['granted 7', 'lost 7']);
    expect(w.session.snapshot()).toMatchObject({ held: false, state: 'lost' });
    // ...and the lost term was handed back, so the controller can grant the next one at once.
    const rec = parseLease(w.lease);
    expect(rec.holder).toBeUndefined();
    expect(rec.token).toBe(7n); // the high-water mark stays
  });

  it('does not take the term up again when a renew sent before the deadline is answered after it', async () => {
    const w = await World.holding(7n); // valid until 2000
    w.holdReplies = true;
    await w.clock.advanceAsync(1000); // the renew goes out at t = 1000 (it would be valid until 3000)
    await w.clock.advanceAsync(1100); // t = 2100: the deadline passed with the reply still out
    expect(w.types()).toEqual(['granted 7', 'lost 7']);

    await w.answerHeld();
    await w.clock.advanceAsync(3000);
    expect(w.session.heldToken()).toBeUndefined();
    expect(w.types()).toEqual(['granted 7', 'lost 7']);
    expect(parseLease(w.lease).holder).toBeUndefined(); // handed back
  });

  it('starts a new term only with a larger token', async () => {
    const w = await World.holding(7n);
    await w.loseAtDeadline();

    await w.grant(SELF, 8n);
    expect(w.session.heldToken()).toBe(8n);
    expect(w.types()).toEqual(['granted 7', 'lost 7', 'granted 8']);
  });

  it('never takes a released term up again, even if its release did not reach the API server', async () => {
    const w = await World.holding(3n);
    w.down = true;
    await expect(w.session.release()).rejects.toThrow(/Failed to release Lease/);
    expect(w.types()).toEqual(['granted 3', 'released 3']);

    w.down = false;
    await w.deliver(); // the Lease still names us with 3
    await w.clock.advanceAsync(3000);
    expect(w.session.heldToken()).toBeUndefined();
    expect(w.types()).toEqual(['granted 3', 'released 3']);
    expect(parseLease(w.lease).holder).toBeUndefined(); // handed back on sight
  });

  it('leaves the Lease to expire when the session is stopped while holding', async () => {
    const w = await World.holding(4n);
    const writes = w.writes;
    await w.session.stop();
    await w.clock.advanceAsync(3000);
    expect(w.types()).toEqual(['granted 4', 'lost 4']);
    expect(w.writes).toBe(writes);
    expect(parseLease(w.lease)).toMatchObject({ holder: SELF, token: 4n });
  });

  it('leaves a Lease that names another holder alone', async () => {
    const w = await World.holding(1n);
    await w.loseAtDeadline();
    await w.grant(OTHER, 2n);
    const writes = w.writes;
    await w.clock.advanceAsync(3000);
    expect(w.writes).toBe(writes);
    expect(parseLease(w.lease).holder).toEqual(OTHER);
    expect(w.types()).toEqual(['granted 1', 'lost 1']);
  });
});
