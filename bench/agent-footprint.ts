/**
 * agent-footprint.ts — `npm run bench:agent [-- --runs N]`: how fast the `fencepost agent`
 * sidecar becomes ready and holds its lock, and how much memory it uses while holding it.
 *
 * Against the real testbed (etcd + kube-apiserver + redis-server on loopback, the controller
 * in-process), with one Ready pod and one DistributedLock, it spawns the agent N times as the pod
 * (POD_NAME/POD_NAMESPACE/POD_UID) and measures, from spawn with performance.now():
 *   - readyMs: the first 200 on GET /readyz (the Lease watch has synced);
 *   - heldMs:  the first `held: true` from GET /v1/locks/NAME (granted and the first renew done);
 *   - VmRSS and VmHWM from /proc/<pid>/status after the agent has held the lock for HOLD_MS;
 * then stops it with SIGTERM (it releases the Lease, so the next agent is granted at once) and
 * records how long the exit took. A baseline `node -e "setInterval(()=>{},1000)"` shows how much
 * of the RSS is Node itself. One more, unmeasured, agent run counts the modules the agent loads
 * (a `module.registerHooks` load hook given with --import).
 *
 * Writes bench/results/agent-footprint.json and prints a table. Every process it starts is stopped
 * by PID at the end, also on failure or Ctrl-C.
 */
import { tmpdir } from 'node:os';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import type { LockSnapshot } from '../src/agent/session.ts';
import { startLockController, type LockController } from '../src/controllers/distributedlock/setup.ts';
import { silentLogger } from '../src/observability/logger.ts';
import { realClock } from '../src/runtime/clock.ts';
import { createLock, createPod, lockBody, testKube } from '../test/support/fixtures.ts';
import { ETCD_VERSION, KUBE_VERSION } from '../test/support/testbed/assets.ts';
import type { ControlPlane } from '../test/support/testbed/control-plane.ts';
import { getStatus } from '../test/support/testbed/http-probe.ts';
import { freePort } from '../test/support/testbed/ports.ts';
import { spawnManaged, tailLog, type ManagedProcess } from '../test/support/testbed/processes.ts';
import type { RedisServer } from '../test/support/testbed/redis.ts';
import {
  describeMachine,
  machineLine,
  onInterrupt,
  parseRuns,
  percentile,
  runMain,
  startServers,
  textTable,
} from './lib.ts';

const ROOT = resolve(import.meta.dirname, '..');
const MAIN = join(ROOT, 'src/cli/main.ts');
const OUT = join(ROOT, 'bench/results/agent-footprint.json');
const LOCK = 'bench';
const POD = 'bench-0';
/** LEASE_SECONDS: the lock's leaseDurationSeconds (the agent renews about every third of it). */
const LEASE_SECONDS = 10;
/** HOLD_MS: how long the agent holds the lock before its memory is read. */
const HOLD_MS = 3000;
/** BASELINE_MS: how long the idle node process runs before its memory is read. */
const BASELINE_MS = 1000;
const POLL_MS = 10;
const STEP_TIMEOUT_MS = 30_000;

const USAGE = `Usage: node bench/agent-footprint.ts [--runs N]

  --runs N   agent runs to measure (default 10)
`;

interface Mem {
  readonly rssKiB: number;
  readonly hwmKiB: number;
}
interface AgentSample extends Mem {
  readonly run: number;
  readonly readyMs: number;
  readonly heldMs: number;
  readonly token: string | undefined;
  /** stopMs: SIGTERM to exit (the release of the Lease included). */
  readonly stopMs: number;
  readonly exitCode: number | string;
}
interface Stats {
  readonly p50: number;
  readonly p90: number;
  readonly max: number;
}
interface ModuleCount {
  readonly total: number;
  readonly builtin: number;
  readonly project: number;
  readonly nodeModules: number;
  readonly nodeModulesBytes: number;
  readonly projectBytes: number;
  readonly packages: Record<string, number>;
}

function stats(xs: readonly number[]): Stats {
  const r = (n: number): number => Math.round(n * 10) / 10;
  return { p50: r(percentile(xs, 50)), p90: r(percentile(xs, 90)), max: r(Math.max(...xs)) };
}

