// The Go client's lock stores (clients/go/store) against real redis-servers of this file's own —
// one single Redis, five Redlock masters and one guard Redis — and against the TypeScript library:
// the cross-language contention, where the clients must agree on keys, scripts and tokens. A Node
// worker (the library's acquire({ store }) and its Redis guard) and the Go worker
// (clients/go/examples/store-worker: package store and the Go Redis guard) run their rounds on one
// lock at the same time: both acquire, never together, every token distinct, every fenced write
// applied — for a redis:// and a redlock:// URL. Then the README's store example runs on both. The
// Go code is built once per file into a temporary folder.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GO_MODULE, requireGo } from '../../support/client-toolchains.ts';
import { assertContention, runStoreContention } from '../../support/store-contention.ts';
import { startRedis, type RedisServer } from '../../support/testbed/redis.ts';

describe('the Go lock stores against real redis-servers and the TypeScript library', () => {
  const servers: RedisServer[] = [];
  let dir = '';
  let bin = '';

  beforeAll(async () => {
    process.stdout.write(`go store: ${requireGo()}\n`);
    dir = mkdtempSync(join(tmpdir(), 'fencepost-go-store-'));
    bin = join(dir, 'bin');
    const started = performance.now();
    const [, ...started7] = await Promise.all([
      promisify(execFile)('go', ['build', '-o', `${bin}/`, './examples/store-worker', './examples/store'], {
        cwd: GO_MODULE,
      }),
      ...Array.from({ length: 7 }, () => startRedis()),
    ]);
    servers.push(...started7);
    process.stdout.write(`go store: built and 7 redis-servers up in ${Math.round(performance.now() - started)} ms\n`);
  });

  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()));
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
  });

  const hostPort = (s: RedisServer): string => s.url.replace(/^redis:\/\//, '');
  const storeUrl = (kind: 'redis' | 'redlock'): string => {
    const [, single, ...masters] = servers as [RedisServer, RedisServer, ...RedisServer[]];
    return kind === 'redis' ? single.url : `redlock://${masters.map(hostPort).join(',')}`;
  };
  const guard = (): RedisServer => servers[0] as RedisServer;

  it.each(['redis', 'redlock'] as const)(
    '%s: a Go and a Node worker contend for one lock: both acquire, never together, distinct tokens, every write applied',
    async (kind) => {
      const rounds = 20;
      const events = await runStoreContention({
        foreign: { command: join(bin, 'store-worker') },
        storeUrl: storeUrl(kind),
        guardUrl: guard().url,
        lock: `go-contend-${kind}`,
        rounds,
        // Long enough that the rounds overlap: the Node worker takes one to three seconds to
        // start on a busy machine, the Go worker a few milliseconds.
        holdMs: 200,
        ttlMs: 2000,
      });
      assertContention(events, 'go');
      const acquired = events.filter((e) => e.event === 'acquired');
      expect(acquired).toHaveLength(2 * rounds);
      // The Go worker's tokens came from the same counter as the Node worker's: the last write
      // in the guard Redis is the highest token of both.
      const highest = acquired.map((e) => BigInt(e.token ?? '0')).reduce((a, b) => (a > b ? a : b));
      const c = guard().client();
      try {
        expect(await c.get(`go-contend-${kind}:data`)).toBe(highest.toString());
        expect(await c.get(`go-contend-${kind}:inside`)).toBe('0');
      } finally {
        c.disconnect();
      }
      // The grants' order. Neither store queues its waiters: on one Redis, the Go worker's next
      // acquire right after its own release reaches Redis before the Node worker, woken by that
      // release, has sent its attempt, so the Go worker usually takes every round it wants while
      // the Node worker waits (seen: 20 go, then 20 node). On Redlock they interleave.
      const order = acquired.map((e) => e.worker);
      const switches = order.filter((w, i) => i > 0 && w !== order[i - 1]).length;
      process.stdout.write(`go store ${kind}: grant order ${order.map((w) => w[0]).join('')}\n`);
      expect(switches).toBeGreaterThan(kind === 'redlock' ? 2 : 0);
      process.stdout.write(
        `go store ${kind}: ${acquired.filter((e) => e.worker === 'go').length} go and ${acquired.filter((e) => e.worker === 'node').length} node grants, tokens up to ${highest}\n`,
      );
    },
  );

  it.each(['redis', 'redlock'] as const)(
    "%s: the README's store example acquires, writes through the guard and releases",
    async (kind) => {
      const lock = `go-readme-${kind}`;
      const env = { ...process.env, FENCEPOST_STORE: storeUrl(kind), FENCEPOST_LOCK: lock, REDIS_URL: guard().url };
      const written = (stdout: string): bigint => {
        const m = /^wrote "report written under token (\d+)" \(applied\)\n$/.exec(stdout);
        expect(m, stdout).not.toBeNull();
        return BigInt(m?.[1] ?? '0');
      };
      // A new lock's first token is the Redis server's clock in µs (fence_epoch), then +1.
      const before = BigInt(Date.now()) * 1000n;
      const first = written((await promisify(execFile)(join(bin, 'store'), [], { env })).stdout);
      expect(first).toBeGreaterThan(before);
      const second = written((await promisify(execFile)(join(bin, 'store'), [], { env })).stdout);
      expect(second).toBe(first + 1n);
      const c = guard().client();
      try {
        expect(await c.get('report:latest')).toBe(`report written under token ${second}`);
      } finally {
        c.disconnect();
      }
    },
  );
});
