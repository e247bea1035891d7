/**
 * compare.ts — `npm run bench:compare [-- --runs N --window S]`: fencepost side by side with
 * client-go's tools/leaderelection (LeaseLock, ReleaseOnCancel) on one test API server, in one run.
 *
 * Systems, each with its own namespace, two candidate pods and the lock's Lease:
 *   - fencepost: `fencepost controller` (one process, Redis fencing, --leader-elect=false) and one
 *     `fencepost-agent agent` process per pod (the shipped executable, test/support/agent-binary.ts);
 *     the lock has the EQUAL timings;
 *   - client-go (equal): the peer (bench/peers/client-go) with the same lease, renew deadline and
 *     retry period as fencepost's lease, renew deadline and renew period;
 *   - client-go (defaults): the peer at 15 s / 10 s / 2 s.
 *
 * Scenarios, run after run alternating the systems (A, B, C, then C, B, A, …):
 *   - handoff: SIGTERM to the holder (fencepost's agent releases the Lease, client-go's elector
 *     releases on cancel) → the successor's line saying it holds;
 *   - crash-silent: SIGKILL to the holder, nothing else → the successor holds (expected ≈ the lease);
 *   - crash-terminated: SIGKILL and, right after, the holder pod's container reported terminated in
 *     its status (as a kubelet would) → the successor holds. client-go does not look at pods, so
 *     this runs for fencepost and client-go (equal) only;
 * each preceded by a random wait of up to one retry period (so the phase of the renew/poll loop
 * relative to the event is uniform, not fixed by the restart rhythm), and followed by a restart
 * of the old holder's candidate (same pod) until it has synced. Times are performance.now() at the
 * signal to the arrival of the successor's line in this process; the same for both systems.
 *
 * The floor, one sample before each handoff round: a bare Lease compare-and-swap (GET then PUT
 * with its resourceVersion; the PUT timed) on one kept-alive HTTPS connection, and the watch
 * delivery of that write (PUT returned → event on a client-node Watch of the Lease).
 *
 * Steady-state API load, after the scenarios, with everything else stopped: for each of idle (no
 * candidates), fencepost (equal), client-go (equal), client-go (defaults) and fencepost (its
 * default timings, lease 15 s), 3 candidates on one lock; after they have settled, the difference
 * of kube-apiserver's own apiserver_request_total (resource requests only; by verb and resource)
 * and of etcd's revision (one per committed write) over a window, minus the idle window, per
 * minute. fencepost's figures include its controller's requests.
 *
 * Writes .results/bench/compare.json (compare-quick.json with --quick) and prints a table.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { CoordinationV1Api, Watch, type KubeConfig, type V1Lease } from '@kubernetes/client-node';
import { apiClientFor } from '../src/kube/api-client.ts';
import { typedApi } from '../test/support/typed-api.ts';
import { renewedLease } from '../src/lease/record.ts';
import {
  createLock,
  createPod,
  deleteLock,
  lockBody,
  setPodStatus,
  testKube,
  type TestKube,
} from '../test/support/fixtures.ts';
import { ETCD_VERSION, KUBE_VERSION } from '../test/support/testbed/assets.ts';
import type { ControlPlane } from '../test/support/testbed/control-plane.ts';
import { freePort } from '../test/support/testbed/ports.ts';
import type { RedisServer } from '../test/support/testbed/redis.ts';
import { agentBinary } from '../test/support/agent-binary.ts';
import { clientGoPeer, fencepostAgent, holdsNow, LineProcess, type Candidate, type Timings } from './candidates.ts';
import { keepAliveClient, parseMetrics, sumMetric, type KeepAliveClient, type MetricSample } from './kube-http.ts';
import {
  describeMachine,
  loadAverage,
  machineLine,
  onInterrupt,
  runMain,
  startServers,
  textTable,
  summarize,
  writeResult,
  type Stats,
} from './lib.ts';
import { clientGoVersion, ensureClientGoPeer } from './peers/client-go-peer.ts';

const ROOT = resolve(import.meta.dirname, '..');
const MAIN = join(ROOT, 'src/cli/main.ts');
const LOCK = 'bench';
/** EQUAL: the timings both systems get in the equal-settings comparison (short, so failovers fit in a run). */
const EQUAL: Timings = { leaseDurationSeconds: 3, renewDeadlineSeconds: 2, retryPeriodSeconds: 1 };
/** CLIENT_GO_DEFAULTS: what most client-go programs use (the controller-runtime defaults too). */
const CLIENT_GO_DEFAULTS: Timings = { leaseDurationSeconds: 15, renewDeadlineSeconds: 10, retryPeriodSeconds: 2 };
/** FENCEPOST_DEFAULTS: a lock with no timings set (lease 15 s; renew deadline 10 s and period 5 s by default). */
const FENCEPOST_DEFAULTS: Timings = { leaseDurationSeconds: 15, renewDeadlineSeconds: 10, retryPeriodSeconds: 5 };
const STEP_TIMEOUT_MS = 60_000;

