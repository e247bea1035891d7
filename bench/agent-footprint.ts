/**
 * agent-footprint.ts — `npm run bench:agent [-- --runs N]`: how fast the in-pod agent becomes
 * ready and holds its lock, and how much memory it uses while holding it — for the agent that
 * ships (dist/bin/fencepost-agent, the agent compiled by Bun: hack/build-agent.ts), for the same
 * agent code run by Node (`node src/cli/main.ts agent`), and for the client-go peer
 * (bench/peers/client-go: client-go's leader elector holding a Lease), in the same run.
 *
 * Against the real testbed (etcd + kube-apiserver + redis-server on loopback, the controller
 * in-process), with one Ready pod and one DistributedLock, it spawns each subject N times, in turn
 * (shipped, node, client-go, shipped, …, so that drift on the machine hits each alike), and
 * measures from spawn with performance.now():
 *   - readyMs: agents: the first 200 on GET /readyz (the Lease watch has synced); the peer: its
 *     `ready` line (client built, about to campaign);
 *   - heldMs: agents: the first `held: true` on GET /v1/locks/NAME (granted and the first renew
 *     done); the peer: its `started` line (it acquired its Lease);
 *   - memory after HOLD_MS of holding: VmRSS and VmHWM, RssAnon and RssFile from
 *     /proc/<pid>/status, Pss from /proc/<pid>/smaps_rollup. RssFile is the executable's own pages
 *     (shared by every process running the same file on a node); RssAnon is what each process adds;
 * then SIGTERM (each releases its Lease) and the time to exit. Idle `node` and `bun` processes
 * show what the runtimes take by themselves, and two floor programs, compiled exactly as the agent
 * is (hack/build-agent.ts compileLean) and run interpreter-only as it runs, show what any agent
 * built this way takes before its own code: one loads every Node built-in module the agent's bundle
 * imports, listens on loopback with node:http and keeps a TLS connection to the API server open
 * with node:https; the other does the same with Bun's own `Bun.serve` and `fetch` and the bundle's
 * other built-ins (what a rewrite of the agent's HTTP on Bun's APIs could reach at best). One
 * more, unmeasured, Node agent run counts the modules it loads (a `module.registerHooks` load hook
 * given with --import); the shipped agent's modules are its bundle (Bun's metafile).
 *
 * Writes .results/bench/agent-footprint.json and prints a table. Every process it starts is stopped
 * by PID at the end, also on failure or Ctrl-C.
 */
import { execFileSync } from 'node:child_process';
import { loadavg, tmpdir } from 'node:os';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { buildAgent, bundledBuiltins, bunPath, compileLean, packageOf } from '../hack/build-agent.ts';
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
  writeResult,
} from './lib.ts';
import { clientGoVersion, ensureClientGoPeer } from './peers/client-go-peer.ts';

const ROOT = resolve(import.meta.dirname, '..');
const MAIN = join(ROOT, 'src/cli/main.ts');
/** SHARED_AGENTS: how many shipped agents run at once for the shared-memory (Pss) figure. */
const SHARED_AGENTS = 10;
const LOCK = 'bench';
/** PEER_LEASE: the Lease the client-go peer campaigns for (its own, not the DistributedLock's). */
const PEER_LEASE = 'bench-client-go';
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
  /** anonKiB: RssAnon, the process's private memory (heap, stacks). */
  readonly anonKiB: number;
  /** fileKiB: RssFile, pages of files it maps (the executable): shared by every process of the same file. */
  readonly fileKiB: number;
  /** pssKiB: Pss, RSS with each shared page divided among the processes that map it. */
  readonly pssKiB: number;
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

/** readMem reads the memory figures (in KiB) from /proc/<pid>/status and /proc/<pid>/smaps_rollup. */
function readMem(pid: number): Mem {
  const field = (file: string, name: string): number => {
    const text = readFileSync(`/proc/${pid}/${file}`, 'utf8');
    const m = new RegExp(`^${name}:\\s+(\\d+) kB$`, 'm').exec(text);
    if (m?.[1] === undefined) throw new Error(`/proc/${pid}/${file} has no ${name}`);
    return Number(m[1]);
  };
  return {
    rssKiB: field('status', 'VmRSS'),
    hwmKiB: field('status', 'VmHWM'),
    anonKiB: field('status', 'RssAnon'),
    fileKiB: field('status', 'RssFile'),
    pssKiB: field('smaps_rollup', 'Pss'),
  };
}

