import { describe, expect, it } from 'vitest';
import {
  LOCK_LABEL,
  leaseName,
  lockKeyPrefix,
  lockLabelSelector,
  lockOfHolderLabel,
  PERMIT_LABEL,
  permitLeaseName,
  permitOfLease,
  podKeys,
} from '../../../src/protocol/names.ts';

describe('protocol names', () => {
  it("a lock's Lease is dlock-<lock>, found by its lock label", () => {
    expect(leaseName('billing')).toBe('dlock-billing');
    expect(LOCK_LABEL).toBe('fencepost.io/lock');
    expect(lockLabelSelector('billing')).toBe('fencepost.io/lock=billing');
  });

  it("a Semaphore's permit i is the Lease dlock.<lock>.<i>, labelled with its lock and permit", () => {
    expect(permitLeaseName('workers', 0)).toBe('dlock.workers.0');
    expect(permitLeaseName('workers', 999)).toBe('dlock.workers.999');
    expect(PERMIT_LABEL).toBe('fencepost.io/permit');
  });

  it("no permit Lease has the name of any lock's Lease, nor of another permit (dotted lock names included)", () => {
    const locks = ['workers', 'workers-1', 'workers.1', 'a', 'a.1', 'a-1', 'a.1.2'];
    const names = [
      ...locks.map((l) => leaseName(l)),
      ...locks.flatMap((l) => [0, 1, 2, 12].map((i) => permitLeaseName(l, i))),
    ];
    expect(new Set(names).size).toBe(names.length);
  });

  it.each([
    { lock: 'workers', name: 'dlock.workers.0', want: 0 },
    { lock: 'workers', name: 'dlock.workers.17', want: 17 },
    { lock: 'a.1', name: 'dlock.a.1.2', want: 2 },
    { lock: 'a', name: 'dlock.a.1.2', want: undefined },
    { lock: 'workers', name: 'dlock-workers', want: undefined },
    { lock: 'workers', name: 'dlock-workers-1', want: undefined },
    { lock: 'workers', name: 'dlock.workers.01', want: undefined },
    { lock: 'workers', name: 'dlock.workers.-1', want: undefined },
    { lock: 'workers', name: 'dlock.workers.', want: undefined },
    { lock: 'workers', name: 'dlock.workers.1234567', want: undefined },
  ])('permitOfLease($lock, $name) is $want', ({ lock, name, want }) => {
    expect(permitOfLease(lock, name)).toBe(want);
  });

  it.each([
    { key: podKeys('billing').holder, want: 'billing' },
    { key: podKeys('a.b-c').holder, want: 'a.b-c' },
    { key: podKeys('billing').token, want: undefined },
    { key: `${lockKeyPrefix('billing')}/holders`, want: undefined },
    { key: 'app.kubernetes.io/name', want: undefined },
  ])('lockOfHolderLabel($key) is $want', ({ key, want }) => {
    expect(lockOfHolderLabel(key)).toBe(want);
  });
});
