// The Redis lock stores of the four languages, in one conformance matrix on one set of real
// redis-servers that this file starts: one single Redis, five Redlock masters and one guard Redis
// for the data. The clients must agree on keys, scripts and tokens (clients/conformance/store.json;
// the scripts and key prefixes are generated into each client from it, hack/gen-protocol.ts):
//
// - contention, on a redis:// and on a redlock:// URL: the Go, Python and Java workers each run
//   their rounds on one lock at the same time as a Node worker (the TypeScript library;
//   test/support/store-contention.ts), each writing through its own language's Redis guard, both
//   started together once both are connected. Both acquire, never together, every token distinct
//   and increasing per worker, every fenced write applied, the counter (on a majority of the masters) and the
//   guarded data end at the highest token;
// - the README's store example of each client, which acquires, writes through the guard under
//   increasing tokens and releases.
//
// The TypeScript row is the Node worker's side of each contention. At the end the file prints the
// matrix (language × vector → pass). The Go, Python and Java store unit tests, which run
// store.json's own vectors and start redis-servers of their own, run once, in
// hack/test-clients.sh (CI's "Language clients" step), which fails if they skip.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GO_MODULE, javaBuild, requireGo, requireJava } from '../../support/client-toolchains.ts';
import {
  assertContention,
  runStoreContention,
  type ContentionEvent,
  type ForeignWorker,
} from '../../support/store-contention.ts';
import { startRedis, type RedisServer } from '../../support/testbed/redis.ts';

const ROOT = resolve(import.meta.dirname, '../../..');
const PY_CLIENT = join(ROOT, 'clients/python');

type Language = 'go' | 'python' | 'java';
type Kind = 'redis' | 'redlock';
const LANGUAGES: readonly Language[] = ['go', 'python', 'java'];
const KINDS: readonly Kind[] = ['redis', 'redlock'];

/**
 * Rounds and hold times per language. Both workers start their rounds together (the harness waits
 * until both are connected), so the first round is a race and the loser waits for the winner's
 * release. How often the lock changes hands after that is not promised: neither store queues its
 * waiters, and on one Redis the releasing worker's next acquire usually reaches Redis before the
 * woken waiter's (seen: 20 go, then 20 node). The hand-overs are printed, not asserted.
 */
const PLAN: Readonly<Record<Language, { rounds: number; holdMs: number }>> = {
  go: { rounds: 20, holdMs: 200 },
  python: { rounds: 25, holdMs: 40 },
  java: { rounds: 30, holdMs: 20 },
};

/** switches counts how often the holder changed worker between consecutive grants. */
function switches(events: readonly ContentionEvent[]): number {
  const order = events.filter((e) => e.event === 'acquired').map((e) => e.worker);
  return order.slice(1).filter((w, i) => w !== order[i]).length;
}

/** MATRIX: each cell's outcome, filled as the tests run and printed at the end. */
const matrix = new Map<string, Map<string, 'pass' | 'FAIL'>>();
function record(language: string, vector: string, ok: boolean): void {
  const row = matrix.get(language) ?? new Map<string, 'pass' | 'FAIL'>();
  row.set(vector, ok ? 'pass' : 'FAIL');
  matrix.set(language, row);
}

/** cell runs `check` as the matrix cell (language, vector): a throw records FAIL and fails the test. */
async function cell(languages: readonly string[], vector: string, check: () => Promise<void>): Promise<void> {
  try {
    await check();
    for (const l of languages) record(l, vector, true);
  } catch (e) {
    for (const l of languages) record(l, vector, false);
    throw e;
  }
}