type Summary = Record<'readyMs' | 'heldMs' | 'stopMs' | keyof Mem, Stats>;

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

/** NETWORK_BUILTINS: the Node built-ins that Bun's own `Bun.serve` and `fetch` would replace. */
const NETWORK_BUILTINS = new Set(['http', 'https', 'net', 'tls']);

/**
 * floorSource is a floor program (module comment): it imports each of `builtins` (a namespace
 * import, used, so that the bundler keeps it and the runtime evaluates it), serves loopback HTTP
 * and keeps one TLS connection to `FLOOR_URL` (the API server; certificates unchecked, the answer
 * ignored), then prints `ready` and idles. `bunHttp`: with Bun.serve and fetch instead of
 * node:http and node:https.
 */
function floorSource(builtins: readonly string[], bunHttp: boolean): string {
  const names = builtins.filter((b) => !(bunHttp && NETWORK_BUILTINS.has(b)));
  const lines = names.map((b, i) => `import * as m${i} from 'node:${b}';`);
  lines.push(`const loaded = [${names.map((_, i) => `m${i}`).join(', ')}].map((m) => Object.keys(m).length);`);
  const url = 'process.env.FLOOR_URL';
  if (bunHttp)
    lines.push(
      `Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: () => new Response('ok') });`,
      `fetch(${url}, { keepalive: true, tls: { rejectUnauthorized: false } }).then((r) => r.text()).then(() => console.log('ready', loaded.length));`,
    );
  else
    lines.push(
      `import { createServer } from 'node:http';`,
      `import { Agent, request } from 'node:https';`,
      `createServer((_q, s) => { s.end('ok'); }).listen(0, '127.0.0.1');`,
      `const agent = new Agent({ keepAlive: true, rejectUnauthorized: false });`,
      `request(${url}, { agent }, (r) => { r.resume(); r.on('end', () => console.log('ready', loaded.length)); }).end();`,
    );
  lines.push('setInterval(() => {}, 1000);');
  return `${lines.join('\n')}\n`;
}

/** FloorKey names a floor program. */
type FloorKey = 'node-http' | 'bun-http';
const FLOOR_LABEL: Readonly<Record<FloorKey, string>> = {
  'node-http': "floor: the agent's built-ins, node:http(s)",
  'bun-http': 'floor: Bun.serve + fetch, other built-ins',
};

/** Subject is one kind of process measured. */
type SubjectKey = 'shipped' | 'node' | 'client-go';
const SUBJECTS: readonly SubjectKey[] = ['shipped', 'node', 'client-go'];
const SUBJECT_LABEL: Readonly<Record<SubjectKey, string>> = {
  shipped: 'fencepost-agent (Bun-compiled, shipped)',
  node: 'fencepost agent on Node',
  'client-go': 'client-go leader elector (Go)',
};

