import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DistributedLock } from '../../../src/api/v1alpha1/distributedlock.ts';
import { parseLease, type LockRecord } from '../../../src/lease/record.ts';
import { spawnManaged, tailLog, type ManagedProcess } from '../../support/testbed/processes.ts';
import { startRedis, type RedisServer } from '../../support/testbed/redis.ts';
import { startTcpProxy, type TcpProxy } from '../../support/testbed/tcp-proxy.ts';
import { eventually, freshNamespace, sharedKubeConfig, sharedKubeconfigPath } from '../../support/env.ts';
import {
  createLock,
  createPod,
  getLease,
  getLock,
  lockBody,
  releaseLease,
  testKube,
  type TestKube,
} from '../../support/fixtures.ts';
import { podKeys } from '../../../src/protocol/names.ts';

const main = resolve(import.meta.dirname, '../../../src/cli/main.ts');

/** isFenceScriptCall: the RESP bytes of an EVALSHA/EVAL of the fencing script (its key is `fencepost:fence:<ns>/<lock>`). */
function isFenceScriptCall(bytes: Buffer): boolean {
  const text = bytes.toString('latin1');
  return /\r\n(evalsha|eval)\r\n/i.test(text) && text.includes('fencepost:fence:');
}

// The controller is SIGKILLed after Redis executed the fencing script (the token is taken) and
// before the Lease compare-and-swap recorded it. The only trace must be a gap in the tokens; a new
// controller process grants with the next token and everything converges.
describe('fencepost controller killed between the Redis increment and the Lease write', () => {
  const kc = sharedKubeConfig();
  let t: TestKube;
  let dir: string;
  let redis: RedisServer;
  let proxy: TcpProxy;
  let direct: Redis;
  const procs: ManagedProcess[] = [];

  const start = (identity: string): ManagedProcess => {
    const proc = spawnManaged(identity, process.execPath, {
      args: [
        main,
        'controller',
        '--kubeconfig',
        sharedKubeconfigPath(),
        '--redis-url',
        `redis://127.0.0.1:${proxy.port}`,
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
        '--metrics-bind-address',
        '127.0.0.1:0',
        '--health-probe-bind-address',
        '127.0.0.1:0',
        '--identity',
        identity,
      ],
      logFile: join(dir, `${identity}.log`),
    });
    procs.push(proc);
    return proc;
  };
  const logs = (): string =>
    procs.map((p) => `--- ${p.name} (${p.isRunning() ? 'running' : 'exited'}):\n${tailLog(p.logFile, 40)}`).join('\n');
  const record = async (): Promise<LockRecord | undefined> => {
    const l = await getLease(t, 'c');
    return l !== undefined ? parseLease(l) : undefined;
  };
  const pods = async () => (await t.core.listNamespacedPod({ namespace: t.namespace })).items;
  const leaderIdentity = async (): Promise<string | undefined> => {
    try {
      return (await t.leases.readNamespacedLease({ namespace: t.namespace, name: 'fencepost-controller' })).spec
        ?.holderIdentity;
    } catch {
      return undefined;
    }
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fencepost-crash-'));
    redis = await startRedis();
    direct = redis.client(); // straight to redis-server, never through the proxy
    proxy = await startTcpProxy({ targetPort: redis.port });
    t = testKube(kc, await freshNamespace(kc, 'crash-'));
  });
  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop()));
    direct?.disconnect();
    await proxy?.close();
    await redis?.stop();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it('burns exactly one token and changes nothing else; a new controller grants the next token and state converges', async () => {
    const keys = podKeys('c');
    const counterKey = `fencepost:fence:${t.namespace}/c`;
    const crash0 = start('crash-0');
    await createPod(t, 'c-0', { app: 'c' });
    await createPod(t, 'c-1', { app: 'c' });
    await createLock(t, lockBody('c', 'c', { leaseDurationSeconds: 30 }));

    // ### 1: The first grant, settled: Lease, holder pod, status and the counter all say t1.
    const first = await eventually(async () => {
      const r = await record();
      expect(r?.holder).toBeDefined();
      return r;
    }, 30_000).catch((err: unknown) => {
      throw new Error(logs(), { cause: err });
    });
    const t1 = first?.token;
    const firstHolder = first?.holder;
    if (t1 === undefined || firstHolder === undefined) throw new Error('first grant has no token or holder');
    await eventually(async () => {
      const holderPod = (await pods()).find((p) => p.metadata?.name === firstHolder.name);
      expect(holderPod?.metadata?.labels?.[keys.holder]).toBe('true');
      expect(holderPod?.metadata?.annotations?.[keys.token]).toBe(t1.toString());
      expect((await getLock(t, 'c')).status?.fencingToken).toBe(t1.toString());
      expect(await direct.get(counterKey)).toBe(t1.toString());
    }, 20_000);
    const burned = t1 + 1n;

    // ### 2: Hold Redis's replies from the next fencing-script call on, and trigger a grant.
    let sentAt: number | undefined;
    const unsubscribe = proxy.onClientData((chunk) => {
      if (sentAt === undefined && isFenceScriptCall(chunk)) sentAt = performance.now();
    });
    proxy.holdReplies(isFenceScriptCall);
    const releasedAt = performance.now();
    await releaseLease(t, 'c');
    await eventually(
      () => {
        expect(proxy.holding).toBe(true);
      },
      20_000,
      5,
    ).catch((err: unknown) => {
      throw new Error(logs(), { cause: err });
    });
    // Redis executed it: the counter moved to t1+1, but the controller never got the answer.
    await eventually(
      async () => {
        expect(await direct.get(counterKey)).toBe(burned.toString());
      },
      10_000,
      5,
    );
    const executedAt = performance.now();
    crash0.signal('SIGKILL');
    expect(await crash0.exited).toBe('SIGKILL');
    const killedAt = performance.now();
    unsubscribe();

    // ### 3: Nothing but the counter changed: the Lease is still released at t1, no pod got t1+1.
    await sleep(500);
    const afterKill = await record();
    expect(afterKill?.holder).toBeUndefined();
    expect(afterKill?.released).toBe('Released');
    expect(afterKill?.token).toBe(t1);
    expect(afterKill?.transitions).toBe(first?.transitions);
    expect(await direct.get(counterKey)).toBe(burned.toString()); // exactly one script ran
    for (const p of await pods()) {
      expect(p.metadata?.annotations?.[keys.token], p.metadata?.name).not.toBe(burned.toString());
      if (p.metadata?.name !== firstHolder.name)
        expect(p.metadata?.labels?.[keys.holder], p.metadata?.name).toBeUndefined();
    }
    expect((await getLock(t, 'c')).status?.fencingToken).toBe(t1.toString());
    const grantLines = readFileSync(crash0.logFile, 'utf8')
      .split('\n')
      .filter((l) => l.includes('Granted Lease'));
    expect(grantLines).toHaveLength(1); // the first grant only
    expect(grantLines.join('\n')).not.toContain(`"token":"${burned}"`);

    // ### 4: A new controller process takes over after the old leader's Lease expires and grants t1+2.
    proxy.heal();
    const restartedAt = performance.now();
    start('crash-1');
    const second = await eventually(async () => {
      const r = await record();
      expect(r?.holder).toBeDefined();
      return r;
    }, 30_000).catch((err: unknown) => {
      throw new Error(logs(), { cause: err });
    });
    const grantedAt = performance.now();
    const t2 = t1 + 2n;
    expect(second?.token).toBe(t2); // a gap of exactly one burned token, never t1+1
    expect(second?.transitions).toBe((first?.transitions ?? 0) + 1);
    expect(await leaderIdentity()).toMatch(/^crash-1_/);
    expect(grantedAt - killedAt).toBeGreaterThanOrEqual(1500); // waited out (most of) the 2 s controller Lease
    const holder = second?.holder;
    if (holder === undefined) throw new Error('second grant has no holder');

    // ### 5: Converged: the holder pod carries the label and t1+2, nobody else does, status agrees.
    const lock = await eventually(async () => {
      for (const p of await pods()) {
        const mine = p.metadata?.name === holder.name;
        expect(p.metadata?.labels?.[keys.holder], p.metadata?.name).toBe(mine ? 'true' : undefined);
        expect(p.metadata?.annotations?.[keys.token], p.metadata?.name).toBe(mine ? t2.toString() : undefined);
      }
      const l: DistributedLock = await getLock(t, 'c');
      expect(l.status?.holder).toEqual({ name: holder.name, uid: holder.uid });
      expect(l.status?.fencingToken).toBe(t2.toString());
      expect(l.status?.conditions?.find((x) => x.type === 'Held')).toMatchObject({ status: 'True' });
      return l;
    }, 20_000);
    expect(await direct.get(counterKey)).toBe(t2.toString());

    // ### 6: The burned token appears nowhere: Lease, pods, status, Events.
    const burnedWord = new RegExp(`\\b${burned}\\b`);
    const lease = await getLease(t, 'c');
    expect(Object.values(lease?.metadata?.annotations ?? {})).not.toContain(burned.toString());
    for (const p of await pods()) {
      expect(Object.values(p.metadata?.annotations ?? {}), p.metadata?.name).not.toContain(burned.toString());
      expect(Object.values(p.metadata?.labels ?? {}), p.metadata?.name).not.toContain(burned.toString());
    }
    expect(lock.status?.fencingToken).not.toBe(burned.toString());
    for (const c of lock.status?.conditions ?? []) expect(c.message ?? '').not.toMatch(burnedWord);
    const granted = await eventually(async () => {
      const events = (await t.core.listNamespacedEvent({ namespace: t.namespace })).items.filter(
        (e) => e.reason === 'LeaseGranted',
      );
      expect(events.some((e) => e.message?.includes(`token ${t2}`))).toBe(true);
      return events;
    });
    for (const e of granted) expect(e.message ?? '').not.toMatch(burnedWord);

    console.log(
      `crash timings (ms): release→script sent ${fmt(sentAt, releasedAt)}, sent→executed ${fmt(executedAt, sentAt)}, executed→killed ${fmt(killedAt, executedAt)}, ` +
        `restart→grant ${fmt(grantedAt, restartedAt)}, kill→grant ${fmt(grantedAt, killedAt)}; tokens ${t1} → (burned ${burned}) → ${t2}`,
    );
  });
});

function fmt(a: number | undefined, b: number | undefined): string {
  return a === undefined || b === undefined ? '?' : (a - b).toFixed(0);
}
