/**
 * The SQL fencing guard, as statement text (no driver): every fenced write is a single statement,
 * so the database's row lock makes check and write atomic.
 *
 * Two scopes (a mark per row let a stale holder write the rows its successor had not, hence the
 * per-lock default):
 * - **One mark per lock** (the default of postgresGuard; `lockFenced*Sql`): a fence table holds
 *   one row per lock, `(lock text PRIMARY KEY, token bigint)` (`fenceTableSql` creates it), and
 *   each statement first raises that row to the token — only if it is not above it — and writes
 *   the data only when it did. The fence row's lock serialises every writer of the lock, and
 *   once token N+1 has written, inserted or deleted any row, token N can do nothing: not update
 *   another row, not insert a new one, not bring back a deleted one.
 * - **One mark per row** (`fenced*Sql`, a fence column on the data table): weaker. A stale holder
 *   can still update every row the newer holder has not written, insert rows, and re-insert a row
 *   the newer holder deleted (the row, and with it its mark, is gone). Use it only for rows whose
 *   writes are independent of each other.
 *
 * How to use it (PostgreSQL):
 * - A fence column or the fence table's token is `bigint NOT NULL` (or `numeric(20)`). Tokens go
 *   up to 2^63−1, which `bigint` holds exactly. A NULL fence refuses every write (`NULL <= $n` is
 *   not true): safe, but it will look like a stale token.
 * - Bind the token as a decimal string (`tokenParam`), never as a JavaScript number (exact only
 *   up to 2^53) and never compare it as a float (`real`, `double precision`, or a JSON number).
 * - An equal token is accepted: the same holder writing again in its term.
 * - Quoted identifiers are case-sensitive in PostgreSQL: pass names as the table was created
 *   (unquoted names are folded to lower case at creation).
 *
 * Parameters: per-row statements take `$1..$n` the values of `setColumns` in order, `$n+1` the
 * token, `$n+2` the row id (`fencedParams`); the per-row delete `$1` the token, `$2` the id.
 * Lock statements take the same and then the lock name (`lockFencedParams`).
 */
import { parseToken } from '../protocol/token.ts';

/** FencedSqlSpec names the table and columns of a fenced write. */
export interface FencedSqlSpec {
  /** table is the table's name (unqualified). */
  readonly table: string;
  /** schema qualifies the table when given. */
  readonly schema?: string;
  /** idColumn identifies the row (for the upsert: a primary key or unique column). */
  readonly idColumn: string;
  /** fenceColumn holds the row's high-water mark. */
  readonly fenceColumn: string;
  /** setColumns are the columns the write sets, in parameter order (at least one). */
  readonly setColumns: readonly string[];
}

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** PostgreSQL silently truncates identifiers to 63 bytes (NAMEDATALEN − 1): two long names could
 *  become one. */
const MAX_IDENTIFIER = 63;

/** SqlIdentifierError says which name was refused and why. */
export class SqlIdentifierError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SqlIdentifierError';
  }
}

/**
 * quoteIdentifier double-quotes a name after checking that it is a plain identifier
 * (`[A-Za-z_][A-Za-z0-9_]*`, at most 63 characters). Anything else — spaces, quotes, dots,
 * semicolons, non-ASCII letters — throws SqlIdentifierError naming `what` and the value: names are
 * never escaped, only refused, so no input can change the statement's shape.
 */
export function quoteIdentifier(name: unknown, what = 'identifier'): string {
  if (typeof name !== 'string') throw new SqlIdentifierError(`${what} must be a string, got ${typeof name}`);
  if (!IDENTIFIER.test(name))
    throw new SqlIdentifierError(
      `${what} ${JSON.stringify(name.slice(0, 80))} is not an identifier of the form [A-Za-z_][A-Za-z0-9_]*`,
    );
  if (name.length > MAX_IDENTIFIER)
    throw new SqlIdentifierError(
      `${what} ${JSON.stringify(name.slice(0, 80))} is longer than ${MAX_IDENTIFIER} characters`,
    );
  return `"${name}"`;
}

interface Quoted {
  table: string;
  id: string;
  fence: string;
  set: string[];
}