async function main(): Promise<void> {
  const runs = parseRuns(10, USAGE);
  if (runs === undefined) return;

  const load0 = loadavg();
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
    const build = buildAgent();
    log(`${relative(ROOT, build.path)}: ${build.built ? 'built' : 'up to date'}`);
    const peer = ensureClientGoPeer(log);
    const bun = bunPath();
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
    const agentArgs = (port: number): string[] => [
      'agent',
      '--lock',
      LOCK,
      '--listen',
      `127.0.0.1:${port}`,
      '--health-probe-bind-address=0',
      '--metrics-bind-address=0',
      '--kubeconfig',
      kubeconfig,
    ];

    const spawnSubject = async (
      key: SubjectKey,
      name: string,
      extraNodeArgs: readonly string[] = [],
      extraEnv: NodeJS.ProcessEnv = {},
    ): Promise<{ proc: ManagedProcess; port: number; t0: number }> => {
      const port = await freePort();
      const logFile = join(dir, `${name}.log`);
      const [file, args]: [string, string[]] =
        key === 'shipped'
          ? [build.path, agentArgs(port)]
          : key === 'node'
            ? [process.execPath, [...extraNodeArgs, MAIN, ...agentArgs(port)]]
            : [
                peer,
                [
                  `--kubeconfig=${kubeconfig}`,
                  `--namespace=${t.namespace}`,
                  `--lease=${PEER_LEASE}`,
                  `--identity=${name}`,
                  `--lease-duration=${LEASE_SECONDS}s`,
                  `--renew-deadline=${(LEASE_SECONDS * 2) / 3}s`,
                  '--retry-period=2s',
                ],
              ];
      const t0 = performance.now();
      const proc = spawnManaged(name, file, { args, logFile, env: { ...env, ...extraEnv } });
      procs.push(proc);
      return { proc, port, t0 };
    };
    // The peer prints one event a line: `ready <unix ns>`, `started <unix ns>`, `stopped <unix ns>`.
    const peerSaid = (proc: ManagedProcess, event: string): Promise<true> =>
      until(`"${event}" from the peer`, proc, signal, () =>
        Promise.resolve(new RegExp(`^${event} `, 'm').test(readFileSync(proc.logFile, 'utf8')) ? true : undefined),
      );
    const waitReady = (key: SubjectKey, proc: ManagedProcess, port: number): Promise<unknown> =>
      key === 'client-go'
        ? peerSaid(proc, 'ready')
        : until('200 on /readyz', proc, signal, async () =>
            (await getStatus(`http://127.0.0.1:${port}/readyz`, undefined, 1000)).status === 200 ? true : undefined,
          );
    const waitHeld = async (key: SubjectKey, proc: ManagedProcess, port: number): Promise<string | undefined> => {
      if (key === 'client-go') {
        await peerSaid(proc, 'started');
        return undefined;
      }
      const snap = await until('held: true', proc, signal, async () => {
        const r = await getStatus(`http://127.0.0.1:${port}/v1/locks/${LOCK}`, undefined, 1000);
        const s = r.status === 200 ? (JSON.parse(r.body) as LockSnapshot) : undefined;
        return s?.held === true ? s : undefined;
      });
      return snap.token;
    };
    const stillHeld = async (key: SubjectKey, proc: ManagedProcess, port: number): Promise<boolean> => {
      if (key === 'client-go') return !/^stopped /m.test(readFileSync(proc.logFile, 'utf8'));
      const after = await getStatus(`http://127.0.0.1:${port}/v1/locks/${LOCK}`, undefined, 1000);
      return (JSON.parse(after.body) as LockSnapshot).held === true;
    };
    const stopTimed = async (proc: ManagedProcess): Promise<{ stopMs: number; exitCode: number | string }> => {
      const t1 = performance.now();
      await proc.stop(15_000);
      return { stopMs: performance.now() - t1, exitCode: await proc.exited };
    };

    const samples: Record<SubjectKey, AgentSample[]> = { shipped: [], node: [], 'client-go': [] };
    for (let run = 1; run <= runs; run++) {
      for (const key of SUBJECTS) {
        const { proc, port, t0 } = await spawnSubject(key, `${key}-${run}`);
        await waitReady(key, proc, port);
        const readyMs = performance.now() - t0;
        const token = await waitHeld(key, proc, port);
        const heldMs = performance.now() - t0;
        await sleep(HOLD_MS, undefined, { signal });
        const mem = readMem(proc.pid);
        if (!(await stillHeld(key, proc, port)))
          throw new Error(`${proc.name}: lost the lock while holding it:\n${tailLog(proc.logFile)}`);
        const { stopMs, exitCode } = await stopTimed(proc);
        if (exitCode !== 0)
          throw new Error(`${proc.name}: exited with ${exitCode} on SIGTERM:\n${tailLog(proc.logFile)}`);
        samples[key].push({
          run,
          readyMs: round1(readyMs),
          heldMs: round1(heldMs),
          ...mem,
          token,
          stopMs: round1(stopMs),
          exitCode,
        });
        log(
          `run ${run}/${runs} ${key}: ready ${readyMs.toFixed(0)} ms, held ${heldMs.toFixed(0)} ms, ` +
            `RSS ${(mem.rssKiB / 1024).toFixed(1)} MiB (anon ${(mem.anonKiB / 1024).toFixed(1)}, file ${(mem.fileKiB / 1024).toFixed(1)})`,
        );
      }
    }

    // Ten shipped agents at once, each holding a lock of its own, from one executable (as ten
    // sidecars of one node run the one file of the image): what each adds is its anon memory; the
    // file-backed pages are shared, which Pss (each page divided by the processes mapping it) shows.
    const shared: Mem[] = [];
    {
      const agents: { proc: ManagedProcess; port: number; lock: string }[] = [];
      for (let i = 0; i < SHARED_AGENTS; i++) {
        const lock = `shared-${i}`;
        const p = await createPod(t, `${lock}-pod`, { app: lock });
        await createLock(t, lockBody(lock, lock, { leaseDurationSeconds: LEASE_SECONDS }));
        const port = await freePort();
        const proc = spawnManaged(lock, build.path, {
          args: agentArgs(port).map((a) => (a === LOCK ? lock : a)),
          logFile: join(dir, `${lock}.log`),
          env: { ...env, POD_NAME: `${lock}-pod`, POD_UID: p.metadata?.uid ?? '' },
        });
        procs.push(proc);
        agents.push({ proc, port, lock });
      }
      for (const a of agents)
        await until('held: true', a.proc, signal, async () => {
          const r = await getStatus(`http://127.0.0.1:${a.port}/v1/locks/${a.lock}`, undefined, 1000);
          return r.status === 200 && (JSON.parse(r.body) as LockSnapshot).held ? true : undefined;
        });
      await sleep(HOLD_MS, undefined, { signal });
      for (const a of agents) shared.push(readMem(a.proc.pid));
      await Promise.all(agents.map((a) => a.proc.stop(15_000)));
      const sum = (f: (m: Mem) => number): number => shared.reduce((x, m) => x + f(m), 0);
      log(
        `${SHARED_AGENTS} agents at once: RSS ${(sum((m) => m.rssKiB) / 1024).toFixed(1)} MiB in all, ` +
          `Pss ${(sum((m) => m.pssKiB) / 1024).toFixed(1)} MiB in all (anon ${(sum((m) => m.anonKiB) / 1024).toFixed(1)})`,
      );
    }

    const idle: Record<'node' | 'bun', Mem[]> = { node: [], bun: [] };
    for (let i = 1; i <= runs; i++) {
      for (const [runtime, file] of [
        ['node', process.execPath],
        ['bun', bun],
      ] as const) {
        const proc = spawnManaged(`idle-${runtime}-${i}`, file, {
          args: ['-e', 'setInterval(()=>{},1000)'],
          logFile: join(dir, 'idle.log'),
        });
        procs.push(proc);
        await sleep(BASELINE_MS, undefined, { signal });
        if (!proc.isRunning()) throw new Error(`idle ${runtime} exited:\n${tailLog(proc.logFile)}`);
        idle[runtime].push(readMem(proc.pid));
        await proc.stop();
      }
    }

    // The floors: built once, run as often as the agents, each read HOLD_MS after its TLS request
    // was answered (the agents' memory is read HOLD_MS after they hold).
    const builtins = bundledBuiltins(build.metafile);
    const floor: Record<FloorKey, Mem[]> = { 'node-http': [], 'bun-http': [] };
    const floorKeys = Object.keys(floor) as FloorKey[];
    const floorBinary = (key: FloorKey): string => join(dir, `floor-${key}`);
    for (const key of floorKeys) {
      const entry = join(dir, `floor-${key}.ts`);
      writeFileSync(entry, floorSource(builtins, key === 'bun-http'));
      compileLean(entry, floorBinary(key));
    }
    const apiUrl = `${kc.getCurrentCluster()?.server ?? ''}/readyz`;
    for (let i = 1; i <= runs; i++) {
      for (const key of floorKeys) {
        const proc = spawnManaged(`floor-${key}-${i}`, floorBinary(key), {
          args: [],
          logFile: join(dir, `floor-${key}-${i}.log`),
          // As the agent runs once it has replaced itself (src/cli/interpreter-only.ts).
          env: { ...process.env, FLOOR_URL: apiUrl, BUN_JSC_useJIT: '0' },
        });
        procs.push(proc);
        await until('"ready"', proc, signal, () =>
          Promise.resolve(/^ready /m.test(readFileSync(proc.logFile, 'utf8')) ? true : undefined),
        );
        await sleep(HOLD_MS, undefined, { signal });
        floor[key].push(readMem(proc.pid));
        await proc.stop();
      }
    }
    log(
      floorKeys
        .map((k) => `${FLOOR_LABEL[k]}: RSS ${(stats(floor[k].map((m) => m.rssKiB)).p50 / 1024).toFixed(1)} MiB`)
        .join('; '),
    );

    // One more Node agent, not timed: count the modules it loads up to holding the lock and exiting.
    let modules: ModuleCount | { skipped: string };
    try {
      const hook = join(dir, 'count-modules.mjs');
      const list = join(dir, 'modules.json');
      writeFileSync(hook, HOOK);
      const { proc, port } = await spawnSubject('node', 'agent-modules', ['--import', pathToFileURL(hook).href], {
        FENCEPOST_BENCH_MODULES: list,
      });
      // Ready first, as in the timed runs: the agent takes over SIGTERM only once its watches have
      // synced (/readyz), and its lock API can say held a moment before that.
      await waitReady('node', proc, port);
      await waitHeld('node', proc, port);
      const { exitCode } = await stopTimed(proc);
      if (exitCode !== 0) throw new Error(`agent exited with ${exitCode}`);
      modules = countModules(JSON.parse(readFileSync(list, 'utf8')) as string[]);
    } catch (err) {
      signal.throwIfAborted();
      modules = { skipped: `module count failed: ${err instanceof Error ? err.message : String(err)}` };
    }
    const bundled = {
      modules: build.inputs.length,
      packages: [...new Set(build.inputs.filter((p) => p.includes('node_modules/')).map(packageOf))].toSorted(),
      executableBytes: statSync(build.path).size,
    };

    const summaryOf = (xs: readonly AgentSample[]): Summary => ({
      readyMs: stats(xs.map((s) => s.readyMs)),
      heldMs: stats(xs.map((s) => s.heldMs)),
      stopMs: stats(xs.map((s) => s.stopMs)),
      rssKiB: stats(xs.map((s) => s.rssKiB)),
      hwmKiB: stats(xs.map((s) => s.hwmKiB)),
      anonKiB: stats(xs.map((s) => s.anonKiB)),
      fileKiB: stats(xs.map((s) => s.fileKiB)),
      pssKiB: stats(xs.map((s) => s.pssKiB)),
    });
    const memOf = (xs: readonly Mem[]): Record<keyof Mem, Stats> => ({
      rssKiB: stats(xs.map((m) => m.rssKiB)),
      hwmKiB: stats(xs.map((m) => m.hwmKiB)),
      anonKiB: stats(xs.map((m) => m.anonKiB)),
      fileKiB: stats(xs.map((m) => m.fileKiB)),
      pssKiB: stats(xs.map((m) => m.pssKiB)),
    });
    const result = {
      benchmark: 'agent-footprint',
      date: new Date().toISOString(),
      command: `node bench/agent-footprint.ts --runs ${runs}`,
      runs,
      loadAverageAtStart: load0,
      setup: {
        leaseDurationSeconds: LEASE_SECONDS,
        holdMs: HOLD_MS,
        baselineMs: BASELINE_MS,
        pollMs: POLL_MS,
        note:
          'agents: times from spawn (performance.now()) to the first 200 on /readyz and to the first held: true on /v1/locks/NAME; ' +
          'client-go peer: to its "ready" and "started" lines; subjects alternate run by run; the controller runs in the benchmark process; ' +
          'p50/p90 are nearest-rank; memory from /proc/<pid>/status (VmRSS, VmHWM, RssAnon, RssFile) and smaps_rollup (Pss)',
      },
      machine: describeMachine(),
      versions: {
        node: process.version,
        bun: execFileSync(bun, ['--version'], { encoding: 'utf8' }).trim(),
        clientGo: clientGoVersion(),
        kube: KUBE_VERSION,
        etcd: ETCD_VERSION,
      },
      subjects: Object.fromEntries(
        SUBJECTS.map((k) => [k, { label: SUBJECT_LABEL[k], summary: summaryOf(samples[k]), samples: samples[k] }]),
      ) as Record<SubjectKey, { label: string; summary: Summary; samples: AgentSample[] }>,
      idle: { node: memOf(idle.node), bun: memOf(idle.bun) },
      floor: {
        builtins,
        note: 'Bun-compiled as the agent is and run interpreter-only; memory read HOLD_MS after the TLS request to the API server was answered',
        programs: Object.fromEntries(
          floorKeys.map((k) => [k, { label: FLOOR_LABEL[k], memory: memOf(floor[k]) }]),
        ) as Record<FloorKey, { label: string; memory: Record<keyof Mem, Stats> }>,
      },
      sharedAgents: {
        agents: SHARED_AGENTS,
        note: 'shipped agents running at once from one executable, each holding its own lock; totals over all of them',
        totalKiB: {
          rss: shared.reduce((x, m) => x + m.rssKiB, 0),
          pss: shared.reduce((x, m) => x + m.pssKiB, 0),
          anon: shared.reduce((x, m) => x + m.anonKiB, 0),
          file: shared.reduce((x, m) => x + m.fileKiB, 0),
        },
        perAgent: memOf(shared),
      },
      modules: { node: modules, shipped: bundled },
    };
    const out = writeResult('agent-footprint.json', result);
    process.stdout.write(table(result));
    process.stdout.write(`\nWrote ${relative(process.cwd(), out) || out}\n`);
  } finally {
    await Promise.allSettled(procs.map((p) => p.stop()));
    await controller?.stop().catch(() => undefined);
    await Promise.allSettled([plane?.stop(), redis?.stop()]);
    rmSync(dir, { recursive: true, force: true });
    interrupt.dispose();
  }
}

