/**
 * `fencepost exec` must stop the whole process tree of its command when the lock is lost, not only
 * its direct child: cron jobs are `sh -c '…'`, `npm run`, pipelines, and the process doing the
 * work is a grandchild. Real processes, the real API server: exec holds the lock through a TCP
 * proxy that the test then blackholes (exec is cut off from the API server, as in
 * test/integration/agent/partition.test.ts), so exec declares the loss at its renew deadline and
 * the controller grants a second pod after the lease duration. The grandchild writes a wall-clock
 * timestamp every 100 ms; its last write must come before the successor's grant, and within
 * lease − renew deadline of exec's loss. Then no process of the tree may be alive, and exec must
 * exit although it still cannot reach the API server (its post-loss requests are bounded).
 *
 * Without a loss: a SIGTERM to exec (the kubelet's, or Ctrl-C's SIGINT) reaches the whole tree,
 * and a process the command left running in the background is stopped before the release.
 * Every process is one the test started (exec) or one its shells recorded by PID (and marked in
 * their command line); the test signals only those, and each loop is bounded in count and time.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubeConfig } from '@kubernetes/client-node';
import { acquire } from '../../../src/index.ts';
import { EXIT_LOST } from '../../../src/cli/exec.ts';
import { parseLease } from '../../../src/lease/record.ts';
import { spawnManaged, type ManagedProcess } from '../../support/testbed/processes.ts';
import { startTcpProxy, type TcpProxy } from '../../support/testbed/tcp-proxy.ts';
import { useLockController } from '../../support/lock-controller.ts';
import { eventually, sharedKubeConfig, sharedKubeconfigPath } from '../../support/env.ts';
import { createLock, createPod, getLease, lockBody, type TestKube } from '../../support/fixtures.ts';
import { agentBinary } from '../../support/agent-binary.ts';

const LEASE_MS = 3000; // renew deadline 2000 ms, renew period 1000 ms
const WINDOW_MS = 1000; // lease − renew deadline: how long the command may outlive exec's loss
const MARKER = 'fencepost-exec-tree-test'; // in every shell's command line, so cleanup signals only ours

/** alive: the PID runs (a zombie has stopped running and counts as gone). Linux /proc. */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

/** parentOf reads the PPID from /proc (undefined once the process is gone). */
function parentOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return undefined;
  }
}

/** killOurs SIGKILLs a PID the test's shells recorded, only if its command line still carries MARKER. */
function killOurs(pid: number): void {
  try {
    if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(MARKER)) process.kill(pid, 'SIGKILL');
  } catch {
    /* gone */
  }
}

const readPid = (file: string): number => (existsSync(file) ? Number(readFileSync(file, 'utf8').trim()) : 0);

/** lossAt: the wall time (ms) of exec's "Lost lock; stopping command" log line. */
function lossAt(log: string): number | undefined {
  for (const line of log.split('\n')) {
    if (!line.includes('Lost lock; stopping command')) continue;
    const ts = (JSON.parse(line) as { ts?: string }).ts;
    if (ts !== undefined) return Date.parse(ts);
  }
  return undefined;
}

