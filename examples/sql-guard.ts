/**
 * The SQL guard: make PostgreSQL refuse writes from a holder whose fencing token is stale.
 *
 * Once, as a migration: give the table a `fence bigint` column. Then every write of a lock holder
 * goes through the guard with the holder's token: `UPDATE ... SET ..., fence = $token WHERE id = $id
 * AND fence <= $token`. A holder that was paused, partitioned or replaced carries a smaller token
 * than the row has seen, so its write affects no row and is reported `stale`.
 *
 * In your application import from 'fencepost'; this file imports from the source tree so that
 * test/integration/examples runs it as it is.
 */
import { fenceMigrationSql, postgresGuard, type PostgresGuard, type PostgresQueryable } from '../src/index.ts';

/** LEDGER is the protected table: one row per day, written only by the current lock holder. */
export const LEDGER = {
  table: 'daily_totals',
  idColumn: 'day',
  fenceColumn: 'fence',
  setColumns: ['total', 'written_by'],
} as const;

/** migrate creates the table (if needed) and adds the fence column (idempotent). */
export async function migrate(db: PostgresQueryable): Promise<void> {
  await db.query(
    'CREATE TABLE IF NOT EXISTS daily_totals (day text PRIMARY KEY, total bigint NOT NULL, written_by text NOT NULL)',
    [],
  );
  await db.query(fenceMigrationSql({ table: LEDGER.table, fenceColumn: LEDGER.fenceColumn }), []);
}

/** ledger returns the guard for daily_totals: every write carries the holder's token. */
export function ledger(db: PostgresQueryable): PostgresGuard {
  return postgresGuard(db, { ...LEDGER, setColumns: [...LEDGER.setColumns] });
}

/**
 * writeTotal records a day's total as the holder of token. It returns false when the database
 * refused the write because a newer holder has written since: stop, you are not the holder.
 */
export async function writeTotal(
  guard: PostgresGuard,
  day: string,
  total: number,
  token: bigint,
  writer: string,
): Promise<boolean> {
  const result = await guard.upsert(day, token, [total, writer]);
  return result.accepted;
}
