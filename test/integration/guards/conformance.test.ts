// The guard outcome vectors of clients/conformance/guard-outcomes.json hold of the TypeScript
// guards against a real redis-server (the run's shared one) and a real PostgreSQL (this file's
// own): the same cases the Go, Python and Java guards run. Each case has a lock, data keys and a
// table of its own.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postgresGuard, type PostgresWriteResult } from '../../../src/guards/postgres-guard.ts';
import { redisGuard, type RedisWriteResult } from '../../../src/guards/redis-guard.ts';
import { fenceTableSql } from '../../../src/guards/sql-guard.ts';
import { TokenError } from '../../../src/protocol/token.ts';
import { readVectors, type GuardVectors } from '../../support/conformance.ts';
import { sharedRedisUrl } from '../../support/env.ts';
import { startPostgres, type PostgresServer } from '../../support/testbed/postgres.ts';

const vectors = readVectors<GuardVectors>('guard-outcomes.json');
const run = randomBytes(4).toString('hex');

const redisOutcome = (r: RedisWriteResult): string => (r.accepted ? (r.duplicate ? 'duplicate' : 'applied') : 'stale');
const sqlOutcome = (r: PostgresWriteResult): string => (r.accepted ? 'accepted' : r.reason);

describe('guard outcome vectors: the Redis guard on a real redis-server', () => {
  let client: Redis;
  beforeAll(() => {
    client = new Redis(sharedRedisUrl());
  });
  afterAll(() => {
    client.disconnect();
  });

  it.each(vectors.redis.map((c, i) => [c.name, c, i] as const))('%s', async (_name, c, i) => {
    const lock = `conformance-${run}-${i}`;
    const key = (k: string): string => `${lock}:${k}`;
    const guard = redisGuard(client, { lock });
    for (const [n, s] of c.steps.entries()) {
      const at = `step ${n} (${s.op})`;
      if (s.op === 'get') {
        expect(await client.get(key(s.key)), at).toBe(s.value);
        continue;
      }
      if (s.op === 'write' && s.expect === 'token-error') {
        await expect(guard.write(key(s.key), s.token, s.value), at).rejects.toThrow(TokenError);
        continue;
      }
      const r =
        s.op === 'write'
          ? await guard.write(key(s.key), s.token, s.value, s.writeId)
          : s.op === 'delete'
            ? await guard.delete(key(s.key), s.token)
            : await guard.advance(s.token);
      expect(redisOutcome(r), at).toBe(s.expect);
      expect((await guard.highWater())?.toString(), at).toBe(s.mark);
    }
  });
});

describe('guard outcome vectors: the SQL guard on a real PostgreSQL', () => {
  let server: PostgresServer;
  let pool: pg.Pool;
  beforeAll(async () => {
    server = await startPostgres();
    pool = new pg.Pool({ connectionString: server.url, max: 4 });
    pool.on('error', () => undefined);
    await pool.query(fenceTableSql());
  }, 60_000);
  afterAll(async () => {
    await pool?.end();
    await server?.stop();
  });

  it.each(vectors.sql.map((c, i) => [c.name, c, i] as const))('%s', async (_name, c, i) => {
    const table = `items_${i}`;
    await pool.query(`CREATE TABLE ${table} (id bigint PRIMARY KEY, v text)`);
    const guard = postgresGuard(pool, { table, idColumn: 'id', setColumns: ['v'], lock: `conformance-${run}-${i}` });
    for (const [n, s] of c.steps.entries()) {
      const at = `step ${n} (${s.op})`;
      if (s.op === 'read') {
        const rows = (await pool.query<{ v: string }>(`SELECT v FROM ${table} WHERE id = $1`, [s.id])).rows;
        expect(rows.length === 0 ? null : rows.map((r) => r.v), at).toEqual(s.values);
        continue;
      }
      if (s.op === 'advance') {
        expect(sqlOutcome(await guard.advance(s.token)), at).toBe(s.expect);
        continue;
      }
      const call = (): Promise<PostgresWriteResult> =>
        s.op === 'delete' ? guard.delete(s.id, s.token) : guard[s.op](s.id, s.token, s.values ?? []);
      if (s.expect === 'token-error') {
        await expect(call(), at).rejects.toThrow(TokenError);
        continue;
      }
      expect(sqlOutcome(await call()), at).toBe(s.expect);
    }
  });
});
