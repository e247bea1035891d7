/**
 * The PostgreSQL fencing guard: the SQL guard's statements (src/guards/sql-guard.ts) run through
 * a client you pass in; one statement checks and writes under a row lock, so concurrent writers
 * cannot interleave.
 *
 * Its default is **one mark per lock**: give the spec a `lock` (and run `fenceTableSql()` once);
 * every write, upsert and delete of that lock is then fenced by one row of the fence table, so a
 * stale holder can neither write another row, nor insert a new one, nor bring back a deleted one.
 * A spec with a `fenceColumn` instead selects one mark per row, the earlier behaviour, which is
 * weaker (see sql-guard.ts).
 *
 * No driver is imported: any client with `query(text, params) → { rowCount }` works — a `pg`
 * Client, Pool or PoolClient does. `pg` is an optional peer: install it only if you use this guard.
 */
import {
  fencedDeleteSql,
  fencedParams,
  fencedUpdateSql,
  fencedUpsertSql,
  lockAdvanceSql,
  lockFencedDeleteSql,
  lockFencedParams,
  lockFencedUpdateSql,
  lockFencedUpsertSql,
  quoteIdentifier,
  tokenParam,
  type FencedSqlSpec,
  type LockFencedSqlSpec,
} from './sql-guard.ts';

/** PostgresQueryable is the part of a driver the guard uses (a `pg` Client, Pool or PoolClient). */
export interface PostgresQueryable {
  query(text: string, params: unknown[]): Promise<{ rowCount: number | null }>;
}

/**
 * PostgresWriteResult says whether a fenced write was applied: refused as `stale` (nothing
 * changed), or — lock scope, `write` only — `not-found`: the token was accepted (and the lock's
 * mark raised to it) but no row has that id.
 */
export type PostgresWriteResult =
  { accepted: true } | { accepted: false; reason: 'stale' } | { accepted: false; reason: 'not-found' };

/** PostgresGuard runs fenced writes against one table. */
export interface PostgresGuard {
  /**
   * write updates the row `id`, setting `values` (in `setColumns` order), if the token is not below
   * the mark, and raises the mark to it. A stale token is `{ accepted: false, reason: 'stale' }`;
   * a missing row is `not-found` with one mark per lock, and `stale` with one mark per row (the
   * statement cannot tell them apart there); use upsert to create rows. A malformed token throws
   * TokenError, and a wrong number of values RangeError, before any query.
   */
  write(id: unknown, token: bigint | string, values: readonly unknown[]): Promise<PostgresWriteResult>;
  /** upsert is write that inserts the row when it does not exist (per row: with the token as its fence). */
  upsert(id: unknown, token: bigint | string, values: readonly unknown[]): Promise<PostgresWriteResult>;
  /**
   * delete removes the row `id` under the same rule; deleting a missing row with a current token
   * is accepted. WARNING with one mark per row: the mark goes with the row, so a stale holder's
   * later upsert re-creates it (one mark per lock has no such hole).
   */
  delete(id: unknown, token: bigint | string): Promise<PostgresWriteResult>;
  /**
   * advance raises the lock's mark to `token` without writing data (one mark per lock only;
   * RangeError otherwise): a new holder that calls it first fences out every older token at once.
   */
  advance(token: bigint | string): Promise<PostgresWriteResult>;
}

/**
 * postgresGuard builds the statements once (a bad name throws SqlIdentifierError here) and returns
 * a guard that binds the token as a decimal string, never a JavaScript number. `spec` with a
 * `lock`: one mark per lock, in the fence table (create it with fenceTableSql). `spec` with a
 * `fenceColumn`: one mark per row, weaker. Both, or neither: RangeError.
 */
export function postgresGuard(client: PostgresQueryable, spec: FencedSqlSpec | LockFencedSqlSpec): PostgresGuard {
  const hasLock = 'lock' in spec && spec.lock !== undefined;
  const hasColumn = 'fenceColumn' in spec && spec.fenceColumn !== undefined;
  if (hasLock === hasColumn)
    throw new RangeError(
      'postgresGuard: give the spec a lock (one mark per lock, the safe default) or a fenceColumn (one mark per row), not both',
    );
  if (hasLock) return lockGuard(client, spec);
  return rowGuard(client, spec as FencedSqlSpec);
}

