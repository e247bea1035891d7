import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubeConfig } from '@kubernetes/client-node';
import { leaseName } from '../../../src/protocol/names.ts';
import { parseLease } from '../../../src/lease/record.ts';
import { firstEvent, startAgent, type AgentProcess } from '../../support/agent-processes.ts';
import { eventually, sharedKubeconfigPath } from '../../support/env.ts';
import {
  createLock,
  createPod,
  deleteLock,
  getLease,
  lockBody,
  type TestKube,
  mergePatch,
} from '../../support/fixtures.ts';
import { useLockController } from '../../support/lock-controller.ts';
import type { ManagedProcess } from '../../support/testbed/processes.ts';
import { startTcpProxy, type TcpProxy } from '../../support/testbed/tcp-proxy.ts';

// Someone deletes the lock's Lease (a cleanup script, a namespace admin, a co-tenant with
// `leases delete`) while its holder is cut off from the API server. The cut-off holder cannot see
// the deletion and keeps believing until its renew deadline; the controller must not grant the lock
// on the new Lease before then: a lock that had a holder waits a full lease duration before the
// first grant on a new Lease.
describe('the lock Lease deleted while its holder is cut off', () => {
  const fx = useLockController('lease-del-');
  let t: TestKube;
  let dir: string;
  let proxy: TcpProxy | undefined;
  const procs: ManagedProcess[] = [];
  beforeAll(() => {
    t = fx.t;
    dir = mkdtempSync(join(tmpdir(), 'fencepost-lease-del-'));
  });
  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop()));
    await proxy?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** viaProxy: a kubeconfig whose traffic crosses the TCP proxy, so that the test can cut it off. */
  const proxied = async (): Promise<{ proxy: TcpProxy; kubeconfig: string }> => {
    if (proxy === undefined) {
      const admin = new KubeConfig();
      admin.loadFromFile(sharedKubeconfigPath());
      const server = new URL(admin.getCurrentCluster()?.server ?? '');
      proxy = await startTcpProxy({ targetPort: Number(server.port) });
      writeFileSync(
        join(dir, 'kubeconfig-proxied'),
        admin.exportConfig().replace(server.origin, `https://127.0.0.1:${proxy.port}`),
      );
    }
    return { proxy, kubeconfig: join(dir, 'kubeconfig-proxied') };
  };

  /**
   * heldThenCut: lock `lock` (lease 6 s: renew deadline 4 s) held by pod a, whose agent goes through
   * the proxy; pod b's agent talks to the API server directly. a then leaves the candidates (a
   * rollout relabels it), so that the next grant goes to b and not to a again — its agent keeps the
   * term it holds, as it should — and a is cut off. Returns a's token and the times of a's step-down
   * and b's grant, to come.
   */
  const heldThenCut = async (
    lock: string,
  ): Promise<{
    tokenA: bigint;
    lostAt: Promise<number>;
    grantedAt: Promise<number>;
    stop: () => void;
    cut: TcpProxy;
  }> => {
    const { proxy: cut, kubeconfig } = await proxied();
    const start = async (pod: string, via: string): Promise<AgentProcess> => {
      const p = await createPod(t, pod, { app: lock });
      const agent = await startAgent({
        lock,
        pod,
        uid: p.metadata?.uid ?? '',
        namespace: t.namespace,
        kubeconfig: via,
        logDir: dir,
      });
      procs.push(agent.process);
      return agent;
    };
    const a = await start(`${lock}-a`, kubeconfig);
    await createLock(t, lockBody(lock, lock, { leaseDurationSeconds: 6 }));
    await eventually(async () => {
      expect((await a.snapshot()).held).toBe(true);
    }, 20_000);
    const b = await start(`${lock}-b`, sharedKubeconfigPath());
    const tokenA = BigInt((await a.snapshot()).token ?? '0');
    await t.core.patchNamespacedPod(
      { namespace: t.namespace, name: `${lock}-a`, body: { metadata: { labels: { app: `${lock}-old` } } } },
      mergePatch,
    );
    const lost = firstEvent(a.port, lock, 'lost');
    const granted = firstEvent(b.port, lock, 'granted');
    cut.blackhole();
    return {
      tokenA,
      lostAt: lost.at,
      grantedAt: granted.at,
      cut,
      stop: () => {
        lost.stop();
        granted.stop();
        cut.heal();
      },
    };
  };

  it('grants nobody on the new Lease before the cut-off holder has stepped down', async () => {
    const s = await heldThenCut('del');
    const deletedAt = performance.now();
    try {
      await t.leases.deleteNamespacedLease({ namespace: t.namespace, name: leaseName('del') });
      const [lostAt, grantedAt] = await Promise.all([s.lostAt, s.grantedAt]);
      process.stdout.write(
        `lease deletion: deleted→holder stepped down ${Math.round(lostAt - deletedAt)} ms, deleted→successor granted ${Math.round(grantedAt - deletedAt)} ms (lease 6000, renew deadline 4000)\n`,
      );
      expect(lostAt).toBeLessThan(grantedAt);
      // And the successor's token is above the deleted Lease's, although the new Lease never saw it.
      const record = await eventually(async () => {
        const l = await getLease(t, 'del');
        const r = l !== undefined ? parseLease(l) : undefined;
        expect(r?.holder?.name).toBe('del-b');
        return r;
      });
      expect(record?.token ?? 0n).toBeGreaterThan(s.tokenA);
      // Loudly: a Warning Event on the lock names the holder that may still believe.
      const events = await t.core.listNamespacedEvent({
        namespace: t.namespace,
        fieldSelector: 'involvedObject.name=del,reason=LeaseLost',
      });
      expect(events.items.map((e) => e.type)).toEqual(['Warning']);
      expect(events.items[0]?.message).toContain('pod del-a held the lock');
    } finally {
      s.stop();
    }
  });

  it('a held lock deleted and applied again at once grants nobody before the cut-off holder has stepped down', async () => {
    const s = await heldThenCut('rea');
    const deletedAt = performance.now();
    try {
      await deleteLock(t, 'rea');
      // `kubectl apply` in a loop: refused (AlreadyExists) while the old lock is still terminating.
      await eventually(async () => {
        await createLock(t, lockBody('rea', 'rea', { leaseDurationSeconds: 6 }));
      }, 30_000);
      const [lostAt, grantedAt] = await Promise.all([s.lostAt, s.grantedAt]);
      process.stdout.write(
        `lock deleted and applied again: deleted→holder stepped down ${Math.round(lostAt - deletedAt)} ms, deleted→successor granted ${Math.round(grantedAt - deletedAt)} ms (lease 6000, renew deadline 4000)\n`,
      );
      expect(lostAt).toBeLessThan(grantedAt);
      const l = await getLease(t, 'rea');
      expect(l !== undefined ? parseLease(l).token : 0n).toBeGreaterThan(s.tokenA);
    } finally {
      s.stop();
    }
  });
});
