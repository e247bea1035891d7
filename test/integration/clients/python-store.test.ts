// The Python client's Redis lock stores (clients/python, fencepost.store) against real
// redis-servers of this file's own: one single Redis, five Redlock masters, one guard Redis. The
// Python code runs in the virtualenv of hack/python-venv.sh (made here when missing).
//
// - Cross-language contention (test/support/store-contention.ts): the Node worker and the Python
//   worker (clients/python/tests/store_contention_worker.py) contend for one lock, on redis:// and
//   on redlock://, each writing through its own language's Redis guard: both acquire, never
//   together, every token distinct, every write applied — the two agree on keys, scripts, tokens.
// - The README's store example (clients/python/examples/store_worker.py) against the single Redis.
// - The Python store tests themselves (pytest tests/test_store_redis.py, test_store_vectors.py),
//   which start redis-servers of their own: they must pass and none may skip.
import { execFile } from 'node:child_process';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertContention, runStoreContention } from '../../support/store-contention.ts';
import { startRedis, type RedisServer } from '../../support/testbed/redis.ts';

const ROOT = resolve(import.meta.dirname, '../../..');
const PY_CLIENT = join(ROOT, 'clients/python');
const ROUNDS = 25;

describe('the Python Redis lock stores against real redis-servers and the Node library', () => {
  const servers: RedisServer[] = [];
  let python = '';

  beforeAll(async () => {
    const started = performance.now();
    const [venv] = await Promise.all([
      promisify(execFile)(join(ROOT, 'hack/python-venv.sh'), [], { cwd: ROOT }).then((r) => r.stdout.trim()),
      Promise.all(Array.from({ length: 7 }, () => startRedis())).then((s) => servers.push(...s)),
    ]);
    python = join(venv, 'bin', 'python');
    process.stdout.write(
      `python store: venv ${venv} and 7 redis-servers ready in ${Math.round(performance.now() - started)} ms\n`,
    );
  });
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()));
  });

  const hostPort = (s: RedisServer): string => s.url.replace(/^redis:\/\//, '');
  const pyEnv = (): NodeJS.ProcessEnv => ({ ...process.env, PYTHONDONTWRITEBYTECODE: '1' });

  it.each(['redis', 'redlock'] as const)(
    '%s: a Python worker and a Node worker both acquire, never together, with distinct tokens, every write applied',
    async (kind) => {
      const [guard, single, ...masters] = servers as [RedisServer, RedisServer, ...RedisServer[]];
      const storeUrl = kind === 'redis' ? single.url : `redlock://${masters.map(hostPort).join(',')}`;
      const events = await runStoreContention({
        foreign: { command: python, args: [join(PY_CLIENT, 'tests/store_contention_worker.py')], env: pyEnv() },
        storeUrl,
        guardUrl: guard.url,
        lock: `py-contend-${kind}`,
        namespace: 'cross-lang',
        // Long enough that the two overlap although Node takes longer to start than Python.
        rounds: ROUNDS,
        holdMs: 40,
        ttlMs: 2000,
      });
      assertContention(events, 'python');
      const acquired = events.filter((e) => e.event === 'acquired');
      const by = (w: string): number => acquired.filter((e) => e.worker === w).length;
      process.stdout.write(
        `python store: ${kind}: ${acquired.length} grants (node ${by('node')}, python ${by('python')}), ` +
          `tokens ${acquired[0]?.token}..${acquired.at(-1)?.token}, ` +
          `order ${acquired.map((e) => (e.worker === 'node' ? 'N' : 'P')).join('')}\n`,
      );
      expect(by('node')).toBe(ROUNDS);
      expect(by('python')).toBe(ROUNDS);
      // The grants interleave: the two really contended (neither ran all its rounds first).
      const order = acquired.map((e) => e.worker).join(',');
      expect(order).not.toBe(
        [...Array<string>(ROUNDS).fill('node'), ...Array<string>(ROUNDS).fill('python')].join(','),
      );
      expect(order).not.toBe(
        [...Array<string>(ROUNDS).fill('python'), ...Array<string>(ROUNDS).fill('node')].join(','),
      );
      // The guard's data key holds the last token written, through whichever guard wrote it.
      const data = guard.client();
      try {
        const last = events.filter((e) => e.event === 'write').at(-1);
        expect(await data.get(`py-contend-${kind}:data`)).toBe(last?.token);
        expect(await data.get(`py-contend-${kind}:inside`)).toBe('0');
      } finally {
        data.disconnect();
      }
    },
  );

  it("the README's store example holds a store lock and writes through the guard", async () => {
    const single = servers[1] as RedisServer;
    const r = await promisify(execFile)(python, [join(PY_CLIENT, 'examples/store_worker.py')], {
      env: { ...pyEnv(), REDIS_URL: single.url, FENCEPOST_LOCK: 'py-readme' },
    });
    const written = /wrote '(report written under token (\d+))' to redis \(applied\)/.exec(r.stdout);
    expect(written, r.stdout + r.stderr).not.toBeNull();
    const c = single.client();
    try {
      expect(await c.get('report:latest')).toBe(written?.[1]);
      // Released: the holder key is gone; the counter stays.
      expect(await c.exists('fencepost:lock:{fencepost:fence:default/py-readme}')).toBe(0);
      expect(await c.get('fencepost:fence:default/py-readme')).toBe(written?.[2]);
    } finally {
      c.disconnect();
    }
  });

  it('the Python store tests pass against redis-servers of their own, none skipped', async () => {
    const r = await promisify(execFile)(
      python,
      ['-m', 'pytest', '-v', '-p', 'no:cacheprovider', 'tests/test_store_redis.py', 'tests/test_store_vectors.py'],
      { cwd: PY_CLIENT, env: pyEnv(), maxBuffer: 16 << 20 },
    );
    const passed = r.stdout.split('\n').filter((l) => l.includes(' PASSED')).length;
    process.stdout.write(`python store: ${passed} pytest tests passed\n`);
    expect(r.stdout).not.toContain('SKIPPED');
    expect(r.stdout).not.toContain('FAILED');
    expect(r.stdout).toMatch(/test_redlock_raises_the_token_to_the_majoritys_largest_counter PASSED/);
    expect(passed).toBeGreaterThan(80);
  });
});
