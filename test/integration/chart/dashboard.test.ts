/**
 * The chart's dashboard (`dashboard.enabled=true`), installed with `helm install` on the shared API
 * server, then run as a local process with the chart's dashboard ServiceAccount token and its
 * Deployment's own args (the address moved to a free loopback port, as the e2e pod runner does):
 * that RBAC is enough to show a held lock with its holder and token and to answer the page's links
 * (Lease, holder pod, Events), nothing it asked for was forbidden, and it may read and nothing more.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Snapshot } from '../../../src/dashboard/wire.ts';
import { microTime } from '../../../src/lease/record.ts';
import { LOCK_LABEL, TOKEN_ANNOTATION, leaseName } from '../../../src/protocol/names.ts';
import { allowed, describeAccess, helm, installChart, runDeployment, type Access } from '../../support/chart.ts';
import { tailLog, type ManagedProcess } from '../../support/testbed/processes.ts';
import { eventually, freshNamespace, sharedKubeConfig } from '../../support/env.ts';
import { createLock, createPod, lockBody, testKube, type TestKube } from '../../support/fixtures.ts';

describe('helm install with dashboard.enabled: a read-only dashboard on its own ServiceAccount', () => {
  const admin = sharedKubeConfig();
  const release = `dash${Math.random().toString(36).slice(2, 7)}`;
  let t: TestKube;
  let dir = '';
  let dashboard: ManagedProcess | undefined;
  let url = '';
  let dashboardKc: KubeConfig;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fencepost-dashboard-chart-'));
    t = testKube(admin, await freshNamespace(admin, 'dash-chart-'));
    // Without the Lease protection: this file's admin writes the held Lease itself (no controller
    // runs), and with the policy on that write raced the policy's arrival in the admission chain
    // (refused with 403 in 2 of 4 runs). The policy has its own tests (install, lease-protection).
    const deployments = await installChart(release, t.namespace, [
      'dashboard.enabled=true',
      'leaseProtection.enabled=false',
    ]);
    const deployment = deployments.find((d) => d.metadata?.name === `${release}-fencepost-dashboard`);
    if (deployment === undefined) throw new Error('the release has no dashboard Deployment');
    const r = await runDeployment(deployment, { name: 'dashboard', namespace: t.namespace, dir });
    dashboard = r.process;
    dashboardKc = r.kc;
    expect(r.serviceAccount).toBe(`${release}-fencepost-dashboard`);
    expect(r.args[0]).toBe('dashboard');
    url = `http://127.0.0.1:${r.ports.get(8300) ?? 0}`;
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
    expect(tailLog(dashboard?.logFile ?? '', 100_000)).not.toMatch(/forbidden|"code":403|"statusCode":403|HTTP 403/i);
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