/** readMem reads VmRSS and VmHWM (in KiB) from /proc/<pid>/status. */
function readMem(pid: number): Mem {
  const text = readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name: string): number => {
    const m = new RegExp(`^${name}:\\s+(\\d+) kB$`, 'm').exec(text);
    if (m?.[1] === undefined) throw new Error(`/proc/${pid}/status has no ${name}`);
    return Number(m[1]);
  };
  return { rssKiB: field('VmRSS'), hwmKiB: field('VmHWM') };
}

/** until polls check every POLL_MS until it returns a value, the process dies, or the timeout passes. */
async function until<T>(
  what: string,
  proc: ManagedProcess,
  signal: AbortSignal,
  check: () => Promise<T | undefined>,
): Promise<T> {
  const deadline = performance.now() + STEP_TIMEOUT_MS;
  for (;;) {
    signal.throwIfAborted();
    if (!proc.isRunning()) throw new Error(`${proc.name} exited before ${what}:\n${tailLog(proc.logFile)}`);
    try {
      const v = await check();
      if (v !== undefined) return v;
    } catch {
      /* not listening yet */
    }
    if (performance.now() > deadline)
      throw new Error(`${proc.name}: no ${what} after ${STEP_TIMEOUT_MS} ms:\n${tailLog(proc.logFile)}`);
    await sleep(POLL_MS);
  }
}

/** HOOK counts every module the process loads (ESM and CJS, builtins included) and writes the list at exit. */
const HOOK = `import { registerHooks } from 'node:module';
import { writeFileSync } from 'node:fs';
const seen = new Set();
registerHooks({ load(url, context, nextLoad) { seen.add(url); return nextLoad(url, context); } });
process.on('exit', () => { writeFileSync(process.env.FENCEPOST_BENCH_MODULES, JSON.stringify([...seen])); });
`;

function countModules(urls: readonly string[]): ModuleCount {
  let builtin = 0,
    project = 0,
    nodeModules = 0,
    nodeModulesBytes = 0,
    projectBytes = 0;
  const packages: Record<string, number> = {};
  for (const url of new Set(urls)) {
    if (!url.startsWith('file:')) {
      builtin++;
      continue;
    }
    const path = fileURLToPath(url);
    const size = statSync(path).size;
    const at = path.lastIndexOf('/node_modules/');
    if (at < 0) {
      project++;
      projectBytes += size;
      continue;
    }
    nodeModules++;
    nodeModulesBytes += size;
    const parts = path.slice(at + '/node_modules/'.length).split('/');
    const pkg = parts[0]?.startsWith('@') === true ? `${parts[0]}/${parts[1] ?? ''}` : (parts[0] ?? '?');
    packages[pkg] = (packages[pkg] ?? 0) + 1;
  }
  const sorted = Object.fromEntries(Object.entries(packages).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])));
  return {
    total: builtin + project + nodeModules,
    builtin,
    project,
    nodeModules,
    nodeModulesBytes,
    projectBytes,
    packages: sorted,
  };
}

