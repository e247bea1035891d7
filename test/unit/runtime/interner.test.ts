// The interner changes which string instance a cached object points at, never what it says: an
// object comes out deep-equal to what went in, and the table stays within its bound however many
// distinct values pass through it. (Sharing itself is not observable from JavaScript; the heap
// figures of bench/scale.ts show it.)
import { describe, expect, it } from 'vitest';
import { INTERNED_MAX, Interner, internShared } from '../../../src/runtime/interner.ts';

function lock(name: string, created: string): object {
  return {
    apiVersion: 'fencepost.io/v1alpha1',
    kind: 'DistributedLock',
    metadata: {
      name,
      namespace: 'team-a',
      uid: `uid-${name}`,
      creationTimestamp: created,
      labels: { app: 'billing', tier: 'batch' },
      finalizers: ['fencepost.io/lease-cleanup'],
      ownerReferences: [{ apiVersion: 'apps/v1', kind: 'Deployment', name: 'billing', uid: 'd-1' }],
    },
    spec: { candidates: { selector: { matchLabels: { app: 'billing' } } } },
    status: {
      conditions: [
        {
          type: 'Ready',
          status: 'True',
          reason: 'AsExpected',
          message: 'The lock is managed',
          lastTransitionTime: created,
        },
      ],
    },
  };
}

describe('Interner', () => {
  it('leaves every object deep-equal to what it was, and keeps one entry per distinct shared value', () => {
    const interner = new Interner();
    for (let i = 0; i < 100; i++) {
      const obj = lock(`l-${i}`, '2026-12-07T10:00:00Z');
      const copy = structuredClone(obj);
      expect(internShared(obj, interner)).toEqual(copy);
    }
    // apiVersion, kind, namespace, the time, two label values, the finalizer, the owner's
    // apiVersion and kind, and the condition's type, status, reason and message: names and uids
    // are not interned.
    expect(interner.size).toBe(13);
  });

  it('starts over once full, so values that never repeat cost at most the bound', () => {
    const interner = new Interner();
    for (let i = 0; i < INTERNED_MAX * 2 + 5; i++) expect(interner.of(`t-${i}`)).toBe(`t-${i}`);
    expect(interner.size).toBeLessThanOrEqual(INTERNED_MAX);
    expect(interner.size).toBe(5);
  });

  it('passes over what is not a string (a Date from a typed client, a missing status)', () => {
    const interner = new Interner();
    const created = new Date('2026-12-07T10:00:00Z');
    const obj = { metadata: { name: 'x', creationTimestamp: created } };
    expect(internShared(obj, interner).metadata.creationTimestamp).toBe(created);
    expect(interner.size).toBe(0);
  });
});
