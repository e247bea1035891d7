/**
 * An application that holds a lock in-process with the library (no sidecar): it waits until its
 * pod is granted `daily-totals`, then writes the day's total every second with the fencing token,
 * through the SQL guard, until it loses the lock or is told to stop.
 *
 *   POD_NAME, POD_NAMESPACE, POD_UID   from the downward API (see examples/singleton-deployment.yaml)
 *   DATABASE_URL                       postgres://...
 *   node examples/library-app.ts       (in your image: node app.js, importing from 'fencepost')
 *
 * The pod's ServiceAccount needs the agent's Role (the chart's agentRbac). On SIGTERM the lock is
 * released at once (`await using` disposes it), so another replica takes over without waiting for
 * the lease to expire.
 */
import pg from 'pg';
import { acquire } from '../src/index.ts';
import { ledger, migrate, writeTotal } from './sql-guard.ts';

const stop = new AbortController();
process.once('SIGTERM', () => {
  stop.abort();
});
process.once('SIGINT', () => {
  stop.abort();
});

const db = new pg.Pool({ connectionString: process.env['DATABASE_URL'], max: 2 });
db.on('error', (err) => {
  console.error(`database: ${err.message}`);
});
try {
  await migrate(db);
  const guard = ledger(db);
  const me = process.env['POD_NAME'] ?? 'unknown';
  await using lock = await acquire('daily-totals', { signal: stop.signal });
  console.log(`holding daily-totals with fencing token ${lock.token}`);
  for (let total = 1; !lock.signal.aborted && !stop.signal.aborted; total++) {
    const day = new Date().toISOString().slice(0, 10);
    // Check, then write with the token: if this process pauses between the two, the guard still
    // refuses the write once a newer holder has written.
    if (!(await writeTotal(guard, day, total, lock.token, me))) {
      console.log(`write refused: token ${lock.token} is stale`);
      break;
    }
    console.log(`wrote total ${total} for ${day} with token ${lock.token}`);
    await new Promise((r) => setTimeout(r, 1000));
  }
  console.log(lock.signal.aborted ? 'lost the lock; stopped writing' : 'stopping; releasing the lock');
} finally {
  await db.end();
}
