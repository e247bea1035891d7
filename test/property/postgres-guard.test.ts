/**
 * Forged and malformed tokens at the SQL guard: generated tokens and write sequences against
 * `postgresGuard` on a real PostgreSQL server of this file's own (a bigint fence column, as
 * fenceMigrationSql makes it), compared with the BigInt model of test/property/guard-model.ts. The
 * SQL guard has no write ids: a retry is a second write with the same token, which an equal token
 * lets through (the same holder writing again).
 *
 * Properties: a malformed token is refused with TokenError naming the value before any query,
 * and the row is unchanged; in any interleaving of upserts and deletes on two locks of three rows
 * each, one mark per lock (the default scope: the fence table), an operation is applied exactly
 * when its token is >= its lock's mark — whichever row it touches —, and a rejected one never
 * moves a mark or any row; tokens past 2^53 compare exactly (bound as text, compared as bigint by
 * the database).
 */
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  fenceMigrationSql,
  postgresGuard,
  type PostgresGuard,
  type PostgresQueryable,
} from '../../src/guards/postgres-guard.ts';
import { fenceTableSql, type FencedSqlSpec } from '../../src/guards/sql-guard.ts';
import { startPostgres, type PostgresServer } from '../support/testbed/postgres.ts';
import { applyToModel, emptyLock, guardOps, type Expected, type LockModel } from './guard-model.ts';
import { banner, fcParams, runs } from './settings.ts';
import { malformedToken, namesValue, validToken } from './tokens.ts';
import { TokenError } from '../../src/protocol/token.ts';

const MALFORMED_RUNS = 500;
const SEQUENCE_RUNS = 600;
const SPEC: FencedSqlSpec = { table: 'docs', idColumn: 'id', fenceColumn: 'fence', setColumns: ['body'] };

interface Row {
  body: string | null;
  fence: string;
}

describe('the SQL guard against generated tokens (real PostgreSQL)', () => {
  let server: PostgresServer;
  let client: pg.Client;
  let guard: PostgresGuard;
  let queries = 0;
  let n = 0;
  const fresh = (): string => `doc-${++n}`;

  beforeAll(async () => {
    server = await startPostgres();
    client = new pg.Client({ connectionString: server.url });
    client.on('error', () => undefined);
    await client.connect();
    await client.query('CREATE TABLE docs (id text PRIMARY KEY, body text)');
    await client.query(fenceMigrationSql(SPEC));
    await client.query(fenceTableSql());
    // Count the guard's queries: a malformed token must not reach the database.
    const counted: PostgresQueryable = {
      query: (text, params) => {
        queries++;
        return client.query(text, params);
      },
    };
    guard = postgresGuard(counted, SPEC);
    console.info(banner('sql guard properties', runs(MALFORMED_RUNS) + runs(SEQUENCE_RUNS)));
  }, 60_000);
  afterAll(async () => {
    await client?.end();
    await server?.stop();
  });

  const row = async (id: string): Promise<Row | undefined> => {
    const res = await client.query<Row>('SELECT body, fence::text AS fence FROM docs WHERE id = $1', [id]);
    return res.rows[0];
  };

  it('refuses every malformed token before any query, naming the value; the row is unchanged', async () => {
    await fc.assert(
      fc.asyncProperty(
        malformedToken,
        fc.option(validToken, { nil: undefined }),
        fc.boolean(),
        async (bad, mark, upsert) => {
          const id = fresh();
          if (mark !== undefined) expect(await guard.upsert(id, mark, ['before'])).toEqual({ accepted: true });
          const before = await row(id);
          const queriesBefore = queries;
          let error: unknown;
          try {
            await (upsert
              ? guard.upsert(id, bad.value as string, ['forged'])
              : guard.write(id, bad.value as string, ['forged']));
          } catch (err) {
            error = err;
          }
          expect(queries, 'queries sent for a malformed token').toBe(queriesBefore);
          expect(error).toBeInstanceOf(TokenError);
          expect(namesValue((error as Error).message, bad.value), (error as Error).message).toBe(true);
          expect(await row(id)).toEqual(before);
        },
      ),
      fcParams(MALFORMED_RUNS),
    );
  });

  it('applies exactly the upserts and deletes with token >= the lock mark, on any of its rows; a rejected one changes nothing', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(guardOps, async (ops) => {
        const base = `lock-${++run}`;
        const locks = [`${base}-0`, `${base}-1`] as const;
        const guards = locks.map((lock) =>
          postgresGuard(client, { table: 'docs', idColumn: 'id', setColumns: ['body'], lock }),
        );
        const models: [LockModel, LockModel] = [emptyLock(), emptyLock()];
        const rows = new Map<string, string>(); // what each row must hold
        const ids = locks.flatMap((l) => [0, 1, 2].map((k) => `${l}-r${k}`));
        for (const [i, op] of ops.entries()) {
          const id = `${locks[op.lock]}-r${i % 3}`;
          const del = i % 5 === 4; // every fifth operation is a delete
          const model = models[op.lock];
          const token = op.token.ok ? op.token.value : undefined;
          const markBefore = model.mark;
          const expected = applyToModel(model, token, `v${i}`, undefined, false);
          if (expected === 'applied') {
            if (del) rows.delete(id);
            else rows.set(id, `v${i}`);
          }
          const g = guards[op.lock];
          if (g === undefined) throw new Error('no guard');
          const text = op.token.ok ? op.token.value : (op.token.bad.value as string);
          let got: Expected;
          try {
            const r = await (del ? g.delete(id, text) : g.upsert(id, text, [`v${i}`]));
            got = r.accepted ? 'applied' : 'stale';
          } catch (err) {
            if (!(err instanceof TokenError)) throw err;
            got = 'malformed';
          }
          expect(
            got,
            `${del ? 'delete' : 'upsert'} ${i} of ${id} (token ${token ?? 'malformed'}, mark ${markBefore ?? 'none'})`,
          ).toBe(expected);
          const marks = await client.query<{ lock: string; token: string }>(
            'SELECT lock, token::text AS token FROM fencepost_fences WHERE lock = ANY($1)',
            [locks],
          );
          expect(Object.fromEntries(marks.rows.map((r) => [r.lock, r.token])), `marks after op ${i}`).toEqual(
            Object.fromEntries(
              locks.flatMap((l, j) => {
                const m = models[j as 0 | 1].mark;
                return m === undefined ? [] : [[l, m.toString()]];
              }),
            ),
          );
          const data = await client.query<{ id: string; body: string }>(
            'SELECT id, body FROM docs WHERE id = ANY($1)',
            [ids],
          );
          expect(Object.fromEntries(data.rows.map((r) => [r.id, r.body])), `rows after op ${i}`).toEqual(
            Object.fromEntries(rows),
          );
        }
      }),
      fcParams(SEQUENCE_RUNS),
    );
  });
});
