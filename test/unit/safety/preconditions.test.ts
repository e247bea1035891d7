import { describe, expect, it } from 'vitest';
import type { V1Lease } from '@kubernetes/client-node';
import { grantedLease, releasedLease, renewedLease } from '../../../src/lease/record.ts';
import { leaseName } from '../../../src/protocol/names.ts';

// No unconditional renew, at the code level: every Lease body fencepost writes is a
// compare-and-swap — it carries the resourceVersion it was built from, so the API server refuses it
// (409) when the Lease changed in between. (The contract half, the 409 itself, is in
// test/safety/bad-input.test.ts.)
const lease: V1Lease = {
  metadata: {
    name: leaseName('x'),
    namespace: 'ns',
    resourceVersion: '4711',
    annotations: { 'fencepost.io/fencing-token': '7' },
  },
  spec: { holderIdentity: 'pod-a/uid-a', leaseDurationSeconds: 2, leaseTransitions: 3 },
};

describe('every Lease write is conditional on the version it was built from', () => {
  it.each([
    ['renew', () => renewedLease(lease, new Date())],
    ['release', () => releasedLease(lease, 'Released')],
    ['revoke', () => releasedLease(lease, 'Expired')],
    [
      'grant',
      () =>
        grantedLease(
          lease,
          { name: 'pod-b', uid: 'uid-b' },
          8n,
          { leaseDurationMs: 2000, renewDeadlineMs: 1333, renewPeriodMs: 666 },
          new Date(),
        ),
    ],
  ])('%s keeps metadata.resourceVersion', (_name, build) => {
    expect(build().metadata?.resourceVersion).toBe('4711');
  });
});
