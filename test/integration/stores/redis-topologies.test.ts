/**
 * The Sentinel and Cluster URLs work through ioredis, against real servers started here
 * (redis-server; a Sentinel is redis-server with --sentinel):
 *
 * - redis+sentinel://: a Sentinel monitoring one master; acquire finds the master through it;
 * - redis+cluster://: a one-node Redis Cluster owning every slot. A Cluster refuses a script whose
 *   keys hash to different slots (CROSSSLOT) even on one node, so this shows that the holder key's
 *   hash tag puts it in its counter's slot: the grant and its token stay one script.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { execFile } from 'node:child_process';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acquire } from '../../../src/index.ts';
import { freePort } from '../../support/testbed/ports.ts';
import { spawnManaged, type ManagedProcess } from '../../support/testbed/processes.ts';
import {
  redisServerBinary,
  startRedis,
  startReplica,
  type RedisServer,
  type Replica,
} from '../../support/testbed/redis.ts';

const execFileAsync = promisify(execFile);
const cliMain = resolve(import.meta.dirname, '../../../src/cli/main.ts');

let dir: string;
const started: ManagedProcess[] = [];
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'fencepost-topologies-'));
});
afterAll(async () => {
  for (const p of started) await p.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** serve starts redis-server with `args` on a free port and waits until `ready` says yes (bounded). */
