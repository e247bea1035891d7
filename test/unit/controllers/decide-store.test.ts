// decideStore (controllers/distributedlock/decide-store.ts): what the controller makes of a lock
// held in a Redis or Redlock store, case by case, on the pure decision.
import { describe, expect, it } from 'vitest';
import type { DistributedLock } from '../../../src/api/v1alpha1/distributedlock.ts';
import {
  decideStore,
  END_GRACE_MS,
  type StoreInput,
  type StoreMemory,
  type StoreRead,
} from '../../../src/controllers/distributedlock/decide-store.ts';

const lock: DistributedLock = {
  apiVersion: 'fencepost.io/v1alpha1',
  kind: 'DistributedLock',
  metadata: { name: 'l', namespace: 'ns', generation: 1 },
  spec: { leaseDurationSeconds: 2, store: 'Redis', candidates: { selector: { matchLabels: { app: 'a' } } } },
};
const pods = [
  { name: 'p1', uid: 'u1', labels: { app: 'a' } },
  { name: 'other', uid: 'u9', labels: { app: 'b' } },
];
const t0 = new Date('2026-12-05T00:00:00Z');
const at = (ms: number) => new Date(t0.getTime() + ms);
const held = (owner: string, token: bigint, pod?: { name: string; uid: string }): StoreRead => ({
  ok: true,
  owner,
  ttlMs: 1800,
  token,
  pod,
});
const free: StoreRead = { ok: true, owner: undefined, ttlMs: -2, token: undefined, pod: undefined };
const input = (read: StoreRead, memory: StoreMemory, now: Date, released: string[] = []): StoreInput => ({
  lock,
  read,
  memory,
  released: new Set(released),
  pods,
  now,
  store: 'Redis',
});

describe('decideStore', () => {
  it('a store that does not answer: Ready=False naming why, nothing else changes', () => {
    const d = decideStore(input({ ok: false, error: 'the controller was started without --redis-store-url' }, {}, t0));
    const ready = d.status.conditions?.find((c) => c.type === 'Ready');
    expect(ready).toMatchObject({ status: 'False', reason: 'StoreUnavailable' });
    expect(ready?.message).toContain('--redis-store-url');
    expect(d.transitions).toEqual([]);
    expect(d.mark).toBeUndefined();
  });

  it('a grant to a candidate pod: marked, granted once, status as for a Lease lock', () => {
    const d = decideStore(input(held('x/p1/u1', 7n, { name: 'p1', uid: 'u1' }), {}, t0));
    expect(d.status).toMatchObject({ holder: { name: 'p1', uid: 'u1' }, fencingToken: '7', leaseDurationSeconds: 2 });
    expect(d.mark).toMatchObject({ pod: { name: 'p1', uid: 'u1' }, token: 7n });
    expect(d.transitions).toEqual([{ type: 'granted', token: 7n, pod: { name: 'p1', uid: 'u1' } }]);
    const again = decideStore(input(held('x/p1/u1', 7n, { name: 'p1', uid: 'u1' }), d.memory, at(1000)));
    expect(again.transitions).toEqual([]);
    expect(again.mark).toBeUndefined();
    expect(again.status.acquireTime).toBe(d.status.acquireTime);
  });

  it('a pod named by the owner id but not a candidate, or with another uid, is not the holder', () => {
    for (const pod of [
      { name: 'other', uid: 'u9' },
      { name: 'p1', uid: 'forged' },
      { name: 'gone', uid: 'u0' },
    ]) {
      const d = decideStore(input(held(`x/${pod.name}/${pod.uid}`, 3n, pod), {}, t0));
      expect(d.status.holder).toBeUndefined();
      expect(d.mark).toBeUndefined();
      expect(d.status.fencingToken).toBe('3');
      expect(d.status.conditions?.find((c) => c.type === 'Held')?.status).toBe('True');
    }
  });

  it('a release heard on the channel is a release; the pod is unmarked', () => {
    const g = decideStore(input(held('x/p1/u1', 7n, { name: 'p1', uid: 'u1' }), {}, t0));
    const d = decideStore(input(free, g.memory, at(500), ['x/p1/u1']));
    expect(d.transitions).toEqual([{ type: 'released', token: 7n, heldMs: 500 }]);
    expect(d.unmark).toEqual({ name: 'p1', uid: 'u1' });
    expect(d.status.holder).toBeUndefined();
    expect(d.status.fencingToken).toBe('7');
    expect(d.status.conditions?.find((c) => c.type === 'Held')?.reason).toBe('Released');
  });

  it('a key gone without a release waits END_GRACE_MS for the message, then is an expiry', () => {
    const g = decideStore(input(held('x/p1/u1', 7n, { name: 'p1', uid: 'u1' }), {}, t0));
    const pending = decideStore(input(free, g.memory, at(2000)));
    expect(pending.transitions).toEqual([]);
    expect(pending.requeueAfterMs).toBe(END_GRACE_MS);
    const late = decideStore(input(free, pending.memory, at(2100), ['x/p1/u1']));
    expect(late.transitions.map((t) => t.type)).toEqual(['released']);
    const expired = decideStore(input(free, pending.memory, at(2000 + END_GRACE_MS)));
    expect(expired.transitions).toEqual([{ type: 'expired', token: 7n, heldMs: 2000 + END_GRACE_MS }]);
    expect(expired.status.conditions?.find((c) => c.type === 'Held')?.reason).toBe('HolderExpired');
    const later = decideStore(input(free, expired.memory, at(5000)));
    expect(later.status.conditions?.find((c) => c.type === 'Held')?.reason).toBe('HolderExpired');
  });

  it('a new owner at once after the old: the old one ends, the new one is granted and counted as a transition', () => {
    const g = decideStore(input(held('x/p1/u1', 7n, { name: 'p1', uid: 'u1' }), {}, t0));
    const d = decideStore(input(held('y', 8n), g.memory, at(300), ['x/p1/u1']));
    expect(d.transitions.map((t) => t.type)).toEqual(['released', 'granted']);
    expect(d.unmark).toEqual({ name: 'p1', uid: 'u1' });
    expect(d.status.leaseTransitions).toBe(1);
    expect(d.status.fencingToken).toBe('8');
  });

  it('status.fencingToken never goes down (a store that lost its counter)', () => {
    const withStatus = { ...lock, status: { fencingToken: '50' } };
    const d = decideStore({ ...input(held('z', 1n), {}, t0), lock: withStatus });
    expect(d.status.fencingToken).toBe('50');
  });
});