describe('the Redis lock stores of TypeScript, Go, Python and Java: one conformance matrix', () => {
  let dir = '';
  let goBin = '';
  let python = '';
  let classpath = '';
  const servers: RedisServer[] = [];

  beforeAll(async () => {
    process.stdout.write(`stores: ${requireGo()}; ${requireJava()}\n`);
    dir = mkdtempSync(join(tmpdir(), 'fencepost-client-stores-'));
    goBin = join(dir, 'go-bin');
    const started = performance.now();
    // The servers start while the three toolchains build. They are recorded as soon as they are
    // up, so that afterAll stops them even when a build fails.
    const up = Promise.all(Array.from({ length: 7 }, () => startRedis())).then((s) => servers.push(...s));
    try {
      const [, venv, cp] = await Promise.all([
        promisify(execFile)('go', ['build', '-o', `${goBin}/`, './examples/store-worker', './examples/store'], {
          cwd: GO_MODULE,
        }),
        promisify(execFile)(join(ROOT, 'hack/python-venv.sh'), [], { cwd: ROOT }).then((r) => r.stdout.trim()),
        javaBuild(join(dir, 'java-target')),
      ]);
      python = join(venv, 'bin', 'python');
      classpath = cp;
    } finally {
      await up;
    }
    process.stdout.write(
      `stores: Go, Python and Java ready and 7 redis-servers up in ${Math.round(performance.now() - started)} ms\n`,
    );
  });

  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()));
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
    const vectors = [...new Set([...matrix.values()].flatMap((row) => [...row.keys()]))];
    const width = Math.max(...vectors.map((v) => v.length), 6);
    const lines = [
      `${'language'.padEnd(12)}${vectors.map((v) => v.padEnd(width + 2)).join('')}`,
      ...['typescript', ...LANGUAGES].map(
        (l) => `${l.padEnd(12)}${vectors.map((v) => (matrix.get(l)?.get(v) ?? '-').padEnd(width + 2)).join('')}`,
      ),
    ];
    process.stdout.write(`stores: conformance matrix (language × vector)\n${lines.join('\n')}\n`);
  });

  const guard = (): RedisServer => servers[0] as RedisServer;
  const single = (): RedisServer => servers[1] as RedisServer;
  const masters = (): RedisServer[] => servers.slice(2);
  const storeUrl = (kind: Kind): string =>
    kind === 'redis'
      ? single().url
      : `redlock://${masters()
          .map((m) => `127.0.0.1:${m.port}`)
          .join(',')}`;
  const pyEnv = (): NodeJS.ProcessEnv => ({ ...process.env, PYTHONDONTWRITEBYTECODE: '1' });

  const foreign = (language: Language): ForeignWorker => {
    switch (language) {
      case 'go':
        return { command: join(goBin, 'store-worker') };
      case 'python':
        return { command: python, args: [join(PY_CLIENT, 'tests/store_contention_worker.py')], env: pyEnv() };
      case 'java':
        return { command: 'java', args: ['-cp', classpath, 'example.StoreContentionWorker'] };
    }
  };

  /** get reads one key of a server. */
  const get = async (s: RedisServer, key: string): Promise<string | null> => {
    const c = s.client();
    try {
      return await c.get(key);
    } finally {
      c.disconnect();
    }
  };

  const pairs = LANGUAGES.flatMap((language) => KINDS.map((kind) => ({ language, kind })));
  it.each(pairs)(
    '$kind://: a $language and a Node worker contend for one lock: both acquire, never together, distinct tokens, every write applied',
    async ({ language, kind }) => {
      await cell([language, 'typescript'], `${kind}:// vs node`, async () => {
        const plan = PLAN[language];
        const lock = `xlang-${language}-${kind}-${randomBytes(3).toString('hex')}`;
        const started = performance.now();
        const events = await runStoreContention({
          foreign: foreign(language),
          storeUrl: storeUrl(kind),
          guardUrl: guard().url,
          lock,
          namespace: 'cross-lang',
          rounds: plan.rounds,
          holdMs: plan.holdMs,
          ttlMs: 2000,
        });
        assertContention(events, language);
        const acquired = events.filter((e) => e.event === 'acquired');
        const by = (w: string): number => acquired.filter((e) => e.worker === w).length;
        const top = acquired.map((e) => BigInt(e.token ?? '0')).reduce((a, b) => (a > b ? a : b), 0n);
        process.stdout.write(
          `stores: ${language} ${kind}:// ${acquired.length} grants (node ${by('node')}, ${language} ${by(language)}), ` +
            `${switches(events)} hand-overs, tokens up to ${top}, in ${Math.round(performance.now() - started)} ms; ` +
            `order ${acquired.map((e) => (e.worker === 'node' ? 'N' : language[0]?.toUpperCase())).join('')}\n`,
        );
        expect(by('node')).toBe(plan.rounds);
        expect(by(language)).toBe(plan.rounds);
        // Every grant of both came from the one counter, which ends at the largest token: on one
        // Redis exactly; on Redlock at least on a majority of the masters.
        const counter = `fencepost:fence:cross-lang/${lock}`;
        const stores = kind === 'redis' ? [single()] : masters();
        const counters = await Promise.all(stores.map((s) => get(s, counter)));
        expect(counters.filter((v) => v === top.toString()).length).toBeGreaterThanOrEqual(
          Math.floor(stores.length / 2) + 1,
        );
        // The guarded data holds the last (highest) token written, through whichever guard wrote
        // it, and nobody is inside any more.
        expect(await get(guard(), `${lock}:data`)).toBe(top.toString());
        expect(await get(guard(), `${lock}:inside`)).toBe('0');
      });
    },
  );

  /** README: each client's README store example, run as it is, and the tokens it wrote. */
  const README: Record<Language, (lock: string, kind: Kind) => Promise<void>> = {
    go: async (lock, kind) => {
      const written = (stdout: string): bigint => {
        const m = /^wrote "report written under token (\d+)" \(applied\)\n$/.exec(stdout);
        expect(m, stdout).not.toBeNull();
        return BigInt(m?.[1] ?? '0');
      };
      const env = { ...process.env, FENCEPOST_STORE: storeUrl(kind), FENCEPOST_LOCK: lock, REDIS_URL: guard().url };
      // A new lock's first token is the Redis server's clock in µs (fence_epoch), then +1.
      const before = BigInt(Date.now()) * 1000n;
      const first = written((await promisify(execFile)(join(goBin, 'store'), [], { env })).stdout);
      expect(first).toBeGreaterThan(before);
      const second = written((await promisify(execFile)(join(goBin, 'store'), [], { env })).stdout);
      expect(second).toBe(first + 1n);
      expect(await get(guard(), 'report:latest')).toBe(`report written under token ${second}`);
    },
    python: async (lock) => {
      const r = await promisify(execFile)(python, [join(PY_CLIENT, 'examples/store_worker.py')], {
        env: { ...pyEnv(), REDIS_URL: single().url, FENCEPOST_LOCK: lock },
      });
      const written = /wrote '(report written under token (\d+))' to redis \(applied\)/.exec(r.stdout);
      expect(written, r.stdout + r.stderr).not.toBeNull();
      expect(await get(single(), 'report:latest')).toBe(written?.[1]);
      // Released: the holder key is gone; the counter stays.
      const c = single().client();
      try {
        expect(await c.exists(`fencepost:lock:{fencepost:fence:default/${lock}}`)).toBe(0);
      } finally {
        c.disconnect();
      }
      expect(await get(single(), `fencepost:fence:default/${lock}`)).toBe(written?.[2]);
    },
    java: async (lock) => {
      const r = await promisify(execFile)('java', ['-cp', classpath, 'example.StoreExample'], {
        env: { ...process.env, FENCEPOST_STORE: storeUrl('redis'), FENCEPOST_LOCK: lock, REDIS_URL: guard().url },
      });
      const runs = [...r.stdout.matchAll(/^run (\d): token (\d+), write applied$/gm)].map((m) => BigInt(m[2] ?? '0'));
      // A new lock's first token is the Redis server's clock in µs (fence_epoch), then +1 per grant.
      const first = runs[0] ?? 0n;
      expect(runs, r.stdout + r.stderr).toEqual([first, first + 1n, first + 2n]);
      expect(first).toBeGreaterThan(1_000_000_000_000_000n);
      expect(await get(guard(), 'report:latest')).toBe(`report 3 written under token ${first + 2n}`);
    },
  };

  // One after another: the Go and Java examples write the guard Redis's report:latest. The Go
  // example takes a store URL, and runs on Redlock too.
  const examples: readonly { language: Language; kind: Kind }[] = [
    { language: 'go', kind: 'redis' },
    { language: 'go', kind: 'redlock' },
    { language: 'python', kind: 'redis' },
    { language: 'java', kind: 'redis' },
  ];
  it.each(examples)(
    "$language, $kind://: the README's store example acquires, writes through the guard and releases",
    async ({ language, kind }) => {
      const lock = `readme-${language}-${kind}-${randomBytes(3).toString('hex')}`;
      await cell([language], `README ${kind}://`, () => README[language](lock, kind));
    },
  );
});
