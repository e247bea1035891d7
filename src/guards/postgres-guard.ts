/**
 * The PostgreSQL fencing guard: the SQL guard's statements (fencedUpdateSql, fencedUpsertSql) run
 * through a client you pass in. The row's fence column holds the highest token it accepted; one
 * statement checks and writes under the row lock, so concurrent writers cannot interleave.
 *
 * No driver is imported: any client with `query(text, params) → { rowCount }` works — a `pg`
 * Client, Pool or PoolClient does. `pg` is an optional peer: install it only if you use this guard.
 */
import { fencedParams, fencedUpdateSql, fencedUpsertSql, quoteIdentifier, type FencedSqlSpec } from './sql-guard.ts';

/** PostgresQueryable is the part of a driver the guard uses (a `pg` Client, Pool or PoolClient). */
export interface PostgresQueryable {
  query(text: string, params: unknown[]): Promise<{ rowCount: number | null }>;
}

/** PostgresWriteResult says whether a fenced write was applied. */
export type PostgresWriteResult = { accepted: true } | { accepted: false; reason: 'stale' };

/** PostgresGuard runs fenced writes against one table. */
export interface PostgresGuard {
  /**
   * write updates the row `id`, setting `values` (in `setColumns` order) and raising the fence to
   * `token`, if the row's fence is not above the token. Zero rows affected — a stale token, or no
   * such row — is `{ accepted: false, reason: 'stale' }`; use upsert to create rows. A malformed
   * token throws TokenError, and a wrong number of values RangeError, before any query.
   */
  write(id: unknown, token: bigint | string, values: readonly unknown[]): Promise<PostgresWriteResult>;
  /** upsert is write that inserts the row (with the token as its fence) when it does not exist. */
  upsert(id: unknown, token: bigint | string, values: readonly unknown[]): Promise<PostgresWriteResult>;
}

/**
 * postgresGuard builds the statements once (a bad name throws SqlIdentifierError here) and returns
 * a guard that binds the token as a decimal string, never a JavaScript number.
 */
export function postgresGuard(client: PostgresQueryable, spec: FencedSqlSpec): PostgresGuard {
  const updateSql = fencedUpdateSql(spec);
  const upsertSql = fencedUpsertSql(spec);
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
