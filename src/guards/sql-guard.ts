/**
 * The SQL fencing guard, as statement text (no driver): the row carries its own high-water mark
 * in a fence column, and the write is a single statement whose WHERE clause refuses a token below
 * it, so the database's row lock makes check and write atomic.
 *
 * How to use it (PostgreSQL):
 * - Declare the fence column `bigint NOT NULL DEFAULT 0` (or `numeric(20) NOT NULL DEFAULT 0`).
 *   Tokens go up to 2^63−1, which `bigint` holds exactly. A NULL fence refuses every write
 *   (`NULL <= $n` is not true): safe, but it will look like a stale token.
 * - Bind the token as a decimal string (`tokenParam`), never as a JavaScript number (exact only
 *   up to 2^53) and never compare it as a float (`real`, `double precision`, or a JSON number).
 * - A result of zero rows means the write was refused: the token is stale (for `UPDATE`, or the
 *   row does not exist — tell the two apart with a SELECT or use the upsert). An equal token is
 *   accepted: the same holder writing again in its term.
 * - Quoted identifiers are case-sensitive in PostgreSQL: pass names as the table was created
 *   (unquoted names are folded to lower case at creation).
 *
 * Parameters, for both statements: `$1..$n` are the values of `setColumns` in order, `$n+1` the
 * token, `$n+2` the row id (`fencedParams` builds that array).
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
