import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import {
  fenceMigrationSql,
  postgresGuard,
  type PostgresGuard,
  type PostgresQueryable,
} from '../../../src/guards/postgres-guard.ts';
import { fenceTableSql, type FencedSqlSpec } from '../../../src/guards/sql-guard.ts';
import { startPostgres, type PostgresServer } from '../../support/testbed/postgres.ts';
import { MAX_TOKEN, TokenError } from '../../../src/protocol/token.ts';

const MALFORMED = ['', '-1', '01', '1e3', '0x10', '1.5', ' 1', 'NaN', '9223372036854775808'];
const SPEC: FencedSqlSpec = { table: 'docs', idColumn: 'id', fenceColumn: 'fence', setColumns: ['body'] };

interface Row {
  body: string | null;
  fence: string;
}

// A real PostgreSQL server of this file's own: what matters is what the database does with the
// statements — the comparison of a text-bound token with a bigint column, the row lock under
// concurrent writers, ON CONFLICT.
describe('postgresGuard with one mark per row (a fenceColumn) against a real PostgreSQL server', () => {
  let server: PostgresServer;
  let pool: pg.Pool;
  let guard: PostgresGuard;
  let n = 0;
  const fresh = (): string => `doc-${++n}`;

  const row = async (id: string): Promise<Row | undefined> => {
    const res = await pool.query<Row>('SELECT body, fence::text AS fence FROM docs WHERE id = $1', [id]);
    return res.rows[0];
  };
  const insert = async (id: string, body = 'initial'): Promise<void> => {
    await pool.query('INSERT INTO docs (id, body) VALUES ($1, $2)', [id, body]);
  };

  beforeAll(async () => {
    server = await startPostgres();
    pool = new pg.Pool({ connectionString: server.url, max: 25 });
    pool.on('error', () => undefined);
    // The table exists before the fence column: the migration adds it.
    await pool.query('CREATE TABLE docs (id text PRIMARY KEY, body text)');
    await pool.query(fenceMigrationSql(SPEC));
    guard = postgresGuard(pool, SPEC);
  }, 60_000);
  afterAll(async () => {
    await pool?.end();
    await server?.stop();
  });

  it('runs the migration idempotently: a bigint fence column, NOT NULL DEFAULT 0, on existing rows too', async () => {
    expect(fenceMigrationSql(SPEC)).toBe(
      'ALTER TABLE "docs" ADD COLUMN IF NOT EXISTS "fence" bigint NOT NULL DEFAULT 0',
    );
    await pool.query('CREATE TABLE migrated (id text PRIMARY KEY, body text)');
    await pool.query("INSERT INTO migrated (id, body) VALUES ('old', 'before the migration')");
    const spec = { table: 'migrated', fenceColumn: 'fence' };
    await pool.query(fenceMigrationSql(spec));
    await pool.query(fenceMigrationSql(spec)); // again: a notice, no error, no change
    const cols = await pool.query<{ data_type: string; is_nullable: string; column_default: string }>(
      "SELECT data_type, is_nullable, column_default FROM information_schema.columns WHERE table_name = 'migrated' AND column_name = 'fence'",
    );
    expect(cols.rows).toEqual([{ data_type: 'bigint', is_nullable: 'NO', column_default: '0' }]);
    const old = await pool.query<{ fence: string }>("SELECT fence::text AS fence FROM migrated WHERE id = 'old'");
    expect(old.rows[0]?.fence).toBe('0');
    const g = postgresGuard(pool, { table: 'migrated', idColumn: 'id', fenceColumn: 'fence', setColumns: ['body'] });
    expect(await g.write('old', 1n, ['after'])).toEqual({ accepted: true });
    expect(() => fenceMigrationSql({ table: 'x"; DROP TABLE docs; --', fenceColumn: 'fence' })).toThrow(
      /not an identifier/,
    );
    expect(fenceMigrationSql({ schema: 'public', table: 'docs', fenceColumn: 'fence' })).toBe(
      'ALTER TABLE "public"."docs" ADD COLUMN IF NOT EXISTS "fence" bigint NOT NULL DEFAULT 0',
    );
  });

  it('accepts increasing tokens, writes the value and raises the fence', async () => {
    const id = fresh();
    await insert(id);
    for (const t of [1n, 2n, 5n, 100n]) {
      expect(await guard.write(id, t, [`v${t}`])).toEqual({ accepted: true });
      expect(await row(id)).toEqual({ body: `v${t}`, fence: t.toString() });
    }
  });

  it('rejects a lower token and leaves the row and the fence unchanged', async () => {
    const id = fresh();
    await insert(id);
    expect(await guard.write(id, '7', ['seven'])).toEqual({ accepted: true });
    expect(await guard.write(id, '6', ['six'])).toEqual({ accepted: false, reason: 'stale' });
    expect(await guard.write(id, 0n, ['zero'])).toEqual({ accepted: false, reason: 'stale' });
    expect(await row(id)).toEqual({ body: 'seven', fence: '7' });
  });

  it('accepts an equal token (the same holder writing again in its term)', async () => {
    const id = fresh();
    await insert(id);
    await guard.write(id, 9n, ['first']);
    expect(await guard.write(id, '9', ['second'])).toEqual({ accepted: true });
    expect(await row(id)).toEqual({ body: 'second', fence: '9' });
  });

  it('reports an update of a missing row as refused and creates nothing', async () => {
    const id = fresh();
    expect(await guard.write(id, 1n, ['ghost'])).toEqual({ accepted: false, reason: 'stale' });
    expect(await row(id)).toBeUndefined();
  });

  it('compares exactly around 2^53, by value not as strings, and takes 2^63−1', async () => {
    const id = fresh();
    await insert(id);
    expect(await guard.write(id, '9007199254740992', ['a'])).toEqual({ accepted: true });
    expect(await guard.write(id, '9007199254740993', ['b'])).toEqual({ accepted: true });
    expect(await guard.write(id, '9007199254740992', ['c'])).toEqual({ accepted: false, reason: 'stale' });
    expect(await row(id)).toEqual({ body: 'b', fence: '9007199254740993' });

    const len = fresh(); // "9" > "10" as strings; 9 < 10 as integers
    await insert(len);
    await guard.write(len, '10', ['ten']);
    expect(await guard.write(len, '9', ['nine'])).toEqual({ accepted: false, reason: 'stale' });

    const max = fresh();
    await insert(max);
    expect(await guard.write(max, MAX_TOKEN - 1n, ['almost'])).toEqual({ accepted: true });
    expect(await guard.write(max, '9223372036854775807', ['max'])).toEqual({ accepted: true });
    expect(await guard.write(max, MAX_TOKEN - 1n, ['late'])).toEqual({ accepted: false, reason: 'stale' });
    expect(await guard.write(max, MAX_TOKEN, ['max again'])).toEqual({ accepted: true });
    expect(await row(max)).toEqual({ body: 'max again', fence: '9223372036854775807' });
  });

  it('refuses malformed tokens before anything reaches the database, changing nothing', async () => {
    let sent = 0;
    const counting: PostgresQueryable = {
      query: async (text, params) => {
        sent++;
        return pool.query(text, params);
      },
    };
    const g = postgresGuard(counting, SPEC);
    const id = fresh();
    await insert(id);
    expect(await g.write(id, '5', ['kept'])).toEqual({ accepted: true });
    expect(sent).toBe(1);
    for (const bad of MALFORMED) {
      for (const mode of ['write', 'upsert'] as const) {
        const err = await g[mode](id, bad, ['forged']).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(err, `${mode} with token ${JSON.stringify(bad)}`).toBeInstanceOf(TokenError);
        expect((err as Error).message).toContain(bad === '9223372036854775808' ? bad : JSON.stringify(bad));
      }
    }
    for (const bad of [-1n, MAX_TOKEN + 1n]) {
      await expect(g.write(id, bad, ['forged'])).rejects.toThrow(TokenError);
      await expect(g.upsert(fresh(), bad, ['forged'])).rejects.toThrow(TokenError);
    }
    await expect(g.write(id, '6', [])).rejects.toThrow(RangeError);
    expect(sent).toBe(1);
    expect(await row(id)).toEqual({ body: 'kept', fence: '5' });
  });

  it('upserts a new row with the token as its fence and refuses a stale upsert', async () => {
    const id = fresh();
    expect(await guard.upsert(id, 42n, ['created'])).toEqual({ accepted: true });
    expect(await row(id)).toEqual({ body: 'created', fence: '42' });
    expect(await guard.upsert(id, '41', ['stale'])).toEqual({ accepted: false, reason: 'stale' });
    expect(await row(id)).toEqual({ body: 'created', fence: '42' });
    expect(await guard.upsert(id, '42', ['same term'])).toEqual({ accepted: true });
    expect(await guard.upsert(id, '9007199254740993', ['newer'])).toEqual({ accepted: true });
    expect(await row(id)).toEqual({ body: 'newer', fence: '9007199254740993' });
  });

  it("leaves the highest token's value when 20 writers race on separate connections", async () => {
    const randomToken = (): bigint => randomBytes(8).readBigUInt64BE() & MAX_TOKEN;
    const WRITERS = 20;
    for (const mode of ['write', 'upsert'] as const) {
      const tokens = new Set<bigint>();
      while (tokens.size < WRITERS) tokens.add(randomToken());
      const list = [...tokens];
      const maxTok = list.reduce((a, b) => (a > b ? a : b));
      const why = `${mode} with tokens ${list.join(',')}`;
      const id = fresh();
      if (mode === 'write') await insert(id);
      // One connection per writer, all checked out before any writes: the writes really overlap.
      const conns = await Promise.all(list.map(() => pool.connect()));
      try {
        const results = await Promise.all(
          list.map((t, i) => {
            const conn = conns[i];
            if (conn === undefined) throw new Error('no connection');
            return postgresGuard(conn, SPEC)[mode](id, t, [`t${t}`]);
          }),
        );
        expect(results[list.indexOf(maxTok)], why).toEqual({ accepted: true });
        expect(results.filter((r) => r.accepted).length, why).toBeGreaterThanOrEqual(1);
      } finally {
        for (const c of conns) c.release();
      }
      expect(await row(id), why).toEqual({ body: `t${maxTok}`, fence: maxTok.toString() });
    }
  });
});

