// The Go client (clients/go) against real parts: two real agents (the shipped executable) of two
// pods on the shared API server with the lock controller, the shared redis-server, and a
// PostgreSQL of this file's own. The Go code is built once per file into a temporary folder.
//
// - The Go guards run the shared guard outcome vectors on these servers (go test ./guard).
// - The README's example program runs against a real agent and writes through both guards.
// - The paused-holder scenario: two Go workers contend for a Mutex lock; the holder — its Go worker
//   and its agent, as in a VM pause — is SIGSTOPped between its lock check and its write, past the
//   lease; the successor's Go writes are accepted through the Go guards (Redis and SQL); the
//   resumed worker's late write is refused by them, and its lock reports lost.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fenceTableSql } from '../../../src/guards/sql-guard.ts';
import { startAgent, type AgentProcess } from '../../support/agent-processes.ts';
import { eventually, sharedKubeconfigPath, sharedRedisUrl } from '../../support/env.ts';
import { createLock, createPod, lockBody, type TestKube } from '../../support/fixtures.ts';
import { GO_MODULE, requireGo } from '../../support/client-toolchains.ts';
import { useLockController } from '../../support/lock-controller.ts';
import { startPostgres, type PostgresServer } from '../../support/testbed/postgres.ts';
import { spawnManaged, type ManagedProcess } from '../../support/testbed/processes.ts';

const LEASE_SECONDS = 3;

/** Worker is a Go scenario worker: its process and its JSON lines. */
interface Worker {
  readonly process: ManagedProcess;
  send(line: string): void;
  /** next waits for the next line whose event is `event` (earlier lines of other events are dropped). */
  next(event: string, timeoutMs?: number): Promise<Record<string, unknown>>;
}

