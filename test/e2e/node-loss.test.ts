import { setTimeout as sleep } from 'node:timers/promises';
import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { GROUP, PLURAL, VERSION } from '../../src/api/v1alpha1/distributedlock.ts';
import { parseLease } from '../../src/lease/record.ts';
import { leaseName } from '../../src/protocol/names.ts';
import { eventually } from '../support/env.ts';
import { createNodes, waitNodesReady } from '../support/cluster/nodes.ts';
import { ON_KUBELET, dumpDiagnostics, useE2eCluster } from './e2e-cluster.ts';

const NS = 'e2e-node-loss';
const LOCK = 'partitioned';
const LEASE_SECONDS = 90;
const LOCK_DELAY_SECONDS = 10;
/** KEEP is a finalizer that keeps the holder pod visible after the pod GC's force deletion, as Job pods' is. */
const KEEP = 'e2e.fencepost.io/keep';

/**
 * aPod is a candidate pod bound to node whose containers the pod runner does not run (their
 * images are not fencepost's): kwok reports them running and the pod Ready, but no agent renews
 * the Lease — the holder is as silent as one whose node is cut off.
 */
function aPod(name: string, node: string, finalizers: readonly string[] = []): V1Pod {
  return {
    metadata: { name, labels: { app: LOCK }, finalizers: [...finalizers] },
    spec: {
      nodeName: node,
      initContainers: [{ name: 'fencepost-agent', image: 'registry.example/agent:1', restartPolicy: 'Always' }],
      containers: [{ name: 'app', image: 'registry.example/app:1' }],
    },
  };
}

// Node loss as kube-controller-manager's pod GC reports it: when a Node is deleted, the GC marks
// its pods Failed (with a DisruptionTarget condition, reason DeletionByPodGC) and force-deletes
// them — without anyone having seen the containers stop. The holder's processes may still run on
// the lost node, so a pod's phase is no proof that it stopped: the lock must wait out the lease
// (since the holder's last renewal) and the lock delay before it goes to anyone else.
// kwok's nodes only (FENCEPOST_E2E_RUNTIME unset or crun): it creates a node to lose, which the
// cluster with one real node cannot yet (a second kubelet would).
describe.skipIf(ON_KUBELET)('a holder whose node is deleted (pod GC marks its pod Failed)', () => {
  const e = useE2eCluster([NS]);

  it('is not replaced before the lease and the lock delay have passed since its last renewal', async () => {
    const [doomed] = await createNodes(e.kc, 1, 'doomed');
    if (doomed === undefined) throw new Error('no node created');
    await waitNodesReady(e.kc, [doomed]);
    await e.custom.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: NS,
      plural: PLURAL,
      body: {
        apiVersion: `${GROUP}/${VERSION}`,
        kind: 'DistributedLock',
        metadata: { name: LOCK },
        spec: {
          leaseDurationSeconds: LEASE_SECONDS,
          lockDelaySeconds: LOCK_DELAY_SECONDS,
          mode: 'Election',
          candidates: { selector: { matchLabels: { app: LOCK } } },
        },
      },
    });
    await e.core.createNamespacedPod({ namespace: NS, body: aPod('holder', doomed, [KEEP]) });
    try {
      // 1. The pod on the doomed node is granted the lock; nobody renews it from then on.
      const granted = await eventually(
        async () => {
          const lease = await e.leases.readNamespacedLease({ namespace: NS, name: leaseName(LOCK) });
          expect(parseLease(lease).holder?.name).toBe('holder');
          return lease;
        },
        60_000,
        200,
      );
      const lastRenewal = new Date(granted.spec?.renewTime ?? 0).getTime();
      expect(lastRenewal).toBeGreaterThan(0);

      // 2. A candidate on a surviving node.
      await e.core.createNamespacedPod({ namespace: NS, body: aPod('survivor', e.cluster.nodes[0] ?? '') });
      await eventually(
        async () => {
          const p = await e.core.readNamespacedPod({ namespace: NS, name: 'survivor' });
          expect(p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')).toBe(true);
        },
        60_000,
        200,
      );

      // 3. The node goes. Watch the holder pod (for the pod GC's mark) and the Lease until the survivor holds it.
      await e.kubectl(['delete', 'node', doomed, '--wait=false']);
      let failedAt: number | undefined;
      let failedPod: V1Pod | undefined;
      const deadline = lastRenewal + (LEASE_SECONDS + LOCK_DELAY_SECONDS + 90) * 1000;
      let successor: { name: string | undefined; acquireTime: number } | undefined;
      while (successor === undefined) {
        if (Date.now() > deadline) throw new Error(`no successor by the deadline\n${await dumpDiagnostics(e, NS)}`);
        const pod = await e.core.readNamespacedPod({ namespace: NS, name: 'holder' }).catch(() => undefined);
        if (failedAt === undefined && pod?.status?.phase === 'Failed') {
          failedAt = Date.now();
          failedPod = pod;
        }
        const lease = await e.leases.readNamespacedLease({ namespace: NS, name: leaseName(LOCK) });
        const r = parseLease(lease);
        if (r.holder !== undefined && r.holder.name !== 'holder')
          successor = { name: r.holder.name, acquireTime: new Date(lease.spec?.acquireTime ?? 0).getTime() };
        await sleep(200);
      }

      // The scenario happened: the pod GC marked the holder Failed while its containers still ran,
      // and did so well inside the lease (else this test would prove nothing).
      expect(failedAt, 'the pod GC never marked the holder pod Failed').toBeDefined();
      expect(
        failedPod?.status?.conditions?.find((c) => c.type === 'DisruptionTarget')?.reason,
        JSON.stringify(failedPod?.status),
      ).toBe('DeletionByPodGC');
      expect(failedPod?.status?.containerStatuses?.every((s) => s.state?.running !== undefined)).toBe(true);
      expect((failedAt ?? Infinity) - lastRenewal).toBeLessThan(LEASE_SECONDS * 1000);

      // The claim: no grant before the lease plus the lock delay since the holder's last renewal.
      const waitedMs = successor.acquireTime - lastRenewal;
      process.stderr.write(
        `[e2e] node loss: pod GC marked the holder Failed ${(((failedAt ?? 0) - lastRenewal) / 1000).toFixed(1)} s ` +
          `after its last renewal; ${successor.name ?? '?'} granted ${(waitedMs / 1000).toFixed(1)} s after it\n`,
      );
      expect(successor.name).toBe('survivor');
      expect(
        waitedMs,
        `granted ${(waitedMs / 1000).toFixed(1)} s after the holder's last renewal; ` +
          `lease ${LEASE_SECONDS} s + lock delay ${LOCK_DELAY_SECONDS} s`,
      ).toBeGreaterThanOrEqual((LEASE_SECONDS + LOCK_DELAY_SECONDS) * 1000);
    } finally {
      await e
        .kubectl([
          'patch',
          'pod',
          '-n',
          NS,
          'holder',
          '--type=json',
          '-p',
          '[{"op":"remove","path":"/metadata/finalizers"}]',
        ])
        .catch(() => undefined);
    }
  }, 360_000);
});
