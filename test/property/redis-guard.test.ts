/**
 * Forged and malformed tokens at the real Redis guard: generated tokens and write sequences
 * (fast-check, with shrinking) against `redisGuard` on a real redis-server of this file's own,
 * compared after every write with the BigInt model of test/property/guard-model.ts.
 *
 * Properties:
 * - every malformed token is refused with TokenError naming the value, before anything is sent
 *   to Redis, and the data and the mark are unchanged;
 * - in any interleaving of valid, stale, malformed and retried writes and deletes on two locks,
 *   each guarding three keys under one mark per lock (the default scope), a write or delete is
 *   applied exactly when its token is >= the lock's mark at that moment — whichever key it
 *   touches —, a rejected one never moves the mark or any data, and a write id already applied is
 *   reported as a duplicate and not applied again (exactly once);
 * - tokens that float64 cannot tell apart (2^53 and 2^53 + 1, ..., MAX_TOKEN − 1 and MAX_TOKEN)
 *   are ordered exactly.
 */
import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisGuard, type RedisGuard, type RedisWriteResult } from '../../src/guards/redis-guard.ts';
import { startRedis, type RedisServer } from '../support/testbed/redis.ts';
import { applyToModel, emptyLock, guardOps, type Expected, type GuardOp, type LockModel } from './guard-model.ts';
import { banner, fcParams, runs } from './settings.ts';
import { EDGE_TOKENS, malformedToken, namesValue, validToken } from './tokens.ts';
import { TokenError } from '../../src/protocol/token.ts';

const MALFORMED_RUNS = 2000;
const SEQUENCE_RUNS = 2000;
const PRECISION_RUNS = 500;

function outcomeOf(r: RedisWriteResult): Expected {
  if (!r.accepted) return 'stale';
  return r.duplicate ? 'duplicate' : 'applied';
}