const USAGE = `Usage: node bench/compare.ts [--runs N] [--window S] [--defaults-crash-runs N] [--quick] [--skip-steady] [--only LIST] [--out FILE]

  --runs N       runs per scenario and system (default 30)
  --window S     steady-state measuring window per system, seconds (default 60)
  --quick        write .results/bench/compare-quick.json instead of compare.json
  --skip-steady  leave out the steady-state API load
  --defaults-crash-runs N  silent crashes of client-go at its defaults (15 s each; default 10)
  --only LIST    only these scenarios (comma-separated: handoff, crash-silent, crash-terminated; none: steady state only)
  --out FILE     the results file name under .results/bench/ (default compare.json / compare-quick.json)
`;

type Scenario = 'handoff' | 'crash-silent' | 'crash-terminated';
type SystemId = 'fencepost' | 'client-go-equal' | 'client-go-defaults';

/** Pair is one system's lock with two candidate pods and who holds it now. */
interface Pair {
  readonly id: SystemId;
  readonly label: string;
  readonly timings: Timings;
  readonly t: TestKube;
  readonly pods: readonly [string, string];
  readonly candidates: Map<string, Candidate>;
  holder: string;
  restarts: number;
  unplannedChanges: number;
  start(pod: string): Promise<Candidate>;
}

interface Sample {
  readonly run: number;
  readonly system: SystemId;
  readonly scenario: Scenario;
  readonly from: string;
  readonly to: string;
  /** ms: the signal to the successor's line. */
  readonly ms: number;
  /** beyondLeaseMs: for crashes, ms − the lease duration. */
  readonly beyondLeaseMs?: number;
  /** statusWriteMs: crash-terminated, how long the pod status write took (it starts right after the kill). */
  readonly statusWriteMs?: number;
  /** phaseWaitMs: the random wait before the signal. */
  readonly phaseWaitMs: number;
}

interface FloorSample {
  readonly run: number;
  readonly casMs: number;
  readonly watchMs: number;
  readonly watchFromSendMs: number;
  /** clientNodeCasMs: the same replace with a plain client-node KubeConfig (a new TLS connection per call). */
  readonly clientNodeCasMs: number;
  /** pooledCasMs: the same replace through the one API client (kube/typed-api.ts, what the controller uses). */
  readonly pooledCasMs: number;
}

const r2 = (n: number): number => Math.round(n * 100) / 100;

/** LeaseEvents keeps the arrival time of every event of a client-node Watch on one Lease. */
class LeaseEvents {
  readonly events: { at: number; rv: string }[] = [];
  #abort: AbortController | undefined;

  #stopped = false;

  /** open watches the Lease and re-opens the watch whenever the server ends it (until stop). */
  static async open(kc: KubeConfig, namespace: string, name: string): Promise<LeaseEvents> {
    const w = new LeaseEvents();
    const watch = async (): Promise<void> => {
      w.#abort = await new Watch(kc).watch(
        `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases`,
        { fieldSelector: `metadata.name=${name}` },
        (_type: string, obj: V1Lease) => {
          w.events.push({ at: performance.now(), rv: obj.metadata?.resourceVersion ?? '' });
        },
        () => {
          if (!w.#stopped) void watch().catch(() => undefined);
        },
      );
    };
    await watch();
    return w;
  }

  async waitFor(rv: string, signal: AbortSignal): Promise<number> {
    const deadline = performance.now() + STEP_TIMEOUT_MS / 6;
    for (;;) {
      const e = this.events.find((x) => x.rv === rv);
      if (e !== undefined) return e.at;
      signal.throwIfAborted();
      if (performance.now() > deadline) throw new Error(`no watch event for resourceVersion ${rv}`);
      // (deadline: STEP_TIMEOUT_MS / 6, so a lost event costs 10 s, not a minute)
      await sleep(1);
    }
  }

  stop(): void {
    this.#stopped = true;
    this.#abort?.abort();
  }
}

/** FloorClients: the three ways the floor's CAS is sent. */
interface FloorClients {
  readonly raw: KeepAliveClient;
  readonly plain: CoordinationV1Api;
  readonly pooled: CoordinationV1Api;
  readonly namespace: string;
  readonly name: string;
}

/**
 * floorSample: one bare CAS on the scratch Lease over the kept-alive connection and its watch
 * delivery; then the same replace through client-node, plain and pooled (order alternating).
 */
