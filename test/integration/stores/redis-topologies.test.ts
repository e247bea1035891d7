/**
 * Issue 19: the Sentinel and Cluster URLs work through ioredis, against real servers started
 * here (redis-server; a Sentinel is redis-server with --sentinel):
 *
 * - redis+sentinel://: a Sentinel monitoring one master; acquire finds the master through it;
 * - redis+cluster://: a one-node Redis Cluster owning every slot. A Cluster refuses a script whose
 *   keys hash to different slots (CROSSSLOT) even on one node, so this shows that the holder key's
 *   hash tag puts it in its counter's slot: the grant and its token stay one script.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acquire } from '../../../src/index.ts';
import { freePort } from '../../support/testbed/ports.ts';
import { spawnManaged, type ManagedProcess } from '../../support/testbed/processes.ts';
import { redisServerBinary, startRedis, type RedisServer } from '../../support/testbed/redis.ts';

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
    expect(lock.token).toBe(1n);
    const c = master.client();
    try {
      expect(await c.get('fencepost:fence:default/via-sentinel')).toBe('1');
      expect(await c.exists('fencepost:lock:{fencepost:fence:default/via-sentinel}')).toBe(1);
      await lock.release();
      expect(await c.exists('fencepost:lock:{fencepost:fence:default/via-sentinel}')).toBe(0);
    } finally {
      c.disconnect();
    }
  });
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
    expect(next.token).toBe(2n);
    await next.release();
  });
});
