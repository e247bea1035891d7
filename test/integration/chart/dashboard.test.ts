/**
 * The chart's dashboard (`dashboard.enabled=true`), installed with `helm install` on the shared API
 * server, then run as a local process with the chart's dashboard ServiceAccount token and its
 * Deployment's own args (the address moved to a free loopback port, as the e2e pod runner does):
 * that RBAC is enough to show a held lock with its holder and token and to answer the page's links
 * (Lease, holder pod, Events), nothing it asked for was forbidden, and it may read and nothing more.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { AuthorizationV1Api, KubeConfig, loadAllYaml, type V1Deployment } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Snapshot } from '../../../src/dashboard/wire.ts';
import { microTime } from '../../../src/lease/record.ts';
import { LOCK_LABEL, TOKEN_ANNOTATION, leaseName } from '../../../src/protocol/names.ts';
import { writeServiceAccountKubeconfig } from '../../support/cluster/identity.ts';
import { FENCEPOST_MAIN, rewriteAddresses } from '../../support/cluster/pod-runner.ts';
import { findBinary } from '../../support/testbed/assets.ts';
import { spawnManaged, tailLog, type ManagedProcess } from '../../support/testbed/processes.ts';
import { eventually, freshNamespace, sharedKubeConfig, sharedKubeconfigPath } from '../../support/env.ts';
import { createLock, createPod, lockBody, testKube, type TestKube } from '../../support/fixtures.ts';

const run = promisify(execFile);
const chart = resolve(import.meta.dirname, '../../../charts/fencepost');

/** Access is one SelfSubjectAccessReview question: may this identity do verb on resource? */
interface Access {
  readonly verb: string;
  readonly resource: string;
  readonly group?: string;
  readonly subresource?: string;
  readonly namespace?: string;
}

const describeAccess = (a: Access): string =>
  `${a.verb} ${a.group !== undefined ? `${a.group}/` : ''}${a.resource}${a.subresource !== undefined ? `/${a.subresource}` : ''}${a.namespace !== undefined ? ` in ${a.namespace}` : ' (cluster)'}`;

async function allowed(kc: KubeConfig, a: Access): Promise<boolean> {
  const r = await kc.makeApiClient(AuthorizationV1Api).createSelfSubjectAccessReview({
    body: {
      spec: {
        resourceAttributes: {
          verb: a.verb,
          resource: a.resource,
          group: a.group ?? '',
          ...(a.subresource !== undefined ? { subresource: a.subresource } : {}),
          ...(a.namespace !== undefined ? { namespace: a.namespace } : {}),
        },
      },
    },
  });
  return r.status?.allowed === true;
}

