// The controller tells a store lock's release from its expiry by the release message (the owner
// id, published by store-release.lua in the same script that deletes the key). In a CI run the
// controller called a Redlock release an expiry: the read that found the key gone was answered on
// one connection while the message still waited on the subscriber's, and the grace ran out first
// on a loaded machine. The reader now puts a barrier after each read (a PING on the subscriber
// connection, answered after the messages queued before it), so a release made before a read is
// heard by the time the read returns, however late the subscriber's bytes are. This test makes
// them late: the subscriber's connection (the reader's second) passes through a proxy that holds
// every byte from the server for 400 ms.
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acquire } from '../../../src/index.ts';
import { openStoreReader } from '../../../src/stores/observe.ts';
import { startRedis, type RedisServer } from '../../support/testbed/redis.ts';

const LATE_MS = 400;

/** lateSecondConnection: a loopback proxy to `port` that delays server→client bytes of its second connection. */
async function lateSecondConnection(port: number): Promise<{ port: number; server: Server; sockets: Socket[] }> {
  const sockets: Socket[] = [];
  let n = 0;
  const server = createServer((client) => {
    const late = ++n === 2;
    const upstream = createConnection({ host: '127.0.0.1', port });
    sockets.push(client, upstream);
    client.on('data', (b) => upstream.write(b));
    upstream.on('data', (b) => {
      if (late) setTimeout(() => client.writable && client.write(b), LATE_MS);
      else client.write(b);
    });
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return { port: address.port, server, sockets };
}

describe('store reader: a release made before a read is heard when the read returns', () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis.stop();
  });

  it('even when the subscriber connection is 400 ms late', async () => {
    const proxy = await lateSecondConnection(redis.port);
    const reader = await openStoreReader(`redis://127.0.0.1:${proxy.port}`, 'test store');
    const heard: string[] = [];
    try {
      await reader.onRelease((_ns, name, owner) => heard.push(`${name} ${owner}`));
      const lock = await acquire('barrier', { store: redis.url, ttlMs: 5000 });
      expect((await reader.read('default', 'barrier')).token).toBe(lock.token);
      await lock.release();
      const started = performance.now();
      const after = await reader.read('default', 'barrier');
      expect(after.owner).toBeUndefined();
      expect(heard).toHaveLength(1); // without the barrier: [] here, and the message 400 ms later
      expect(heard[0]).toMatch(/^barrier \S+$/);
      expect(performance.now() - started).toBeGreaterThanOrEqual(LATE_MS - 50); // it waited for the subscriber
    } finally {
      await reader.close();
      for (const s of proxy.sockets) s.destroy();
      await new Promise((resolve) => proxy.server.close(resolve));
    }
  });
});