async function main(): Promise<void> {
  const runs = parseRuns(10, USAGE);
  if (runs === undefined) return;

  const interrupt = onInterrupt();
  const signal = interrupt.signal;

  const dir = mkdtempSync(join(tmpdir(), 'fencepost-bench-'));
  const procs: ManagedProcess[] = [];
  let plane: ControlPlane | undefined;
  let redis: RedisServer | undefined;
  let controller: LockController | undefined;
  try {
    const log = (msg: string): void => {
      process.stderr.write(`${msg}\n`);
    };
    log('Starting control plane and redis…');
    ({ plane, redis } = await startServers());
    const kc = plane.kubeConfig();
    const t = testKube(kc, await plane.createNamespace('bench-'));
    controller = await startLockController({
      kc,
      redisUrl: redis.url,
      namespace: t.namespace,
      identity: 'bench-controller',
      clock: realClock,
      log: silentLogger,
    });
    const pod = await createPod(t, POD, { app: LOCK });
    const uid = pod.metadata?.uid ?? '';
    await createLock(t, lockBody(LOCK, LOCK, { leaseDurationSeconds: LEASE_SECONDS }));
    const env = { ...process.env, POD_NAME: POD, POD_NAMESPACE: t.namespace, POD_UID: uid };
    const kubeconfig = plane.kubeconfigPath;

    const spawnAgent = async (
      name: string,
      extraNodeArgs: readonly string[],
      extraEnv: NodeJS.ProcessEnv = {},
    ): Promise<{ proc: ManagedProcess; port: number; t0: number }> => {
      const port = await freePort();
      const t0 = performance.now();
      const proc = spawnManaged(name, process.execPath, {
        args: [
          ...extraNodeArgs,
          MAIN,
          'agent',
          '--lock',
          LOCK,
          '--listen',
          `127.0.0.1:${port}`,
          '--health-probe-bind-address=0',
          '--metrics-bind-address=0',
          '--kubeconfig',
          kubeconfig,
        ],
        logFile: join(dir, `${name}.log`),
        env: { ...env, ...extraEnv },
      });
      procs.push(proc);
      return { proc, port, t0 };
    };
    const waitHeld = (proc: ManagedProcess, port: number): Promise<LockSnapshot> =>
      until('held: true', proc, signal, async () => {
        const r = await getStatus(`http://127.0.0.1:${port}/v1/locks/${LOCK}`, undefined, 1000);
        const s = r.status === 200 ? (JSON.parse(r.body) as LockSnapshot) : undefined;
        return s?.held === true ? s : undefined;
      });
    const stopTimed = async (proc: ManagedProcess): Promise<{ stopMs: number; exitCode: number | string }> => {
      const t1 = performance.now();
      await proc.stop(15_000);
      return { stopMs: performance.now() - t1, exitCode: await proc.exited };
    };

    const samples: AgentSample[] = [];
    for (let run = 1; run <= runs; run++) {
      const { proc, port, t0 } = await spawnAgent(`agent-${run}`, []);
      await until('200 on /readyz', proc, signal, async () =>
        (await getStatus(`http://127.0.0.1:${port}/readyz`, undefined, 1000)).status === 200 ? true : undefined,
      );
      const readyMs = performance.now() - t0;
      const snap = await waitHeld(proc, port);
      const heldMs = performance.now() - t0;
      await sleep(HOLD_MS, undefined, { signal });
      const mem = readMem(proc.pid);
      const after = await getStatus(`http://127.0.0.1:${port}/v1/locks/${LOCK}`, undefined, 1000);
      if ((JSON.parse(after.body) as LockSnapshot).held !== true)
        throw new Error(`run ${run}: the agent lost the lock while holding it:\n${tailLog(proc.logFile)}`);
      const { stopMs, exitCode } = await stopTimed(proc);
      if (exitCode !== 0)
        throw new Error(`run ${run}: agent exited with ${exitCode} on SIGTERM:\n${tailLog(proc.logFile)}`);
      samples.push({
        run,
        readyMs: Math.round(readyMs * 10) / 10,
        heldMs: Math.round(heldMs * 10) / 10,
        ...mem,
        token: snap.token,
        stopMs: Math.round(stopMs * 10) / 10,
        exitCode,
      });
      log(
        `run ${run}/${runs}: ready ${readyMs.toFixed(0)} ms, held ${heldMs.toFixed(0)} ms (token ${snap.token ?? '?'}), RSS ${(mem.rssKiB / 1024).toFixed(1)} MiB`,
      );
    }

    const baseline: Mem[] = [];
    for (let i = 1; i <= runs; i++) {
      const proc = spawnManaged(`baseline-${i}`, process.execPath, {
        args: ['-e', 'setInterval(()=>{},1000)'],
        logFile: join(dir, 'baseline.log'),
      });
      procs.push(proc);
      await sleep(BASELINE_MS, undefined, { signal });
      if (!proc.isRunning()) throw new Error(`baseline node exited:\n${tailLog(proc.logFile)}`);
      baseline.push(readMem(proc.pid));
      await proc.stop();
    }

    // One more agent, not timed: count the modules it loads up to holding the lock and exiting.
    let modules: ModuleCount | { skipped: string };
    try {
      const hook = join(dir, 'count-modules.mjs');
      const list = join(dir, 'modules.json');
      writeFileSync(hook, HOOK);
      const { proc, port } = await spawnAgent('agent-modules', ['--import', pathToFileURL(hook).href], {
        FENCEPOST_BENCH_MODULES: list,
      });
      await waitHeld(proc, port);
      const { exitCode } = await stopTimed(proc);
      if (exitCode !== 0) throw new Error(`agent exited with ${exitCode}`);
      modules = countModules(JSON.parse(readFileSync(list, 'utf8')) as string[]);
    } catch (err) {
      signal.throwIfAborted();
      modules = { skipped: `module count failed: ${err instanceof Error ? err.message : String(err)}` };
    }

    const result = {
      benchmark: 'agent-footprint',
      date: new Date().toISOString(),
      command: `node bench/agent-footprint.ts --runs ${runs}`,
      runs,
      setup: {
        leaseDurationSeconds: LEASE_SECONDS,
        holdMs: HOLD_MS,
        baselineMs: BASELINE_MS,
        pollMs: POLL_MS,
        note:
          'times are from spawn (performance.now()) to the first 200 on /readyz and to the first held: true on /v1/locks/NAME; ' +
          'the controller runs in the benchmark process; p50/p90 are nearest-rank; memory is VmRSS/VmHWM from /proc/<pid>/status',
      },
      machine: describeMachine(),
      versions: { node: process.version, kube: KUBE_VERSION, etcd: ETCD_VERSION },
      summary: {
        readyMs: stats(samples.map((s) => s.readyMs)),
        heldMs: stats(samples.map((s) => s.heldMs)),
        stopMs: stats(samples.map((s) => s.stopMs)),
        rssKiB: stats(samples.map((s) => s.rssKiB)),
        hwmKiB: stats(samples.map((s) => s.hwmKiB)),
        baselineRssKiB: stats(baseline.map((b) => b.rssKiB)),
        baselineHwmKiB: stats(baseline.map((b) => b.hwmKiB)),
      },
      modules,
      samples,
      baseline,
    };
    mkdirSync(join(ROOT, 'bench/results'), { recursive: true });
    writeFileSync(OUT, `${JSON.stringify(result, null, 2)}\n`);
    process.stdout.write(table(result.summary, modules, runs, result.machine, result.versions));
    process.stdout.write(`\nWrote ${relative(process.cwd(), OUT) || OUT}\n`);
  } finally {
    await Promise.allSettled(procs.map((p) => p.stop()));
    await controller?.stop().catch(() => undefined);
    await Promise.allSettled([plane?.stop(), redis?.stop()]);
    rmSync(dir, { recursive: true, force: true });
    interrupt.dispose();
  }
}