describe('fencepost exec and the process tree of its command', () => {
  const kc = sharedKubeConfig();
  const fx = useLockController('exec-tree-');
  let t: TestKube;
  let dir: string;
  let proxy: TcpProxy | undefined;
  let viaProxy = '';
  const procs: ManagedProcess[] = [];
  beforeAll(async () => {
    t = fx.t;
    dir = mkdtempSync(join(tmpdir(), 'fencepost-exec-tree-'));
    const admin = new KubeConfig();
    admin.loadFromFile(sharedKubeconfigPath());
    const server = new URL(admin.getCurrentCluster()?.server ?? '');
    proxy = await startTcpProxy({ targetPort: Number(server.port) });
    viaProxy = join(dir, 'kubeconfig-proxied');
    writeFileSync(viaProxy, admin.exportConfig().replace(server.origin, `https://127.0.0.1:${proxy.port}`));
  });
  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop()));
    await proxy?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /**
   * startTree: exec (pod `<lock>-a`, with `kubeconfig`) runs `sh -c` that runs a second `sh -c`
   * — a child, not exec'd in place (the outer shell has a command after it, or `&`) — whose loop
   * appends `date +%s%N` every 100 ms (600 times at most). innerPrelude runs first in the inner
   * shell; background: the outer shell starts the inner one with `&` and exits 0 at once.
   * Resolves once the loop has written and both PIDs are known.
   */
  const startTree = async (
    lock: string,
    o: { kubeconfig: string; leaseMs: number; innerPrelude?: string; background?: boolean },
  ) => {
    const sub = join(dir, lock);
    const files = { outer: `${sub}.outer.pid`, inner: `${sub}.inner.pid`, writes: `${sub}.writes` };
    const inner = `: ${MARKER}; echo $$ > ${files.inner}; ${o.innerPrelude ?? ''} i=0; while [ $i -lt 600 ]; do date +%s%N >> ${files.writes}; sleep 0.1; i=$((i+1)); done`;
    const outer =
      o.background === true
        ? `: ${MARKER}; echo $$ > ${files.outer}; sh -c '${inner}' & while [ ! -s ${files.writes} ]; do sleep 0.1; done; exit 0`
        : `: ${MARKER}; echo $$ > ${files.outer}; sh -c '${inner}'; :`;
    const a = await createPod(t, `${lock}-a`, { app: lock });
    await createLock(t, lockBody(lock, lock, { leaseDurationSeconds: o.leaseMs / 1000 }));
    const logFile = join(dir, `${lock}-exec.log`);
    const exec = spawnManaged(`exec-${lock}`, agentBinary(), {
      args: ['exec', '--kubeconfig', o.kubeconfig, '--log-level', 'info', '--lock', lock, '--wait', '20s'].concat([
        '--',
        'sh',
        '-c',
        outer,
      ]),
      logFile,
      env: { ...process.env, POD_NAME: `${lock}-a`, POD_NAMESPACE: t.namespace, POD_UID: a.metadata?.uid ?? '' },
    });
    procs.push(exec);
    const cleanup = async (): Promise<void> => {
      for (const f of [files.inner, files.outer]) killOurs(readPid(f));
      await exec.stop(2000);
    };
    try {
      await eventually(() => {
        // In the background case exec stops the loop right after its first write, as it should.
        expect(readFileSync(files.writes, 'utf8').split('\n').length).toBeGreaterThan(o.background === true ? 1 : 3);
        expect(readPid(files.outer)).toBeGreaterThan(0);
        expect(readPid(files.inner)).toBeGreaterThan(0);
      }, 30_000);
    } catch (err) {
      await cleanup();
      throw err;
    }
    const outerPid = readPid(files.outer);
    const innerPid = readPid(files.inner);
    expect(innerPid).not.toBe(outerPid);
    return { files, exec, logFile, outerPid, innerPid, cleanup };
  };

  /** lastWrite: the wall time (ms) of the loop's last write. */
  const lastWrite = (file: string): number =>
    Math.max(
      ...readFileSync(file, 'utf8')
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => Number(BigInt(l) / 1_000_000n)),
    );

  /** runLoss: the tree under exec cut off from the API server (see the header), asserted on. */
  const runLoss = async (lock: string, innerPrelude: string) => {
    proxy?.heal();
    const { files, exec, logFile, outerPid, innerPid, cleanup } = await startTree(lock, {
      kubeconfig: viaProxy,
      leaseMs: LEASE_MS,
      innerPrelude,
    });
    const execExit = exec.exited.then((code) => ({ code, at: Date.now() }));
    try {
      expect(parentOf(innerPid)).toBe(outerPid); // a grandchild of exec
      expect(parentOf(outerPid)).toBe(exec.pid);

      // The successor: a second candidate pod, waiting in this process.
      const b = await createPod(t, `${lock}-b`, { app: lock });
      const successor = acquire(lock, {
        kubeconfig: kc,
        namespace: t.namespace,
        pod: { name: `${lock}-b`, uid: b.metadata?.uid ?? '' },
        waitMs: 30_000,
      });
      const cutAt = Date.now();
      proxy?.blackhole();
      await using held = await successor;
      const lease = parseLease((await getLease(t, lock)) ?? {});
      expect(lease.holder?.name).toBe(`${lock}-b`);
      const grantedAt = lease.acquireTime?.getTime() ?? 0;
      expect(held.token).toBe(lease.token);

      // exec must exit on its own while still cut off; 10 s bounds the wait (it should take ~1 s).
      const exited = await Promise.race([
        execExit,
        new Promise<undefined>((r) => setTimeout(() => r(undefined), 10_000)),
      ]);
      await new Promise((r) => setTimeout(r, 500)); // a still-running loop would write again by then
      const last = lastWrite(files.writes);
      const lost = lossAt(readFileSync(logFile, 'utf8'));
      const leftAlive = [outerPid, innerPid].filter(alive);
      process.stdout.write(
        `exec tree (${lock}): cut→lost ${lost !== undefined ? lost - cutAt : '?'} ms, lost→last write ${lost !== undefined ? last - lost : '?'} ms (window ${WINDOW_MS}), last write→successor granted ${grantedAt - last} ms, exec exit ${exited !== undefined ? `${String(exited.code)} at lost+${lost !== undefined ? exited.at - lost : '?'} ms` : 'none within 10 s'}, alive ${JSON.stringify(leftAlive)}\n`,
      );

      expect(lost, 'exec logged the loss').toBeDefined();
      expect(last, 'the grandchild wrote after the successor was granted').toBeLessThan(grantedAt);
      expect(last - (lost ?? 0), 'the grandchild wrote past lease − renew deadline after the loss').toBeLessThan(
        WINDOW_MS,
      );
      expect(leftAlive, 'processes of the tree still alive').toEqual([]);
      expect(exited?.code, 'exec did not exit while cut off').toBe(EXIT_LOST);
    } finally {
      proxy?.heal();
      await cleanup();
    }
  };

  it('stops a grandchild (sh -c under sh -c) before the successor is granted and leaves no process alive', async () => {
    await runLoss('tree', '');
  });

  it('SIGKILLs, within the grace, a grandchild that ignores SIGTERM after its parent shell exited', async () => {
    await runLoss('stubborn', 'trap "" TERM;');
  });

  it('forwards SIGTERM sent to exec to the whole tree, exits with the command status and releases', async () => {
    const { files, exec, outerPid, innerPid, cleanup } = await startTree('term', {
      kubeconfig: sharedKubeconfigPath(),
      leaseMs: 30_000,
    });
    try {
      const sentAt = Date.now();
      exec.signal('SIGTERM');
      const code = await Promise.race([exec.exited, new Promise<string>((r) => setTimeout(() => r('none'), 10_000))]);
      await new Promise((r) => setTimeout(r, 500)); // a still-running loop would write again by then
      expect(code, 'exec exit status').toBe(128 + 15); // the outer shell's: killed by SIGTERM
      expect(lastWrite(files.writes) - sentAt, 'the grandchild wrote after the SIGTERM').toBeLessThan(200);
      expect([outerPid, innerPid].filter(alive), 'processes of the tree still alive').toEqual([]);
      const lease = parseLease((await getLease(t, 'term')) ?? {});
      // Released; in Election mode the only candidate may be granted again, in a new term.
      expect(lease.released === 'Released' || lease.transitions >= 2).toBe(true);
    } finally {
      await cleanup();
    }
  });

  it('stops what the command left running in the background before it releases the lock', async () => {
    const { files, exec, innerPid, cleanup } = await startTree('bg', {
      kubeconfig: sharedKubeconfigPath(),
      leaseMs: 30_000,
      background: true,
    });
    try {
      const code = await Promise.race([exec.exited, new Promise<string>((r) => setTimeout(() => r('none'), 10_000))]);
      const exitedAt = Date.now();
      await new Promise((r) => setTimeout(r, 500));
      expect(code, 'exec exit status').toBe(0);
      expect(alive(innerPid), 'the background loop is still alive').toBe(false);
      expect(lastWrite(files.writes), 'the background loop wrote after exec exited').toBeLessThan(exitedAt);
      const lease = parseLease((await getLease(t, 'bg')) ?? {});
      // Released; in Election mode the only candidate may be granted again, in a new term.
      expect(lease.released === 'Released' || lease.transitions >= 2).toBe(true);
    } finally {
      await cleanup();
    }
  });
});
