/**
 * Who gets a lock after its holder loses it against its will, on the real API server with the
 * controller in-process:
 * - a Mutex freed by the pod that just held it is not handed straight back to that pod while
 *   another pod's request waits — even one whose pod is not Ready for a while (an agent stalled
 *   for seconds fails its readiness probe and keeps its place in the queue);
 * - a forced release (`kubectl fencepost release --force`: the Lease released as `Revoked`) is
 *   followed by the lock's lock-delay, like an expiry, before the next grant.
 */
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { parseLease, renewedLease } from '../../../src/lease/record.ts';
import { FORCE_RELEASE_REQUEST_ANNOTATION, formatForceReleaseRequest } from '../../../src/protocol/handover.ts';
import { leaseName, podKeys } from '../../../src/protocol/names.ts';
import { GROUP, PLURAL, VERSION } from '../../../src/api/v1alpha1/distributedlock.ts';
import { eventually } from '../../support/env.ts';
import {
  createLock,
  createPod,
  getLease,
  getLock,
  lockBody,
  releaseLease,
  setPodStatus,
  type TestKube,
} from '../../support/fixtures.ts';
import { useLockController } from '../../support/lock-controller.ts';

/** annotatePod sets (or with null removes) annotations of a pod with a merge patch. */
async function annotatePod(t: TestKube, pod: string, annotations: Record<string, string | null>): Promise<void> {
  await t.core.patchNamespacedPod(
    { namespace: t.namespace, name: pod, body: { metadata: { annotations } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
}

/** renewWhileHeld renews the Lease as the holder's agent does, while the Lease names `holder`. */
function renewWhileHeld(t: TestKube, lock: string, holder: string): () => Promise<void> {
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const l = await getLease(t, lock).catch(() => undefined);
      if (l === undefined || parseLease(l).holder?.name !== holder) return;
      await t.leases
        .replaceNamespacedLease({ namespace: t.namespace, name: leaseName(lock), body: renewedLease(l, new Date()) })
        .catch(() => undefined);
      await new Promise((r) => setTimeout(r, 300));
    }
  })();
  return async () => {
    stopped = true;
    await loop;
  };
}

const held = async (t: TestKube, lock: string) =>
  (await getLock(t, lock)).status?.conditions?.find((c) => c.type === 'Held');

describe('grants after an involuntary or a voluntary end', () => {
  const fx = useLockController('involuntary-', null);

  it('Mutex: the pod that released and asked again does not get the lock back while another request waits (its pod not Ready); the waiter gets it next', async () => {
    const t = fx.t;
    const keys = podKeys('fair');
    await createPod(t, 'fair-p', { app: 'fair' });
    await createPod(t, 'fair-q', { app: 'fair' });
    await createLock(t, lockBody('fair', 'fair', { mode: 'Mutex', leaseDurationSeconds: 30 }));
    await annotatePod(t, 'fair-p', { [keys.request]: new Date(Date.now() - 2000).toISOString() });
    const first = await eventually(async () => {
      const r = parseLease((await getLease(t, 'fair')) ?? {});
      expect(r.holder?.name).toBe('fair-p');
      return r;
    });
    // p asks again at once (a loop that re-acquires), q asks and then stalls (not Ready).
    await annotatePod(t, 'fair-p', { [keys.request]: new Date().toISOString() });
    await annotatePod(t, 'fair-q', { [keys.request]: new Date().toISOString() });
    await setPodStatus(t, 'fair-q', 'unready');
    await eventually(async () => {
      expect((await getLock(t, 'fair')).status?.queue?.map((q) => q.pod)).toEqual(['fair-q']);
    });
    // p releases: nobody is granted while q waits unready...
    await releaseLease(t, 'fair');
    await eventually(async () => {
      expect(await held(t, 'fair')).toMatchObject({ status: 'False' });
    });
    const vacant = parseLease((await getLease(t, 'fair')) ?? {});
    expect(vacant.holder).toBeUndefined();
    expect(vacant.transitions).toBe(first.transitions);
    // ...and once q is Ready again it is the next holder, with a larger token.
    await setPodStatus(t, 'fair-q', 'ready');
    const next = await eventually(async () => {
      const r = parseLease((await getLease(t, 'fair')) ?? {});
      expect(r.holder).toBeDefined();
      return r;
    });
    expect(next.holder?.name).toBe('fair-q');
    expect(next.transitions).toBe(first.transitions + 1);
    expect(next.token).toBeGreaterThan(first.token ?? 0n);
  }, 60_000);

  it('a forced release waits out spec.lockDelaySeconds (Held=False LockDelay) before the next grant, which has a larger token', async () => {
    const t = fx.t;
    await createPod(t, 'rv-0', { app: 'rv' });
    await createPod(t, 'rv-1', { app: 'rv' });
    await createLock(t, lockBody('rv', 'rv', { leaseDurationSeconds: 30, lockDelaySeconds: 3 }));
    const first = await eventually(async () => {
      const r = parseLease((await getLease(t, 'rv')) ?? {});
      expect(r.holder).toBeDefined();
      return r;
    });
    const stop = renewWhileHeld(t, 'rv', first.holder?.name ?? '');
    try {
      await t.custom.patchNamespacedCustomObject(
        {
          group: GROUP,
          version: VERSION,
          plural: PLURAL,
          namespace: t.namespace,
          name: 'rv',
          body: {
            metadata: {
              annotations: {
                [FORCE_RELEASE_REQUEST_ANNOTATION]: formatForceReleaseRequest({
                  token: first.token ?? 0n,
                  requestedAt: new Date().toISOString(),
                  by: 'alice',
                }),
              },
            },
          },
        },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      const revoked = await eventually(async () => {
        const r = parseLease((await getLease(t, 'rv')) ?? {});
        expect(r.released).toBe('Revoked');
        return r;
      });
      expect(revoked.holder).toBeUndefined();
      await eventually(async () => {
        expect(await held(t, 'rv')).toMatchObject({ status: 'False', reason: 'LockDelay' });
        expect(parseLease((await getLease(t, 'rv')) ?? {}).holder).toBeUndefined();
      });
      const next = await eventually(async () => {
        const r = parseLease((await getLease(t, 'rv')) ?? {});
        expect(r.holder).toBeDefined();
        return r;
      }, 20_000);
      expect(next.token).toBeGreaterThan(first.token ?? 0n);
      expect(next.transitions).toBe(first.transitions + 1);
    } finally {
      await stop();
    }
  }, 60_000);
});
