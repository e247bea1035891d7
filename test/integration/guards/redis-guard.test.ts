import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { mulberry32 } from '../../support/prng.ts';
import { Redis } from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import { redisGuard, type RedisGuard, type RedisWriteResult } from '../../../src/guards/redis-guard.ts';
import { startRedis, type RedisServer } from '../../support/testbed/redis.ts';
import { openMonitor } from '../../support/testbed/redis-monitor.ts';
import { MAX_TOKEN, TokenError } from '../../../src/protocol/token.ts';

// One mark per key (scope 'key'): where the guard keeps the mark and write id set of data key k.
const markOf = (k: string): string => `fencepost:guard:key:${k}`;
const writesOf = (k: string): string => `fencepost:guard:writes:key:${k}`;

const MALFORMED = ['', '-1', '01', '1e3', '0x10', '1.5', ' 1', 'NaN', '9223372036854775808'];

// A real redis-server of this file's own: the guard is one Lua script, and what matters is what
// Redis does with it (atomicity, string comparison past 2^53, the mark on rejection).
describe("redisGuard with one mark per key (scope 'key') against a real redis-server", () => {
  let redis: RedisServer;
  let client: Redis;
  let guard: RedisGuard;
  let n = 0;
  const fresh = (): string => `guard-test:${++n}`;

  beforeAll(async () => {
    redis = await startRedis();
    client = redis.client();
    guard = redisGuard(client, { scope: 'key' });
  });
  afterAll(async () => {
    client?.disconnect();
    await redis?.stop();
  });

  it('accepts increasing tokens, writes the value and raises the mark', async () => {
    const k = fresh();
    expect(await guard.highWater(k)).toBeUndefined();
    for (const t of [1n, 2n, 5n, 100n]) {
      expect(await guard.write(k, t, `v${t}`)).toEqual({ accepted: true, duplicate: false });
      expect(await client.get(k)).toBe(`v${t}`);
      expect(await guard.highWater(k)).toBe(t);
    }
    expect(await client.get(markOf(k))).toBe('100');
    expect(await client.pttl(markOf(k))).toBe(-1);
  });

  it('rejects a lower token and leaves the data and the mark unchanged', async () => {
    const k = fresh();
    await guard.write(k, '7', 'seven');
    expect(await guard.write(k, '6', 'six')).toEqual({ accepted: false, reason: 'stale', highWater: 7n });
    expect(await guard.write(k, 0n, 'zero')).toEqual({ accepted: false, reason: 'stale', highWater: 7n });
    expect(await client.get(k)).toBe('seven');
    expect(await client.get(markOf(k))).toBe('7');
  });

  it('accepts an equal token (the same holder writing again in its term)', async () => {
    const k = fresh();
    await guard.write(k, 9n, 'first');
    expect(await guard.write(k, '9', 'second')).toEqual({ accepted: true, duplicate: false });
    expect(await client.get(k)).toBe('second');
    expect(await guard.highWater(k)).toBe(9n);
  });

  it('compares exactly around 2^53 and by length, not as doubles or plain strings', async () => {
    const k = fresh();
    expect((await guard.write(k, '9007199254740993', 'a')).accepted).toBe(true);
    expect(await guard.write(k, '9007199254740992', 'b')).toEqual({
      accepted: false,
      reason: 'stale',
      highWater: 9007199254740993n,
    });
    expect(await client.get(k)).toBe('a');
    expect((await guard.write(k, 9007199254740994n, 'c')).accepted).toBe(true);
    expect(await guard.highWater(k)).toBe(9007199254740994n);

    const up = fresh();
    expect((await guard.write(up, '9007199254740992', 'a')).accepted).toBe(true);
    expect((await guard.write(up, '9007199254740993', 'b')).accepted).toBe(true);
    expect(await client.get(up)).toBe('b');

    const len = fresh(); // "9" > "10" as strings; 9 < 10 as integers
    await guard.write(len, '10', 'ten');
    expect(await guard.write(len, '9', 'nine')).toEqual({ accepted: false, reason: 'stale', highWater: 10n });

    const max = fresh();
    await guard.write(max, MAX_TOKEN - 1n, 'almost');
    expect((await guard.write(max, MAX_TOKEN, 'max')).accepted).toBe(true);
    expect(await guard.write(max, MAX_TOKEN - 1n, 'late')).toEqual({
      accepted: false,
      reason: 'stale',
      highWater: MAX_TOKEN,
    });
  });

  it('refuses malformed tokens before anything reaches Redis, naming the value', async () => {
    // A client that can send nothing: any command would fail with a connection error, not a TokenError.
    const offline = new Redis(redis.url, { lazyConnect: true, enableOfflineQueue: false });
    const blind = redisGuard(offline, { scope: 'key' });
    const k = fresh();
    await guard.write(k, '5', 'kept');
    try {
      for (const bad of MALFORMED) {
        for (const g of [blind, guard]) {
          const err = await g.write(k, bad, 'forged').then(
            () => undefined,
            (e: unknown) => e,
          );
          expect(err, `token ${JSON.stringify(bad)}`).toBeInstanceOf(TokenError);
          expect((err as Error).message).toContain(bad === '9223372036854775808' ? bad : JSON.stringify(bad));
        }
      }
      for (const bad of [-1n, MAX_TOKEN + 1n]) {
        await expect(blind.write(k, bad, 'forged')).rejects.toThrow(TokenError);
        await expect(guard.write(k, bad, 'forged')).rejects.toThrow(bad.toString());
      }
      expect(offline.status).toBe('wait');
    } finally {
      offline.disconnect();
    }
    expect(await client.get(markOf(k))).toBe('5');
    expect(await client.get(k)).toBe('kept');
  });

  it('fails closed when the script itself gets a malformed token or the mark is not a token', async () => {
    const k = fresh();
    await guard.write(k, '5', 'kept');
    // Defence in depth: the script re-validates its token.
    const raw = client as unknown as { fencepostFencedWrite(...args: string[]): Promise<unknown> };
    await expect(
      raw.fencepostFencedWrite(k, markOf(k), writesOf(k), '007', 'forged', '', '1000', 'set'),
    ).rejects.toThrow(/malformed fencing token/);
    await expect(
      raw.fencepostFencedWrite(k, markOf(k), writesOf(k), '9223372036854775808', 'forged', '', '1000', 'set'),
    ).rejects.toThrow(/malformed fencing token/);
    expect(await client.get(k)).toBe('kept');
    // A corrupted mark is never compared.
    await client.set(markOf(k), '1e3');
    await expect(guard.write(k, '6', 'after-corruption')).rejects.toThrow(/does not hold a fencing token/);
    expect(await client.get(k)).toBe('kept');
    await expect(guard.highWater(k)).rejects.toThrow(TokenError);
  });

  it('removes a TTL someone put on the fence key, even on a rejected write', async () => {
    const k = fresh();
    await guard.write(k, '5', 'v');
    await client.pexpire(markOf(k), 60_000);
    expect((await guard.write(k, '4', 'stale')).accepted).toBe(false);
    expect(await client.pttl(markOf(k))).toBe(-1);
    expect(await client.get(markOf(k))).toBe('5');
  });

  it('applies a write id once and reports retries as duplicates', async () => {
    const k = fresh();
    expect(await guard.write(k, 5n, 'a', 'w1')).toEqual({ accepted: true, duplicate: false });
    expect(await guard.write(k, 5n, 'a', 'w1')).toEqual({ accepted: true, duplicate: true });
    expect(await guard.write(k, 6n, 'b', 'w2')).toEqual({ accepted: true, duplicate: false });
    // A late retry of w1 (token 5, now below the mark) was applied once already: duplicate, no change.
    expect(await guard.write(k, 5n, 'a', 'w1')).toEqual({ accepted: true, duplicate: true });
    expect(await client.get(k)).toBe('b');
    expect(await guard.highWater(k)).toBe(6n);
    // A rejected write id is not remembered.
    expect((await guard.write(k, 3n, 'x', 'w3')).accepted).toBe(false);
    expect(await client.zscore(writesOf(k), 'w3')).toBeNull();
    // The id set expires; the fence key never does.
    expect(await client.pttl(writesOf(k))).toBeGreaterThan(0);
    expect(await client.pttl(markOf(k))).toBe(-1);
    await expect(guard.write(k, 7n, 'c', '')).rejects.toThrow(/writeId/);
  });

  it('forgets write ids after the window (the token still fences the retry)', async () => {
    const short = redisGuard(client, { scope: 'key', writeIdTtlMs: 50 });
    const k = fresh();
    expect(await short.write(k, 5n, 'a', 'w1')).toEqual({ accepted: true, duplicate: false });
    await sleep(120);
    expect(await short.write(k, 5n, 'a', 'w1')).toEqual({ accepted: true, duplicate: false });
    await short.write(k, 6n, 'b');
    await sleep(120);
    expect(await short.write(k, 5n, 'a', 'w1')).toEqual({ accepted: false, reason: 'stale', highWater: 6n });
  });

  it('shares one mark across keys with the fenceKey option (a lock namespace)', async () => {
    const ns = redisGuard(client, { fenceKey: () => 'guard-test:ns:fence' });
    expect((await ns.write('guard-test:ns:a', 10n, 'a')).accepted).toBe(true);
    expect(await ns.write('guard-test:ns:b', 9n, 'b')).toEqual({ accepted: false, reason: 'stale', highWater: 10n });
    expect(await client.get('guard-test:ns:b')).toBeNull();
    expect(await ns.highWater('guard-test:ns:b')).toBe(10n);
    const suffixed = redisGuard(client, { fenceKeySuffix: '#hw' });
    await suffixed.write('guard-test:sfx', 3n, 'v');
    expect(await client.get('guard-test:sfx#hw')).toBe('3');
    const same = redisGuard(client, { fenceKey: (key) => key });
    await expect(same.write('guard-test:same', 1n, 'v')).rejects.toThrow(/must differ/);
  });

  it('keeps accepted tokens non-decreasing under 2000 randomly interleaved writes from several holders', async () => {
    const seed = Number(process.env['FENCEPOST_GUARD_SEED'] ?? Math.floor(Math.random() * 2 ** 32));
    const rnd = mulberry32(seed);
    const pick = <T>(xs: readonly T[]): T | undefined => xs[Math.floor(rnd() * xs.length)];
    const why = `seed=${seed} (replay the workload with FENCEPOST_GUARD_SEED=${seed})`;
    const key = `guard-test:random:${seed}`;

    interface Send {
      holder: number;
      token: bigint;
      value: string;
      writeId?: string;
    }
    const HOLDERS = 5;
    const TOTAL = 2000;
    const clients = Array.from({ length: HOLDERS }, () => redis.client());
    const guards = clients.map((c) => redisGuard(c, { scope: 'key' }));
    // Load the script once so that every later call is one EVALSHA (no NOSCRIPT + EVAL pair).
    await guards[0]?.write(`${key}:warmup`, 0n, 'x');
    const monitor = await openMonitor(redis.url);
    const seen: string[][] = [];
    const marker = `guard-test:end:${seed}`;
    let ended = false;
    monitor.on('monitor', (_time: string, args: string[]) => {
      const cmd = (args[0] ?? '').toLowerCase();
      if (cmd === 'evalsha' || cmd === 'eval') {
        if (args[3] === key) seen.push(args);
      }
      if (cmd === 'echo' && args[1] === marker) ended = true;
    });

    const sends: Send[] = [];
    const results = new Map<string, RedisWriteResult[]>(); // by value (a retry re-sends the value)
    try {
      let counter = 2n ** 53n - 25n; // the run crosses 2^53
      const current: (bigint | undefined)[] = Array.from({ length: HOLDERS }, () => undefined);
      const history: Send[][] = Array.from({ length: HOLDERS }, () => []);
      let serial = 0;
      while (sends.length < TOTAL) {
        if (rnd() < 0.3 || current.every((t) => t === undefined)) {
          // A grant: a new, larger token for one holder; the others keep their (now stale) ones.
          current[Math.floor(rnd() * HOLDERS)] = ++counter;
        }
        const batch: Send[] = [];
        const size = 1 + Math.floor(rnd() * 8);
        for (let i = 0; i < size && sends.length + batch.length < TOTAL; i++) {
          const holder = Math.floor(rnd() * HOLDERS);
          const token = current[holder];
          if (token === undefined) continue;
          const past = history[holder] ?? [];
          const r = rnd();
          let send: Send;
          if (r < 0.1 && past.length > 0) {
            const old = pick(past.filter((s) => s.writeId !== undefined).slice(-5));
            send = old ?? { holder, token, value: `h${holder}-s${++serial}-t${token}` };
          } else if (r < 0.4) {
            send = { holder, token, value: `h${holder}-s${++serial}-t${token}`, writeId: `h${holder}-id${serial}` };
          } else {
            send = { holder, token, value: `h${holder}-s${++serial}-t${token}` };
          }
          batch.push(send);
          past.push(send);
        }
        sends.push(...batch);
        await Promise.all(
          batch.map(async (s) => {
            const ticks = Math.floor(rnd() * 3);
            for (let i = 0; i < ticks; i++) await new Promise<void>((resolve) => setImmediate(resolve));
            const g = guards[s.holder];
            if (g === undefined) throw new Error('no guard');
            const res = await g.write(key, s.token, s.value, s.writeId);
            const list = results.get(s.value) ?? [];
            list.push(res);
            results.set(s.value, list);
          }),
        );
      }
      await clients[0]?.echo(marker);
      for (let i = 0; !ended; i++) {
        if (i > 500) throw new Error(`monitor never saw the end marker; ${why}`);
        await sleep(10);
      }
    } finally {
      monitor.disconnect();
      for (const c of clients) c.disconnect();
    }

    // Replay Redis's own execution order (MONITOR) against the model.
    expect(seen.length, why).toBe(TOTAL);
    let mark: bigint | undefined;
    let last: string | undefined;
    const applied = new Set<string>();
    const expected = new Map<string, string[]>();
    const acceptedTokens: bigint[] = [];
    for (const args of seen) {
      const token = BigInt(args[6] ?? 'x');
      const value = args[7] ?? '';
      const writeId = args[8] ?? '';
      let outcome: string;
      if (writeId !== '' && applied.has(writeId)) outcome = 'duplicate';
      else if (mark !== undefined && token < mark) outcome = `stale:${mark}`;
      else {
        outcome = 'applied';
        mark = token;
        last = value;
        acceptedTokens.push(token);
        if (writeId !== '') applied.add(writeId);
      }
      expected.set(value, [...(expected.get(value) ?? []), outcome]);
    }
    const actual = new Map<string, string[]>();
    for (const [value, list] of results) {
      actual.set(
        value,
        list.map((r) => (r.accepted ? (r.duplicate ? 'duplicate' : 'applied') : `stale:${r.highWater}`)),
      );
    }
    expect([...actual.keys()].sort(), why).toEqual([...expected.keys()].sort());
    for (const [value, outcomes] of expected) {
      // Outcomes per value as multisets: a retry's result cannot be matched to its send otherwise.
      expect([...(actual.get(value) ?? [])].sort(), `${why}: outcomes of ${value}`).toEqual([...outcomes].sort());
    }

    for (let i = 1; i < acceptedTokens.length; i++) {
      expect(
        (acceptedTokens[i] ?? 0n) >= (acceptedTokens[i - 1] ?? 0n),
        `${why}: accepted ${acceptedTokens[i]} after ${acceptedTokens[i - 1]}`,
      ).toBe(true);
    }
    for (const [value, list] of results) {
      const token = BigInt(/-t(\d+)$/.exec(value)?.[1] ?? 'x');
      for (const r of list) {
        if (!r.accepted) expect(token < r.highWater, `${why}: ${value} rejected by mark ${r.highWater}`).toBe(true);
      }
    }
    const rejected = [...results.values()].flat().filter((r) => !r.accepted).length;
    const duplicates = [...results.values()].flat().filter((r) => r.accepted && r.duplicate).length;
    expect(rejected, `${why}: the workload must exercise rejections`).toBeGreaterThan(0);
    expect(duplicates, `${why}: the workload must exercise retries`).toBeGreaterThan(0);
    expect(await client.get(key), why).toBe(last);
    expect(await client.get(markOf(key)), why).toBe(mark?.toString());
  });
});

