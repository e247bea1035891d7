// The Python client (clients/python) against real parts: two real agents (the shipped executable)
// of two pods on the shared API server with the lock controller, the shared redis-server, and a
// PostgreSQL of this file's own. The Python code runs in the virtualenv of hack/python-venv.sh,
// which this file makes when it is missing (pip install -e clients/python[dev]; about 15 s).
//
// - The Python guards (sync and asyncio) run the shared guard outcome vectors on these servers
//   (pytest tests/test_guard_vectors.py).
// - The README's example program runs against a real agent and writes through both guards.
// - asyncio: `async with acquire_async` with a run id through a real agent, the async guards, the
//   event stream as an async iterator, complete; the same run id is then refused as done.
// - The paused-holder scenario: two Python workers contend for a Mutex lock; the holder — its
//   Python worker and its agent, as in a VM pause — is SIGSTOPped between its lock check and its
//   write, past the lease; the successor's Python writes are accepted through the Python guards
//   (Redis and SQL); the resumed worker's late write is refused by them, and its lock reports lost.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fenceTableSql } from '../../../src/guards/sql-guard.ts';
import { startAgent, type AgentProcess } from '../../support/agent-processes.ts';
import { eventually, sharedKubeconfigPath, sharedRedisUrl } from '../../support/env.ts';
import { createLock, createPod, lockBody, type TestKube } from '../../support/fixtures.ts';
import { useLockController } from '../../support/lock-controller.ts';
import { startPostgres, type PostgresServer } from '../../support/testbed/postgres.ts';
import { spawnManaged, type ManagedProcess } from '../../support/testbed/processes.ts';

const ROOT = resolve(import.meta.dirname, '../../..');
const PY_CLIENT = join(ROOT, 'clients/python');
const LEASE_SECONDS = 3;

/** Worker is a Python scenario worker: its process and its JSON lines. */
interface Worker {
  readonly process: ManagedProcess;
  send(line: string): void;
  /** next waits for the next line whose event is `event` (earlier lines of other events are dropped). */
  next(event: string, timeoutMs?: number): Promise<Record<string, unknown>>;
}

describe('the Python client against real agents, redis-server and PostgreSQL', () => {
  const fx = useLockController('py-client-');
  let t: TestKube;
  let dir = '';
  let python = '';
  let postgres: PostgresServer | undefined;
  let db: pg.Pool | undefined;
  let redis: Redis | undefined;
  const agents: AgentProcess[] = [];
  const procs: ManagedProcess[] = [];
  const lock = `py-${randomBytes(4).toString('hex')}`;

  beforeAll(async () => {
    t = fx.t;
    dir = mkdtempSync(join(tmpdir(), 'fencepost-py-client-'));
    // The virtualenv: made here when missing (a fresh machine), else reused at once.
    const started = performance.now();
    const venv = (await promisify(execFile)(join(ROOT, 'hack/python-venv.sh'), [], { cwd: ROOT })).stdout.trim();
    python = join(venv, 'bin', 'python');
    process.stdout.write(`python client: venv ${venv} ready in ${Math.round(performance.now() - started)} ms\n`);
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
    PYTHONDONTWRITEBYTECODE: '1',
  });

  const startWorker = (name: string, agent: AgentProcess): Worker => {
    const proc = spawnManaged(`py-worker-${name}`, python, {
      args: [join(PY_CLIENT, 'tests/scenario_worker.py')],
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

  it('the Python guards (sync and asyncio) pass the shared guard outcome vectors on the real redis-server and PostgreSQL', async () => {
    const r = await promisify(execFile)(
      python,
      ['-m', 'pytest', '-v', '-p', 'no:cacheprovider', 'tests/test_guard_vectors.py'],
      {
        cwd: PY_CLIENT,
        env: {
          ...process.env,
          PYTHONDONTWRITEBYTECODE: '1',
          FENCEPOST_TEST_REDIS_URL: sharedRedisUrl(),
          FENCEPOST_TEST_POSTGRES_URL: postgres?.url ?? '',
        },
      },
    );
    const passed = r.stdout.split('\n').filter((l) => l.includes(' PASSED')).length;
    process.stdout.write(`python client: guard vectors: ${passed} pytest tests passed\n`);
    expect(r.stdout).toMatch(/test_redis_guard_vectors\[.*-sync\] PASSED/);
    expect(r.stdout).toMatch(/test_redis_guard_vectors\[.*-asyncio\] PASSED/);
    expect(r.stdout).toMatch(/test_sql_guard_vectors\[.*-sync\] PASSED/);
    expect(r.stdout).toMatch(/test_sql_guard_vectors\[.*-asyncio\] PASSED/);
    expect(r.stdout).not.toContain('SKIPPED');
    expect(r.stdout).not.toContain('FAILED');
    expect(passed).toBeGreaterThan(0);
  });

  it("the README's example acquires through a real agent, writes through both guards and releases", async () => {
    const r = await promisify(execFile)(python, [join(PY_CLIENT, 'examples/worker.py')], {
      env: env(agents[0] as AgentProcess),
    });
    const written = /wrote '(report written under token (\d+))' to redis \(applied\) and postgres \(applied\)/.exec(
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

  it('asyncio: async with acquire_async holds a run through a real agent, writes through the async guards, follows the event stream; the run id is then done', async () => {
    const runId = `run-${randomBytes(4).toString('hex')}`;
    const r = await promisify(execFile)(python, [join(PY_CLIENT, 'tests/async_worker.py')], {
      env: { ...env(agents[1] as AgentProcess), RUN_ID: runId },
    });
    const out = JSON.parse(r.stdout) as Record<string, unknown>;
    process.stdout.write(`python client: asyncio worker: ${r.stdout}`);
    expect(out).toMatchObject({
      redis: 'applied',
      sql: 'applied',
      renewedToken: out['token'],
      heldBeforeRelease: true,
      error: 'LockReleasedError',
      again: 'AlreadyDoneError',
    });
    expect(await redis?.get('async:value')).toBe(out['body']);
    expect((await db?.query<{ v: string }>('SELECT v FROM async_scenario WHERE id = 1'))?.rows).toEqual([
      { v: out['body'] },
    ]);
    await eventually(async () => {
      expect((await (agents[1] as AgentProcess).snapshot()).held).toBe(false);
    }, 10_000);
  });

  it("a Python worker paused past the lease: the successor's writes are accepted, the late write is refused by the Python guards", async () => {
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

    // A wakes up and finishes the write it had checked for: refused by both Python guards.
    agentA.process.signal('SIGCONT');
    a.process.signal('SIGCONT');
    a.send('write a-late');
    const late = await a.next('wrote');
    process.stdout.write(
      `python client: A (token ${tokenA}) paused ${Math.round(pausedMs)} ms; B granted token ${tokenB}; A's late write: ${JSON.stringify(late)}\n`,
    );
    expect(late).toMatchObject({ redis: 'stale', redisMark: String(tokenB), sql: 'stale', held: false });
    expect(String(late['cause'])).toContain('LockLostError');
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
