/**
 * T17 at the SQL guard: generated tokens and write sequences against `postgresGuard` on a real
 * PostgreSQL server of this file's own (a bigint fence column, as fenceMigrationSql makes it),
 * compared with the BigInt model of test/property/guard-model.ts. The SQL guard has no write
 * ids: a retry is a second write with the same token, which an equal token lets through (the
 * same holder writing again).
 *
 * Properties: a malformed token is refused with TokenError naming the value before any query,
 * and the row is unchanged; in any interleaving on two rows, a write is applied exactly when its
 * token is >= the row's fence, and a rejected write never moves the fence or the data; tokens
 * past 2^53 compare exactly (bound as text, compared as bigint by the database).
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
import type { FencedSqlSpec } from '../../src/guards/sql-guard.ts';
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

describe('T17: the SQL guard against generated tokens (real PostgreSQL)', () => {
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

  it('applies exactly the writes with token >= fence; a rejected write never moves the fence or the data', async () => {
    await fc.assert(
      fc.asyncProperty(guardOps, async (ops) => {
        const ids = [fresh(), fresh()] as const;
        const models: [LockModel, LockModel] = [emptyLock(), emptyLock()];
        for (const [i, op] of ops.entries()) {
          const id = ids[op.lock];
          const model = models[op.lock];
          const token = op.token.ok ? op.token.value : undefined;
          const markBefore = model.mark;
          const expected = applyToModel(model, token, `v${i}`, undefined, false);
          let got: Expected;
          try {
            const r = await guard.upsert(id, op.token.ok ? op.token.value : (op.token.bad.value as string), [`v${i}`]);
            got = r.accepted ? 'applied' : 'stale';
          } catch (err) {
            if (!(err instanceof TokenError)) throw err;
            got = 'malformed';
          }
          expect(got, `write ${i} (token ${token ?? 'malformed'}, fence ${markBefore ?? 'none'})`).toBe(expected);
          const r = await row(id);
          expect(r?.fence, `fence after write ${i}`).toBe(model.mark?.toString());
          expect(r?.body, `data after write ${i}`).toBe(model.value);
        }
      }),
      fcParams(SEQUENCE_RUNS),
    );
  });
});
