import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { getLock, testKube } from '../support/fixtures.ts';
import { parseLease } from '../../src/lease/record.ts';
import { eventually } from '../support/env.ts';
import { ON_KUBELET, ROOT, SYSTEM_NAMESPACE, dumpDiagnostics, useSharedE2eCluster } from './e2e-cluster.ts';
import { believers, watchHolders, type HolderTerm } from './holders.ts';
import { leaseName } from '../../src/protocol/names.ts';
import type { LockDetail } from '../../src/dashboard/wire.ts';

const NS = 'e2e-singleton';
const LOCK = 'singleton';
const DEPLOYMENT = 'singleton-worker';

// examples/singleton-deployment.yaml on a cluster with scheduled pods: kube-scheduler places the
// Deployment's pods on kwok's nodes, they become Running and Ready, and each pod's agent sidecar
// runs as a local process with the pod's bound ServiceAccount token; the controller is the chart's
// Deployment (two replicas, leader election), run the same way.
describe('a 3-replica singleton Deployment with the agent sidecar (examples/singleton-deployment.yaml)', () => {
  // The chart's dashboard too, serving its Service, and the controllers' metrics over plain HTTP:
  // the run's cluster is installed with them (SHARED_VALUES in cluster-boot.ts). On the real node
  // (FENCEPOST_E2E_RUNTIME=kubelet) the kubelet runs every pod from the image.
  const e = useSharedE2eCluster(NS);

  /** pods lists the Deployment's pods that are Running, Ready and not terminating. */
  const readyPods = async (): Promise<{ name: string; hash: string; ip: string }[]> => {
    const list = await e.core.listNamespacedPod({ namespace: NS, labelSelector: `app=${DEPLOYMENT}` });
    return list.items
      .filter(
        (p) =>
          p.metadata?.deletionTimestamp === undefined &&
          p.status?.phase === 'Running' &&
          p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
      )
      .map((p) => ({
        name: p.metadata?.name ?? '',
        hash: p.metadata?.labels?.['pod-template-hash'] ?? '',
        ip: p.status?.podIP ?? '',
      }));
  };
  /** leaseHolder reads the Lease: the holder pod's name and the token. */
  const leaseHolder = async (): Promise<{
    holder: string | undefined;
    token: bigint | undefined;
    released: string | undefined;
  }> => {
    const lease = await e.leases.readNamespacedLease({ namespace: NS, name: leaseName(LOCK) });
    const r = parseLease(lease);
    return { holder: r.holder?.name, token: r.token, released: lease.metadata?.annotations?.['fencepost.io/release'] };
  };
  /** oneHolder waits until exactly one agent believes it holds the lock and the Lease agrees; returns it. */
  const oneHolder = async (
    among?: (pod: string) => boolean,
    timeoutMs = 60_000,
  ): Promise<{ pod: string; token: bigint }> =>
    eventually(
      async () => {
        const held = await believers(e, NS, LOCK);
        expect(held).toHaveLength(1);
        const [only] = held;
        if (only === undefined) throw new Error('unreachable');
        if (among !== undefined) expect(among(only.pod), `holder ${only.pod}`).toBe(true);
        const lease = await leaseHolder();
        expect(lease.holder).toBe(only.pod);
        expect(lease.token?.toString()).toBe(only.token);
        return { pod: only.pod, token: BigInt(only.token) };
      },
      timeoutMs,
      200,
    );
  /** increasing checks that each term's token is larger than the one before. */
  const expectIncreasing = (terms: readonly HolderTerm[]): void => {
    for (let i = 1; i < terms.length; i++)
      expect(
        (terms[i]?.token ?? 0n) > (terms[i - 1]?.token ?? 0n),
        `tokens ${terms.map((t) => `${t.holder}:${t.token}`).join(' → ')}`,
      ).toBe(true);
  };

  it('installs with helm (two controller replicas, one leading) and runs three Ready pods with exactly one holder', async () => {
    await eventually(
      async () => {
        const controllers = await e.running(SYSTEM_NAMESPACE, 'controller');
        expect(controllers).toHaveLength(2);
        const leading = await Promise.all(
          controllers.map(async (pod) =>
            /^leader_election_master_status\{name="fencepost-controller"\} 1$/m.test(
              (await e.podGet(SYSTEM_NAMESPACE, pod, 'controller', 8443, '/metrics')).body,
            ),
          ),
        );
        expect(leading.filter(Boolean)).toHaveLength(1);
      },
      60_000,
      250,
    );

    await e.kubectl(['apply', '-n', NS, '-f', join(ROOT, 'examples/singleton-deployment.yaml')]);
    await e.kubectl(['rollout', 'status', '-n', NS, `deployment/${DEPLOYMENT}`, '--timeout=90s']);
    const pods = await eventually(
      async () => {
        const p = await readyPods();
        expect(p).toHaveLength(3);
        return p;
      },
      60_000,
      200,
    );
    expect(new Set(pods.map((p) => p.hash)).size).toBe(1);
    const scheduled = await e.core.listNamespacedPod({ namespace: NS });
    expect(scheduled.items.every((p) => e.facts.nodes.includes(p.spec?.nodeName ?? ''))).toBe(true);

    const { pod, token } = await oneHolder().catch(async (err: unknown) => {
      throw new Error(`${String(err)}\n${await dumpDiagnostics(e, NS)}`);
    });
    const lock = await getLock(testKube(e.kc, NS), LOCK);
    expect(lock.status?.holder?.name).toBe(pod);
    expect(lock.status?.fencingToken).toBe(token.toString());
    // The holder-only Service routes to the holder alone (the EndpointSlice controller follows the label).
    const holderIp = pods.find((p) => p.name === pod)?.ip;
    await eventually(
      async () => {
        const slices = JSON.parse(
          await e.kubectl([
            'get',
            'endpointslices',
            '-n',
            NS,
            '-l',
            'kubernetes.io/service-name=singleton-active',
            '-o',
            'json',
          ]),
        ) as { items: { endpoints?: { addresses: string[] }[] }[] };
        expect(slices.items.flatMap((s) => s.endpoints ?? []).flatMap((ep) => ep.addresses)).toEqual([holderIp]);
      },
      30_000,
      250,
    );
  });

  it("the chart's dashboard, on its read-only ServiceAccount, shows the lock held by the holder with its token", async () => {
    const { pod, token } = await oneHolder();
    const dashboard = await eventually(
      async () => {
        const pods = (await e.running(SYSTEM_NAMESPACE, 'dashboard')).filter((p) =>
          p.startsWith('fencepost-dashboard-'),
        );
        expect(pods).toHaveLength(1);
        return pods[0] ?? '';
      },
      60_000,
      250,
    );
    const get = (path: string): Promise<{ status: number; body: string }> =>
      e.podGet(SYSTEM_NAMESPACE, dashboard, 'dashboard', 8300, path);
    await eventually(
      async () => {
        const r = await get(`/api/locks/${NS}/${LOCK}`);
        expect(r.status).toBe(200);
        const view = (JSON.parse(r.body) as LockDetail).lock;
        expect([view.holder, view.token, view.state]).toEqual([pod, token.toString(), 'Held']);
      },
      30_000,
      250,
    );
    expect((await get(`/api/raw/pods/${NS}/${pod}`)).status).toBe(200);
  });

  it('kubectl rollout restart: the lock moves to a new pod with a larger token, and there are never two holders', async () => {
    const before = await oneHolder();
    const oldHash = (await readyPods()).find((p) => p.name === before.pod)?.hash ?? '';
    const watch = watchHolders(e, NS, LOCK);
    await e.kubectl(['rollout', 'restart', '-n', NS, `deployment/${DEPLOYMENT}`]);
    await e.kubectl(['rollout', 'status', '-n', NS, `deployment/${DEPLOYMENT}`, '--timeout=120s']);
    const newPods = new Set(
      (
        await eventually(
          async () => {
            const p = await readyPods();
            expect(p).toHaveLength(3);
            expect(p.every((x) => x.hash !== oldHash)).toBe(true);
            return p;
          },
          90_000,
          250,
        )
      ).map((p) => p.name),
    );
    const after = await oneHolder((pod) => newPods.has(pod));
    const report = await watch.stop();
    expect(after.token).toBeGreaterThan(before.token);
    expect(report.overlaps).toEqual([]);
    // The watch saw the old holder's term first and the new one's last (below), so it covered the
    // handover; with the agent executable ready in ~0.1 s a rollout of 3 pods can take under 1 s
    // (6 polls at 100 ms), so only ask that it polled more than once.
    expect(report.rounds).toBeGreaterThan(1);
    expect(report.terms.at(0)?.holder).toBe(before.pod);
    expect(report.terms.at(-1)?.holder).toBe(after.pod);
    expectIncreasing(report.terms);
    process.stderr.write(
      `[e2e] rollout restart: ${report.terms.map((t) => `${t.holder}:${t.token}`).join(' → ')} (${report.rounds} polls, at most ${report.maxBelievers} held answers in one poll, none proven at once)\n`,
    );
  });

  it('kubectl delete pod of the holder: another pod holds the lock with a larger token well before the lease could expire', async () => {
    const before = await oneHolder();
    const watch = watchHolders(e, NS, LOCK, 50);
    const started = performance.now();
    await e.kubectl(['delete', 'pod', '-n', NS, before.pod, '--wait=false']);
    const after = await oneHolder((pod) => pod !== before.pod, 30_000);
    const handoffMs = performance.now() - started;
    const report = await watch.stop();
    expect(after.token).toBeGreaterThan(before.token);
    expect(report.overlaps).toEqual([]);
    expectIncreasing(report.terms);
    // The lease is 15 s: a successor after an expiry would need at least that. The release on
    // SIGTERM makes it a matter of the pod runner's poll, the release and one reconcile.
    expect(handoffMs).toBeLessThan(15_000);
    process.stderr.write(
      `[e2e] delete pod ${before.pod} → ${after.pod} holds token ${after.token} after ${Math.round(handoffMs)} ms\n`,
    );
  });

  // The kubelet's restart of a crashed native sidecar (restartPolicy: Always), on the real node
  // only: the agent process of the holder pod is SIGKILLed (as an OOM kill would) while the
  // application runs. The kubelet starts the agent again in the same pod, the application
  // container is left running, and the restarted agent takes the pod's term up — the Lease still
  // names the pod — with the same token: no other pod is granted, no new term begins.
  it.skipIf(!ON_KUBELET)(
    "a crashed agent sidecar: the kubelet restarts it while the app runs on, and it keeps the pod's term with the same token",
    async () => {
      const before = await oneHolder();
      const statusOf = async (): Promise<{
        agent: { restarts: number; running: boolean; ready: boolean; id: string };
        app: { restarts: number; running: boolean; id: string };
      }> => {
        const p = await e.core.readNamespacedPod({ namespace: NS, name: before.pod });
        const agent = p.status?.initContainerStatuses?.find((c) => c.name === 'fencepost-agent');
        const app = p.status?.containerStatuses?.find((c) => c.name === 'worker');
        return {
          agent: {
            restarts: agent?.restartCount ?? -1,
            running: agent?.state?.running !== undefined,
            ready: agent?.ready === true,
            id: agent?.containerID ?? '',
          },
          app: {
            restarts: app?.restartCount ?? -1,
            running: app?.state?.running !== undefined,
            id: app?.containerID ?? '',
          },
        };
      };
      const start = await statusOf();
      expect(start.app.running && start.agent.running, JSON.stringify(start)).toBe(true);
      const leaseBefore = await e.leases.readNamespacedLease({ namespace: NS, name: leaseName(LOCK) });
      const events = e.node.events();
      const watch = watchHolders(e, NS, LOCK, 100);
      const pid = e.node.containerPid(NS, before.pod, 'fencepost-agent');
      if (pid === undefined) throw new Error(`no running fencepost-agent in ${before.pod}`);
      const killedAt = Date.now();
      process.kill(pid, 'SIGKILL');
      // The kubelet notices the exit, starts the agent again, and its startupProbe passes.
      const restarted = await eventually(
        async () => {
          const s = await statusOf();
          expect(s.agent.restarts).toBe(start.agent.restarts + 1);
          expect(s.agent.running && s.agent.ready, JSON.stringify(s)).toBe(true);
          return s;
        },
        60_000,
        200,
      );
      const after = await oneHolder(undefined, 30_000);
      const report = await watch.stop();
      await events.stop();
      const leaseAfter = await e.leases.readNamespacedLease({ namespace: NS, name: leaseName(LOCK) });
      const mine = events.list().filter((ev) => ev.namespace === NS && ev.pod === before.pod);
      const agentExit = mine.find((ev) => ev.container === 'fencepost-agent' && ev.what === 'exit');
      const agentStart = mine.find((ev) => ev.container === 'fencepost-agent' && ev.what === 'start');
      process.stderr.write(
        `[e2e] crashed sidecar: agent of ${before.pod} SIGKILLed (exit ${String(agentExit?.exitStatus)} at +${(agentExit?.at ?? 0) - killedAt} ms), ` +
          `restarted by the kubelet at +${(agentStart?.at ?? 0) - killedAt} ms, held again with token ${after.token} ` +
          `${Date.now() - killedAt} ms after the kill; terms ${report.terms.map((t) => `${t.holder}:${t.token}`).join(' → ')}\n`,
      );
      // The runtime saw the agent die of SIGKILL and start again, and nothing else of the pod.
      expect(agentExit?.exitStatus).toBe(137);
      expect(agentStart?.at ?? 0).toBeGreaterThanOrEqual(agentExit?.at ?? Infinity);
      expect(
        mine.filter((ev) => ev.container !== 'fencepost-agent'),
        JSON.stringify(mine),
      ).toEqual([]);
      // The application ran on: the same container, never restarted.
      expect(restarted.app).toEqual(start.app);
      expect(restarted.agent.id).not.toBe(start.agent.id);
      // The same pod keeps the same term: same token, no new transition on the Lease, and nobody
      // else was ever named or believed to hold it.
      expect(after).toEqual(before);
      expect(parseLease(leaseAfter).token).toBe(before.token);
      expect(leaseAfter.spec?.leaseTransitions).toBe(leaseBefore.spec?.leaseTransitions);
      expect(report.terms).toEqual([{ holder: before.pod, token: before.token }]);
      expect(report.overlaps).toEqual([]);
    },
    120_000,
  );

  it('scale to 0: the lock is released and nobody holds it', async () => {
    await oneHolder();
    await e.kubectl(['scale', '-n', NS, `deployment/${DEPLOYMENT}`, '--replicas=0']);
    await eventually(
      async () => {
        const list = await e.core.listNamespacedPod({ namespace: NS, labelSelector: `app=${DEPLOYMENT}` });
        expect(list.items).toHaveLength(0);
      },
      90_000,
      250,
    );
    const lease = await eventually(
      async () => {
        const l = await leaseHolder();
        expect(l.holder).toBeUndefined();
        return l;
      },
      30_000,
      200,
    );
    expect(lease.released).toBe('Released');
    expect(await believers(e, NS, LOCK)).toEqual([]);
    const lock = await getLock(testKube(e.kc, NS), LOCK);
    expect(lock.status?.holder).toBeUndefined();
  });
});
