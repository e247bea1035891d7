// The Java client's Redis lock stores (clients/java: LockStore, StoreLock) against the TypeScript
// ones, on real redis-servers this file starts: one single Redis, five Redlock masters, and one
// guard Redis for the data. A Java worker and a Node worker contend for one lock (test/support/store-contention.ts), for a redis:// and a redlock:// URL — both
// acquire, never two holders at once, every token distinct, every fenced write applied. Also: the
// README's store example runs, and the Java store tests (StoreRedisTest) run on real servers
// here rather than being skipped. The Java code is built once per change of its sources
// (javaBuild, kept in the fencepost cache) and copied into a temporary folder.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { javaBuild, mvn, requireJava } from '../../support/client-toolchains.ts';
import { assertContention, runStoreContention, type ContentionEvent } from '../../support/store-contention.ts';
import { startRedis, type RedisServer } from '../../support/testbed/redis.ts';

/** switches counts how often the holder changed worker between consecutive grants. */
function switches(events: readonly ContentionEvent[]): number {
  const order = events.filter((e) => e.event === 'acquired').map((e) => e.worker);
  return order.slice(1).filter((w, i) => w !== order[i]).length;
}

describe('the Java Redis stores against the TypeScript ones, on real redis-servers', () => {
  let dir = '';
  let build = '';
  let classpath = '';
  let single: RedisServer | undefined;
  let guard: RedisServer | undefined;
  const masters: RedisServer[] = [];

  beforeAll(async () => {
    process.stdout.write(`java store: ${requireJava()}\n`);
    dir = mkdtempSync(join(tmpdir(), 'fencepost-java-store-'));
    build = join(dir, 'target');
    const started = performance.now();
    // The servers start while Maven builds. They are recorded as soon as they are up, so that
    // afterAll stops them even when the build fails (they were left running before).
    const servers = Promise.all([startRedis(), startRedis(), ...Array.from({ length: 5 }, () => startRedis())]).then(
      ([s, g, ...m]) => {
        single = s;
        guard = g;
        masters.push(...m);
      },
    );
    try {
      classpath = await javaBuild(build);
    } finally {
      await servers;
    }
    process.stdout.write(`java store: built in ${Math.round(performance.now() - started)} ms\n`);
  });
  afterAll(async () => {
    await Promise.all([single, guard, ...masters].map(async (s) => s?.stop()));
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
  });

  const storeUrl = (kind: 'redis' | 'redlock'): string =>
    kind === 'redis' ? (single?.url ?? '') : `redlock://${masters.map((m) => `127.0.0.1:${m.port}`).join(',')}`;

  it.each(['redis', 'redlock'] as const)(
    '%s:// — a Java and a Node worker contend for one lock: both acquire, no overlap, every token distinct, every write applied',
    async (kind) => {
      const lock = `xlang-${kind}-${randomBytes(4).toString('hex')}`;
      const started = performance.now();
      const events = await runStoreContention({
        foreign: { command: 'java', args: ['-cp', classpath, 'example.StoreContentionWorker'] },
        storeUrl: storeUrl(kind),
        guardUrl: guard?.url ?? '',
        lock,
        rounds: 30,
        holdMs: 20,
        ttlMs: 2000,
      });
      assertContention(events, 'java');
      const acquired = events.filter((e) => e.event === 'acquired');
      process.stdout.write(
        `java store: ${kind}:// ${acquired.length} grants (${acquired.filter((e) => e.worker === 'java').length} java), ${switches(events)} hand-overs between the workers, in ${Math.round(performance.now() - started)} ms\n`,
      );
      // They really contended: the lock went from one language to the other and back.
      expect(switches(events)).toBeGreaterThanOrEqual(2);
      // Every grant of both came from the one counter, which ends at the largest token.
      const top = acquired.map((e) => BigInt(e.token ?? '0')).reduce((a, b) => (a > b ? a : b), 0n);
      const counter = `fencepost:fence:default/${lock}`;
      const stores = kind === 'redis' ? [single] : masters;
      const counters = await Promise.all(
        stores.map(async (s) => {
          const c = s?.client();
          try {
            return await c?.get(counter);
          } finally {
            c?.disconnect();
          }
        }),
      );
      // Single Redis: exactly the top token. Redlock: at least a majority stands at it.
      expect(counters.filter((v) => v === top.toString()).length).toBeGreaterThanOrEqual(
        Math.floor(stores.length / 2) + 1,
      );
    },
  );

  it("the README's store example holds the lock three times and writes through the guard under increasing tokens", async () => {
    const lock = `readme-${randomBytes(4).toString('hex')}`;
    const r = await promisify(execFile)('java', ['-cp', classpath, 'example.StoreExample'], {
      env: { ...process.env, FENCEPOST_STORE: storeUrl('redis'), FENCEPOST_LOCK: lock, REDIS_URL: guard?.url ?? '' },
    });
    const runs = [...r.stdout.matchAll(/^run (\d): token (\d+), write applied$/gm)].map((m) => BigInt(m[2] ?? '0'));
    // A new lock's first token is the Redis server's clock in µs (fence_epoch), then +1 per grant.
    const first = runs[0] ?? 0n;
    expect(runs, r.stdout + r.stderr).toEqual([first, first + 1n, first + 2n]);
    expect(first).toBeGreaterThan(1_000_000_000_000_000n);
    const c = guard?.client();
    try {
      expect(await c?.get('report:latest')).toBe(`report 3 written under token ${first + 2n}`);
    } finally {
      c?.disconnect();
    }
  });

  it('the Java store tests run on real redis-servers here, not skipped (StoreRedisTest)', async () => {
    await mvn([`-Dfencepost.buildDir=${build}`, 'surefire:test', '-Dtest=StoreRedisTest']);
    const reports = join(build, 'surefire-reports');
    const xml = readdirSync(reports)
      .filter((f) => f.endsWith('.xml'))
      .map((f) => readFileSync(join(reports, f), 'utf8'))
      .join('\n');
    const cases = (xml.match(/<testcase /g) ?? []).length;
    process.stdout.write(`java store: StoreRedisTest: ${cases} cases passed\n`);
    expect(cases).toBeGreaterThanOrEqual(15);
    expect(xml).not.toContain('<skipped');
    expect(xml).not.toContain('<failure');
    expect(xml).not.toContain('<error');
  });
});