function lockGuard(client: PostgresQueryable, spec: LockFencedSqlSpec): PostgresGuard {
  const updateSql = lockFencedUpdateSql(spec);
  const upsertSql = lockFencedUpsertSql(spec);
  const deleteSql = lockFencedDeleteSql(spec);
  const advanceSql = lockAdvanceSql(spec);
  // 0 rows: the fence refused the token; 1: fenced, no data row; 2: fenced and written.
  const outcome = (rows: number | null, missing: PostgresWriteResult): PostgresWriteResult => {
    if ((rows ?? 0) === 0) return { accepted: false, reason: 'stale' };
    return rows === 1 ? missing : { accepted: true };
  };
  return {
    write: async (id, token, values) =>
      outcome((await client.query(updateSql, lockFencedParams(spec, values, token, id))).rowCount, {
        accepted: false,
        reason: 'not-found',
      }),
    upsert: async (id, token, values) =>
      outcome((await client.query(upsertSql, lockFencedParams(spec, values, token, id))).rowCount, {
        accepted: false,
        reason: 'not-found',
      }),
    delete: async (id, token) =>
      outcome((await client.query(deleteSql, lockFencedParams({ lock: spec.lock }, [], token, id))).rowCount, {
        accepted: true,
      }),
    advance: async (token) => {
      const res = await client.query(advanceSql, [tokenParam(token), spec.lock]);
      return (res.rowCount ?? 0) > 0 ? { accepted: true } : { accepted: false, reason: 'stale' };
    },
  };
}

function rowGuard(client: PostgresQueryable, spec: FencedSqlSpec): PostgresGuard {
  const updateSql = fencedUpdateSql(spec);
  const upsertSql = fencedUpsertSql(spec);
  const deleteSql = fencedDeleteSql(spec);
  const run = async (
    sql: string,
    id: unknown,
    token: bigint | string,
    values: readonly unknown[],
  ): Promise<PostgresWriteResult> => {
    // fencedParams checks the token with parseToken (TokenError) before anything is sent.
    const params = fencedParams(spec, values, token, id);
    const res = await client.query(sql, params);
    return (res.rowCount ?? 0) > 0 ? { accepted: true } : { accepted: false, reason: 'stale' };
  };
  return {
    write: (id, token, values) => run(updateSql, id, token, values),
    upsert: (id, token, values) => run(upsertSql, id, token, values),
    delete: async (id, token) => {
      const res = await client.query(deleteSql, [tokenParam(token), id]);
      // Zero rows: stale, or no such row (then nothing is left to delete either way).
      return (res.rowCount ?? 0) > 0 ? { accepted: true } : { accepted: false, reason: 'stale' };
    },
    advance: () => Promise.reject(new RangeError('advance needs one mark per lock (a spec with a lock)')),
  };
}

/** FenceMigrationSpec names the table to give a fence column. */
export interface FenceMigrationSpec {
  readonly table: string;
  readonly schema?: string;
  readonly fenceColumn: string;
}

/**
 * fenceMigrationSql returns `ALTER TABLE "t" ADD COLUMN IF NOT EXISTS "fence" bigint NOT NULL
 * DEFAULT 0`: idempotent, and existing rows start at fence 0 (any token is accepted once).
 *
 * bigint, not numeric(20,0): tokens are in [0, 2^63−1] (MAX_TOKEN, a Redis counter), exactly
 * bigint's non-negative range, so every token fits with no rounding and no sign problem; a value
 * above it is refused by the database ("out of range") rather than stored, where numeric(20,0)
 * would take 2^63 silently; and it is eight bytes with integer comparison. An existing
 * numeric(20,0) fence column works with the guard too.
 */
export function fenceMigrationSql(spec: FenceMigrationSpec): string {
  const table = quoteIdentifier(spec.table, 'table');
  const qualified = spec.schema === undefined ? table : `${quoteIdentifier(spec.schema, 'schema')}.${table}`;
  return `ALTER TABLE ${qualified} ADD COLUMN IF NOT EXISTS ${quoteIdentifier(spec.fenceColumn, 'fenceColumn')} bigint NOT NULL DEFAULT 0`;
}