describe('the Go client against real agents, redis-server and PostgreSQL', () => {
  const fx = useLockController('go-client-');
  let t: TestKube;
  let dir = '';
  let bin = '';
  let postgres: PostgresServer | undefined;
  let db: pg.Pool | undefined;
  let redis: Redis | undefined;
  const agents: AgentProcess[] = [];
  const procs: ManagedProcess[] = [];
  const lock = `go-${randomBytes(4).toString('hex')}`;

  beforeAll(async () => {
    t = fx.t;
    process.stdout.write(`go client: ${requireGo()}\n`);
    dir = mkdtempSync(join(tmpdir(), 'fencepost-go-client-'));
    bin = join(dir, 'bin');
    const started = performance.now();
    await promisify(execFile)('go', ['build', '-o', `${bin}/`, './examples/worker', './internal/scenarioworker'], {
      cwd: GO_MODULE,
    });
    process.stdout.write(`go client: built in ${Math.round(performance.now() - started)} ms\n`);
    postgres = await startPostgres();
    db = new pg.Pool({ connectionString: postgres.url, max: 2 });
    db.on('error', () => undefined);
    await db.query(fenceTableSql());
    await db.query('CREATE TABLE scenario (id bigint PRIMARY KEY, v text)');
    redis = new Redis(sharedRedisUrl());

    await createLock(t, lockBody(lock, lock, { mode: 'Mutex', leaseDurationSeconds: LEASE_SECONDS }));
    for (const pod of ['a', 'b']) {
      const p = await createPod(t, `${lock}-${pod}`, { app: lock });
      agents.push(
        await startAgent({
          lock,
          pod: `${lock}-${pod}`,
          uid: p.metadata?.uid ?? '',
          namespace: t.namespace,
          kubeconfig: sharedKubeconfigPath(),
          logDir: dir,
        }),
      );
    }
  });
  afterAll(async () => {
    for (const p of procs) p.signal('SIGCONT');
    for (const a of agents) a.process.signal('SIGCONT');
    await Promise.all([...procs, ...agents.map((a) => a.process)].map((p) => p.stop()));
    redis?.disconnect();
    await db?.end();
    await postgres?.stop();
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
  });

  const env = (agent: AgentProcess): NodeJS.ProcessEnv => ({
    ...process.env,
    FENCEPOST_LOCK: lock,
    FENCEPOST_AGENT_URL: `http://127.0.0.1:${agent.port}`,
    REDIS_URL: sharedRedisUrl(),
    DATABASE_URL: postgres?.url ?? '',
  });

  const startWorker = (name: string, agent: AgentProcess): Worker => {
    const proc = spawnManaged(`go-worker-${name}`, join(bin, 'scenarioworker'), {
      args: [],
      env: env(agent),
      logFile: join(dir, `worker-${name}.log`),
      pipeStdio: true,
    });
    procs.push(proc);
    const lines: Record<string, unknown>[] = [];
    let wake = (): void => undefined;
    if (proc.stdout === null) throw new Error('no stdout pipe');
    createInterface({ input: proc.stdout }).on('line', (line) => {
      lines.push(JSON.parse(line) as Record<string, unknown>);
      wake();
    });
    return {
      process: proc,
      send: (line) => {
        proc.stdin?.write(`${line}\n`);
      },
      next: async (event, timeoutMs = 30_000) => {
        const deadline = performance.now() + timeoutMs;
        for (;;) {
          const line = lines.shift();
          if (line?.['event'] === 'error') throw new Error(`worker ${name}: ${String(line['error'])}`);
          if (line?.['event'] === event) return line;
          if (line !== undefined) continue;
          if (performance.now() > deadline) throw new Error(`worker ${name}: no ${event} line within ${timeoutMs} ms`);
          await new Promise<void>((r) => {
            wake = r;
            setTimeout(r, 100);
          });
        }
      },
    };
  };

  it('the Go guards pass the shared guard outcome vectors on the real redis-server and PostgreSQL', async () => {
    const r = await promisify(execFile)('go', ['test', '-count=1', '-v', '-run', 'GuardVectors', './guard'], {
      cwd: GO_MODULE,
      env: {
        ...process.env,
        FENCEPOST_TEST_REDIS_URL: sharedRedisUrl(),
        FENCEPOST_TEST_POSTGRES_URL: postgres?.url ?? '',
      },
    });
    const passed = r.stdout.split('\n').filter((l) => l.includes('--- PASS')).length;
    process.stdout.write(`go client: guard vectors: ${passed} Go tests passed\n`);
    expect(r.stdout).toContain('--- PASS: TestRedisGuardVectors');
    expect(r.stdout).toContain('--- PASS: TestSQLGuardVectors');
    expect(r.stdout).not.toContain('--- SKIP');
    expect(r.stdout).not.toContain('--- FAIL');
  });

  it("the README's example acquires through a real agent, writes through both guards and releases", async () => {
    const r = await promisify(execFile)(join(bin, 'worker'), [], { env: env(agents[0] as AgentProcess) });
    const written = /wrote "(report written under token (\d+))" to redis \(applied\) and postgres \(applied\)/.exec(
      r.stdout,
    );
    expect(written, r.stdout + r.stderr).not.toBeNull();
    expect(await redis?.get('report:latest')).toBe(written?.[1]);
    expect((await db?.query<{ body: string }>('SELECT body FROM reports WHERE id = 1'))?.rows).toEqual([
      { body: written?.[1] },
    ]);
    // Released: the agent no longer holds it.
    await eventually(async () => {
      expect((await (agents[0] as AgentProcess).snapshot()).held).toBe(false);
    }, 10_000);
  });

  it("a Go worker paused past the lease: the successor's writes are accepted, the late write is refused by the Go guards", async () => {
    const [agentA, agentB] = agents as [AgentProcess, AgentProcess];
    // Two workers contend: A asks first and is granted; B waits in the Mutex queue.
    const a = startWorker('a', agentA);
    const tokenA = BigInt(String((await a.next('acquired'))['token']));
    const b = startWorker('b', agentB);
    a.send('write a1');
    expect(await a.next('wrote')).toMatchObject({ redis: 'applied', sql: 'applied', held: true });

    // A checks that it holds the lock — and is frozen with its agent before its write.
    a.send('check');
    expect(await a.next('checked')).toMatchObject({ held: true });
    const pausedAt = performance.now();
    agentA.process.signal('SIGSTOP');
    a.process.signal('SIGSTOP');

    // The lease expires; B is granted with a larger token and writes.
    const tokenB = BigInt(String((await b.next('acquired', 30_000))['token']));
    expect(tokenB).toBeGreaterThan(tokenA);
    b.send('write b1');
    expect(await b.next('wrote')).toMatchObject({ redis: 'applied', sql: 'applied', held: true });
    // Past the lease whatever the grant's timing (it can come a renew period early: the lease
    // runs from A's last renewal, before the pause).
    const pastLease = pausedAt + LEASE_SECONDS * 1000 + 500 - performance.now();
    if (pastLease > 0) await new Promise((r) => setTimeout(r, pastLease));
    const pausedMs = performance.now() - pausedAt;
    expect(pausedMs).toBeGreaterThan(LEASE_SECONDS * 1000);

    // A wakes up and finishes the write it had checked for: refused by both Go guards.
    agentA.process.signal('SIGCONT');
    a.process.signal('SIGCONT');
    a.send('write a-late');
    const late = await a.next('wrote');
    process.stdout.write(
      `go client: A (token ${tokenA}) paused ${Math.round(pausedMs)} ms; B granted token ${tokenB}; A's late write: ${JSON.stringify(late)}\n`,
    );
    expect(late).toMatchObject({ redis: 'stale', redisMark: String(tokenB), sql: 'stale', held: false });
    expect(String(late['cause'])).toContain('lock lost');
    expect(await redis?.get('scenario:value')).toBe('b1');
    expect((await db?.query<{ v: string }>('SELECT v FROM scenario WHERE id = 1'))?.rows).toEqual([{ v: 'b1' }]);

    // A's agent reports the loss too; B still holds.
    expect((await agentA.snapshot()).held).toBe(false);
    b.send('status');
    expect(await b.next('status')).toMatchObject({ held: true, cause: '' });
    b.send('release');
    await b.next('released');
  }, 90_000);
});
