import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { createLock, lockBody, testKube } from '../support/fixtures.ts';
import { parseLease } from '../../src/lease/record.ts';
import { leaseName } from '../../src/protocol/names.ts';
import { eventually } from '../support/env.ts';
import { createNodes, waitNodesReady } from '../support/cluster/nodes.ts';
import { EXAMPLE_APP_IMAGE, IMAGE, ON_KUBELET, SPARE_TAINT, dumpDiagnostics, useE2eCluster } from './e2e-cluster.ts';
import { snapshotOf, watchHolders } from './holders.ts';

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
// kwok's nodes only (FENCEPOST_E2E_RUNTIME unset or crun): it creates a fake node to lose. On the
// real node the describe below loses a second kubelet instead.
describe.skipIf(ON_KUBELET)('a holder whose node is deleted (pod GC marks its pod Failed)', () => {
  const e = useE2eCluster([NS]);

  it('is not replaced before the lease and the lock delay have passed since its last renewal', async () => {
    const [doomed] = await createNodes(e.kc, 1, 'doomed');
    if (doomed === undefined) throw new Error('no node created');
    await waitNodesReady(e.kc, [doomed]);
    await createLock(
      testKube(e.kc, NS),
      lockBody(LOCK, LOCK, {
        leaseDurationSeconds: LEASE_SECONDS,
        lockDelaySeconds: LOCK_DELAY_SECONDS,
        mode: 'Election',
      }),
    );
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
      await e.core.createNamespacedPod({ namespace: NS, body: aPod('survivor', e.facts.nodes[0] ?? '') });
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

const REAL_LEASE_SECONDS = 15;
const REAL_LOCK_DELAY_SECONDS = 5;
/** NODE_GRACE is kube-controller-manager's node-monitor grace period in this file: NotReady that long after the last heartbeat. */
const NODE_GRACE = '20s';

/** agentPod is a candidate pod with the agent sidecar from the image, bound to node. */
function agentPod(name: string, node: string): V1Pod {
  const fieldEnv = (
    envName: string,
    path: string,
  ): { name: string; valueFrom: { fieldRef: { fieldPath: string } } } => ({
    name: envName,
    valueFrom: { fieldRef: { fieldPath: path } },
  });
  return {
    metadata: { name, labels: { app: LOCK } },
    spec: {
      nodeName: node,
      serviceAccountName: 'fencepost-agent',
      tolerations: [{ key: SPARE_TAINT, operator: 'Exists', effect: 'NoSchedule' }],
      securityContext: { runAsNonRoot: true, runAsUser: 65532, seccompProfile: { type: 'RuntimeDefault' } },
      initContainers: [
        {
          name: 'fencepost-agent',
          image: IMAGE,
          restartPolicy: 'Always',
          command: ['/app/bin/fencepost-agent'],
          args: ['agent', `--lock=${LOCK}`, '--listen=127.0.0.1:7370', '--health-probe-bind-address=:8081'],
          env: [
            fieldEnv('POD_NAME', 'metadata.name'),
            fieldEnv('POD_NAMESPACE', 'metadata.namespace'),
            fieldEnv('POD_UID', 'metadata.uid'),
          ],
          startupProbe: { httpGet: { path: '/readyz', port: 8081 }, periodSeconds: 1, failureThreshold: 120 },
          readinessProbe: { httpGet: { path: '/readyz', port: 8081 }, periodSeconds: 2 },
          securityContext: {
            allowPrivilegeEscalation: false,
            readOnlyRootFilesystem: true,
            capabilities: { drop: ['ALL'] },
          },
        },
      ],
      containers: [
        {
          name: 'app',
          image: EXAMPLE_APP_IMAGE,
          securityContext: {
            allowPrivilegeEscalation: false,
            readOnlyRootFilesystem: true,
            capabilities: { drop: ['ALL'] },
          },
        },
      ],
    },
  };
}

/** rssMiB is a process's resident memory (VmRSS) in MiB. */
function rssMiB(pid: number): number {
  const kb = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return Math.round(Number(kb ?? 0) / 102.4) / 10;
}

// The same claim on kubelets, with a node that is really lost: two real nodes on this host (the
// spare one with its own containerd, kubelet, bridge, subnet and cgroup root). The holder's pod runs
// on the spare node, a candidate on the first (with the controller). The spare node then dies as a
// machine does: its kubelet stopped and every process of its pods frozen (the cgroup freezer) —
// nothing renews, nothing exits, nothing reports. kube-controller-manager marks the Node NotReady
// after its grace period; the lock goes to the candidate only once the lease and the lock delay ran
// out since the holder's last renewal, with a larger token.
describe.runIf(ON_KUBELET)('a holder whose real node is lost (kubelet stopped, its pods frozen)', () => {
  const e = useE2eCluster([NS], [], { spareNode: true, nodeMonitorGracePeriod: NODE_GRACE });

  it('the Node goes NotReady; the pod on the other node is granted only after the lease and the lock delay since the last renewal, with a larger token', async () => {
    const spare = e.spare;
    process.stderr.write(`[e2e] two real nodes:\n${await e.kubectl(['get', 'nodes', '-o', 'wide'])}`);
    process.stderr.write(
      `[e2e] spare node ${spare.name}: kubelet ${rssMiB(spare.kubelet().pid)} MiB, containerd ${rssMiB(spare.containerd.pid)} MiB RSS\n`,
    );
    await createLock(
      testKube(e.kc, NS),
      lockBody(LOCK, LOCK, {
        leaseDurationSeconds: REAL_LEASE_SECONDS,
        lockDelaySeconds: REAL_LOCK_DELAY_SECONDS,
        mode: 'Election',
      }),
    );
    await e.core.createNamespacedPod({ namespace: NS, body: agentPod('holder', spare.name) });
    const held = await eventually(
      async () => {
        const snap = await snapshotOf(e, NS, 'holder', LOCK);
        expect(snap?.held).toBe(true);
        return BigInt(snap?.token ?? '0');
      },
      90_000,
      250,
    ).catch(async (err: unknown) => {
      throw new Error(`${String(err)}\n${await dumpDiagnostics(e, NS)}`);
    });
    await e.core.createNamespacedPod({ namespace: NS, body: agentPod('survivor', e.node.name) });
    await eventually(
      async () => {
        const p = await e.core.readNamespacedPod({ namespace: NS, name: 'survivor' });
        expect(p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')).toBe(true);
      },
      90_000,
      250,
    );
    const watch = watchHolders(e, NS, LOCK, 250);
    try {
      // The spare node dies: its pods frozen first (the agent's next renewal never goes out), then its kubelet.
      const lostMs = Date.now();
      spare.freezePods();
      await spare.stopKubelet();
      let lastRenewal = 0;
      let notReadyMs: number | undefined;
      let successor: { name: string | undefined; token: bigint | undefined; acquireTime: number } | undefined;
      const deadline = lostMs + 120_000;
      while (successor === undefined || notReadyMs === undefined) {
        if (Date.now() > deadline)
          throw new Error(
            `by the deadline: successor ${JSON.stringify(successor?.name)}, node NotReady ${String(notReadyMs)}\n${await dumpDiagnostics(e, NS)}`,
          );
        const [lease, node] = await Promise.all([
          e.leases.readNamespacedLease({ namespace: NS, name: leaseName(LOCK) }),
          e.core.readNode({ name: spare.name }),
        ]);
        const r = parseLease(lease);
        if (r.holder?.name === 'holder') lastRenewal = new Date(lease.spec?.renewTime ?? 0).getTime();
        else if (r.holder !== undefined && successor === undefined)
          successor = {
            name: r.holder.name,
            token: r.token,
            acquireTime: new Date(lease.spec?.acquireTime ?? 0).getTime(),
          };
        const ready = node.status?.conditions?.find((c) => c.type === 'Ready');
        if (notReadyMs === undefined && ready?.status !== 'True') notReadyMs = Date.now();
        await sleep(200);
      }
      const report = await watch.stop();
      const waitedMs = successor.acquireTime - lastRenewal;
      process.stderr.write(
        `[e2e] real node loss: ${spare.name} NotReady ${((notReadyMs - lostMs) / 1000).toFixed(1)} s after it was lost; ` +
          `${successor.name ?? '?'} granted token ${String(successor.token)} ${(waitedMs / 1000).toFixed(1)} s after the holder's last renewal ` +
          `(lease ${REAL_LEASE_SECONDS} s + lock delay ${REAL_LOCK_DELAY_SECONDS} s); terms ${report.terms.map((t) => `${t.holder}:${t.token}`).join(' → ')}\n`,
      );
      expect(lastRenewal).toBeGreaterThan(0);
      expect(successor.name).toBe('survivor');
      expect(successor.token ?? 0n).toBeGreaterThan(held);
      expect(
        waitedMs,
        `granted ${(waitedMs / 1000).toFixed(1)} s after the holder's last renewal; ` +
          `lease ${REAL_LEASE_SECONDS} s + lock delay ${REAL_LOCK_DELAY_SECONDS} s`,
      ).toBeGreaterThanOrEqual((REAL_LEASE_SECONDS + REAL_LOCK_DELAY_SECONDS) * 1000);
      expect(report.terms.map((t) => t.holder)).toEqual(['holder', 'survivor']);
      expect(report.overlaps).toEqual([]);
      // The survivor's agent agrees, with the new token.
      await eventually(
        async () => {
          const snap = await snapshotOf(e, NS, 'survivor', LOCK);
          expect([snap?.held, snap?.token]).toEqual([true, String(successor.token)]);
        },
        30_000,
        250,
      );
    } finally {
      spare.thawPods();
    }
  }, 240_000);
});
