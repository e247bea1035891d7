import { afterAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { startRedis, type RedisServer } from '../../support/testbed/redis.ts';
import { startTcpProxy, type TcpProxy } from '../../support/testbed/tcp-proxy.ts';
import { startLaggingReplica } from '../../safety/faults/redis-failover.ts';

describe('a Redis failover to a lagging replica behind the counter proxy', () => {
  const servers: RedisServer[] = [];
  let proxy: TcpProxy | undefined;
  afterAll(async () => {
    await proxy?.close();
    await Promise.allSettled(servers.map((s) => s.stop()));
  });

  it('retargets new connections and leaves the promoted replica missing the writes since the cut', async () => {
    const primary = await startRedis();
    servers.push(primary);
    proxy = await startTcpProxy({ targetPort: primary.port });
    const viaProxy = (): Redis => {
      const c = new Redis(`redis://127.0.0.1:${proxy?.port ?? 0}`, {
        maxRetriesPerRequest: 1,
        retryStrategy: () => null,
      });
      c.on('error', () => undefined);
      return c;
    };
    const a = viaProxy();
    try {
      for (let i = 0; i < 5; i++) await a.incr('fence');
    } finally {
      a.disconnect();
    }

    const replica = await startLaggingReplica(primary);
    servers.push(replica.server);
    const b = viaProxy();
    try {
      // After the cut: these reach the primary only.
      expect(await b.incr('fence')).toBe(6);
      expect(await b.incr('fence')).toBe(7);
    } finally {
      b.disconnect();
    }

    await replica.promote(primary);
    expect(primary.process().isRunning()).toBe(false);
    proxy.retarget(replica.server.port);
    expect(proxy.targetPort).toBe(replica.server.port);
    const c = viaProxy();
    try {
      expect(await c.get('fence')).toBe('5'); // the two INCRs after the cut are lost
      expect(await c.incr('fence')).toBe(6); // a bare INCR reissues 6: what the etcd floor prevents
      const role = String(await c.call('ROLE'));
      expect(role.startsWith('master')).toBe(true);
    } finally {
      c.disconnect();
    }
  }, 60_000);

  it('refuses a target that is not a port', async () => {
    const p = await startTcpProxy({ targetPort: 1 });
    try {
      expect(() => {
        p.retarget(0);
      }).toThrow(/invalid target port/);
    } finally {
      await p.close();
    }
  });
});
