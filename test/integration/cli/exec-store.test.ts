/**
 * `fencepost exec --store redis://…` through the real CLI (Node: src/cli/main.ts), with no pod
 * identity and no kubeconfig in its environment, against a real redis-server of its own: the
 * command runs with the lock's token, exec exits with its status and releases; a second exec with
 * --if-held skip exits EXIT_SKIPPED while the first holds; tokens grow run to run; a lock lost
 * while the command runs stops it (EXIT_LOST); bad flags exit 2. The compiled fencepost-agent
 * (Bun's built-in Redis client, stores/bun/) does the same on one Redis and on Redlock masters,
 * taking turns with the Node CLI on one lock (the same keys, scripts and tokens), also on a primary
 * with a replica through a failover, and refuses a Sentinel or Cluster URL naming where it works.
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import { EXIT_LOST, EXIT_SKIPPED } from '../../../src/cli/exec-usage.ts';
import { agentBinary } from '../../support/agent-binary.ts';
import { startRedis, startReplica, type RedisServer } from '../../support/testbed/redis.ts';
import { startTcpProxy } from '../../support/testbed/tcp-proxy.ts';

const main = resolve(import.meta.dirname, '../../../src/cli/main.ts');

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** run runs `file args` with no POD_* or KUBECONFIG in its environment; the timeout only catches hangs. */
function run(file: string, args: readonly string[]): Promise<Run> {
  const { KUBECONFIG: _k, POD_NAME: _n, POD_NAMESPACE: _ns, POD_UID: _u, ...env } = process.env;
  return new Promise((res) => {
    execFile(file, [...args], { env, timeout: 30_000 }, (err, stdout, stderr) => {
      // Killed by the timeout, exec forwards the SIGTERM and exits 143: report a hang as one.
      if (err?.killed === true) res({ code: null, stdout, stderr: `${stderr}[killed by the test's 30 s timeout]\n` });
      else res({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : null, stdout, stderr });
    });
  });
}

const exec = (...args: string[]): Promise<Run> => run(process.execPath, [main, 'exec', ...args]);

/**
 * startedCommand is a command that creates a file and sleeps, and untilStarted waits for that file:
 * the command runs only once the grant counted, so deleting the lock's keys after it is a loss
 * while the command runs, never a race with the acquire. The bound only catches hangs.
 */
const dir = mkdtempSync(join(tmpdir(), 'fencepost-exec-store-'));
const startedCommand = (name: string): [string, string[], string] => {
  const marker = join(dir, name);
  return ['sh', ['-c', 'touch "$0"; sleep 30', marker], marker];
};
async function untilStarted(marker: string): Promise<boolean> {
  const deadline = performance.now() + 25_000;
  while (!existsSync(marker)) {
    if (performance.now() > deadline) return false;
    await sleep(50);
  }
  return true;
}