async function floorSample(
  run: number,
  c: FloorClients,
  watch: LeaseEvents,
  signal: AbortSignal,
): Promise<FloorSample> {
  const path = `/apis/coordination.k8s.io/v1/namespaces/${c.namespace}/leases/${c.name}`;
  const lease = await c.raw.request('GET', path);
  const c0 = performance.now();
  const stored = await c.raw.request('PUT', path, {
    ...lease,
    metadata: {
      ...lease.metadata,
      annotations: { ...lease.metadata?.annotations, 'bench.fencepost.io/seq': String(run) },
    },
  });
  const c1 = performance.now();
  // A watch the server ended between the write and its event loses that event: no watch figure then.
  const at = await watch.waitFor(stored.metadata?.resourceVersion ?? '', signal).catch(() => Number.NaN);
  const viaClientNode = async (api: CoordinationV1Api): Promise<number> => {
    const l = await api.readNamespacedLease({ namespace: c.namespace, name: c.name });
    const t0 = performance.now();
    await api.replaceNamespacedLease({ namespace: c.namespace, name: c.name, body: renewedLease(l, new Date()) });
    return r2(performance.now() - t0);
  };
  let clientNodeCasMs: number;
  let pooledCasMs: number;
  if (run % 2 === 0) {
    clientNodeCasMs = await viaClientNode(c.plain);
    pooledCasMs = await viaClientNode(c.pooled);
  } else {
    pooledCasMs = await viaClientNode(c.pooled);
    clientNodeCasMs = await viaClientNode(c.plain);
  }
  return { run, casMs: r2(c1 - c0), watchMs: r2(at - c1), watchFromSendMs: r2(at - c0), clientNodeCasMs, pooledCasMs };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      runs: { type: 'string', default: '30' },
      window: { type: 'string', default: '60' },
      'defaults-crash-runs': { type: 'string', default: '10' },
      quick: { type: 'boolean' },
      'skip-steady': { type: 'boolean' },
      only: { type: 'string' },
      out: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help === true) {
    process.stdout.write(USAGE);
    return;
  }
  const runs = Number(values.runs);
  const windowS = Number(values.window);
  const defaultsCrashRuns = Math.min(runs, Number(values['defaults-crash-runs']));
  if (!Number.isInteger(runs) || runs < 1)
    throw new Error(`--runs: must be a positive integer, got ${JSON.stringify(values.runs)}`);
  if (!Number.isFinite(windowS) || windowS < 5)
    throw new Error(`--window: must be at least 5 seconds, got ${JSON.stringify(values.window)}`);

  const log = (msg: string): void => {
    process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${msg}\n`);
  };
  const loadAtStart = loadAverage();
  const peerBin = ensureClientGoPeer(log);
  const interrupt = onInterrupt();
  const signal = interrupt.signal;
  const dir = mkdtempSync(join(tmpdir(), 'fencepost-compare-'));
  const procs: LineProcess[] = [];
  const closers: (() => void)[] = [];
  let keepLogs = false;
  let plane: ControlPlane | undefined;
  let redis: RedisServer | undefined;
  try {
    log('Starting control plane and redis…');
    ({ plane, redis } = await startServers());
    const kc = plane.kubeConfig();
    const kubeconfig = plane.kubeconfigPath;
    const cp = plane;
    const ns = async (prefix: string): Promise<TestKube> => testKube(kc, await cp.createNamespace(prefix));
    const fpPairNs = await ns('fp-pair-');
    const fpSteadyNs = await ns('fp-steady-');
    const fpDefaultNs = await ns('fp-default-');

    // The controller: one separate process, as deployed (without its own leader election: with
    // one replica it would only add a constant, per-controller Lease renewal to the load figures).
    const metricsPort = await freePort();
    const controller = new LineProcess(
      'controller',
      process.execPath,
      [
        MAIN,
        'controller',
        '--kubeconfig',
        kubeconfig,
        '--redis-url',
        redis.url,
        '--leader-elect',
        'false',
        '--metrics-secure=false', // plain HTTP: the bench reads the controller's metrics, not its TLS
        '--metrics-bind-address',
        `127.0.0.1:${metricsPort}`,
        '--health-probe-bind-address',
        '0',
        ...[fpPairNs, fpSteadyNs, fpDefaultNs].flatMap((t) => ['--namespace', t.namespace]),
      ],
      process.env,
      join(dir, 'controller.log'),
    );
    procs.push(controller);
    await controller.waitLine('"Started workers"', (l) => l.includes('Started workers'), 0, STEP_TIMEOUT_MS, signal);

    const lockTimings = (x: Timings): Parameters<typeof lockBody>[2] => ({
      leaseDurationSeconds: x.leaseDurationSeconds,
      renewDeadlineSeconds: x.renewDeadlineSeconds,
      renewPeriodSeconds: x.retryPeriodSeconds,
    });

    const uids = new Map<string, string>();
    const makePods = async (t: TestKube, names: readonly string[]): Promise<void> => {
      for (const n of names)
        uids.set(`${t.namespace}/${n}`, (await createPod(t, n, { app: LOCK })).metadata?.uid ?? '');
    };
    const starter =
      (id: SystemId, t: TestKube, timings: Timings, tag: () => string) =>
      async (pod: string): Promise<Candidate> => {
        const c =
          id === 'fencepost'
            ? await fencepostAgent({
                agent: agentBinary(),
                kubeconfig,
                namespace: t.namespace,
                lock: LOCK,
                pod,
                uid: uids.get(`${t.namespace}/${pod}`) ?? '',
                dir,
                tag: tag(),
              })
            : clientGoPeer({
                bin: peerBin,
                kubeconfig,
                namespace: t.namespace,
                lease: LOCK,
                pod,
                timings,
                dir,
                tag: tag(),
              });
        procs.push(c.proc);
        return c;
      };

    const makePair = async (id: SystemId, label: string, t: TestKube, timings: Timings): Promise<Pair> => {
      const pods = ['cand-0', 'cand-1'] as const;
      await makePods(t, pods);
      if (id === 'fencepost') await createLock(t, lockBody(LOCK, LOCK, lockTimings(timings)));
      let n = 0;
      const pair: Pair = {
        id,
        label,
        timings,
        t,
        pods,
        candidates: new Map(),
        holder: pods[0],
        restarts: 0,
        unplannedChanges: 0,
        start: starter(id, t, timings, () => String(++n)),
      };
      // The first candidate takes the lock alone; the second joins once it holds.
      const first = await pair.start(pods[0]);
      pair.candidates.set(pods[0], first);
      await first.proc.waitLine('first lead', first.isLeadLine, 0, STEP_TIMEOUT_MS, signal);
      const second = await pair.start(pods[1]);
      pair.candidates.set(pods[1], second);
      await second.synced(signal);
      return pair;
    };

    log('Starting the three systems…');
    const clientGoEqualNs = await ns('cg-equal-');
    const clientGoDefaultNs = await ns('cg-default-');
    const pairs: Pair[] = [
      await makePair('fencepost', `fencepost (${fmtTimings(EQUAL)})`, fpPairNs, EQUAL),
      await makePair('client-go-equal', `client-go (${fmtTimings(EQUAL)}, equal settings)`, clientGoEqualNs, EQUAL),
      await makePair(
        'client-go-defaults',
        `client-go (${fmtTimings(CLIENT_GO_DEFAULTS)}, defaults)`,
        clientGoDefaultNs,
        CLIENT_GO_DEFAULTS,
      ),
    ];

    // The floor: a scratch Lease nobody else watches, in the fencepost pair's namespace.
    const scratch = 'bench-scratch';
    await fpPairNs.leases.createNamespacedLease({
      namespace: fpPairNs.namespace,
      body: { metadata: { name: scratch }, spec: { holderIdentity: 'bench/scratch', leaseDurationSeconds: 30 } },
    });
    const scratchWatch = await LeaseEvents.open(kc, fpPairNs.namespace, scratch);
    closers.push(() => {
      scratchWatch.stop();
    });
    const raw = keepAliveClient(kc);
    closers.push(() => {
      raw.close();
    });
    const floorClients: FloorClients = {
      raw,
      plain: kc.makeApiClient(CoordinationV1Api),
      pooled: typedApi(apiClientFor(kubeconfig), CoordinationV1Api),
      namespace: fpPairNs.namespace,
      name: scratch,
    };
    for (let i = 0; i < 3; i++) await floorSample(i, floorClients, scratchWatch, signal); // warm-up

    const samples: Sample[] = [];
    const floor: FloorSample[] = [];
    const failures: { run: number; system: SystemId; scenario: Scenario; error: string }[] = [];
    /** resetPair stops both candidates, reports both pods Ready, and starts them again as at the beginning. */
    const resetPair = async (pair: Pair): Promise<void> => {
      await Promise.allSettled([...pair.candidates.values()].map((c) => c.proc.stop()));
      for (const pod of pair.pods) await setPodStatus(pair.t, pod, 'ready');
      const [a, b] = pair.pods;
      const first = await pair.start(a);
      pair.candidates.set(a, first);
      await first.proc.waitLine('lead after reset', first.isLeadLine, 0, STEP_TIMEOUT_MS, signal);
      const second = await pair.start(b);
      pair.candidates.set(b, second);
      await second.synced(signal);
      pair.holder = a;
    };
    /**
     * confirmHolder makes pair.holder the candidate that holds the lock now. On an overloaded
     * machine a holder can lose its lease between runs (a renew that did not come back within the
     * renew deadline: the safety rule at work), and the other candidate is granted; each such
     * change is counted in pair.unplannedChanges.
     */
    const confirmHolder = async (pair: Pair): Promise<void> => {
      const deadline = performance.now() + STEP_TIMEOUT_MS;
      for (;;) {
        const holding = pair.pods.filter((p) => {
          const c = pair.candidates.get(p);
          return c !== undefined && holdsNow(c);
        });
        if (holding.length === 1) {
          const h = holding[0] ?? pair.holder;
          if (h !== pair.holder) {
            pair.unplannedChanges++;
            log(`${pair.id}: ${pair.holder} no longer holds; ${h} does`);
            pair.holder = h;
          }
          return;
        }
        if (performance.now() > deadline)
          throw new Error(`${pair.id}: ${holding.length} candidates say they hold the lock`);
        await sleep(50, undefined, { signal });
      }
    };
    const runOnce = async (pair: Pair, scenario: Scenario, run: number): Promise<Sample> => {
      await confirmHolder(pair);
      const from = pair.holder;
      const to = pair.pods.find((p) => p !== from) ?? '';
      const holder = pair.candidates.get(from);
      const successor = pair.candidates.get(to);
      if (holder === undefined || successor === undefined) throw new Error(`${pair.id}: candidates missing`);
      const phaseWaitMs = Math.random() * pair.timings.retryPeriodSeconds * 1000;
      await sleep(phaseWaitMs, undefined, { signal });
      const fromLine = successor.proc.lines.length;
      const t0 = holder.proc.signal(scenario === 'handoff' ? 'SIGTERM' : 'SIGKILL');
      let statusWriteMs: number | undefined;
      if (scenario === 'crash-terminated') {
        await setPodStatus(pair.t, from, 'terminated');
        statusWriteMs = r2(performance.now() - t0);
      }
      const lead = await successor.proc.waitLine(
        `lead after ${scenario} of ${from}`,
        successor.isLeadLine,
        fromLine,
        STEP_TIMEOUT_MS,
        signal,
      );
      const ms = r2(lead.at - t0);
      await holder.proc.stop(STEP_TIMEOUT_MS);
      if (scenario === 'crash-terminated') await setPodStatus(pair.t, from, 'ready');
      pair.holder = to;
      const fresh = await pair.start(from);
      pair.candidates.set(from, fresh);
      pair.restarts++;
      await fresh.synced(signal);
      return {
        run,
        system: pair.id,
        scenario,
        from,
        to,
        ms,
        phaseWaitMs: r2(phaseWaitMs),
        ...(scenario !== 'handoff' ? { beyondLeaseMs: r2(ms - pair.timings.leaseDurationSeconds * 1000) } : {}),
        ...(statusWriteMs !== undefined ? { statusWriteMs } : {}),
      };
    };

    const all: readonly Scenario[] = ['handoff', 'crash-silent', 'crash-terminated'];
    const only = values.only
      ?.split(',')
      .map((x) => x.trim())
      .filter((x) => x !== '');
    for (const o of only ?? [])
      if (o !== 'none' && !all.includes(o as Scenario))
        throw new Error(`--only: unknown scenario ${JSON.stringify(o)} (one of ${all.join(', ')})`);
    const scenarios = all.filter((x) => only === undefined || only.includes(x));
    for (const scenario of scenarios) {
      for (let run = 1; run <= runs; run++) {
        const inScenario = pairs.filter(
          (p) =>
            !(
              p.id === 'client-go-defaults' &&
              (scenario === 'crash-terminated' || (scenario === 'crash-silent' && run > defaultsCrashRuns))
            ),
        );
        if (scenario === 'handoff') floor.push(await floorSample(run, floorClients, scratchWatch, signal));
        const order = run % 2 === 1 ? inScenario : [...inScenario].reverse();
        const line: string[] = [];
        for (const pair of order) {
          try {
            const s = await runOnce(pair, scenario, run);
            samples.push(s);
            line.push(`${pair.id} ${s.ms.toFixed(0)} ms`);
          } catch (err) {
            // A run that did not finish is recorded (and its logs kept), not dropped silently, and
            // the pair is started afresh so that the remaining runs still count.
            signal.throwIfAborted();
            const message = err instanceof Error ? err.message : String(err);
            failures.push({ run, system: pair.id, scenario, error: message });
            keepLogs = true;
            line.push(`${pair.id} FAILED`);
            log(`${scenario} ${run}: ${pair.id} failed: ${message}; restarting its candidates`);
            await resetPair(pair);
          }
        }
        log(`${scenario} ${run}/${runs}: ${line.join(', ')}`);
      }
    }

    // Steady-state API load: stop every candidate first.
    let steady: SteadyResult | undefined;
    if (values['skip-steady'] !== true) {
      log('Steady state: stopping the scenario candidates…');
      await Promise.all(pairs.flatMap((p) => [...p.candidates.values()].map((c) => c.proc.stop())));
      // A lock whose Ready pods have no agent keeps being granted and expiring (grant, pod label,
      // status, Event every lease duration): delete it, so that it does not count in any window.
      await deleteLock(fpPairNs, LOCK);
      steady = await measureSteady({
        log,
        signal,
        windowS,
        raw,
        etcdUrl: plane.etcd.clientUrl,
        configs: [
          {
            id: 'fencepost',
            label: `fencepost (${fmtTimings(EQUAL)})`,
            timings: EQUAL,
            setup: async () => {
              await setupSteady(fpSteadyNs, EQUAL, true);
              return starter('fencepost', fpSteadyNs, EQUAL, () => 'steady');
            },
            teardown: () => deleteLock(fpSteadyNs, LOCK),
          },
          {
            id: 'client-go-equal',
            label: `client-go (${fmtTimings(EQUAL)})`,
            timings: EQUAL,
            setup: async () => {
              const t = await ns('cg-steady-');
              await makePods(t, STEADY_PODS);
              return starter('client-go-equal', t, EQUAL, () => 'steady');
            },
          },
          {
            id: 'client-go-defaults',
            label: `client-go (${fmtTimings(CLIENT_GO_DEFAULTS)})`,
            timings: CLIENT_GO_DEFAULTS,
            setup: async () => {
              const t = await ns('cg-steady-default-');
              await makePods(t, STEADY_PODS);
              return starter('client-go-defaults', t, CLIENT_GO_DEFAULTS, () => 'steady');
            },
          },
          {
            id: 'fencepost-defaults',
            label: `fencepost (lock defaults: ${fmtTimings(FENCEPOST_DEFAULTS)})`,
            timings: FENCEPOST_DEFAULTS,
            setup: async () => {
              await setupSteady(fpDefaultNs, FENCEPOST_DEFAULTS, false);
              return starter('fencepost', fpDefaultNs, FENCEPOST_DEFAULTS, () => 'steady');
            },
            teardown: () => deleteLock(fpDefaultNs, LOCK),
          },
        ],
        onProc: (p) => {
          procs.push(p);
        },
      });
    }

    async function setupSteady(t: TestKube, timings: Timings, explicit: boolean): Promise<void> {
      await makePods(t, STEADY_PODS);
      // lockBody's own default lease is 2 s (for tests): give the lease, leave the rest to the CRD's defaults.
      await createLock(
        t,
        lockBody(LOCK, LOCK, explicit ? lockTimings(timings) : { leaseDurationSeconds: timings.leaseDurationSeconds }),
      );
    }

    const summary: Record<string, Record<string, Stats>> = {};
    for (const scenario of scenarios) {
      const bySystem: Record<string, Stats> = {};
      summary[scenario] = bySystem;
      for (const p of pairs) {
        const xs = samples.filter((s) => s.scenario === scenario && s.system === p.id);
        if (xs.length === 0) continue;
        bySystem[p.id] = summarize(xs.map((s) => s.ms));
        if (scenario !== 'handoff')
          bySystem[`${p.id}:beyondLease`] = summarize(xs.map((s) => s.beyondLeaseMs ?? Number.NaN));
      }
    }
    const floorSummary = {
      casMs: summarize(floor.map((f) => f.casMs)),
      watchMs: summarize(floor.map((f) => Math.max(0, f.watchMs)).filter(Number.isFinite)),
      watchFromSendMs: summarize(floor.map((f) => f.watchFromSendMs).filter(Number.isFinite)),
      clientNodeCasMs: summarize(floor.map((f) => f.clientNodeCasMs)),
      pooledCasMs: summarize(floor.map((f) => f.pooledCasMs)),
    };
    const result = {
      benchmark: 'compare',
      date: new Date().toISOString(),
      command: `node bench/compare.ts ${process.argv.slice(2).join(' ')}`.trimEnd(),
      runs,
      loadAverage: { start: loadAtStart, end: loadAverage() },
      settings: {
        equal: EQUAL,
        clientGoDefaults: CLIENT_GO_DEFAULTS,
        fencepostDefaults: FENCEPOST_DEFAULTS,
        systems: Object.fromEntries(pairs.map((p) => [p.id, { label: p.label, timings: p.timings }])),
        fencingBackend: 'Redis',
        controller: 'fencepost controller process, --leader-elect=false, Redis fencing, 4 workers',
        note:
          "Times: performance.now() in the benchmark just before kill(2) to the arrival of the successor's line on its stdout/stderr pipe " +
          '(fencepost-agent, the shipped executable: the "Acquired lock" log line, written when its first renew of the grant succeeded; client-go: OnStartedLeading). ' +
          'Before each signal a random wait of 0..retryPeriod. Alternating order A,B,C then C,B,A. crash-terminated writes the pod status ' +
          '(containers terminated, phase Failed) right after the SIGKILL; client-go (defaults) is left out of it (client-go does not read pods; ' +
          'client-go (equal) shows it). Floor: kept-alive node:https GET+PUT of a scratch Lease (PUT timed), watch delivery = PUT returned → ' +
          'client-node Watch event (negative values count as 0 in the summary). Percentiles nearest-rank (with 30 runs p99 = max).',
      },
      machine: describeMachine(),
      versions: {
        node: process.version,
        kube: KUBE_VERSION,
        etcd: ETCD_VERSION,
        clientGo: clientGoVersion(),
        go: goVersion(),
      },
      summary,
      floor: floorSummary,
      ratios: ratios(summary, floorSummary),
      steady,
      samples,
      floorSamples: floor,
      restarts: Object.fromEntries(pairs.map((p) => [p.id, p.restarts])),
      unplannedHolderChanges: Object.fromEntries(pairs.map((p) => [p.id, p.unplannedChanges])),
      failures,
    };
    const out = writeResult(values.out ?? (values.quick === true ? 'compare-quick.json' : 'compare.json'), result);
    process.stdout.write(
      table(result.summary, floorSummary, result.ratios, steady, runs, result.machine, result.loadAverage.start),
    );
    if (failures.length > 0)
      process.stdout.write(
        `\n${failures.length} run(s) did not finish: ${failures.map((f) => `${f.scenario} ${f.run} ${f.system}`).join(', ')}\n`,
      );
    process.stdout.write(`\nWrote ${relative(process.cwd(), out) || out}\n`);
  } catch (err) {
    keepLogs = true;
    throw err;
  } finally {
    for (const c of closers) c();
    await Promise.allSettled(procs.map((p) => p.stop()));
    await Promise.allSettled([plane?.stop(), redis?.stop()]);
    if (keepLogs) process.stderr.write(`Logs kept in ${dir}\n`);
    else rmSync(dir, { recursive: true, force: true });
    interrupt.dispose();
  }
}

const STEADY_PODS = ['cand-0', 'cand-1', 'cand-2'] as const;

interface SteadyConfig {
  readonly id: string;
  readonly label: string;
  readonly timings: Timings;
  /** setup makes the pods (and lock) and returns the candidate starter. */
  setup(): Promise<(pod: string) => Promise<Candidate>>;
  /** teardown, after the candidates stopped: fencepost deletes its lock (Ready pods without agents would keep being granted). */
  teardown?(): Promise<void>;
}

interface Counts {
  readonly requests: number;
  readonly byVerbResource: Record<string, number>;
  readonly etcdRevision: number;
  readonly etcdPuts: number;
  readonly etcdTxns: number;
}

interface SteadyRow {
  readonly id: string;
  readonly label: string;
  readonly timings: Timings;
  readonly windowS: number;
  /** perLockPerMinute: requests (resource requests only, idle subtracted) per minute for the one lock. */
  readonly requestsPerMinute: number;
  readonly etcdWritesPerMinute: number;
  readonly byVerbResourcePerMinute: Record<string, number>;
  readonly raw: Counts;
}

interface SteadyResult {
  readonly windowS: number;
  readonly candidates: number;
  readonly idle: {
    readonly requestsPerMinute: number;
    readonly etcdWritesPerMinute: number;
    readonly byVerbResourcePerMinute: Record<string, number>;
  };
  readonly rows: readonly SteadyRow[];
  readonly note: string;
}

async function scrape(
  raw: KeepAliveClient,
  etcdUrl: string,
): Promise<{ api: MetricSample[]; etcdRevision: number; etcd: MetricSample[] }> {
  const [api, etcdText, range] = await Promise.all([
    raw.text('/metrics').then(parseMetrics),
    fetch(`${etcdUrl}/metrics`).then((r) => r.text()),
    fetch(`${etcdUrl}/v3/kv/range`, {
      method: 'POST',
      body: JSON.stringify({ key: Buffer.from('/').toString('base64'), limit: 1 }),
    }).then((r) => r.json() as Promise<{ header?: { revision?: string } }>),
  ]);
  return { api, etcdRevision: Number(range.header?.revision ?? Number.NaN), etcd: parseMetrics(etcdText) };
}

function diff(a: Awaited<ReturnType<typeof scrape>>, b: Awaited<ReturnType<typeof scrape>>): Counts {
  const by = (samples: readonly MetricSample[]): Map<string, number> => {
    const m = new Map<string, number>();
    for (const s of samples) {
      if (s.name !== 'apiserver_request_total' || (s.labels['resource'] ?? '') === '') continue;
      const k = `${s.labels['verb'] ?? '?'} ${s.labels['resource'] ?? ''}${s.labels['subresource'] !== undefined && s.labels['subresource'] !== '' ? `/${s.labels['subresource']}` : ''}`;
      m.set(k, (m.get(k) ?? 0) + s.value);
    }
    return m;
  };
  const ma = by(a.api);
  const mb = by(b.api);
  const byVerbResource: Record<string, number> = {};
  let requests = 0;
  for (const [k, v] of mb) {
    const d = v - (ma.get(k) ?? 0);
    if (d !== 0) byVerbResource[k] = d;
    requests += d;
  }
  return {
    requests,
    byVerbResource,
    etcdRevision: b.etcdRevision - a.etcdRevision,
    etcdPuts: sumMetric(b.etcd, 'etcd_mvcc_put_total') - sumMetric(a.etcd, 'etcd_mvcc_put_total'),
    etcdTxns: sumMetric(b.etcd, 'etcd_mvcc_txn_total') - sumMetric(a.etcd, 'etcd_mvcc_txn_total'),
  };
}

async function measureSteady(o: {
  log: (m: string) => void;
  signal: AbortSignal;
  windowS: number;
  raw: KeepAliveClient;
  etcdUrl: string;
  configs: readonly SteadyConfig[];
  onProc: (p: LineProcess) => void;
}): Promise<SteadyResult> {
  const SETTLE_MS = 5000;
  const QUIET_MS = 15_000;
  const window = async (): Promise<Counts> => {
    const a = await scrape(o.raw, o.etcdUrl);
    await sleep(o.windowS * 1000, undefined, { signal: o.signal });
    return diff(a, await scrape(o.raw, o.etcdUrl));
  };
  const perMin = (n: number): number => r2((n * 60) / o.windowS);
  await sleep(QUIET_MS, undefined, { signal: o.signal });
  o.log(`Steady state: idle window (${o.windowS} s)…`);
  const idle = await window();
  const rows: SteadyRow[] = [];
  for (const c of o.configs) {
    const start = await c.setup();
    const cands: Candidate[] = [];
    for (const pod of STEADY_PODS) {
      const cand = await start(pod);
      o.onProc(cand.proc);
      cands.push(cand);
    }
    await Promise.all(cands.map((x) => x.synced(o.signal)));
    await Promise.any(cands.map((x) => x.proc.waitLine('lead', x.isLeadLine, 0, STEP_TIMEOUT_MS, o.signal)));
    await sleep(SETTLE_MS, undefined, { signal: o.signal });
    o.log(`Steady state: ${c.label}, 3 candidates, ${o.windowS} s…`);
    const counts = await window();
    await Promise.all(cands.map((x) => x.proc.stop()));
    await c.teardown?.();
    // Stopping releases the lock (fencepost: a handoff chain through the controller); let it end
    // before the next window.
    await sleep(QUIET_MS, undefined, { signal: o.signal });
    const keys = new Set([...Object.keys(counts.byVerbResource), ...Object.keys(idle.byVerbResource)]);
    const byVerbResourcePerMinute: Record<string, number> = {};
    for (const k of [...keys].sort()) {
      const d = perMin((counts.byVerbResource[k] ?? 0) - (idle.byVerbResource[k] ?? 0));
      if (Math.abs(d) >= 0.5) byVerbResourcePerMinute[k] = d;
    }
    rows.push({
      id: c.id,
      label: c.label,
      timings: c.timings,
      windowS: o.windowS,
      requestsPerMinute: perMin(counts.requests - idle.requests),
      etcdWritesPerMinute: perMin(counts.etcdRevision - idle.etcdRevision),
      byVerbResourcePerMinute,
      raw: counts,
    });
  }
  return {
    windowS: o.windowS,
    candidates: STEADY_PODS.length,
    idle: {
      requestsPerMinute: perMin(idle.requests),
      etcdWritesPerMinute: perMin(idle.etcdRevision),
      byVerbResourcePerMinute: Object.fromEntries(Object.entries(idle.byVerbResource).map(([k, v]) => [k, perMin(v)])),
    },
    rows,
    note:
      'kube-apiserver apiserver_request_total (resource requests only; /metrics scrapes and other non-resource paths left out) and etcd revision ' +
      "(one per committed write) differences over the window, minus the idle window (the API server's own identity Lease, the idle controller's watches), " +
      'per minute, one lock with 3 candidates. WATCH requests are counted when they start. fencepost figures include the controller process.',
  };
}

function ratios(
  summary: Record<string, Record<string, Stats>>,
  floor: { casMs: Stats; watchMs: Stats },
): Record<string, number> {
  const out: Record<string, number> = {};
  const fpHandoff = summary['handoff']?.['fencepost'];
  const floorRoundTrip = 2 * floor.watchMs.p50 + floor.casMs.p50;
  if (fpHandoff !== undefined) {
    for (const other of ['client-go-equal', 'client-go-defaults']) {
      const o = summary['handoff']?.[other];
      if (o !== undefined) {
        out[`handoff p50: ${other} / fencepost`] = r2(o.p50 / fpHandoff.p50);
        out[`handoff p99: ${other} / fencepost`] = r2(o.p99 / fpHandoff.p99);
      }
    }
    out['handoff p50: fencepost / floor CAS'] = r2(fpHandoff.p50 / floor.casMs.p50);
    out['handoff p50: fencepost / floor watch round trip (2 × watch + CAS)'] = r2(fpHandoff.p50 / floorRoundTrip);
  }
  const fpTerm = summary['crash-terminated']?.['fencepost'];
  const cgTerm = summary['crash-terminated']?.['client-go-equal'];
  if (fpTerm !== undefined && cgTerm !== undefined)
    out['crash-terminated p50: client-go-equal / fencepost'] = r2(cgTerm.p50 / fpTerm.p50);
  return out;
}

function fmtTimings(t: Timings): string {
  return `${t.leaseDurationSeconds} s / ${t.renewDeadlineSeconds} s / ${t.retryPeriodSeconds} s`;
}

function goVersion(): string {
  try {
    const mod = readFileSync(join(ROOT, 'bench/peers/client-go/go.mod'), 'utf8');
    return /^go (\S+)/m.exec(mod)?.[1] ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

function table(
  summary: Record<string, Record<string, Stats>>,
  floor: { casMs: Stats; watchMs: Stats; watchFromSendMs: Stats; clientNodeCasMs: Stats; pooledCasMs: Stats },
  rat: Record<string, number>,
  steady: SteadyResult | undefined,
  runs: number,
  machine: { cpu: string; cores: number; totalMemoryBytes: number },
  load: { one: number; five: number },
): string {
  const rows: string[][] = [['scenario', 'system', 'p50', 'p90', 'p99', 'max']];
  const ms = (v: number): string => `${v.toFixed(1)} ms`;
  for (const [scenario, bySystem] of Object.entries(summary)) {
    for (const [sys, s] of Object.entries(bySystem))
      rows.push([scenario, sys, ms(s.p50), ms(s.p90), ms(s.p99), ms(s.max)]);
  }
  rows.push([
    'floor',
    'Lease CAS (kept-alive)',
    ms(floor.casMs.p50),
    ms(floor.casMs.p90),
    ms(floor.casMs.p99),
    ms(floor.casMs.max),
  ]);
  rows.push([
    'floor',
    'watch delivery',
    ms(floor.watchMs.p50),
    ms(floor.watchMs.p90),
    ms(floor.watchMs.p99),
    ms(floor.watchMs.max),
  ]);
  rows.push([
    'floor',
    'Lease CAS, client-node plain',
    ms(floor.clientNodeCasMs.p50),
    ms(floor.clientNodeCasMs.p90),
    ms(floor.clientNodeCasMs.p99),
    ms(floor.clientNodeCasMs.max),
  ]);
  rows.push([
    'floor',
    'Lease CAS, client-node pooled',
    ms(floor.pooledCasMs.p50),
    ms(floor.pooledCasMs.p90),
    ms(floor.pooledCasMs.p99),
    ms(floor.pooledCasMs.max),
  ]);
  const out = [
    `fencepost vs client-go leader election: ${runs} runs per scenario and system`,
    `${machineLine(machine)}, load average at start ${load.one} / ${load.five}`,
    '',
    ...textTable(rows, 2),
    '',
    ...Object.entries(rat).map(([k, v]) => `${k}: ${v.toFixed(2)}×`),
  ];
  if (steady !== undefined) {
    out.push(
      '',
      `steady state, 1 lock, ${steady.candidates} candidates, ${steady.windowS} s windows (idle subtracted: ${steady.idle.requestsPerMinute} req/min, ${steady.idle.etcdWritesPerMinute} etcd writes/min):`,
    );
    for (const r of steady.rows)
      out.push(
        `  ${r.label}: ${r.requestsPerMinute} API requests/min, ${r.etcdWritesPerMinute} etcd writes/min  ${JSON.stringify(r.byVerbResourcePerMinute)}`,
      );
  }
  return `${out.join('\n')}\n`;
}

runMain('compare', main);