describe('the Redis guard against generated tokens (real redis-server)', () => {
  let redis: RedisServer;
  let client: Redis;
  let guard: RedisGuard;
  let sent = 0;
  let n = 0;
  const fresh = (): string => `prop:${++n}`;

  beforeAll(async () => {
    redis = await startRedis();
    client = redis.client();
    // Count every command this client sends: a malformed token must not cost a round trip.
    const send = client.sendCommand.bind(client);
    client.sendCommand = (...args: Parameters<Redis['sendCommand']>) => {
      sent++;
      return send(...args);
    };
    guard = redisGuard(client, { scope: 'key' });
    console.info(banner('redis guard properties', runs(MALFORMED_RUNS) + runs(SEQUENCE_RUNS) + runs(PRECISION_RUNS)));
  });
  afterAll(async () => {
    client?.disconnect();
    await redis?.stop();
  });

  const state = async (key: string, g: RedisGuard = guard): Promise<[string | null, string | null]> => {
    const [data, mark] = await client.mget(key, g.markKey(key));
    return [data ?? null, mark ?? null];
  };

  it('refuses every malformed token before sending anything, naming the value; data and mark unchanged', async () => {
    await fc.assert(
      fc.asyncProperty(
        malformedToken,
        fc.option(validToken, { nil: undefined }),
        fc.option(fc.constantFrom('r1', 'r2'), { nil: undefined }),
        async (bad, mark, writeId) => {
          const key = fresh();
          if (mark !== undefined)
            expect(await guard.write(key, mark, 'before')).toEqual({ accepted: true, duplicate: false });
          const before = await state(key);
          const sentBefore = sent;
          let error: unknown;
          try {
            await guard.write(key, bad.value as string, 'forged', writeId);
          } catch (err) {
            error = err;
          }
          expect(sent, 'commands sent for a malformed token').toBe(sentBefore);
          expect(error).toBeInstanceOf(TokenError);
          const message = (error as Error).message;
          expect(message).toContain(`fencing token for ${key}`);
          expect(namesValue(message, bad.value), `message ${JSON.stringify(message)} names ${String(bad.value)}`).toBe(
            true,
          );
          expect(await state(key)).toEqual(before);
        },
      ),
      fcParams(MALFORMED_RUNS),
    );
    expect(sent).toBeGreaterThan(0); // the counter does see the guard's commands
  });

  it('applies exactly the writes and deletes with token >= the lock mark, on any of its keys; never moves it on a rejection; applies a write id once', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(guardOps, async (ops) => {
        const base = `prop:lock:${++run}`;
        const guards = [redisGuard(client, { lock: `${base}:0` }), redisGuard(client, { lock: `${base}:1` })] as const;
        const models: [LockModel, LockModel] = [emptyLock(), emptyLock()];
        const values = new Map<string, string>(); // what each data key must hold
        const dataKeys = [0, 1].flatMap((l) => [0, 1, 2].map((k) => `${base}:${l}:k${k}`));
        const last: [GuardOp | undefined, GuardOp | undefined] = [undefined, undefined];
        for (const [i, generated] of ops.entries()) {
          const op = generated.retry ? (last[generated.lock] ?? generated) : generated;
          last[op.lock] = op;
          // Three keys per lock; every fifth operation is a delete.
          const key = `${base}:${op.lock}:k${i % 3}`;
          const del = i % 5 === 4;
          const g = guards[op.lock];
          const model = models[op.lock];
          const value = `v${i}`;
          const token = op.token.ok ? op.token.value : undefined;
          const markBefore = model.mark;
          const expected = applyToModel(model, token, value, op.writeId, true);
          if (expected === 'applied') {
            if (del) values.delete(key);
            else values.set(key, value);
          }
          const text = op.token.ok ? op.token.value : (op.token.bad.value as string);
          let got: Expected;
          try {
            got = outcomeOf(await (del ? g.delete(key, text, op.writeId) : g.write(key, text, value, op.writeId)));
          } catch (err) {
            if (!(err instanceof TokenError)) throw err;
            got = 'malformed';
          }
          expect(
            got,
            `${del ? 'delete' : 'write'} ${i} of ${key} (token ${token ?? 'malformed'}, mark ${markBefore ?? 'none'}, id ${op.writeId ?? '-'})`,
          ).toBe(expected);
          // One MGET: both marks and all six data keys.
          const names = [guards[0].markKey(), guards[1].markKey(), ...dataKeys];
          const seen = await client.mget(...names);
          const want = [models[0].mark, models[1].mark].map((m) => m?.toString() ?? null);
          want.push(...dataKeys.map((dk) => values.get(dk) ?? null));
          expect(Object.fromEntries(names.map((n, j) => [n, seen[j]])), `after op ${i}`).toEqual(
            Object.fromEntries(names.map((n, j) => [n, want[j]])),
          );
        }
      }),
      fcParams(SEQUENCE_RUNS),
    );
  });

  it('orders neighbouring tokens exactly, also where float64 cannot (2^53 + 1 vs 2^53, MAX_TOKEN)', async () => {
    const near = fc.oneof(fc.constantFrom(...EDGE_TOKENS), validToken).chain((t) =>
      fc
        .tuple(
          fc.constant(t),
          fc.bigInt({ min: -3n, max: 3n }).map((d) => t + d),
        )
        .filter(([, u]) => u >= 0n && u <= 2n ** 63n - 1n),
    );
    await fc.assert(
      fc.asyncProperty(near, fc.boolean(), async ([first, second], asText) => {
        const key = fresh();
        await guard.write(key, asText ? first.toString() : first, 'first');
        const r = await guard.write(key, asText ? second.toString() : second, 'second');
        if (second >= first) expect(r).toEqual({ accepted: true, duplicate: false });
        else expect(r).toEqual({ accepted: false, reason: 'stale', highWater: first });
        expect(await guard.highWater(key)).toBe(second >= first ? second : first);
      }),
      fcParams(PRECISION_RUNS),
    );
  });
});
