import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lockShard } from '../../../src/controllers/sharding/assign.ts';
import { shardLeaseName } from '../../../src/controllers/sharding/shard-manager.ts';
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
const SHARDS = 6;
const LOCKS = 12;

interface Replica {
  readonly name: string;
  readonly proc: ManagedProcess;
  readonly metricsPort: number;
}

/** grantsOf sums fencepost_grants_total of one replica's /metrics. */
function grantsOf(metrics: string): number {
  let n = 0;
  for (const m of metrics.matchAll(/^fencepost_grants_total\{[^}]*\} (\d+)$/gm)) n += Number(m[1]);
  return n;
}

/** shardsHeld: the shards whose leader_election_master_status is 1 in one replica's /metrics. */
function shardsHeld(metrics: string): number[] {
  return [...metrics.matchAll(/^leader_election_master_status\{name="fencepost-controller-shard-(\d+)"\} 1$/gm)]
    .map((m) => Number(m[1]))
    .sort((a, b) => a - b);
}

// Three `fencepost controller --shards 6` processes share twelve locks: each replica holds two
// shard Leases and grants only the locks of those shards; every lock is granted exactly once; a
// SIGKILLed replica's shards are taken over by the two others, which then grant its locks.
describe('fencepost controller replicas sharing the locks (--shards)', () => {
  const kc = sharedKubeConfig();
  let t: TestKube;
  let dir: string;
  const replicas: Replica[] = [];
  const start = async (i: number): Promise<Replica> => {
    const metricsPort = await freePort();
    const name = `replica-${i}`;
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
        '--shards',
        String(SHARDS),
        '--leader-election-namespace',
        t.namespace,
        // The safety suite's timings: shorter ones made replicas miss renew deadlines on a loaded 2-core machine.
        '--leader-election-lease-duration',
        '4s',
        '--leader-election-renew-deadline',
        '3s',
        '--leader-election-retry-period',
        '600ms',
        '--metrics-secure=false',
        '--metrics-bind-address',
        `127.0.0.1:${metricsPort}`,
        '--health-probe-bind-address',
        '0',
        '--identity',
        name,
      ],
      logFile: join(dir, `controller-${i}.log`),
    });
    const r = { name, proc, metricsPort };
    replicas.push(r);
    return r;
  };
  const metricsOf = async (r: Replica): Promise<string> =>
    (await getStatus(`http://127.0.0.1:${r.metricsPort}/metrics`)).body;
  const shardHolder = async (s: number): Promise<string> =>
    (await t.leases.readNamespacedLease({ namespace: t.namespace, name: shardLeaseName('fencepost-controller', s) }))
      .spec?.holderIdentity ?? '';

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fencepost-sharding-'));
    t = testKube(kc, await freshNamespace(kc, 'sharding-'));
    for (let i = 0; i < 3; i++) await start(i);
  });
  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.proc.stop()));
    rmSync(dir, { recursive: true, force: true });
  });

  it('grants every lock once, two shards per replica, and moves a killed replica’s shards', async () => {
    // 1. Every replica holds two of the six shards, none held twice.
    const held = await eventually(async () => {
      const per = await Promise.all(replicas.map(async (r) => shardsHeld(await metricsOf(r))));
      expect(per.map((p) => p.length)).toEqual([2, 2, 2]);
      expect(per.flat().sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5]);
      return per;
    }, 60_000);
    for (const [i, shards] of held.entries())
      for (const s of shards) expect(await shardHolder(s)).toMatch(new RegExp(`^replica-${i}_`));

    // 2. Twelve locks, two candidates each: every one granted once, by the replica holding its shard.
    const names = Array.from({ length: LOCKS }, (_, i) => `l-${i}`);
    for (const n of names) {
      await createPod(t, `${n}-a`, { app: n });
      await createPod(t, `${n}-b`, { app: n });
      await createLock(t, lockBody(n, n, { leaseDurationSeconds: 120 }));
    }
    const first = await eventually(async () => {
      const out = new Map<string, { token: bigint; transitions: number }>();
      for (const n of names) {
        const r = parseLease((await getLease(t, n)) ?? {});
        expect(r.holder, n).toBeDefined();
        out.set(n, { token: r.token ?? 0n, transitions: r.transitions ?? 0 });
      }
      return out;
    }, 60_000);
    for (const [n, g] of first) expect(g.transitions, n).toBe(1);
    const grants = await eventually(async () => {
      const per = await Promise.all(replicas.map(async (r) => grantsOf(await metricsOf(r))));
      expect(per.reduce((a, b) => a + b, 0)).toBe(LOCKS);
      return per;
    });
    // Each replica granted exactly the locks of its shards.
    for (const [i, shards] of held.entries())
      expect(grants[i]).toBe(names.filter((n) => shards.includes(lockShard(`${t.namespace}/${n}`, SHARDS))).length);

    // 3. SIGKILL replica-2: its shards are held again by the others once its Leases expire.
    const victim = replicas[2];
    if (victim === undefined) throw new Error('no replica');
    const victimShards = held[2] ?? [];
    victim.proc.signal('SIGKILL');
    await victim.proc.exited;
    const killedAt = performance.now();
    await eventually(async () => {
      for (const s of victimShards) expect(await shardHolder(s)).toMatch(/^replica-[01]_/);
    }, 60_000);
    const movedMs = performance.now() - killedAt;
    // Not before its membership record, then its shard Leases, went unchanged for a lease duration.
    expect(movedMs).toBeGreaterThanOrEqual(3000);
    process.stdout.write(`shards of the killed replica held again after ${Math.round(movedMs)} ms\n`);
    const after = await eventually(async () => {
      const per = await Promise.all(replicas.slice(0, 2).map(async (r) => shardsHeld(await metricsOf(r))));
      expect(per.flat().sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5]);
      return per;
    }, 30_000);
    expect(after.map((p) => p.length)).toEqual([3, 3]);

    // 4. Every holder releases: each lock is granted once more (its second term), with a larger
    // token, the killed replica's locks by their shard's new owner.
    for (const n of names) await releaseLease(t, n);
    await eventually(async () => {
      for (const n of names) {
        const r = parseLease((await getLease(t, n)) ?? {});
        expect(r.holder, n).toBeDefined();
        expect(r.transitions, n).toBe(2);
        expect(r.token ?? 0n).toBeGreaterThan(first.get(n)?.token ?? 0n);
      }
    }, 60_000);
    for (const r of replicas.slice(0, 2)) expect(r.proc.isRunning(), tailLog(r.proc.logFile)).toBe(true);
  });
});