describe('helm install with dashboard.enabled: a read-only dashboard on its own ServiceAccount', () => {
  const admin = sharedKubeConfig();
  const release = `dash${Math.random().toString(36).slice(2, 7)}`;
  let t: TestKube;
  let dir = '';
  let dashboard: ManagedProcess | undefined;
  let url = '';
  let dashboardKc: KubeConfig;
  const helm = (args: readonly string[]) =>
    run(findBinary('helm'), ['--kubeconfig', sharedKubeconfigPath(), ...args], { maxBuffer: 16 * 1024 * 1024 });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fencepost-dashboard-chart-'));
    t = testKube(admin, await freshNamespace(admin, 'dash-chart-'));
    // As in install.test.ts: the shared API server has the CRD already, and the Lease protection
    // is kept to this release's namespace so that the other test files' writers are not refused.
    await helm([
      'install',
      release,
      chart,
      '--namespace',
      t.namespace,
      '--set',
      'crds.enabled=false',
      '--set',
      `leaseProtection.namespaces={${t.namespace}}`,
      '--set',
      'dashboard.enabled=true',
    ]);
    const manifest = (await helm(['get', 'manifest', release, '--namespace', t.namespace])).stdout;
    const deployment = loadAllYaml(manifest).find(
      (d) =>
        (d as { kind?: string }).kind === 'Deployment' &&
        (d as V1Deployment).metadata?.name === `${release}-fencepost-dashboard`,
    ) as V1Deployment;
    const sa = deployment.spec?.template.spec?.serviceAccountName ?? '';
    expect(sa).toBe(`${release}-fencepost-dashboard`);
    const kubeconfig = await writeServiceAccountKubeconfig(admin, t.namespace, sa, join(dir, 'dashboard.kubeconfig'));
    dashboardKc = new KubeConfig();
    dashboardKc.loadFromFile(kubeconfig);
    const { args, ports } = await rewriteAddresses(deployment.spec?.template.spec?.containers[0]?.args ?? []);
    expect(args[0]).toBe('dashboard');
    url = `http://127.0.0.1:${ports.get(8300) ?? 0}`;
    dashboard = spawnManaged('dashboard', process.execPath, {
      args: [FENCEPOST_MAIN, ...args],
      logFile: join(dir, 'dashboard.log'),
      env: { ...process.env, KUBECONFIG: kubeconfig },
    });
  });
  afterAll(async () => {
    await dashboard?.stop();
    await helm(['uninstall', release, '--namespace', t.namespace]).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });

  it("shows a held lock with its holder and token, and answers the page's links, with the chart's RBAC", async () => {
    await createPod(t, 'web-0', { app: 'web' });
    await createLock(t, lockBody('alpha', 'web', { leaseDurationSeconds: 600 }));
    // The Lease as the controller writes it on a grant (no controller runs here: the chart's
    // Deployments have no kubelet on this API server).
    const now = microTime(new Date());
    await t.leases.createNamespacedLease({
      namespace: t.namespace,
      body: {
        metadata: {
          name: leaseName('alpha'),
          labels: { [LOCK_LABEL]: 'alpha' },
          annotations: { [TOKEN_ANNOTATION]: '7' },
        },
        spec: {
          holderIdentity: 'web-0/uid-0',
          leaseDurationSeconds: 600,
          acquireTime: now,
          renewTime: now,
        },
      },
    });
    const alpha = await eventually(async () => {
      const r = await fetch(`${url}/api/locks`);
      expect(r.status).toBe(200);
      const v = ((await r.json()) as Snapshot).locks.find((l) => l.key === `${t.namespace}/alpha`);
      expect(v?.holder).toBe('web-0');
      return v;
    }, 30_000);
    expect(alpha?.token).toBe('7');
    for (const path of [
      `/api/raw/leases/${t.namespace}/${leaseName('alpha')}`,
      `/api/raw/pods/${t.namespace}/web-0`,
      `/api/raw/events/${t.namespace}/alpha`,
    ])
      expect((await fetch(`${url}${path}`)).status, path).toBe(200);
    expect((await fetch(`${url}/api/locks`, { method: 'POST' })).status).toBe(405);
    expect(tailLog(dashboard?.logFile ?? '', 100_000)).not.toMatch(/forbidden|"code":403|HTTP-Code: 403/i);
  });

  it('the dashboard ServiceAccount may read what the dashboard reads, and write nothing', async () => {
    const ns = t.namespace;
    const granted: Access[] = [
      { verb: 'list', resource: 'distributedlocks', group: 'fencepost.io' },
      { verb: 'watch', resource: 'distributedlocks', group: 'fencepost.io' },
      { verb: 'list', resource: 'leases', group: 'coordination.k8s.io' },
      { verb: 'watch', resource: 'leases', group: 'coordination.k8s.io' },
      { verb: 'get', resource: 'leases', group: 'coordination.k8s.io', namespace: 'any' },
      { verb: 'list', resource: 'events' },
      { verb: 'watch', resource: 'events' },
      { verb: 'get', resource: 'pods', namespace: 'any' },
    ];
    const denied: Access[] = [
      ...['create', 'update', 'patch', 'delete'].flatMap((verb): Access[] => [
        { verb, resource: 'distributedlocks', group: 'fencepost.io', namespace: ns },
        { verb, resource: 'leases', group: 'coordination.k8s.io', namespace: ns },
        { verb, resource: 'pods', namespace: ns },
        { verb, resource: 'events', namespace: ns },
      ]),
      { verb: 'patch', resource: 'distributedlocks', subresource: 'status', group: 'fencepost.io', namespace: ns },
      { verb: 'list', resource: 'pods' },
      { verb: 'create', resource: 'pods', subresource: 'exec', namespace: ns },
      { verb: 'create', resource: 'pods', subresource: 'portforward', namespace: ns },
      { verb: 'get', resource: 'secrets', namespace: ns },
      { verb: 'list', resource: 'secrets' },
      { verb: 'list', resource: 'configmaps' },
      { verb: 'get', resource: 'nodes' },
    ];
    for (const a of granted) expect(await allowed(dashboardKc, a), `dashboard may ${describeAccess(a)}`).toBe(true);
    for (const a of denied) expect(await allowed(dashboardKc, a), `dashboard may not ${describeAccess(a)}`).toBe(false);
  });
});
