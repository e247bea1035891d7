import { describe, expect, it } from 'vitest';
import {
  LOCK_LABEL,
  leaseName,
  lockKeyPrefix,
  lockLabelSelector,
  lockOfHolderLabel,
  podKeys,
} from '../../../src/protocol/names.ts';

describe('protocol names', () => {
  it("a lock's Lease is dlock-<lock>, found by its lock label", () => {
    expect(leaseName('billing')).toBe('dlock-billing');
    expect(LOCK_LABEL).toBe('fencepost.io/lock');
    expect(lockLabelSelector('billing')).toBe('fencepost.io/lock=billing');
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