let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('fencepost exec --store', () => {
  it('runs the command with the token, exits with its status, releases; the next run gets a larger token', async () => {
    const first = await exec(
      '--store',
      redis.url,
      '--lock',
      'nightly',
      '--',
      'sh',
      '-c',
      'echo "$FENCEPOST_LOCK $FENCEPOST_TOKEN"; exit 7',
    );
    expect(first.stderr).toBe('');
    expect(first.code).toBe(7);
    // A new lock's first token is the Redis server's clock in µs (fence-next.lua fence_epoch).
    const token = /^nightly (\d{16,})\n$/.exec(first.stdout)?.[1];
    expect(token, first.stdout).toBeDefined();
    const second = await exec(
      '--store',
      redis.url,
      '--ttl',
      '2s',
      '--lock',
      'nightly',
      '--',
      'sh',
      '-c',
      'echo $FENCEPOST_TOKEN',
    );
    expect(second).toMatchObject({ code: 0, stdout: `${BigInt(token ?? 0) + 1n}\n` });
    const c = redis.client();
    try {
      expect(await c.exists('fencepost:lock:{fencepost:fence:default/nightly}')).toBe(0); // released
    } finally {
      c.disconnect();
    }
  });

  it('--if-held skip exits EXIT_SKIPPED without running the command while another exec holds the lock', async () => {
    const { KUBECONFIG: _k, POD_NAME: _n, POD_NAMESPACE: _ns, POD_UID: _u, ...env } = process.env;
    const holder = spawn(
      process.execPath,
      [
        main,
        'exec',
        '--store',
        redis.url,
        '--namespace',
        'jobs',
        '--lock',
        'busy',
        '--',
        'sh',
        '-c',
        'echo held; sleep 30',
      ],
      { env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    try {
      await new Promise<void>((res, rej) => {
        holder.stdout.once('data', () => res());
        holder.once('exit', (code) => rej(new Error(`holder exited ${code}`)));
      });
      const skipped = await exec(
        '--store',
        redis.url,
        '--namespace',
        'jobs',
        '--if-held',
        'skip',
        '--lock',
        'busy',
        '--',
        'sh',
        '-c',
        'echo ran',
      );
      expect(skipped.code).toBe(EXIT_SKIPPED);
      expect(skipped.stdout).toBe('');
      expect(skipped.stderr).toContain('fencepost exec: skipped: acquire(busy): held by another owner');
      // Another namespace is another lock.
      const elsewhere = await exec(
        '--store',
        redis.url,
        '--if-held',
        'skip',
        '--lock',
        'busy',
        '--',
        'sh',
        '-c',
        'echo ran',
      );
      expect(elsewhere).toMatchObject({ code: 0, stdout: 'ran\n' });
    } finally {
      const exited = new Promise((res) => holder.once('exit', res));
      holder.kill('SIGTERM'); // forwarded to the command's group; exec then releases
      await exited;
    }
  });

  it('a lock lost while the command runs (its key deleted) stops the command: exit EXIT_LOST', async () => {
    const started = performance.now();
    const [cmd, args, marker] = startedCommand('doomed');
    const running = exec('--store', redis.url, '--ttl', '900ms', '--lock', 'doomed', '--', cmd, ...args);
    const c = redis.client();
    try {
      const key = 'fencepost:lock:{fencepost:fence:default/doomed}';
      expect(await untilStarted(marker)).toBe(true);
      expect(await c.del(key)).toBe(1); // as if it expired and was taken over
    } finally {
      c.disconnect();
    }
    const r = await running;
    expect(r.code).toBe(EXIT_LOST);
    expect(performance.now() - started).toBeLessThan(10_000); // not the command's 30 s
  });

  it.each([
    {
      args: ['--store', 'redis://127.0.0.1:0'],
      line: 'fencepost: --store: port 0 is not in 1..65535, got "redis://127.0.0.1:0"',
    },
    {
      args: ['--run-id', 'r1'],
      line: 'fencepost: --run-id: not with --store: a completed run is recorded on a Kubernetes Lease',
    },
  ])('exits 2 on $args, with one line naming the flag', async ({ args, line }) => {
    const r = await exec('--store', redis.url, ...args, '--lock', 'x', '--', 'true');
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`${line}\n`);
  });
});

describe('fencepost-agent exec --store (the compiled agent, on Bun)', () => {
  const agentExec = (...args: string[]): Promise<Run> => run(agentBinary(), ['exec', ...args]);
  const masters: RedisServer[] = [];
  beforeAll(async () => {
    masters.push(...(await Promise.all(Array.from({ length: 5 }, () => startRedis()))));
  });
  afterAll(async () => {
    await Promise.all(masters.map((m) => m.stop()));
  });

  it('runs the command with the token on one Redis, taking turns with the Node CLI on the same lock', async () => {
    const a = await agentExec(
      '--store',
      redis.url,
      '--lock',
      'shared',
      '--',
      'sh',
      '-c',
      'echo $FENCEPOST_TOKEN; exit 3',
    );
    expect(a.stderr).toBe('');
    expect(a.code).toBe(3);
    const b = await exec('--store', redis.url, '--lock', 'shared', '--', 'sh', '-c', 'echo $FENCEPOST_TOKEN');
    const c = await agentExec('--store', redis.url, '--lock', 'shared', '--', 'sh', '-c', 'echo $FENCEPOST_TOKEN');
    const tokens = [a, b, c].map((r) => Number(r.stdout.trim()));
    expect(tokens).toEqual([tokens[0], (tokens[0] ?? 0) + 1, (tokens[0] ?? 0) + 2]);
    const cl = redis.client();
    try {
      expect(await cl.exists('fencepost:lock:{fencepost:fence:default/shared}')).toBe(0); // released
    } finally {
      cl.disconnect();
    }
  });

  it('holds a Redlock lock on five masters; a lost lock stops the command (EXIT_LOST)', async () => {
    const url = `redlock://${masters.map((m) => m.url.replace(/^redis:\/\//, '')).join(',')}`;
    const ok = await agentExec('--store', url, '--lock', 'rl', '--', 'sh', '-c', 'echo $FENCEPOST_TOKEN');
    expect(ok).toMatchObject({ code: 0, stderr: '' });
    expect(Number(ok.stdout.trim())).toBeGreaterThan(0);
    const [cmd, args, marker] = startedCommand('rl-doomed');
    const running = agentExec('--store', url, '--ttl', '900ms', '--lock', 'rl-doomed', '--', cmd, ...args);
    const clients = masters.map((m) => m.client());
    try {
      const key = 'fencepost:lock:{fencepost:fence:default/rl-doomed}';
      expect(await untilStarted(marker)).toBe(true);
      // Every master lost it (the grant counted on a majority): renews find another owner's (none).
      const deleted = await Promise.all(clients.map((cl) => cl.del(key)));
      expect(deleted.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(3);
    } finally {
      for (const cl of clients) cl.disconnect();
    }
    expect((await running).code).toBe(EXIT_LOST);
  });

  it('holds a lock on its home shard of a redis+shards:// store', async () => {
    const url = `redis+shards://${[redis, ...masters].map((m) => m.url.replace(/^redis:\/\//, '')).join(',')}`;
    const runs = [];
    for (const lock of ['sh-a', 'sh-b', 'sh-a'])
      runs.push(await agentExec('--store', url, '--lock', lock, '--', 'sh', '-c', 'echo $FENCEPOST_TOKEN'));
    expect(runs.map((r) => r.code)).toEqual([0, 0, 0]);
    expect(Number(runs[2]?.stdout.trim())).toBe(Number(runs[0]?.stdout.trim()) + 1); // sh-a's counter on its shard
  });

  it('on a primary with a replica, through a failover to the replica that missed the last grant: both execs take turns, and the token after the failover is larger', async () => {
    // The promotion is done as a Sentinel does it (REPLICAOF NO ONE, clients pointed at the new
    // primary): the compiled agent speaks to one Redis, so a proxy stands for the Sentinel.
    const primary = await startRedis();
    const replica = await startReplica(primary);
    // The primary's first replica sync draws it a new replication ID (a new epoch): settle that
    // before the first grant, or t2 would be floored at the clock instead of t1 + 1.
    await replica.inSync();
    const proxy = await startTcpProxy({ targetPort: primary.port });
    try {
      const url = `redis://127.0.0.1:${proxy.port}`;
      const token = async (r: Promise<Run>): Promise<bigint> => {
        const done = await r;
        expect(done, done.stderr).toMatchObject({ code: 0 });
        return BigInt(done.stdout.trim());
      };
      const echo = ['--lock', 'ha', '--', 'sh', '-c', 'echo $FENCEPOST_TOKEN'];
      const t1 = await token(agentExec('--store', url, ...echo));
      const t2 = await token(exec('--store', url, ...echo));
      expect(t2).toBe(t1 + 1n);
      await replica.inSync(); // both grants replicated
      replica.cut(); // from now on the replica misses every write
      const t3 = await token(agentExec('--store', url, ...echo));
      expect(t3).toBe(t2 + 1n); // on the primary only
      await replica.promote(primary);
      proxy.retarget(replica.server.port);
      // Before the epoch floor the promoted replica handed out t3 again; now it floors at its clock.
      const t4 = await token(exec('--store', url, ...echo));
      expect(t4).toBeGreaterThan(t3);
      const t5 = await token(agentExec('--store', url, ...echo));
      expect(t5).toBe(t4 + 1n);
    } finally {
      await Promise.allSettled([proxy.close(), replica.stop(), primary.stop()]);
    }
  });

  it('refuses a Sentinel URL naming where it works, exit 2', async () => {
    const r = await agentExec('--store', 'redis+sentinel://127.0.0.1:26379/mymaster', '--lock', 'x', '--', 'true');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('the compiled fencepost-agent speaks to one Redis');
  });
});