async function serve(
  name: string,
  args: (port: number) => string[],
  ready: (c: Redis) => Promise<boolean>,
): Promise<number> {
  const port = await freePort();
  const p = spawnManaged(name, redisServerBinary(), { args: args(port), logFile: join(dir, `${name}.log`) });
  started.push(p);
  const c = new Redis({
    port,
    host: '127.0.0.1',
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  c.on('error', () => undefined);
  try {
    for (let i = 0; i < 200; i++) {
      try {
        if (c.status !== 'ready') await c.connect();
        if (await ready(c)) return port;
      } catch {
        /* not up yet */
      }
      await sleep(50);
    }
    throw new Error(`${name} not ready on ${port}`);
  } finally {
    c.disconnect();
  }
}

/** startSentinel starts a Sentinel watching `master` as `name` and waits until it knows its one replica. */
function startSentinel(name: string, masterPort: number, failoverTimeoutMs: number): Promise<number> {
  const conf = join(dir, `sentinel-${name}.conf`);
  writeFileSync(
    conf,
    [
      `sentinel monitor ${name} 127.0.0.1 ${masterPort} 1`,
      `sentinel down-after-milliseconds ${name} 1000`,
      `sentinel failover-timeout ${name} ${failoverTimeoutMs}`,
      '',
    ].join('\n'),
  );
  return serve(
    `sentinel-${name}`,
    (port) => [conf, '--sentinel', '--port', String(port), '--bind', '127.0.0.1', '--dir', dir],
    async (c) => {
      const replicas = await c.call('SENTINEL', 'replicas', name);
      return Array.isArray(replicas) && replicas.length === 1;
    },
  );
}

/**
 * forceFailover runs SENTINEL FAILOVER `name`, retried while the Sentinel does not count the
 * replica as good yet (it learns of it by INFO, every few seconds).
 */
async function forceFailover(s: Redis, name: string): Promise<void> {
  for (let i = 0; ; i++) {
    try {
      await s.call('SENTINEL', 'FAILOVER', name);
      return;
    } catch (err) {
      if (i >= 100 || !String(err).includes('NOGOODSLAVE')) throw err;
      await sleep(100);
    }
  }
}

describe('redis+sentinel://', () => {
  let master: RedisServer;
  let sentinelPort: number;
  beforeAll(async () => {
    master = await startRedis();
    const conf = join(dir, 'sentinel.conf');
    writeFileSync(conf, `sentinel monitor fpmaster 127.0.0.1 ${master.port} 1\n`);
    sentinelPort = await serve(
      'sentinel',
      (port) => [conf, '--sentinel', '--port', String(port), '--bind', '127.0.0.1', '--dir', dir],
      async (c) => {
        const addr = await c.call('SENTINEL', 'get-master-addr-by-name', 'fpmaster');
        return Array.isArray(addr) && addr[1] === String(master.port);
      },
    );
  });
  afterAll(async () => {
    await master.stop();
  });

  it('finds the master through the Sentinel and holds the lock there', async () => {
    const lock = await acquire('via-sentinel', {
      store: `redis+sentinel://127.0.0.1:${sentinelPort}/fpmaster`,
      ttlMs: 2000,
    });
    expect(lock.clockFloored).toBe(true); // a new lock
    const c = master.client();
    try {
      expect(await c.get('fencepost:fence:default/via-sentinel')).toBe(lock.token.toString());
      expect(await c.exists('fencepost:lock:{fencepost:fence:default/via-sentinel}')).toBe(1);
      await lock.release();
      expect(await c.exists('fencepost:lock:{fencepost:fence:default/via-sentinel}')).toBe(0);
    } finally {
      c.disconnect();
    }
  });
});

describe('redis+sentinel:// with a primary and a replica: a failover while the lock is held', () => {
  let primary: RedisServer;
  let replicaPort: number;
  let sentinelPort: number;
  beforeAll(async () => {
    primary = await startRedis();
    // A folder of its own: a replica writes the primary's data (dump.rdb) where it runs.
    const replicaDir = join(dir, 'replica');
    mkdirSync(replicaDir);
    replicaPort = await serve(
      'replica',
      (port) => [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
        '--dir',
        replicaDir,
        '--replicaof',
        '127.0.0.1',
        String(primary.port),
      ],
      async (c) => String(await c.call('INFO', 'replication')).includes('master_link_status:up'),
    );

    sentinelPort = await startSentinel('fpfail', primary.port, 5000);
  });
  afterAll(async () => {
    await primary.stop();
  });

  it('a lock replicated before the failover stays held on the promoted replica; its next token is floored at its clock', async () => {
    const store = `redis+sentinel://127.0.0.1:${sentinelPort}/fpfail`;
    const lock = await acquire('failover', { store, ttlMs: 3000 });
    const p = primary.client();
    try {
      // Acknowledged by the replica before the failover: the case that survives. WAIT counts the
      // writes of its own connection, so one write here, after the grant's, is what it waits for.
      await p.set('fencepost-test:marker', '1');
      expect(await p.call('WAIT', '1', '5000')).toBe(1);
    } finally {
      p.disconnect();
    }
    const s = new Redis({ port: sentinelPort, host: '127.0.0.1', maxRetriesPerRequest: 0 });
    try {
      await forceFailover(s, 'fpfail');
      for (let i = 0; i < 200; i++) {
        const addr = await s.call('SENTINEL', 'get-master-addr-by-name', 'fpfail');
        if (Array.isArray(addr) && addr[1] === String(replicaPort)) break;
        await sleep(50);
      }
      expect(await s.call('SENTINEL', 'get-master-addr-by-name', 'fpfail')).toEqual(['127.0.0.1', String(replicaPort)]);
    } finally {
      s.disconnect();
    }
    // The watchdog's renews find the key on the new primary through the Sentinel: still held after two TTLs.
    await sleep(6000);
    expect(lock.isHeld()).toBe(true);
    const r = new Redis({ port: replicaPort, host: '127.0.0.1', maxRetriesPerRequest: 0 });
    try {
      expect(await r.exists('fencepost:lock:{fencepost:fence:default/failover}')).toBe(1);
      await lock.release();
      expect(await r.exists('fencepost:lock:{fencepost:fence:default/failover}')).toBe(0);
      // Another process issues it (fence_epoch): floored at its clock, whatever it had received.
      const next = await acquire('failover', { store, ttlMs: 3000 });
      expect(next).toMatchObject({ clockFloored: true, counterMissing: false });
      expect(next.token).toBeGreaterThan(lock.token + 1n);
      await next.release();
    } finally {
      r.disconnect();
    }
  });

  it('fencepost exec (the Node CLI) holds the lock through the Sentinel on the promoted replica, with the token of its counter', async () => {
    const store = `redis+sentinel://127.0.0.1:${sentinelPort}/fpfail`;
    const { KUBECONFIG: _k, POD_NAME: _n, POD_NAMESPACE: _ns, POD_UID: _u, ...env } = process.env;
    const { stdout } = await execFileAsync(
      process.execPath,
      [cliMain, 'exec', '--store', store, '--lock', 'failover', '--', 'sh', '-c', 'echo $FENCEPOST_TOKEN'],
      { env, timeout: 30_000 },
    );
    const r = new Redis({ port: replicaPort, host: '127.0.0.1', maxRetriesPerRequest: 0 });
    try {
      expect(await r.get('fencepost:fence:default/failover')).toBe(stdout.trim()); // on the new primary
      expect(await r.exists('fencepost:lock:{fencepost:fence:default/failover}')).toBe(0); // released
    } finally {
      r.disconnect();
    }
  });
});

describe('redis+sentinel:// failback to a master that was never demoted', () => {
  let primary: RedisServer;
  let replica: Replica;
  let sentinelPort: number;
  beforeAll(async () => {
    primary = await startRedis();
    replica = await startReplica(primary);
    await replica.inSync();
    sentinelPort = await startSentinel('fpback', primary.port, 2000);
  });
  afterAll(async () => {
    await replica.stop();
    await primary.stop();
  });

  /** masterIs waits (bounded) until the Sentinel names the master on `port`. */
  async function masterIs(s: Redis, port: number): Promise<void> {
    for (let i = 0; i < 600; i++) {
      const addr = await s.call('SENTINEL', 'get-master-addr-by-name', 'fpback');
      if (Array.isArray(addr) && addr[1] === String(port)) return;
      await sleep(50);
    }
    throw new Error(`the Sentinel never named 127.0.0.1:${port} the master`);
  }

  it('tokens rise in grant order when the Sentinel fails over to the replica and back to the old primary', async () => {
    // Sentinel promotes the replica (R) and only later tells the old primary (P) to follow it: it
    // waits about 8 s, and not at all while R is down. R grants, dies, and the Sentinel fails back
    // to P, which is still a master with its own replication ID and its counter below R's token.
    const store = `redis+sentinel://127.0.0.1:${sentinelPort}/fpback`;
    const t1 = await acquire('failback', { store, ttlMs: 2000 });
    await t1.release();
    await replica.inSync();
    const s = new Redis({ port: sentinelPort, host: '127.0.0.1', maxRetriesPerRequest: 0 });
    try {
      await forceFailover(s, 'fpback');
      await masterIs(s, replica.server.port);
      const t2 = await acquire('failback', { store, ttlMs: 2000 });
      await t2.release();
      await replica.server.stop();
      await masterIs(s, primary.port);
      const p = primary.client();
      try {
        // P was never told to follow R: the case this test is about.
        expect(String(await p.call('INFO', 'replication'))).toContain('role:master');
      } finally {
        p.disconnect();
      }
      const t3 = await acquire('failback', { store, ttlMs: 2000 });
      await t3.release();
      expect(t2.token).toBeGreaterThan(t1.token);
      expect(t3.token).toBeGreaterThan(t2.token);
      expect(t3.clockFloored).toBe(true);
    } finally {
      s.disconnect();
    }
  }, 90_000);
});

describe('redis+cluster://', () => {
  let port: number;
  beforeAll(async () => {
    port = await serve(
      'cluster-node',
      (p) => [
        '--port',
        String(p),
        '--bind',
        '127.0.0.1',
        '--cluster-enabled',
        'yes',
        // Alone, a node has never been told its own address (CLUSTER SLOTS would name host "").
        '--cluster-announce-ip',
        '127.0.0.1',
        '--cluster-config-file',
        join(dir, `nodes-${p}.conf`),
        '--save',
        '',
        '--appendonly',
        'no',
        '--dir',
        dir,
      ],
      async (c) => {
        const info = String(await c.call('CLUSTER', 'INFO'));
        if (info.includes('cluster_state:ok')) return true;
        await c.call('CLUSTER', 'ADDSLOTSRANGE', '0', '16383').catch(() => undefined);
        return false;
      },
    );
  });

  it('refuses keys of two slots in one script (so the check below is not vacuous)', async () => {
    const c = new Redis({ port, host: '127.0.0.1' });
    try {
      await expect(
        c.eval("return redis.call('GET', KEYS[1])", 2, 'fencepost:fence:default/a', 'fencepost:lock:default/a'),
      ).rejects.toThrow(/CROSSSLOT/);
    } finally {
      c.disconnect();
    }
  });

  it('grants, renews and releases: holder and counter share a slot', async () => {
    const store = `redis+cluster://127.0.0.1:${port}`;
    const lock = await acquire('via-cluster', { store, ttlMs: 600, waitMs: 5000 }); // CROSSSLOT would end here
    await sleep(800); // past the TTL: only the renews (compare-and-PEXPIRE) keep it
    expect(lock.isHeld()).toBe(true);
    await lock.release();
    const next = await acquire('via-cluster', { store, ttlMs: 600, ifHeld: 'fail' });
    expect(next).toMatchObject({ token: lock.token + 1n, clockFloored: false }); // the epoch key shares the slot too
    await next.release();
  });
});