const round1 = (x: number): number => Math.round(x * 10) / 10;

function table(r: {
  runs: number;
  machine: { cpu: string; cores: number; totalMemoryBytes: number };
  versions: { node: string; bun: string; clientGo: string; kube: string };
  loadAverageAtStart: readonly number[];
  subjects: Record<SubjectKey, { label: string; summary: Summary }>;
  idle: Record<'node' | 'bun', Record<keyof Mem, Stats>>;
  floor: { programs: Record<FloorKey, { label: string; memory: Record<keyof Mem, Stats> }> };
  modules: { node: ModuleCount | { skipped: string }; shipped: { modules: number; packages: readonly string[] } };
}): string {
  const ms = (x: Stats): string => `${x.p50.toFixed(0)} / ${x.p90.toFixed(0)} ms`;
  const mib = (x: Stats): string => `${(x.p50 / 1024).toFixed(1)} MiB`;
  const rows: string[][] = [
    ['p50 (p90 for times)', 'spawn→ready', 'spawn→held', 'SIGTERM→exit', 'RSS', 'peak RSS', 'anon', 'file', 'PSS'],
    ...SUBJECTS.map((k) => {
      const s = r.subjects[k].summary;
      return [
        r.subjects[k].label,
        ms(s.readyMs),
        ms(s.heldMs),
        ms(s.stopMs),
        mib(s.rssKiB),
        mib(s.hwmKiB),
        mib(s.anonKiB),
        mib(s.fileKiB),
        mib(s.pssKiB),
      ];
    }),
    ...(['node', 'bun'] as const).map((k) => {
      const m = r.idle[k];
      return [
        `idle ${k} (-e setInterval)`,
        '',
        '',
        '',
        mib(m.rssKiB),
        mib(m.hwmKiB),
        mib(m.anonKiB),
        mib(m.fileKiB),
        mib(m.pssKiB),
      ];
    }),
    ...(['node-http', 'bun-http'] as const).flatMap((k) => {
      const f = r.floor.programs[k];
      const m = f.memory;
      return [[f.label, '', '', '', mib(m.rssKiB), mib(m.hwmKiB), mib(m.anonKiB), mib(m.fileKiB), mib(m.pssKiB)]];
    }),
  ];
  const out = [
    `agent footprint: ${r.runs} runs each; node ${r.versions.node}, bun ${r.versions.bun}, client-go ${r.versions.clientGo}, kube ${r.versions.kube}`,
    `${machineLine(r.machine)}; load average at start ${r.loadAverageAtStart.map((x) => x.toFixed(2)).join(' ')}`,
    '',
    ...textTable(rows, 1),
    '',
  ];
  const m = r.modules.node;
  if ('skipped' in m) out.push(`node agent, modules loaded: skipped (${m.skipped})`);
  else {
    const top = Object.entries(m.packages)
      .slice(0, 6)
      .map(([p, n]) => `${p} ${n}`)
      .join(', ');
    out.push(
      `node agent, modules loaded: ${m.total} (${m.builtin} builtin, ${m.project} project, ${m.nodeModules} from node_modules, ` +
        `${(m.nodeModulesBytes / 1024).toFixed(0)} KiB of node_modules source)`,
      `  by package: ${top || 'none'}`,
    );
  }
  out.push(
    `shipped agent, modules bundled: ${r.modules.shipped.modules}; packages: ${r.modules.shipped.packages.join(', ') || 'none'}`,
  );
  return `${out.join('\n')}\n`;
}

runMain('agent-footprint', main);