function quoteSpec(spec: FencedSqlSpec): Quoted {
  const table = quoteIdentifier(spec.table, 'table');
  const qualified = spec.schema === undefined ? table : `${quoteIdentifier(spec.schema, 'schema')}.${table}`;
  const id = quoteIdentifier(spec.idColumn, 'idColumn');
  const fence = quoteIdentifier(spec.fenceColumn, 'fenceColumn');
  if (spec.setColumns.length === 0) throw new SqlIdentifierError('setColumns must name at least one column');
  const set = spec.setColumns.map((c, i) => quoteIdentifier(c, `setColumns[${i}]`));
  const all = [spec.idColumn, spec.fenceColumn, ...spec.setColumns];
  const seen = new Set<string>();
  for (const c of all) {
    if (seen.has(c))
      throw new SqlIdentifierError(
        `column ${JSON.stringify(c)} appears twice among idColumn, fenceColumn and setColumns`,
      );
    seen.add(c);
  }
  return { table: qualified, id, fence, set };
}

/**
 * fencedUpdateSql returns `UPDATE "t" SET "a" = $1, "fence" = $2 WHERE "id" = $3 AND "fence" <= $2`:
 * the write happens, and the fence is raised to the token, only if the row's fence is not above
 * the token. Zero rows affected: stale token (or no such row). Throws SqlIdentifierError for a
 * bad name, an empty `setColumns`, or a column named twice.
 */
export function fencedUpdateSql(spec: FencedSqlSpec): string {
  const q = quoteSpec(spec);
  const n = q.set.length;
  const token = `$${n + 1}`;
  const assignments = [...q.set.map((c, i) => `${c} = $${i + 1}`), `${q.fence} = ${token}`].join(', ');
  return `UPDATE ${q.table} SET ${assignments} WHERE ${q.id} = $${n + 2} AND ${q.fence} <= ${token}`;
}

/**
 * fencedUpsertSql returns a PostgreSQL upsert, `INSERT INTO "t" ("a", "fence", "id") VALUES ($1,
 * $2, $3) ON CONFLICT ("id") DO UPDATE SET "a" = EXCLUDED."a", "fence" = EXCLUDED."fence" WHERE
 * "t"."fence" <= EXCLUDED."fence"`: a new row is inserted with the token as its fence; an existing
 * row is updated only if its fence is not above the token. Zero rows affected: stale token.
 * `idColumn` must carry a unique constraint. Same parameters as fencedUpdateSql.
 */
export function fencedUpsertSql(spec: FencedSqlSpec): string {
  const q = quoteSpec(spec);
  const columns = [...q.set, q.fence, q.id];
  const values = columns.map((_, i) => `$${i + 1}`);
  const updates = [...q.set, q.fence].map((c) => `${c} = EXCLUDED.${c}`).join(', ');
  return `INSERT INTO ${q.table} (${columns.join(', ')}) VALUES (${values.join(', ')}) ON CONFLICT (${q.id}) DO UPDATE SET ${updates} WHERE ${q.table}.${q.fence} <= EXCLUDED.${q.fence}`;
}

/**
 * tokenParam turns a token into the string to bind: a canonical decimal, checked with
 * parseToken (throws TokenError). Bind it as text to a bigint/numeric column; the database
 * converts it exactly.
 */
export function tokenParam(token: bigint | string): string {
  return parseToken(typeof token === 'bigint' ? token.toString() : token).toString();
}

/**
 * fencedParams builds the parameter array for fencedUpdateSql/fencedUpsertSql: the set values in
 * order, the token as a string, the id. Throws RangeError when the number of values does not
 * match `setColumns`, and TokenError for a malformed token.
 */
export function fencedParams(
  spec: FencedSqlSpec,
  values: readonly unknown[],
  token: bigint | string,
  id: unknown,
): unknown[] {
  if (values.length !== spec.setColumns.length) {
    throw new RangeError(`fencedParams: ${values.length} values for ${spec.setColumns.length} setColumns`);
  }
  return [...values, tokenParam(token), id];
}

/**
 * fencedDeleteSql returns `DELETE FROM "t" WHERE "id" = $2 AND "fence" <= $1` (per-row scope;
 * parameters: the token, the id). WARNING: the row's mark goes with the row, so a stale holder's
 * later upsert re-creates it; the lock-scoped lockFencedDeleteSql does not have that hole.
 */
