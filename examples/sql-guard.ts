/**
 * The SQL guard: make PostgreSQL refuse writes from a holder whose fencing token is stale.
 *
 * Once, as a migration: create fencepost's fence table (one row per lock). Then every write of a
 * lock holder goes through the guard with the holder's token, as one statement that first raises
 * the lock's row in the fence table to the token (only if it is not above it) and touches the data
 * only if that succeeded. A holder that was paused, partitioned or replaced carries a smaller token
 * than the lock has seen, so its write — an update, an insert of a new day, bringing back a deleted
 * one — changes nothing and is reported `stale`. (A fence column per row is the weaker mode: see
 * docs/agent.md, "Guards".)
 *
 * In your application import from 'fencepost'; this file imports from the source tree so that
 * test/integration/examples runs it as it is.
 */
import { fenceTableSql, postgresGuard, type PostgresGuard, type PostgresQueryable } from '../src/index.ts';

/** LEDGER is the protected table: one row per day, written only by the holder of lock `billing`. */
export const LEDGER = {
  table: 'daily_totals',
  idColumn: 'day',
  setColumns: ['total', 'written_by'],
  lock: 'billing',
} as const;

/** migrate creates the table and fencepost's fence table (both idempotent, and safe to run at once from every replica). */
export async function migrate(db: PostgresQueryable): Promise<void> {
  await createOnce(
    db,
    'CREATE TABLE IF NOT EXISTS daily_totals (day text PRIMARY KEY, total bigint NOT NULL, written_by text NOT NULL)',
  );
  await createOnce(db, fenceTableSql());
}

/**
 * createOnce runs a CREATE … IF NOT EXISTS that another replica may be running at the same moment.
 * PostgreSQL checks IF NOT EXISTS before it inserts the catalog rows, so of two concurrent creators
 * one can fail with unique_violation (23505, on pg_type) or duplicate_table (42P07) — seen when two
 * replicas of library-app.ts started together. The other has created it: run it again, and it is
 * then a no-op.
 */
async function createOnce(db: PostgresQueryable, sql: string): Promise<void> {
  try {
    await db.query(sql, []);
  } catch (err) {
    const code = typeof err === 'object' && err !== null && 'code' in err ? String(err.code) : '';
    if (code !== '23505' && code !== '42P07') throw err;
    await db.query(sql, []);
  }
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
