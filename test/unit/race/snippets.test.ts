/**
 * The race page's code panel: every call its snippets make exists, with that shape, in the client
 * it names — checked against the sources, so that a renamed API fails here rather than on a
 * reader's screen. (The clients' own READMEs have complete programs that their tests compile.)
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import * as fencepost from '../../../src/index.ts';
import { LANGUAGES, SNIPPETS, nextLanguage, parseLanguage, type Language } from '../../../hack/race/page/snippets.ts';

const root = resolve(import.meta.dirname, '../../..');
const source = (path: string): string => readFileSync(resolve(root, path), 'utf8');

/** API: per language, what the snippet calls and where the client defines it. */
const API: Readonly<
  Record<Language, readonly { readonly call: string; readonly file: string; readonly defined: RegExp }[]>
> = {
  ts: [
    {
      call: "acquire('billing', { waitMs: 30_000 })",
      file: 'src/client/acquire.ts',
      defined: /readonly waitMs\?: number/,
    },
    {
      call: "redisGuard(redis, { lock: 'billing' })",
      file: 'src/guards/redis-guard.ts',
      defined: /readonly lock\?: string/,
    },
    {
      call: "guard.write('ledger', lock.token,",
      file: 'src/guards/redis-guard.ts',
      defined: /write\(key: string, token: bigint \| string, value: string/,
    },
    {
      call: 'r.highWater',
      file: 'src/guards/redis-guard.ts',
      defined: /readonly accepted: false; readonly reason: 'stale'; readonly highWater: bigint/,
    },
  ],
  go: [
    {
      call: 'fencepost.Options{Wait: 30 * time.Second}',
      file: 'clients/go/fencepost/lock.go',
      defined: /\tWait time\.Duration/,
    },
    {
      call: 'fencepost.Acquire(ctx, "billing", opts)',
      file: 'clients/go/fencepost/lock.go',
      defined: /func Acquire\(ctx context\.Context, lock string, o Options\) \(\*Lock, error\)/,
    },
    { call: 'fencepost.ErrNotAcquired', file: 'clients/go/fencepost/errors.go', defined: /ErrNotAcquired = / },
    { call: 'guard.RedisOptions{Lock: "billing"}', file: 'clients/go/guard/redis.go', defined: /\tLock string/ },
    {
      call: 'guard.NewRedis(rdb, o)',
      file: 'clients/go/guard/redis.go',
      defined: /func NewRedis\(client redis\.Cmdable, o RedisOptions\) \(\*Redis, error\)/,
    },
    {
      call: 'g.Write(ctx, "ledger", lock.Token(), value)',
      file: 'clients/go/guard/redis.go',
      defined:
        /func \(g \*Redis\) Write\(ctx context\.Context, key string, token fencepost\.Token, value string\) \(RedisResult, error\)/,
    },
    { call: 'r.Accepted()', file: 'clients/go/guard/redis.go', defined: /func \(r RedisResult\) Accepted\(\) bool/ },
    { call: 'r.Mark', file: 'clients/go/guard/redis.go', defined: /\tMark fencepost\.Token/ },
  ],
  python: [
    {
      call: 'fencepost.acquire("billing", wait=30)',
      file: 'clients/python/src/fencepost/_lock.py',
      defined: /def acquire\(\n {4}lock: str,\n {4}\*,\n {4}wait: float \| None = None,/,
    },
    {
      call: 'RedisGuard(rdb, lock="billing")',
      file: 'clients/python/src/fencepost/guard/_redis.py',
      defined: /client: redis\.Redis,\n {8}\*,\n {8}lock: str \| None = None,/,
    },
    {
      call: 'guard.write("ledger", lock.token,',
      file: 'clients/python/src/fencepost/guard/_redis.py',
      defined: /def write\(self, key: str, token: int, value: str/,
    },
    {
      call: 'r.accepted',
      file: 'clients/python/src/fencepost/guard/_redis.py',
      defined: /@property\n {4}def accepted\(self\) -> bool/,
    },
    { call: 'r.mark', file: 'clients/python/src/fencepost/guard/_redis.py', defined: /mark: int \| None/ },
  ],
  java: [
    {
      call: 'Lock.options().waitFor(Duration.ofSeconds(30))',
      file: 'clients/java/src/main/java/io/fencepost/Lock.java',
      defined:
        /public static Options options\(\)[\s\S]*public Options waitFor\(Duration wait\)|public Options waitFor\(Duration wait\)[\s\S]*public static Options options\(\)/,
    },
    {
      call: 'Lock.acquire("billing", opts)',
      file: 'clients/java/src/main/java/io/fencepost/Lock.java',
      defined: /public static Lock acquire\(String name, Options o\)/,
    },
    {
      call: 'new RedisGuard(redis, "billing")',
      file: 'clients/java/src/main/java/io/fencepost/guard/RedisGuard.java',
      defined: /public RedisGuard\(JedisCommands redis, String lock\)/,
    },
    {
      call: 'guard.write("ledger", lock.token(),',
      file: 'clients/java/src/main/java/io/fencepost/guard/RedisGuard.java',
      defined: /public Result write\(String key, long token, String value\)/,
    },
    {
      call: 'r.mark().getAsLong()',
      file: 'clients/java/src/main/java/io/fencepost/guard/RedisGuard.java',
      defined: /public record Result\(Outcome outcome, OptionalLong mark\)/,
    },
  ],
};

describe('the code panel', () => {
  it.each(LANGUAGES)('%s: every call in the snippet is defined that way in the client', (l) => {
    for (const a of API[l]) {
      expect(SNIPPETS[l].code, a.call).toContain(a.call);
      expect(source(a.file), `${a.file} defines ${a.call}`).toMatch(a.defined);
    }
  });

  it('imports from the TypeScript package what it exports', () => {
    expect(SNIPPETS.ts.code).toContain("import { acquire, redisGuard } from 'fencepost';");
    expect(typeof fencepost.acquire).toBe('function');
    expect(typeof fencepost.redisGuard).toBe('function');
  });

  it('remembers only a known language, and moves between tabs like WAI-ARIA tabs', () => {
    expect(parseLanguage('go')).toBe('go');
    expect(parseLanguage('cobol')).toBe('ts');
    expect(parseLanguage(null)).toBe('ts');
    expect(nextLanguage('ts', 'ArrowRight')).toBe('go');
    expect(nextLanguage('ts', 'ArrowLeft')).toBe('java');
    expect(nextLanguage('python', 'Home')).toBe('ts');
    expect(nextLanguage('go', 'End')).toBe('java');
    expect(nextLanguage('go', 'Enter')).toBeUndefined();
  });
});