export function fencedDeleteSql(spec: Omit<FencedSqlSpec, 'setColumns'>): string {
  const q = quoteSpec({ ...spec, setColumns: ['_'] });
  return `DELETE FROM ${q.table} WHERE ${q.id} = $2 AND ${q.fence} <= $1`;
}

/** DEFAULT_FENCE_TABLE is the table of lock marks when a spec names none: `fencepost_fences`. */
export const DEFAULT_FENCE_TABLE = 'fencepost_fences';

/** FenceTableSpec names the table that holds one mark per lock. */
export interface FenceTableSpec {
  /** fenceTable is the table's name (default `fencepost_fences`). */
  readonly fenceTable?: string;
  /** fenceSchema qualifies it when given. */
  readonly fenceSchema?: string;
}

/**
 * LockFencedSqlSpec names the data table and columns of a lock-scoped fenced write, the lock, and
 * the fence table. The data table needs no fence column.
 */
export interface LockFencedSqlSpec extends FenceTableSpec {
  /** table is the data table's name (unqualified). */
  readonly table: string;
  /** schema qualifies the data table when given. */
  readonly schema?: string;
  /** idColumn identifies the row (for upsert: a primary key or unique column). */
  readonly idColumn: string;
  /** setColumns are the columns a write sets, in parameter order (at least one). */
  readonly setColumns: readonly string[];
  /** lock is the name of the lock whose tokens the writes carry: any non-empty string, bound as a
   *  parameter (one row of the fence table). Tables written under one lock share its mark. */
  readonly lock: string;
}

function quoteFenceTable(spec: FenceTableSpec): string {
  const table = quoteIdentifier(spec.fenceTable ?? DEFAULT_FENCE_TABLE, 'fenceTable');
  return spec.fenceSchema === undefined ? table : `${quoteIdentifier(spec.fenceSchema, 'fenceSchema')}.${table}`;
}

/**
 * fenceTableSql returns `CREATE TABLE IF NOT EXISTS "fencepost_fences" ("lock" text PRIMARY KEY,
 * "token" bigint NOT NULL CHECK ("token" >= 0))`: idempotent. Run it once, as a migration,
 * before the first lock-scoped write. Never delete its rows: a lost mark lets every stale holder
 * in again once.
 */
export function fenceTableSql(spec: FenceTableSpec = {}): string {
  return `CREATE TABLE IF NOT EXISTS ${quoteFenceTable(spec)} ("lock" text PRIMARY KEY, "token" bigint NOT NULL CHECK ("token" >= 0))`;
}

interface LockQuoted {
  table: string;
  id: string;
  set: string[];
  fence: string;
}

function quoteLockSpec(spec: LockFencedSqlSpec, needSet: boolean): LockQuoted {
  const table = quoteIdentifier(spec.table, 'table');
  const qualified = spec.schema === undefined ? table : `${quoteIdentifier(spec.schema, 'schema')}.${table}`;
  const id = quoteIdentifier(spec.idColumn, 'idColumn');
  if (needSet && spec.setColumns.length === 0) throw new SqlIdentifierError('setColumns must name at least one column');
  const set = spec.setColumns.map((c, i) => quoteIdentifier(c, `setColumns[${i}]`));
  const seen = new Set<string>();
  for (const c of [spec.idColumn, ...spec.setColumns]) {
    if (seen.has(c))
      throw new SqlIdentifierError(`column ${JSON.stringify(c)} appears twice among idColumn and setColumns`);
    seen.add(c);
  }
  if (typeof spec.lock !== 'string' || spec.lock === '') throw new RangeError('lock must be a non-empty string');
  return { table: qualified, id, set, fence: quoteFenceTable(spec) };
}

/** The fence step every lock statement starts with: raise the lock's mark to $token unless above it. */
function fenceStep(fence: string, token: string, lock: string): string {
  return `WITH fence AS (INSERT INTO ${fence} ("lock", "token") VALUES (${lock}, ${token}) ON CONFLICT ("lock") DO UPDATE SET "token" = EXCLUDED."token" WHERE ${fence}."token" <= EXCLUDED."token" RETURNING 1)`;
}

