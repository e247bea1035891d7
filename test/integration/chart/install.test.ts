import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  AdmissionregistrationV1Api,
  CoordinationV1Api,
  CoreV1Api,
  KubeConfig,
  RbacAuthorizationV1Api,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LockSnapshot } from '../../../src/agent/session.ts';
import { renewedLease } from '../../../src/lease/record.ts';
import { allowed, describeAccess, helm, installChart, runDeployment, type Access } from '../../support/chart.ts';
import { writeServiceAccountKubeconfig } from '../../support/cluster/identity.ts';
import { FENCEPOST_MAIN } from '../../support/cluster/pod-runner.ts';
import { getStatus } from '../../support/testbed/http-probe.ts';
import { freePort } from '../../support/testbed/ports.ts';
import { spawnManaged, tailLog, type ManagedProcess } from '../../support/testbed/processes.ts';
import { eventually, freshNamespace, sharedKubeConfig } from '../../support/env.ts';
import {
  createLock,
  deleteLock,
  setPodStatus,
  getLease,
  getLock,
  lockBody,
  testKube,
  type TestKube,
} from '../../support/fixtures.ts';

function fromFile(file: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(file);
  return kc;
}

// A real `helm install` of the chart on the shared API server, then the controller run as a local
// process with the chart's ServiceAccount token and the Deployment's own args, and agents with the
// chart's agent ServiceAccount bound to their pods: the chart's RBAC is enough for the whole lock
// life cycle (with the chart's agent admission policies on), and every verb the two identities
// should not have is denied.
describe('helm install of the chart: the RBAC it grants is enough, and no more', () => {
  const admin = sharedKubeConfig();
  const release = `rbac${Math.random().toString(36).slice(2, 7)}`;
  let t: TestKube;
  let dir = '';
  let controller: ManagedProcess | undefined;
  let metricsPort = 0;
  let controllerKc: KubeConfig;
  let agentKc: KubeConfig;
  let controllerSa = '';
  const agents: ManagedProcess[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fencepost-install-'));
    t = testKube(admin, await freshNamespace(admin, 'install-'));
    // installChart keeps the CRD off and the Lease protection to this namespace (the API server is shared).
    const [deployment] = await installChart(release, t.namespace, [
      `agentRbac.namespaces={${t.namespace}}`,
      'leaderElection.leaseDuration=4s',
      'leaderElection.renewDeadline=3s',
      'leaderElection.retryPeriod=1s',
      'logLevel=debug',
    ]);
    if (deployment === undefined) throw new Error('the release has no Deployment');
    const r = await runDeployment(deployment, {
      name: 'controller',
      namespace: t.namespace,
      dir,
      // The chart's controller watches every namespace (and its ClusterRole is what this file
      // checks), but this API server is shared: run it on its own namespace only, else it reconciles
      // (grants, revokes) the other test files' locks with its own fencing backend — a CI run saw
      // kubectl-plugin.test.ts's lock granted a token while that lock's own Redis was unreachable.
      extraArgs: [`--namespace=${t.namespace}`],
      env: { POD_NAME: `${release}-controller-0`, POD_NAMESPACE: t.namespace },
    });
    controller = r.process;
    controllerKc = r.kc;
    controllerSa = r.serviceAccount;
    expect(controllerSa).toBe(`${release}-fencepost`);
    metricsPort = r.ports.get(8443) ?? 0;
    agentKc = fromFile(
      await writeServiceAccountKubeconfig(admin, t.namespace, 'fencepost-agent', join(dir, 'agent.kubeconfig')),
    );
  });
  afterAll(async () => {
    await admin
      .makeApiClient(RbacAuthorizationV1Api)
      .deleteClusterRoleBinding({ name: `${release}-prometheus` })
      .catch(() => undefined);
    await Promise.all(agents.map((a) => a.stop()));
    await controller?.stop();
    await helm(['uninstall', release, '--namespace', t.namespace]).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });

  it("installs every object, and the chart-configured controller becomes leader and ready with the chart's identity", async () => {
    const status = await helm(['status', release, '--namespace', t.namespace, '-o', 'json']);
    expect(JSON.parse(status.stdout)).toMatchObject({ info: { status: 'deployed' } });
    const lease = await eventually(async () => {
      const l = await t.leases.readNamespacedLease({ namespace: t.namespace, name: 'fencepost-controller' });
      expect(l.spec?.holderIdentity).toMatch(new RegExp(`^${release}-controller-0_`));
      return l;
    }, 30_000);
    expect(lease.metadata?.namespace).toBe(t.namespace);
    // Every admission binding the release made is scoped to its own namespace (see beforeAll), but
    // the controller's: those apply wherever the controller writes, and only to the requests of
    // this release's controller ServiceAccount (their policies' match condition), so they leave
    // the other test files on this API server alone.
    const adm = admin.makeApiClient(AdmissionregistrationV1Api);
    const all = (await adm.listValidatingAdmissionPolicyBinding()).items.filter((b) =>
      b.metadata?.name?.startsWith(`${release}-`),
    );
    const controllerBindings = all.filter((b) => b.metadata?.name?.startsWith(`${release}-fencepost-controller-`));
    expect(controllerBindings.map((b) => b.metadata?.name).sort()).toEqual([
      `${release}-fencepost-controller-leases`,
      `${release}-fencepost-controller-pods`,
    ]);
    for (const b of controllerBindings) {
      const policy = await adm.readValidatingAdmissionPolicy({ name: b.spec?.policyName ?? '' });
      expect(policy.spec?.matchConditions?.map((c) => c.expression)).toEqual([
        `request.userInfo.username == "system:serviceaccount:${t.namespace}:${release}-fencepost"`,
      ]);
    }
    const bindings = all.filter((b) => !controllerBindings.includes(b));
    expect(bindings.map((b) => b.metadata?.name).sort()).toContain(`${release}-fencepost-leases`);
    for (const b of bindings) {
      expect(b.spec?.matchResources?.namespaceSelector?.matchExpressions?.[0]?.values, b.metadata?.name).toEqual([
        t.namespace,
      ]);
    }
    // /metrics over HTTPS (a self-signed certificate: no metrics.certSecret), answered only to a
    // token whose user the chart's metrics-reader ClusterRole lets in; the controller checks it with
    // its own ServiceAccount (the chart's metrics-auth ClusterRole).
    const url = `https://127.0.0.1:${metricsPort}/metrics`;
    const core = admin.makeApiClient(CoreV1Api);
    const tokenOf = async (name: string): Promise<string> => {
      await core.createNamespacedServiceAccount({ namespace: t.namespace, body: { metadata: { name } } });
      const tr = await core.createNamespacedServiceAccountToken({
        namespace: t.namespace,
        name,
        body: { spec: { audiences: [], expirationSeconds: 3600 } },
      });
      return tr.status?.token ?? '';
    };
    const prometheus = await tokenOf('prometheus');
    const stranger = await tokenOf('stranger');
    await admin.makeApiClient(RbacAuthorizationV1Api).createClusterRoleBinding({
      body: {
        metadata: { name: `${release}-prometheus` },
        roleRef: {
          apiGroup: 'rbac.authorization.k8s.io',
          kind: 'ClusterRole',
          name: `${release}-fencepost-metrics-reader`,
        },
        subjects: [{ kind: 'ServiceAccount', name: 'prometheus', namespace: t.namespace }],
      },
    });
    const scrape = (token?: string) =>
      getStatus(url, undefined, 2000, {
        insecure: true,
        ...(token !== undefined ? { headers: { authorization: `Bearer ${token}` } } : {}),
      });
    await eventually(async () => {
      const m = await scrape(prometheus);
      expect(m.body).toMatch(/^leader_election_master_status\{name="fencepost-controller"\} 1$/m);
    }, 30_000);
    expect((await scrape()).status).toBe(401);
    expect((await scrape(stranger)).status).toBe(403);
  });

  it("grants, hands off and cleans up a lock with agents on the chart's agent ServiceAccount; no request is forbidden", async () => {
    const uids: string[] = [];
    for (const i of [0, 1]) {
      // A bound token must name a pod running as that ServiceAccount (the API server checks).
      const pod = await t.core.createNamespacedPod({
        namespace: t.namespace,
        body: {
          metadata: { name: `svc-${i}`, labels: { app: 'svc' } },
          spec: {
            serviceAccountName: 'fencepost-agent',
            containers: [{ name: 'app', image: 'example.invalid/app:1' }],
          },
        },
      });
      uids.push(pod.metadata?.uid ?? '');
      await setPodStatus(t, `svc-${i}`, 'ready');
    }
    const ports: number[] = [];
    for (const i of [0, 1]) {
      const port = await freePort();
      ports.push(port);
      const kubeconfig = await writeServiceAccountKubeconfig(
        admin,
        t.namespace,
        'fencepost-agent',
        join(dir, `agent-${i}.kubeconfig`),
        { name: `svc-${i}`, uid: uids[i] ?? '' },
      );
      agents.push(
        spawnManaged(`agent-${i}`, process.execPath, {
          args: [
            FENCEPOST_MAIN,
            'agent',
            '--lock',
            'svc',
            '--listen',
            `127.0.0.1:${port}`,
            '--health-probe-bind-address=0',
            '--metrics-bind-address=0',
          ],
          logFile: join(dir, `agent-${i}.log`),
          env: {
            ...process.env,
            KUBECONFIG: kubeconfig,
            POD_NAME: `svc-${i}`,
            POD_NAMESPACE: t.namespace,
            POD_UID: uids[i] ?? '',
          },
        }),
      );
    }
    await createLock(t, lockBody('svc', 'svc', { leaseDurationSeconds: 3 }));
    const snap = async (i: number): Promise<LockSnapshot> =>
      JSON.parse((await getStatus(`http://127.0.0.1:${ports[i] ?? 0}/v1/locks/svc`)).body) as LockSnapshot;
    const first = await eventually(async () => {
      const s = [await snap(0), await snap(1)];
      expect(s.filter((x) => x.held)).toHaveLength(1);
      return s[0]?.held === true ? 0 : 1;
    }, 30_000);
    const token = BigInt((await snap(first)).token ?? '0');
    // The controller wrote the lock's status, labelled the holder pod, and recorded an Event.
    await eventually(async () => {
      const lock = await getLock(t, 'svc');
      expect(lock.status?.holder?.name).toBe(`svc-${first}`);
      const pod = await t.core.readNamespacedPod({ namespace: t.namespace, name: `svc-${first}` });
      expect(Object.values(pod.metadata?.annotations ?? {})).toContain(token.toString());
      const events = await t.core.listNamespacedEvent({ namespace: t.namespace });
      expect(events.items.some((e) => e.involvedObject.kind === 'DistributedLock')).toBe(true);
    }, 20_000);
    // The holder's agent is stopped (SIGTERM releases): the other one is granted a larger token.
    await agents[first]?.stop();
    const second = 1 - first;
    await eventually(async () => {
      const s = await snap(second);
      expect(s.held).toBe(true);
      expect(BigInt(s.token ?? '0')).toBeGreaterThan(token);
    }, 20_000);
    // The chart's admission policies: the first pod's agent identity (a token bound to svc-<first>,
    // still valid) may not write the Lease svc-<second> now holds, though RBAC grants update on it.
    const held = await eventually(async () => {
      const l = await getLease(t, 'svc');
      expect(l?.spec?.holderIdentity).toMatch(new RegExp(`^svc-${second}/`));
      return l;
    }, 20_000);
    const other = fromFile(join(dir, `agent-${first}.kubeconfig`)).makeApiClient(CoordinationV1Api);
    const denied = await other
      .replaceNamespacedLease({
        namespace: t.namespace,
        name: held?.metadata?.name ?? '',
        body: renewedLease(held ?? {}, new Date()),
      })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(denied).toMatchObject({ code: 403 });
    expect(String((denied as { body?: unknown }).body)).toMatch(
      /spec\.holderIdentity: only the holder pod may write this Lease/,
    );
    // The real holder's agent still renews through the same policies.
    const renewedBefore = String(held?.spec?.renewTime);
    await eventually(async () => {
      const l = await getLease(t, 'svc');
      expect(l?.spec?.holderIdentity).toBe(held?.spec?.holderIdentity);
      expect(String(l?.spec?.renewTime)).not.toBe(renewedBefore);
    }, 20_000);
    // Deleting the lock runs the finalizer: the Lease goes, then the lock.
    await deleteLock(t, 'svc');
    await eventually(async () => {
      expect(await getLease(t, 'svc')).toBeUndefined();
      await expect(getLock(t, 'svc')).rejects.toMatchObject({ code: 404 });
    }, 20_000);
    for (const log of [controller?.logFile ?? '', ...agents.map((a) => a.logFile)]) {
      expect(tailLog(log, 100_000), log).not.toMatch(/forbidden|"code":403|"statusCode":403|HTTP 403/i);
    }
  });

  it('the controller ServiceAccount may do exactly what the controller does', async () => {
    const ns = t.namespace;
    const granted: Access[] = [
      { verb: 'list', resource: 'distributedlocks', group: 'fencepost.io' },
      { verb: 'watch', resource: 'distributedlocks', group: 'fencepost.io' },
      { verb: 'patch', resource: 'distributedlocks', group: 'fencepost.io', namespace: 'any' },
      { verb: 'patch', resource: 'distributedlocks', group: 'fencepost.io', subresource: 'status', namespace: 'any' },
      {
        verb: 'update',
        resource: 'distributedlocks',
        group: 'fencepost.io',
        subresource: 'finalizers',
        namespace: 'any',
      },
      { verb: 'create', resource: 'leases', group: 'coordination.k8s.io', namespace: 'any' },
      { verb: 'update', resource: 'leases', group: 'coordination.k8s.io', namespace: 'any' },
      { verb: 'delete', resource: 'leases', group: 'coordination.k8s.io', namespace: 'any' },
      { verb: 'list', resource: 'pods' },
      { verb: 'patch', resource: 'pods', namespace: 'any' },
      { verb: 'create', resource: 'events', namespace: 'any' },
      { verb: 'patch', resource: 'events', namespace: 'any' }, // a repeated Event's count
      // The secure metrics listener's checks of each scrape.
      { verb: 'create', resource: 'tokenreviews', group: 'authentication.k8s.io' },
      { verb: 'create', resource: 'subjectaccessreviews', group: 'authorization.k8s.io' },
    ];
    const denied: Access[] = [
      { verb: 'get', resource: 'secrets', namespace: ns },
      { verb: 'list', resource: 'secrets' },
      { verb: 'watch', resource: 'configmaps' },
      { verb: 'create', resource: 'pods', namespace: ns },
      { verb: 'update', resource: 'pods', namespace: ns },
      { verb: 'delete', resource: 'pods', namespace: ns },
      { verb: 'create', resource: 'pods', subresource: 'exec', namespace: ns },
      { verb: 'create', resource: 'pods', subresource: 'eviction', namespace: ns },
      { verb: 'update', resource: 'pods', subresource: 'status', namespace: ns },
      { verb: 'create', resource: 'distributedlocks', group: 'fencepost.io', namespace: ns },
      { verb: 'update', resource: 'distributedlocks', group: 'fencepost.io', namespace: ns },
      { verb: 'delete', resource: 'distributedlocks', group: 'fencepost.io', namespace: ns },
      { verb: 'deletecollection', resource: 'distributedlocks', group: 'fencepost.io', namespace: ns },
      { verb: 'update', resource: 'distributedlocks', group: 'fencepost.io', subresource: 'status', namespace: ns },
      { verb: 'deletecollection', resource: 'leases', group: 'coordination.k8s.io', namespace: ns },
      { verb: 'patch', resource: 'leases', group: 'coordination.k8s.io', namespace: ns },
      { verb: 'delete', resource: 'events', namespace: ns },
      { verb: 'patch', resource: 'deployments', group: 'apps', namespace: ns },
      { verb: 'create', resource: 'serviceaccounts', subresource: 'token', namespace: ns, name: controllerSa },
      { verb: 'get', resource: 'nodes' },
      { verb: 'create', resource: 'namespaces' },
      { verb: 'update', resource: 'customresourcedefinitions', group: 'apiextensions.k8s.io' },
      { verb: 'create', resource: 'clusterrolebindings', group: 'rbac.authorization.k8s.io' },
      { verb: 'escalate', resource: 'clusterroles', group: 'rbac.authorization.k8s.io' },
      { verb: 'bind', resource: 'clusterroles', group: 'rbac.authorization.k8s.io' },
      { verb: 'impersonate', resource: 'serviceaccounts', namespace: ns },
      { verb: 'create', resource: 'validatingadmissionpolicies', group: 'admissionregistration.k8s.io' },
    ];
    for (const a of granted) expect(await allowed(controllerKc, a), `controller may ${describeAccess(a)}`).toBe(true);
    for (const a of denied)
      expect(await allowed(controllerKc, a), `controller may not ${describeAccess(a)}`).toBe(false);
    // And real requests, not only reviews: reading a Secret and deleting a pod are refused with 403.
    const core = controllerKc.makeApiClient(CoreV1Api);
    await expect(core.listNamespacedSecret({ namespace: ns })).rejects.toMatchObject({ code: 403 });
    await expect(core.deleteNamespacedPod({ namespace: ns, name: 'svc-0' })).rejects.toMatchObject({ code: 403 });
  });

  it('the agent ServiceAccount may renew Leases and patch pods in its namespace, and nothing more', async () => {
    const ns = t.namespace;
    const granted: Access[] = [
      { verb: 'get', resource: 'leases', group: 'coordination.k8s.io', namespace: ns },
      { verb: 'watch', resource: 'leases', group: 'coordination.k8s.io', namespace: ns },
      { verb: 'update', resource: 'leases', group: 'coordination.k8s.io', namespace: ns },
      { verb: 'patch', resource: 'pods', namespace: ns },
      { verb: 'get', resource: 'distributedlocks', group: 'fencepost.io', namespace: ns },
      { verb: 'create', resource: 'events', namespace: ns }, // the LockLost Event on its own pod
      { verb: 'patch', resource: 'events', namespace: ns }, // ... and its count when it repeats
    ];
    const denied: Access[] = [
      { verb: 'create', resource: 'leases', group: 'coordination.k8s.io', namespace: ns },
      { verb: 'delete', resource: 'leases', group: 'coordination.k8s.io', namespace: ns },
      { verb: 'update', resource: 'leases', group: 'coordination.k8s.io', namespace: 'default' },
      { verb: 'list', resource: 'leases', group: 'coordination.k8s.io' },
      { verb: 'get', resource: 'secrets', namespace: ns },
      { verb: 'delete', resource: 'pods', namespace: ns },
      { verb: 'update', resource: 'pods', subresource: 'status', namespace: ns },
      { verb: 'patch', resource: 'distributedlocks', group: 'fencepost.io', namespace: ns },
      { verb: 'patch', resource: 'distributedlocks', group: 'fencepost.io', subresource: 'status', namespace: ns },
      { verb: 'create', resource: 'events', namespace: 'default' },
      { verb: 'update', resource: 'events', namespace: ns },
      { verb: 'patch', resource: 'pods', namespace: 'default' },
    ];
    for (const a of granted) expect(await allowed(agentKc, a), `agent may ${describeAccess(a)}`).toBe(true);
    for (const a of denied) expect(await allowed(agentKc, a), `agent may not ${describeAccess(a)}`).toBe(false);
  });
});
