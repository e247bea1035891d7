import { describe, expect, it, beforeAll } from 'vitest';
import { CoordinationV1Api, type V1Lease } from '@kubernetes/client-node';
import { freshNamespace, sharedKubeConfig } from '../../support/env.ts';

// Proves the harness talks to a real API server: optimistic concurrency on a Lease is enforced
// by etcd's compare-and-swap, which no stand-in would give us for free.
describe('a Lease on the real API server', () => {
  const kc = sharedKubeConfig();
  const leases = kc.makeApiClient(CoordinationV1Api);
  let namespace = '';
  beforeAll(async () => {
    namespace = await freshNamespace(kc);
  });

  it('rejects a replace with a stale resourceVersion with 409 Conflict and keeps the winner', async () => {
    const created = await leases.createNamespacedLease({
      namespace,
      body: { metadata: { name: 'cas' }, spec: { holderIdentity: 'a', leaseDurationSeconds: 10 } },
    });
    const staleRv = created.metadata?.resourceVersion ?? '';

    const winner: V1Lease = { ...created, spec: { ...created.spec, holderIdentity: 'b' } };
    const replaced = await leases.replaceNamespacedLease({ name: 'cas', namespace, body: winner });
    expect(replaced.metadata?.resourceVersion).not.toBe(staleRv);

    const loser: V1Lease = {
      ...created,
      metadata: { ...created.metadata, resourceVersion: staleRv },
      spec: { ...created.spec, holderIdentity: 'c' },
    };
    await expect(leases.replaceNamespacedLease({ name: 'cas', namespace, body: loser })).rejects.toMatchObject({
      code: 409,
    });

    const now = await leases.readNamespacedLease({ name: 'cas', namespace });
    expect(now.spec?.holderIdentity).toBe('b');
  });

  it('serialises concurrent compare-and-swaps on one resourceVersion: exactly one succeeds', async () => {
    const created = await leases.createNamespacedLease({
      namespace,
      body: { metadata: { name: 'race' }, spec: { holderIdentity: 'nobody' } },
    });
    const attempts = Array.from({ length: 20 }, (_, i) =>
      leases.replaceNamespacedLease({
        name: 'race',
        namespace,
        body: { ...created, spec: { holderIdentity: `c${i}` } },
      }),
    );
    const results = await Promise.allSettled(attempts);
    const ok = results.filter((r) => r.status === 'fulfilled');
    const conflicts = results.filter((r) => r.status === 'rejected' && (r.reason as { code?: number }).code === 409);
    expect(ok).toHaveLength(1);
    expect(conflicts).toHaveLength(19);
  });
});