/** Every lock statement answers 0 rows (stale), 1 (fenced, no row written) or 2 (fenced and written). */
const STEPS = `SELECT 'fenced' AS step FROM fence UNION ALL SELECT 'written' FROM w`;

/**
 * lockFencedUpdateSql returns one statement that raises the lock's mark in the fence table to the
 * token (only if it is not above it) and then updates the row — only when the mark was raised.
 * It returns 0 rows when the token is stale (nothing changed), 1 when the token was accepted but
 * no row has that id, 2 when the row was updated. Parameters: lockFencedParams.
 */
export function lockFencedUpdateSql(spec: LockFencedSqlSpec): string {
  const q = quoteLockSpec(spec, true);
  const n = q.set.length;
  const assignments = q.set.map((c, i) => `${c} = $${i + 1}`).join(', ');
  return `${fenceStep(q.fence, `$${n + 1}`, `$${n + 3}`)}, w AS (UPDATE ${q.table} SET ${assignments} WHERE ${q.id} = $${n + 2} AND EXISTS (SELECT 1 FROM fence) RETURNING 1) ${STEPS}`;
}

/**
 * lockFencedUpsertSql is lockFencedUpdateSql that inserts the row when it does not exist (a
 * stale token inserts nothing, also not a row deleted meanwhile): 0 rows stale, 2 written.
 * `idColumn` must carry a unique constraint.
 */
export function lockFencedUpsertSql(spec: LockFencedSqlSpec): string {
  const q = quoteLockSpec(spec, true);
  const n = q.set.length;
  const columns = [...q.set, q.id];
  const values = [...q.set.map((_, i) => `$${i + 1}`), `$${n + 2}`];
  const updates = q.set.map((c) => `${c} = EXCLUDED.${c}`).join(', ');
  return `${fenceStep(q.fence, `$${n + 1}`, `$${n + 3}`)}, w AS (INSERT INTO ${q.table} (${columns.join(', ')}) SELECT ${values.join(', ')} WHERE EXISTS (SELECT 1 FROM fence) ON CONFLICT (${q.id}) DO UPDATE SET ${updates} RETURNING 1) ${STEPS}`;
}

/**
 * lockFencedDeleteSql deletes the row under the lock's mark: 0 rows stale, 1 accepted but no such
 * row, 2 deleted. The mark stays, so a stale holder cannot bring the row back. Parameters:
 * lockFencedParams with no values (`$1` token, `$2` id, `$3` lock).
 */
export function lockFencedDeleteSql(spec: Omit<LockFencedSqlSpec, 'setColumns'>): string {
  const q = quoteLockSpec({ ...spec, setColumns: [] }, false);
  return `${fenceStep(q.fence, '$1', '$3')}, w AS (DELETE FROM ${q.table} WHERE ${q.id} = $2 AND EXISTS (SELECT 1 FROM fence) RETURNING 1) ${STEPS}`;
}

/**
 * lockAdvanceSql raises the lock's mark to `$1` (the token) for lock `$2` without writing data:
 * 1 row when accepted, 0 when stale. A new holder that runs it first fences out every older token
 * before its first write.
 */
export function lockAdvanceSql(spec: FenceTableSpec = {}): string {
  return `${fenceStep(quoteFenceTable(spec), '$1', '$2')} SELECT 'fenced' AS step FROM fence`;
}

/**
 * lockFencedParams builds the parameters of the lock statements: the set values in order (none
 * for delete), the token as a string, the id, the lock name. Throws RangeError when the number of
 * values does not match, and TokenError for a malformed token.
 */
export function lockFencedParams(
  spec: Pick<LockFencedSqlSpec, 'lock'> & { readonly setColumns?: readonly string[] },
  values: readonly unknown[],
  token: bigint | string,
  id: unknown,
): unknown[] {
  const expected = spec.setColumns?.length ?? 0;
  if (values.length !== expected) {
    throw new RangeError(`lockFencedParams: ${values.length} values for ${expected} setColumns`);
  }
  return [...values, tokenParam(token), id, spec.lock];
}
