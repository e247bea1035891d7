/**
 * The side panel's code: what the race's workers do, in each client's own API — acquire the lock,
 * write the ledger through the Redis guard with the lock's fencing token, treat a refusal as "a
 * newer holder has written". The calls are the real ones (src/index.ts, clients/go,
 * clients/python, clients/java; test/unit/race/snippets.test.ts checks the names against the
 * sources), shortened to the part that matters: each client's README has a complete program.
 */

/** Language is a tab of the panel. */
export type Language = 'ts' | 'go' | 'python' | 'java';

/** LANGUAGES in tab order. */
export const LANGUAGES: readonly Language[] = ['ts', 'go', 'python', 'java'];

/** Snippet is one tab's content. */
export interface Snippet {
  readonly label: string;
  /** note: one sentence under the code about how the client reaches the lock. */
  readonly note: string;
  readonly code: string;
}

/** SNIPPETS: the same worker in each language. */
export const SNIPPETS: Readonly<Record<Language, Snippet>> = {
  ts: {
    label: 'TypeScript',
    note: 'acquire() runs the lock session in-process (npm package fencepost); the guard only needs ioredis.',
    code: `import { acquire, redisGuard } from 'fencepost';
import { Redis } from 'ioredis';

// One mark for the lock: a token below it is refused.
const redis = new Redis(redisUrl);
const guard = redisGuard(redis, { lock: 'billing' });

// NotAcquiredError if not granted within 30 s.
await using lock = await acquire('billing', { waitMs: 30_000 });
// A pause here (GC, VM stall, SIGSTOP) can outlast the
// lease: then lock.token is stale when the write runs.
const value = \`written by \${pod} with token \${lock.token}\`;
const r = await guard.write('ledger', lock.token, value);
if (!r.accepted) {
  throw new Error(\`stale token \${lock.token} < \${r.highWater}\`);
}`,
  },
  go: {
    label: 'Go',
    note: 'Asks the fencepost agent beside it (clients/go); the guard takes a go-redis client.',
    code: `import (
	"github.com/fencepost/fencepost/clients/go/fencepost"
	"github.com/fencepost/fencepost/clients/go/guard"
)

opts := fencepost.Options{Wait: 30 * time.Second}
lock, err := fencepost.Acquire(ctx, "billing", opts)
if err != nil {
	return err // errors.Is(err, fencepost.ErrNotAcquired)
}
defer lock.Release()

// One mark for the lock: a token below it is refused.
o := guard.RedisOptions{Lock: "billing"}
g, err := guard.NewRedis(rdb, o)
if err != nil {
	return err
}
// A pause here can outlast the lease: the token goes stale.
value := fmt.Sprintf("written by %s with token %s",
	pod, lock.Token())
r, err := g.Write(ctx, "ledger", lock.Token(), value)
if err != nil {
	return err
}
if !r.Accepted() {
	return fmt.Errorf("stale token %s < %s", lock.Token(), r.Mark)
}`,
  },
  python: {
    label: 'Python',
    note: 'Asks the fencepost agent beside it (clients/python); the guard takes a redis-py client.',
    code: `import fencepost
import redis
from fencepost.guard import RedisGuard

# One mark for the lock: a token below it is refused.
rdb = redis.Redis.from_url(redis_url, decode_responses=True)
guard = RedisGuard(rdb, lock="billing")

# NotAcquiredError if not granted within 30 s.
with fencepost.acquire("billing", wait=30) as lock:
    # A pause here can outlast the lease: the token goes stale.
    value = f"written by {pod} with token {lock.token}"
    r = guard.write("ledger", lock.token, value)
    if not r.accepted:
        raise RuntimeError(f"stale token {lock.token} < {r.mark}")`,
  },
  java: {
    label: 'Java',
    note: 'Asks the fencepost agent beside it (clients/java); the guard takes a Jedis client.',
    code: `import io.fencepost.Lock;
import io.fencepost.guard.RedisGuard;
import redis.clients.jedis.RedisClient;

// NotAcquiredException if not granted within 30 s.
var opts = Lock.options().waitFor(Duration.ofSeconds(30));
try (Lock lock = Lock.acquire("billing", opts);
    var redis = RedisClient.create(URI.create(redisUrl))) {
  // One mark for the lock: a token below it is refused.
  RedisGuard guard = new RedisGuard(redis, "billing");
  // A pause here can outlast the lease: the token goes stale.
  String value = "written by " + pod
      + " with token " + lock.token();
  var r = guard.write("ledger", lock.token(), value); // a Result
  if (!r.accepted()) {
    throw new IllegalStateException("stale token " + lock.token()
        + " < " + r.mark().getAsLong());
  }
}`,
  },
};

/** STORAGE_KEY: where the chosen language is remembered (localStorage). */
export const STORAGE_KEY = 'fencepost.race.language';

/** parseLanguage reads a remembered value; the default (TypeScript) for anything else. */
export function parseLanguage(v: string | null | undefined): Language {
  return LANGUAGES.find((l) => l === v) ?? 'ts';
}

/** nextLanguage: the tab that arrow keys, Home and End move to from `from` (WAI-ARIA tabs pattern). */
export function nextLanguage(from: Language, key: string): Language | undefined {
  const i = LANGUAGES.indexOf(from);
  const n = LANGUAGES.length;
  switch (key) {
    case 'ArrowRight':
      return LANGUAGES[(i + 1) % n];
    case 'ArrowLeft':
      return LANGUAGES[(i + n - 1) % n];
    case 'Home':
      return LANGUAGES[0];
    case 'End':
      return LANGUAGES[n - 1];
    default:
      return undefined;
  }
}