// What the guard does by default, with nothing but the client. A server of its own, flushed before
// each test: the default mark is shared by everything the default guard writes, which is the point.
describe('redisGuard defaults (a real redis-server)', () => {
  let redis: RedisServer;
  let client: Redis;

  beforeAll(async () => {
    redis = await startRedis();
    client = redis.client();
  });
  afterAll(async () => {
    client?.disconnect();
    await redis?.stop();
  });
  beforeEach(async () => {
    await client.flushall();
  });

  it('refuses a stale holder writing a key the newer holder never wrote (one mark per lock)', async () => {
    const guard = redisGuard(client);
    // Holder B (token 11) writes orders:1; holder A, paused with token 10, then writes orders:2.
    expect(await guard.write('orders:1', 11n, 'B')).toEqual({ accepted: true, duplicate: false });
    expect(await guard.write('orders:2', 10n, 'A (stale)')).toEqual({
      accepted: false,
      reason: 'stale',
      highWater: 11n,
    });
    expect(await client.get('orders:2')).toBeNull();
  });

  it('refuses a stale holder re-creating a key the newer holder deleted', async () => {
    const guard = redisGuard(client);
    await guard.write('orders:1', 10n, 'A');
    expect(await guard.write('orders:1', 11n, 'B')).toEqual({ accepted: true, duplicate: false });
    await client.del('orders:1'); // B deletes it (the mark is what remembers B)
    expect((await guard.write('orders:1', 10n, 'A resurrects')).accepted).toBe(false);
    expect(await client.get('orders:1')).toBeNull();
  });

  it('never lets a data key be the mark of another key', async () => {
    const guard = redisGuard(client);
    expect((await guard.write('orders', 11n, 'B')).accepted).toBe(true);
    // A data key named like the mark of `orders`: writing it must not move that mark.
    await guard.write('orders:fence', 11n, '0').catch(() => undefined);
    expect(await guard.highWater('orders')).toBe(11n);
    expect((await guard.write('orders', 10n, 'A (stale)')).accepted).toBe(false);
    expect(await client.get('orders')).toBe('B');
    // Marks live under fencepost:guard:, which no data key may enter (per key or per lock).
    expect(guard.markKey()).toBe('fencepost:guard:lock:default');
    for (const g of [guard, redisGuard(client, { scope: 'key' })]) {
      for (const key of ['fencepost:guard:lock:default', 'fencepost:guard:key:orders', 'fencepost:fence:x']) {
        await expect(g.write(key, 12n, '0')).rejects.toThrow(/reserved fencepost: namespace/);
        await expect(g.delete(key, 12n)).rejects.toThrow(RangeError);
      }
    }
    expect(await guard.highWater()).toBe(11n);
    // The old per-key naming, chosen explicitly, refuses data keys that end like a mark.
    const legacy = redisGuard(client, { fenceKeySuffix: ':fence' });
    await expect(legacy.write('orders:fence', 11n, '0')).rejects.toThrow(/ends like a mark/);
    await expect(legacy.write('orders:writes', 11n, '0')).rejects.toThrow(/ends like a mark/);
    expect((await legacy.write('orders', 5n, 'v')).accepted).toBe(true);
    expect(await client.get('orders:fence')).toBe('5');
  });

  it('refuses a stale holder re-creating a key the newer holder deleted through the guard', async () => {
    const guard = redisGuard(client, { lock: 'orders' });
    await guard.write('orders:1', 10n, 'A');
    expect(await guard.delete('orders:1', 11n, 'd1')).toEqual({ accepted: true, duplicate: false });
    expect(await guard.delete('orders:1', 11n, 'd1')).toEqual({ accepted: true, duplicate: true });
    expect(await client.exists('orders:1')).toBe(0);
    expect(await guard.write('orders:1', 10n, 'A resurrects')).toEqual({
      accepted: false,
      reason: 'stale',
      highWater: 11n,
    });
    expect(await guard.delete('orders:2', 10n)).toEqual({ accepted: false, reason: 'stale', highWater: 11n });
    expect(await client.exists('orders:1')).toBe(0);
    expect(await client.get('fencepost:guard:lock:orders')).toBe('11');
  });

  it('advance fences out older tokens before the new holder writes anything', async () => {
    const guard = redisGuard(client, { lock: 'billing' });
    expect(await guard.advance(20n)).toEqual({ accepted: true, duplicate: false });
    expect(await guard.write('billing:a', 19n, 'stale')).toEqual({ accepted: false, reason: 'stale', highWater: 20n });
    expect(await guard.advance(19n)).toEqual({ accepted: false, reason: 'stale', highWater: 20n });
    expect(await client.exists('billing:a')).toBe(0);
    expect(await guard.highWater()).toBe(20n);
    await expect(redisGuard(client, { scope: 'key' }).advance(21n)).rejects.toThrow(RangeError);
  });

  it('keeps one mark per lock name: other locks are not refused by it', async () => {
    const orders = redisGuard(client, { lock: 'orders' });
    const billing = redisGuard(client, { lock: 'billing' });
    expect((await orders.write('orders:1', 1000n, 'o')).accepted).toBe(true);
    expect((await billing.write('billing:1', 3n, 'b')).accepted).toBe(true);
    expect(await orders.highWater()).toBe(1000n);
    expect(await billing.highWater()).toBe(3n);
  });

  it("with one mark per key (scope 'key', documented as weaker) a stale holder still writes another key", async () => {
    const perKey = redisGuard(client, { scope: 'key' });
    expect((await perKey.write('orders:1', 11n, 'B')).accepted).toBe(true);
    expect((await perKey.write('orders:2', 10n, 'A (stale)')).accepted).toBe(true);
  });

  it('refuses contradictory options', () => {
    expect(() => redisGuard(client, { fenceKeySuffix: ':f', lock: 'x' })).toThrow(RangeError);
    expect(() => redisGuard(client, { fenceKey: () => 'm', scope: 'key' })).toThrow(RangeError);
    expect(() => redisGuard(client, { scope: 'key', lock: 'x' })).toThrow(RangeError);
    expect(() => redisGuard(client, { writesKey: (k) => `${k}:w` })).toThrow(RangeError);
    expect(() => redisGuard(client, { lock: '' })).toThrow(RangeError);
  });
});