// One fence per row lets a paused former holder insert rows the newer holder never touched, or
// bring back a row it deleted. What a new user gets must refuse both.
describe('postgresGuard defaults (a real PostgreSQL server)', () => {
  let server: PostgresServer;
  let pool: pg.Pool;
  let n = 0;
  const fresh = (): string => `order-${++n}`;

  beforeAll(async () => {
    server = await startPostgres();
    pool = new pg.Pool({ connectionString: server.url, max: 25 });
    pool.on('error', () => undefined);
    await pool.query('CREATE TABLE orders (id text PRIMARY KEY, body text)');
    await pool.query(fenceMigrationSql({ table: 'orders', fenceColumn: 'fence' })); // for the per-row comparison
    await pool.query(fenceTableSql());
    await pool.query(fenceTableSql()); // idempotent
  }, 60_000);
  afterAll(async () => {
    await pool?.end();
    await server?.stop();
  });

  let lockN = 0;
  const guardOf = (): PostgresGuard =>
    postgresGuard(pool, { table: 'orders', idColumn: 'id', setColumns: ['body'], lock: `orders-${++lockN}` });
  const mark = async (lock: string): Promise<string | undefined> =>
    (await pool.query<{ token: string }>('SELECT token::text AS token FROM fencepost_fences WHERE lock = $1', [lock]))
      .rows[0]?.token;
  const body = async (id: string): Promise<string | undefined> =>
    (await pool.query<{ body: string }>('SELECT body FROM orders WHERE id = $1', [id])).rows[0]?.body;

  it('refuses a stale holder inserting a row the newer holder never wrote', async () => {
    const guard = guardOf();
    const [b, a] = [fresh(), fresh()];
    expect(await guard.upsert(b, 11n, ['B'])).toEqual({ accepted: true });
    expect(await guard.upsert(a, 10n, ['A (stale)'])).toEqual({ accepted: false, reason: 'stale' });
    expect(await body(a)).toBeUndefined();
  });

  it('refuses a stale holder bringing back a row the newer holder deleted', async () => {
    const guard = guardOf();
    const id = fresh();
    expect(await guard.upsert(id, 10n, ['A'])).toEqual({ accepted: true });
    expect(await guard.upsert(id, 11n, ['B'])).toEqual({ accepted: true });
    expect(await guard.delete(id, 11n)).toEqual({ accepted: true }); // B deletes the row
    expect(await body(id)).toBeUndefined();
    expect(await guard.upsert(id, 10n, ['A resurrects'])).toEqual({ accepted: false, reason: 'stale' });
    expect(await guard.write(id, 10n, ['A updates'])).toEqual({ accepted: false, reason: 'stale' });
    expect(await guard.delete(id, 10n)).toEqual({ accepted: false, reason: 'stale' });
    expect(await body(id)).toBeUndefined();
    expect(await guard.delete(id, 11n)).toEqual({ accepted: true }); // gone already: still accepted
  });

  it('tells a missing row from a stale token, and compares exactly past 2^53', async () => {
    const guard = postgresGuard(pool, { table: 'orders', idColumn: 'id', setColumns: ['body'], lock: 'exact' });
    const id = fresh();
    expect(await guard.write(id, 5n, ['ghost'])).toEqual({ accepted: false, reason: 'not-found' });
    expect(await mark('exact')).toBe('5'); // an accepted token raises the mark even with no row
    expect(await guard.upsert(id, '9007199254740993', ['a'])).toEqual({ accepted: true });
    expect(await guard.write(id, '9007199254740992', ['b'])).toEqual({ accepted: false, reason: 'stale' });
    expect(await guard.write(id, MAX_TOKEN, ['max'])).toEqual({ accepted: true });
    expect(await body(id)).toBe('max');
    expect(await mark('exact')).toBe(MAX_TOKEN.toString());
    await expect(guard.write(id, '01', ['bad'])).rejects.toThrow(TokenError);
    await expect(guard.write(id, 1n, [])).rejects.toThrow(RangeError);
  });

  it('advance fences out older tokens before the new holder writes anything', async () => {
    const guard = postgresGuard(pool, { table: 'orders', idColumn: 'id', setColumns: ['body'], lock: 'adv' });
    expect(await guard.advance(20n)).toEqual({ accepted: true });
    expect(await guard.advance(19n)).toEqual({ accepted: false, reason: 'stale' });
    const id = fresh();
    expect(await guard.upsert(id, 19n, ['stale'])).toEqual({ accepted: false, reason: 'stale' });
    expect(await body(id)).toBeUndefined();
    expect(await mark('adv')).toBe('20');
    await expect(guardOfRow().advance(1n)).rejects.toThrow(RangeError);
  });

  const guardOfRow = (): PostgresGuard =>
    postgresGuard(pool, { table: 'orders', idColumn: 'id', fenceColumn: 'fence', setColumns: ['body'] });

  it('with one mark per row (documented as weaker) a stale holder still inserts and resurrects rows', async () => {
    const guard = guardOfRow();
    const [b, a] = [fresh(), fresh()];
    expect(await guard.upsert(b, 11n, ['B'])).toEqual({ accepted: true });
    expect(await guard.upsert(a, 10n, ['A (stale)'])).toEqual({ accepted: true });
    expect(await guard.delete(b, 11n)).toEqual({ accepted: true });
    expect(await guard.upsert(b, 10n, ['A resurrects'])).toEqual({ accepted: true });
  });

  it('refuses a spec with both a lock and a fence column, or neither', () => {
    const base = { table: 'orders', idColumn: 'id', setColumns: ['body'] };
    expect(() => postgresGuard(pool, { ...base, lock: 'x', fenceColumn: 'fence' })).toThrow(RangeError);
    expect(() => postgresGuard(pool, base as unknown as FencedSqlSpec)).toThrow(RangeError);
    expect(() => postgresGuard(pool, { ...base, lock: '' })).toThrow(RangeError);
  });

  it('serialises racing writers of one lock on different rows: the highest token always lands, and the mark is it', async () => {
    const WRITERS = 20;
    const lock = `race-${++lockN}`;
    const tokens = [...new Set(Array.from({ length: WRITERS }, () => randomBytes(8).readBigUInt64BE() & MAX_TOKEN))];
    const maxTok = tokens.reduce((x, y) => (x > y ? x : y));
    const conns = await Promise.all(tokens.map(() => pool.connect()));
    try {
      const results = await Promise.all(
        tokens.map((t, i) => {
          const conn = conns[i];
          if (conn === undefined) throw new Error('no connection');
          return postgresGuard(conn, { table: 'orders', idColumn: 'id', setColumns: ['body'], lock }).upsert(
            `${lock}-${i}`,
            t,
            [`t${t}`],
          );
        }),
      );
      expect(results[tokens.indexOf(maxTok)]).toEqual({ accepted: true });
    } finally {
      for (const c of conns) c.release();
    }
    expect(await mark(lock)).toBe(maxTok.toString());
  });
});
