import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseLease } from '../../../src/lease/record.ts';
import { getStatus } from '../../support/testbed/http-probe.ts';
import { freePort } from '../../support/testbed/ports.ts';
import { spawnManaged, tailLog, type ManagedProcess } from '../../support/testbed/processes.ts';
import {
  eventually,
  freshNamespace,
  sharedKubeConfig,
  sharedKubeconfigPath,
  sharedRedisUrl,
} from '../../support/env.ts';
import {
  createLock,
  createPod,
  getLease,
  lockBody,
  releaseLease,
  testKube,
  type TestKube,
} from '../../support/fixtures.ts';

const main = resolve(import.meta.dirname, '../../../src/cli/main.ts');

interface Replica {
  readonly proc: ManagedProcess;
  readonly metricsPort: number;
  readonly healthPort: number;
}

// Two `fencepost controller` processes, as a 2-replica Deployment would run them: one leads and
// grants; killing it hands the work to the other after the controller Lease expires.
describe('fencepost controller as replicated processes', () => {
  const kc = sharedKubeConfig();
  let t: TestKube;
  let dir: string;
  const replicas: Replica[] = [];
  const start = async (i: number): Promise<Replica> => {
    const metricsPort = await freePort();
    const healthPort = await freePort();
    const proc = spawnManaged(`controller-${i}`, process.execPath, {
      args: [
        main,
        'controller',
        '--kubeconfig',
        sharedKubeconfigPath(),
        '--redis-url',
        sharedRedisUrl(),
        '--namespace',
        t.namespace,
        '--leader-election-namespace',
        t.namespace,
        '--leader-election-lease-duration',
        '2s',
        '--leader-election-renew-deadline',
        '1500ms',
        '--leader-election-retry-period',
        '300ms',
        '--metrics-secure=false', // plain HTTP: metrics-auth.test.ts covers the secure listener
        '--metrics-bind-address',
        `127.0.0.1:${metricsPort}`,
        '--health-probe-bind-address',
        `127.0.0.1:${healthPort}`,
        '--identity',
        `replica-${i}`,
      ],
      logFile: join(dir, `controller-${i}.log`),
    });
    const r = { proc, metricsPort, healthPort };
    replicas.push(r);
    return r;
  };
  const leaderIdentity = async (): Promise<string | undefined> => {
    try {
      return (await t.leases.readNamespacedLease({ namespace: t.namespace, name: 'fencepost-controller' })).spec
        ?.holderIdentity;
    } catch {
      return undefined;
    }
  };
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fencepost-replicas-'));
    t = testKube(kc, await freshNamespace(kc, 'replicas-'));
    await start(0);
    await start(1);
  });
  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.proc.stop()));
    rmSync(dir, { recursive: true, force: true });
  });

  it('elects one leader that grants locks and exports metrics; a SIGKILLed leader is replaced after the lease', async () => {
    const leader = await eventually(async () => {
      const id = await leaderIdentity();
      expect(id).toMatch(/^replica-[01]_/);
      return id ?? '';
    }, 30_000);
    const leaderIndex = Number(/^replica-(\d)/.exec(leader)?.[1]);
    const lead = replicas[leaderIndex];
    const standby = replicas[1 - leaderIndex];
    if (lead === undefined || standby === undefined) throw new Error('no replicas');

    await createPod(t, 'p-0', { app: 'p' });
    await createPod(t, 'p-1', { app: 'p' });
    await createLock(t, lockBody('p', 'p', { leaseDurationSeconds: 30 }));
    const first = await eventually(async () => {
      const l = await getLease(t, 'p');
      const r = l !== undefined ? parseLease(l) : undefined;
      expect(r?.holder).toBeDefined();
      return r;
    }, 20_000);

    const metrics = await eventually(async () => {
      const m = await getStatus(`http://127.0.0.1:${lead.metricsPort}/metrics`);
      expect(m.body).toMatch(/fencepost_grants_total\{cause="Vacant",backend="Redis"\} 1/);
      // The grant is counted inside the reconcile, its result only when the reconcile returns: poll
      // until both are in (a scrape between the two saw every reconcile_total series at 0).
      expect(m.body).toMatch(
        /controller_runtime_reconcile_total\{controller="distributedlock",result="(success|requeue_after)"\} [1-9]/,
      );
      return m.body;
    });
    expect(metrics).toMatch(/^leader_election_master_status\{name="fencepost-controller"\} 1$/m);
    expect(metrics).toMatch(/# TYPE fencepost_handoff_duration_seconds histogram/);
    expect(
      metrics,
      metrics
        .split('\n')
        .filter((l) => l.includes('reconcile_total'))
        .join('\n'),
    ).toMatch(
      /controller_runtime_reconcile_total\{controller="distributedlock",result="(success|requeue_after)"\} [1-9]/,
    );
    expect((await getStatus(`http://127.0.0.1:${lead.healthPort}/readyz`)).status).toBe(200);
    // The standby may still be booting under load: it only has to answer eventually.
    await eventually(async () => {
      expect((await getStatus(`http://127.0.0.1:${standby.healthPort}/healthz`)).status).toBe(200);
      expect((await getStatus(`http://127.0.0.1:${standby.metricsPort}/metrics`)).body).toMatch(
        /^leader_election_master_status\{name="fencepost-controller"\} 0$/m,
      );
    }, 30_000);

    lead.proc.signal('SIGKILL');
    await lead.proc.exited;
    const killedAt = performance.now();
    await eventually(async () => {
      expect(await leaderIdentity()).toMatch(/^replica-/);
      expect(await leaderIdentity()).not.toBe(leader);
    }, 30_000);
    expect(performance.now() - killedAt).toBeGreaterThanOrEqual(1500); // waited out (most of) the 2 s controller lease

    // The holder kept its lock through the failover: same holder, same token, no new term.
    await new Promise((r) => setTimeout(r, 1500)); // let the new leader reconcile
    const kept = parseLease((await getLease(t, 'p')) ?? {});
    expect(kept.holder).toEqual(first?.holder);
    expect(kept.token).toBe(first?.token);
    expect(kept.transitions).toBe(first?.transitions);

    // The new leader grants: release the lock and watch it move to the other pod.
    await releaseLease(t, 'p');
    const second = await eventually(async () => {
      const l = await getLease(t, 'p');
      const r = l !== undefined ? parseLease(l) : undefined;
      expect(r?.holder).toBeDefined();
      expect(r?.holder?.name).not.toBe(first?.holder?.name);
      return r;
    }, 30_000);
    expect(second?.token).toBeGreaterThan(first?.token ?? 0n);

    // SIGTERM: drain, release the controller Lease, exit 0.
    await standby.proc.stop(10_000);
    expect(await standby.proc.exited, tailLog(standby.proc.logFile)).toBe(0);
    const after = await t.leases.readNamespacedLease({ namespace: t.namespace, name: 'fencepost-controller' });
    expect(after.spec?.holderIdentity ?? '').toBe('');
  });
});
