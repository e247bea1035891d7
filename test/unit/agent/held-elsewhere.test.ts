/**
 * heldElsewhere (src/client/if-held.ts): what `--if-held` and `ifHeld: 'fail'` call held — one
 * holder for Election and Mutex locks, every permit for a Semaphore. The whole path (a real
 * Semaphore, real sessions, the shipped exec) runs in test/integration/cli/exec-multilock.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { heldElsewhere } from '../../../src/agent/held-elsewhere.ts';
import type { HolderRef } from '../../../src/protocol/holder.ts';

const A: HolderRef = { name: 'a', uid: 'a1' };
const B: HolderRef = { name: 'b', uid: 'b1' };

/** seen: a session stand-in whose watch saw `holder` on the lock's Lease and `permits` on permit Leases. */
const seen = (holder: HolderRef | undefined, permits: readonly HolderRef[] = []) => ({
  otherHolder: () => holder,
  otherPermitHolders: (n: number) => permits.slice(0, n),
});

describe('heldElsewhere', () => {
  it('an Election or Mutex lock is held when its Lease names another pod', () => {
    expect(heldElsewhere(seen(A), undefined)).toEqual({ holder: A });
    expect(heldElsewhere(seen(undefined), undefined)).toBeUndefined();
  });

  it('a Semaphore is held only when every permit is held by other pods', () => {
    expect(heldElsewhere(seen(undefined, [A]), 2)).toBeUndefined(); // a permit is free
    expect(heldElsewhere(seen(undefined, []), 2)).toBeUndefined();
    expect(heldElsewhere(seen(undefined, [A, B]), 2)).toEqual({ holder: A, permits: { of: 2, holders: [A, B] } });
  });
});
