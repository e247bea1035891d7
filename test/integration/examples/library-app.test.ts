import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ledger, writeTotal } from '../../../examples/sql-guard.ts';
import { useLockController } from '../../support/lock-controller.ts';
import { eventually, sharedKubeconfigPath } from '../../support/env.ts';
import { createPod, lockBody, createLock } from '../../support/fixtures.ts';
import { startPostgres, type PostgresServer } from '../../support/testbed/postgres.ts';
import { spawnManaged, type ManagedProcess } from '../../support/testbed/processes.ts';

const app = resolve(import.meta.dirname, '../../../examples/library-app.ts');

// examples/library-app.ts and examples/sql-guard.ts as they are: two replicas of the app, each a
// real process with its pod's identity, a real PostgreSQL, the controller in-process.
describe('examples/library-app.ts with the SQL guard of examples/sql-guard.ts', () => {
  const f = useLockController('example-app-');
  let db: PostgresServer;
  let pool: pg.Pool;
  let dir = '';
  const apps: ManagedProcess[] = [];
  const output = (p: ManagedProcess): string => readFileSync(p.logFile, 'utf8');

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fencepost-example-'));
    db = await startPostgres();
    pool = new pg.Pool({ connectionString: db.url, max: 2 });
    pool.on('error', () => undefined); // the server stops after the test
  }, 60_000);
  afterAll(async () => {
    await Promise.all(apps.map((a) => a.stop()));
    await pool?.end();
    await db?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('one replica writes with its token; on SIGTERM it releases, the other writes with a larger token, and the first token is then refused', async () => {
    await createLock(f.t, lockBody('daily-totals', 'ledger', { leaseDurationSeconds: 10 }));
    for (const i of [0, 1]) {
      const pod = await createPod(f.t, `ledger-${i}`, { app: 'ledger' });
      apps.push(
        spawnManaged(`app-${i}`, process.execPath, {
          args: [app],
          logFile: join(dir, `app-${i}.log`),
          env: {
            ...process.env,
            KUBECONFIG: sharedKubeconfigPath(),
            DATABASE_URL: db.url,
            POD_NAME: `ledger-${i}`,
            POD_NAMESPACE: f.t.namespace,
            POD_UID: pod.metadata?.uid ?? '',
          },
        }),
      );
    }
    const tokenOf = (text: string): bigint | undefined => {
      const m = /holding daily-totals with fencing token (\d+)/.exec(text);
      return m?.[1] !== undefined ? BigInt(m[1]) : undefined;
    };
    const first = await eventually(
      () => {
        const holders = apps.filter((a) => /wrote total 2 /.test(output(a)));
        expect(holders).toHaveLength(1);
        return holders[0] as ManagedProcess;
      },
      30_000,
      100,
    );
    const other = apps.find((a) => a !== first) as ManagedProcess;
    const oldToken = tokenOf(output(first)) ?? 0n;
    expect(tokenOf(output(other))).toBeUndefined();

    const stoppedAt = performance.now();
    await first.stop();
    expect(await first.exited).toBe(0);
    expect(output(first)).toContain('stopping; releasing the lock');
    const newToken = await eventually(
      () => {
        expect(output(other)).toMatch(/wrote total 1 /);
        return tokenOf(output(other)) ?? 0n;
      },
      20_000,
      100,
    );
    expect(performance.now() - stoppedAt).toBeLessThan(10_000); // released, not expired
    expect(newToken).toBeGreaterThan(oldToken);

    // A write with the first replica's token, as a stale holder would send it, is refused.
    const day = new Date().toISOString().slice(0, 10);
    expect(await writeTotal(ledger(pool), day, 999, oldToken, 'ledger-stale')).toBe(false);
    const row = await pool.query<{ written_by: string }>('SELECT written_by FROM daily_totals WHERE day = $1', [day]);
    expect(row.rows[0]).toEqual({ written_by: other === apps[0] ? 'ledger-0' : 'ledger-1' });
    // One mark for the whole lock, in fencepost's fence table: the newer holder's token.
    const mark = await pool.query<{ token: string }>(
      'SELECT token::text AS token FROM fencepost_fences WHERE lock = $1',
      ['billing'],
    );
    expect(mark.rows[0]).toEqual({ token: newToken.toString() });
  });
});
