// The cross-language contention harness, proved on itself first: two Node workers (the foreign
// one is the Node worker again, under another name) contend for one lock on a single Redis and on
// five Redlock masters; the other languages' tests (test/integration/clients/*-store.test.ts)
// run the same harness against their own worker.
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertContention, runStoreContention } from '../../support/store-contention.ts';
import { startRedis, type RedisServer } from '../../support/testbed/redis.ts';

const NODE_WORKER = resolve(import.meta.dirname, '../../support/store-contention-worker.ts');

describe('the store contention harness, Node against Node', () => {
  const servers: RedisServer[] = [];
  beforeAll(async () => {
    servers.push(...(await Promise.all(Array.from({ length: 7 }, () => startRedis()))));
  });
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()));
  });
  const hostPort = (s: RedisServer) => s.url.replace(/^redis:\/\//, '');

  it.each(['redis', 'redlock'] as const)('%s: both acquire, never together, every write applied', async (kind) => {
    const [guard, single, ...masters] = servers as [RedisServer, RedisServer, ...RedisServer[]];
    const storeUrl = kind === 'redis' ? single.url : `redlock://${masters.map(hostPort).join(',')}`;
    const events = await runStoreContention({
      // The same worker under another name: `worker` is what the harness tells apart.
      foreign: { command: process.execPath, args: [NODE_WORKER, '--worker-name', 'twin'] },
      storeUrl,
      guardUrl: guard.url,
      lock: `contend-${kind}`,
      rounds: 8,
    });
    assertContention(events, 'twin');
    expect(events.filter((e) => e.event === 'acquired').length).toBe(16);
  });
});