function table(
  s: Record<'readyMs' | 'heldMs' | 'stopMs' | 'rssKiB' | 'hwmKiB' | 'baselineRssKiB' | 'baselineHwmKiB', Stats>,
  modules: ModuleCount | { skipped: string },
  runs: number,
  machine: { cpu: string; cores: number; totalMemoryBytes: number },
  versions: { node: string; kube: string },
): string {
  const ms = (x: Stats): string[] => [x.p50, x.p90, x.max].map((v) => `${v.toFixed(0)} ms`);
  const mib = (x: Stats): string[] => [x.p50, x.p90, x.max].map((v) => `${(v / 1024).toFixed(1)} MiB`);
  const rows: string[][] = [
    ['metric', 'p50', 'p90', 'max'],
    ['spawn → /readyz 200', ...ms(s.readyMs)],
    ['spawn → held: true', ...ms(s.heldMs)],
    ['SIGTERM → exit (release)', ...ms(s.stopMs)],
    [`agent RSS (held ${HOLD_MS / 1000} s)`, ...mib(s.rssKiB)],
    ['agent peak RSS (HWM)', ...mib(s.hwmKiB)],
    ['baseline node RSS', ...mib(s.baselineRssKiB)],
    ['baseline node HWM', ...mib(s.baselineHwmKiB)],
  ];
  const out = [
    `fencepost agent footprint: ${runs} runs, node ${versions.node}, kube ${versions.kube}`,
    machineLine(machine),
    '',
    ...textTable(rows, 1),
    '',
  ];
  if ('skipped' in modules) out.push(`modules loaded: skipped (${modules.skipped})`);
  else {
    const top = Object.entries(modules.packages)
      .slice(0, 6)
      .map(([p, n]) => `${p} ${n}`)
      .join(', ');
    out.push(
      `modules loaded: ${modules.total} (${modules.builtin} builtin, ${modules.project} project, ${modules.nodeModules} from node_modules, ` +
        `${(modules.nodeModulesBytes / 1024).toFixed(0)} KiB of node_modules source)`,
      `  by package: ${top}`,
    );
  }
  return `${out.join('\n')}\n`;
}

runMain('agent-footprint', main);
