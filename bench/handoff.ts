/**
 * handoff.ts — `npm run bench:handoff [-- --runs N]`: how long a voluntary handoff takes, from the
 * holder's release (the Lease's holder cleared by compare-and-swap) until a watcher sees the next
 * candidate granted, next to the physical floor measured in the same run.
 *
 * Against the real testbed (etcd + kube-apiserver + redis-server on loopback), with the controller
 * in-process, two Ready pods and one DistributedLock (`leaseDurationSeconds: 30`), it does N times:
 *   - release: releaseLease() from the test fixtures, as the holder's agent does on SIGTERM (GET,
 *     then a replace carrying the resourceVersion it read). t0 = performance.now() right before the
 *     replace call, t1 when it returned;
 *   - observe: a client-node Watch on the lock's Lease (fieldSelector metadata.name=dlock-NAME),
 *     opened before the first release. t2 = arrival of the event with a new holder and a larger
 *     fencing token.
 * It reports release → grant observed (t2 − t0) and commit → grant observed (t2 − t1).
 *
 * The floor, interleaved with the handoffs (one floor sample before each handoff), on a scratch
 * Lease that the controller does not watch: a bare GET, a bare CAS round trip (replace with the
 * read resourceVersion) and the bare watch delivery of that write (from the replace returning to
 * the event with its resourceVersion on a second Watch). Each is measured twice: with client-node,
 * as the controller and the fixtures call the API server (client-node 2.0 builds a new undici Agent
 * for every request, so every call opens a new TLS connection), and with one kept-alive node:https
 * connection, which is what the loopback API server and etcd themselves cost.
 *
 * Two series, one control plane: the Redis fencing backend (controller given the Redis URL), then
 * the embedded Lease backend (controller without Redis), each in a fresh namespace with its own
 * controller. Writes .results/bench/handoff.json and prints a table. Every process it starts is
 * stopped by PID at the end, also on failure or Ctrl-C.
 */
import { readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { CoordinationV1Api, Watch, type KubeConfig, type V1Lease } from '@kubernetes/client-node';
import { startLockController, type LockController } from '../src/controllers/distributedlock/setup.ts';
import { parseLease, renewedLease, type LockRecord } from '../src/lease/record.ts';
import { apiClientFor } from '../src/kube/api-client.ts';
import { typedApi } from '../test/support/typed-api.ts';
import { silentLogger } from '../src/observability/logger.ts';
import { realClock } from '../src/runtime/clock.ts';
import {
  createLock,
  createPod,
  getLease,
  getLock,
  lockBody,
  releaseLease,
  testKube,
  type TestKube,
} from '../test/support/fixtures.ts';
import { ETCD_VERSION, KUBE_VERSION } from '../test/support/testbed/assets.ts';
import type { ControlPlane } from '../test/support/testbed/control-plane.ts';
import type { RedisServer } from '../test/support/testbed/redis.ts';
import { keepAliveClient } from './kube-http.ts';
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
import { leaseName } from '../src/protocol/names.ts';

const ROOT = resolve(import.meta.dirname, '..');
const LOCK = 'bench';
const LEASE = leaseName(LOCK);
const SCRATCH = 'bench-scratch';
const PODS = ['cand-0', 'cand-1'] as const;
/** LEASE_SECONDS: the lock's leaseDurationSeconds; far longer than a run, so nothing expires. */
const LEASE_SECONDS = 30;
/** WARMUP: handoffs (and floor samples) per series done first and kept apart from the figures. */
const WARMUP = 2;
/** SETTLE_MS: quiet time after the controller has written status, before the next sample. */
const SETTLE_MS = 200;
const POLL_MS = 20;
const STEP_TIMEOUT_MS = 15_000;

const USAGE = `Usage: node bench/handoff.ts [--runs N]

  --runs N   handoffs (and floor samples) to measure per fencing backend (default 30)
`;

type Backend = 'Redis' | 'Lease';
interface Stats {
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
  readonly max: number;
}

interface HandoffSample {
  readonly run: number;
  readonly from: string;
  readonly to: string;
  readonly tokenBefore: string;
  readonly token: string;
  /** releaseAttempts: replace calls releaseLease made (more than 1 after a 409). */
  readonly releaseAttempts: number;
  /** releaseToGrantMs: t2 − t0. */
  readonly releaseToGrantMs: number;
  /** commitToGrantMs: t2 − t1. */
  readonly commitToGrantMs: number;
  /** releaseCasMs: t1 − t0, the release write itself. */
  readonly releaseCasMs: number;
  /** releaseSeenMs: from t1 to the watch event of the release (holder cleared). */
  readonly releaseSeenMs: number;
  /** releaseSeenToGrantMs: from the release event to the grant event on the same watch. */
  readonly releaseSeenToGrantMs: number;
  /**
   * releaseSeenToGrantSentMs and grantSentToSeenMs split releaseSeenToGrantMs at the grant's
   * spec.acquireTime, which the controller stamps (wall clock, whole ms, same process) just before
   * it sends the grant's replace: the controller's reads and token before it, the write and its
   * delivery after it.
   */
  readonly releaseSeenToGrantSentMs: number;
  readonly grantSentToSeenMs: number;
  /**
   * confirmCasMs: the successor's confirmation, the last hop — a renew CAS of the granted Lease
   * as seen on the watch (what the successor's agent does before it says it holds), call to return.
   */
  readonly confirmCasMs: number;
  /** releaseToConfirmMs: t0 to that confirmation returning: the whole handoff, five hops. */
  readonly releaseToConfirmMs: number;
}
/** FloorPart is one floor sample taken with one HTTP client. */
interface FloorPart {
  /** getMs: one GET of the scratch Lease, call to return. */
  readonly getMs: number;
  /** casMs: one replace of the scratch Lease (with the resourceVersion just read), call to return. */
  readonly casMs: number;
  /** watchMs: from that replace returning to its watch event (negative: the event came first). */
  readonly watchMs: number;
  /** watchFromSendMs: from the replace call to its watch event. */
  readonly watchFromSendMs: number;
}
interface FloorSample {
  readonly run: number;
  /** clientNode: with client-node (a new TLS connection per call, as the controller makes them). */
  readonly clientNode: FloorPart;
  /** keepAlive: with node:https over one kept-alive connection. */
  readonly keepAlive: FloorPart;
}
interface FloorStats {
  readonly getMs: Stats;
  readonly casMs: Stats;
  readonly watchMs: Stats;
  readonly watchFromSendMs: Stats;
}
interface Summary {
  readonly releaseToGrantMs: Stats;
  readonly commitToGrantMs: Stats;
  readonly releaseCasMs: Stats;
  readonly releaseSeenMs: Stats;
  readonly releaseSeenToGrantMs: Stats;
  readonly releaseSeenToGrantSentMs: Stats;
  readonly grantSentToSeenMs: Stats;
  readonly confirmCasMs: Stats;
  readonly releaseToConfirmMs: Stats;
  readonly floorClientNode: FloorStats;
  readonly floorKeepAlive: FloorStats;
}
interface SeriesResult {
  readonly backend: Backend;
  readonly controller: string;
  readonly namespace: string;
  readonly summary: Summary;
  /**
   * models, from the floor p50s (a negative watch delivery counts as 0):
   * - watchRoundTrip*: one watch round trip, 2 × watch delivery + 1 × CAS (the release reaches the
   *   controller by watch, it writes the grant, the grant reaches the watcher by watch);
   * - controllerPathClientNodeMs: the controller's calls on the path with client-node: it decides
   *   from its cache, so this is the watch round trip again (it was 2 × watch + 1 × GET + 1 × CAS
   *   while it read the Lease directly before each grant); no Redis INCR;
   * - protocolFloorKeepAliveMs: the whole handoff on the bare floor, release CAS + watch + grant
   *   CAS + watch + confirm CAS (3 × CAS + 2 × watch, kept-alive).
   */
  readonly models: {
    readonly watchRoundTripKeepAliveMs: number;
    readonly watchRoundTripClientNodeMs: number;
    readonly controllerPathClientNodeMs: number;
    readonly protocolFloorKeepAliveMs: number;
  };
  /** ratios: commit → grant observed p50 over each model. */
  readonly ratios: {
    readonly commitToGrantOverWatchRoundTripKeepAlive: number;
    readonly commitToGrantOverWatchRoundTripClientNode: number;
    readonly commitToGrantOverControllerPathClientNode: number;
    /** releaseToConfirmOverProtocolFloor: release → confirmed p50 over protocolFloorKeepAliveMs. */
    readonly releaseToConfirmOverProtocolFloor: number;
  };
  readonly redisCounter: string | null;
  readonly samples: { readonly handoff: HandoffSample[]; readonly floor: FloorSample[] };
  readonly warmup: { readonly handoff: HandoffSample[]; readonly floor: FloorSample[] };
}

const r2 = (n: number): number => Math.round(n * 100) / 100;
function stats(xs: readonly number[]): Stats {
  return {
    p50: r2(percentile(xs, 50)),
    p90: r2(percentile(xs, 90)),
    p99: r2(percentile(xs, 99)),
    max: r2(Math.max(...xs)),
  };
}
function floorStats(xs: readonly FloorPart[]): FloorStats {
  return {
    getMs: stats(xs.map((x) => x.getMs)),
    casMs: stats(xs.map((x) => x.casMs)),
    watchMs: stats(xs.map((x) => x.watchMs)),
    watchFromSendMs: stats(xs.map((x) => x.watchFromSendMs)),
  };
}

/** TimedLeases is the Lease client with the time of its last replace call: t0 at the call, t1 at its return. */
class TimedLeases extends CoordinationV1Api {
  t0 = Number.NaN;
  t1 = Number.NaN;
  attempts = 0;

  override async replaceNamespacedLease(
    ...args: Parameters<CoordinationV1Api['replaceNamespacedLease']>
  ): Promise<V1Lease> {
    this.attempts++;
    this.t0 = performance.now();
    try {
      return await super.replaceNamespacedLease(...args);
    } finally {
      this.t1 = performance.now();
    }
  }
}

interface Seen {
  readonly at: number;
  readonly type: string;
  readonly lease: V1Lease;
}

/**
 * LeaseWatch keeps every event of a client-node Watch on one Lease, stamped with performance.now()
 * on arrival, and lets the caller wait for the first event after an index that matches.
 */
class LeaseWatch {
  readonly events: Seen[] = [];
  readonly #what: string;
  readonly #signal: AbortSignal;
  #wake: (() => void)[] = [];
  #closed: Error | undefined;
  #stopped = false;
  #abort: AbortController | undefined;

  private constructor(what: string, signal: AbortSignal) {
    this.#what = what;
    this.#signal = signal;
    signal.addEventListener(
      'abort',
      () => {
        this.#wakeAll();
      },
      { once: true },
    );
  }

  /** open starts the watch (no resourceVersion: the current object first, as ADDED) and waits for that first event. */
  static async open(kc: KubeConfig, namespace: string, name: string, signal: AbortSignal): Promise<LeaseWatch> {
    const w = new LeaseWatch(`watch of Lease ${namespace}/${name}`, signal);
    w.#abort = await new Watch(kc).watch(
      `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases`,
      { fieldSelector: `metadata.name=${name}` },
      (type: string, obj: unknown) => {
        w.#onEvent(type, obj);
      },
      (err: unknown) => {
        w.#onDone(err);
      },
    );
    await w.next(0, 'the initial ADDED event', () => true);
    return w;
  }

  #onEvent(type: string, obj: unknown): void {
    const at = performance.now();
    if (type === 'ERROR') {
      this.#closed = new Error(`${this.#what}: ERROR event ${JSON.stringify(obj)}`);
    } else if (
      typeof obj === 'object' &&
      obj !== null &&
      (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED')
    ) {
      const lease: V1Lease = obj; // a Lease (the fieldSelector matches only the one)
      this.events.push({ at, type, lease });
    }
    this.#wakeAll();
  }

  #onDone(err: unknown): void {
    if (this.#stopped) return;
    const why =
      err === null || err === undefined ? '' : `: ${err instanceof Error ? err.message : JSON.stringify(err)}`;
    this.#closed = new Error(`${this.#what} ended unexpectedly${why}`);
    this.#wakeAll();
  }

  #wakeAll(): void {
    const wake = this.#wake;
    this.#wake = [];
    for (const w of wake) w();
  }

  /** next returns the first event at index ≥ from that matches. */
  async next(from: number, what: string, match: (s: Seen) => boolean): Promise<Seen> {
    const deadline = performance.now() + STEP_TIMEOUT_MS;
    for (let i = from; ;) {
      for (; i < this.events.length; i++) {
        const s = this.events[i];
        if (s !== undefined && match(s)) return s;
      }
      if (this.#closed !== undefined) throw this.#closed;
      this.#signal.throwIfAborted();
      const left = deadline - performance.now();
      if (left <= 0) throw new Error(`${this.#what}: no ${what} within ${STEP_TIMEOUT_MS} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.#wake.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  stop(): void {
    this.#stopped = true;
    this.#abort?.abort();
    this.#wakeAll();
  }
}

/** until polls check every POLL_MS until it returns a value or the timeout passes. */
async function until<T>(what: string, signal: AbortSignal, check: () => Promise<T | undefined>): Promise<T> {
  const deadline = performance.now() + STEP_TIMEOUT_MS;
  for (;;) {
    signal.throwIfAborted();
    const v = await check();
    if (v !== undefined) return v;
    if (performance.now() > deadline) throw new Error(`no ${what} after ${STEP_TIMEOUT_MS} ms`);
    await sleep(POLL_MS, undefined, { signal });
  }
}

const holderName = (r: LockRecord): string => r.holder?.name ?? '';

/** settle waits until the lock's status shows the Lease's current holder and token, then SETTLE_MS more. */
async function settle(t: TestKube, record: LockRecord, signal: AbortSignal): Promise<void> {
  await until(`status showing ${holderName(record)} with token ${record.token ?? '?'}`, signal, async () => {
    const s = (await getLock(t, LOCK)).status;
    return s?.holder?.name === holderName(record) && s.fencingToken === record.token?.toString() ? true : undefined;
  });
  await sleep(SETTLE_MS, undefined, { signal });
}

async function runSeries(
  plane: ControlPlane,
  redis: RedisServer,
  backend: Backend,
  runs: number,
  signal: AbortSignal,
  log: (msg: string) => void,
): Promise<SeriesResult> {
  const kc = plane.kubeConfig();
  // The controller and the agents' side (release, confirm) call the API server as the CLI does:
  // through the one API client's pooled connection. The client-node floor keeps the plain KubeConfig.
  const pooled = apiClientFor(plane.kubeconfigPath);
  const namespace = await plane.createNamespace(`bench-handoff-${backend.toLowerCase()}-`);
  const t = testKube(kc, namespace);
  const redisUrl = backend === 'Redis' ? redis.url : undefined;
  let controller: LockController | undefined;
  const closers: (() => void)[] = [];
  try {
    controller = await startLockController({
      kc: pooled,
      redisUrl,
      namespace,
      identity: `bench-controller-${backend.toLowerCase()}`,
      clock: realClock,
      log: silentLogger,
    });
    for (const name of PODS) await createPod(t, name, { app: LOCK });
    await createLock(t, lockBody(LOCK, LOCK, { leaseDurationSeconds: LEASE_SECONDS }));
    const first = await until('first grant', signal, async () => {
      const l = await getLease(t, LOCK);
      const r = l !== undefined ? parseLease(l) : undefined;
      return r?.holder !== undefined && r.token !== undefined ? r : undefined;
    });
    await settle(t, first, signal);

    const lockWatch = await LeaseWatch.open(kc, namespace, LEASE, signal);
    closers.push(() => {
      lockWatch.stop();
    });
    await t.leases.createNamespacedLease({
      namespace,
      body: {
        metadata: { name: SCRATCH, namespace },
        spec: { holderIdentity: 'bench/scratch', leaseDurationSeconds: LEASE_SECONDS },
      },
    });
    const scratchWatch = await LeaseWatch.open(kc, namespace, SCRATCH, signal);
    closers.push(() => {
      scratchWatch.stop();
    });
    const timed = typedApi(pooled, TimedLeases);
    const confirmer = typedApi(pooled, CoordinationV1Api);
    const releaser: TestKube = { ...t, leases: timed };
    const raw = keepAliveClient(kc);
    closers.push(() => {
      raw.close();
    });
    const scratchPath = `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases/${SCRATCH}`;

    /** floorPart times read → CAS → watch event of that write: write(read()) with the given client. */
    const floorPart = async <L>(
      read: () => Promise<L>,
      write: (l: L) => Promise<string | undefined>,
    ): Promise<FloorPart> => {
      const g0 = performance.now();
      const lease = await read();
      const g1 = performance.now();
      const from = scratchWatch.events.length;
      const c0 = performance.now();
      const rv = await write(lease);
      const c1 = performance.now();
      const ev = await scratchWatch.next(
        from,
        `event for resourceVersion ${rv ?? '?'}`,
        (s) => s.lease.metadata?.resourceVersion === rv,
      );
      return { getMs: r2(g1 - g0), casMs: r2(c1 - c0), watchMs: r2(ev.at - c1), watchFromSendMs: r2(ev.at - c0) };
    };
    const floorSample = async (run: number): Promise<FloorSample> => {
      // client-node: the renew body (renewedLease), as a holder's agent writes it.
      const clientNode = await floorPart(
        () => t.leases.readNamespacedLease({ namespace, name: SCRATCH }),
        async (l) =>
          (await t.leases.replaceNamespacedLease({ namespace, name: SCRATCH, body: renewedLease(l, new Date()) }))
            .metadata?.resourceVersion,
      );
      // keep-alive: the JSON as read, one annotation changed.
      const keepAlive = await floorPart(
        () => raw.request('GET', scratchPath),
        async (l) =>
          (
            await raw.request('PUT', scratchPath, {
              ...l,
              metadata: {
                ...l.metadata,
                annotations: { ...l.metadata?.annotations, 'bench.fencepost.io/seq': String(run) },
              },
            })
          ).metadata?.resourceVersion,
      );
      return { run, clientNode, keepAlive };
    };

    let current = first;
    const handoffSample = async (run: number): Promise<HandoffSample> => {
      const before = current;
      const tokenBefore = before.token;
      if (tokenBefore === undefined) throw new Error('unreachable: a held Lease without a token');
      const from = lockWatch.events.length;
      timed.attempts = 0;
      await releaseLease(releaser, LOCK);
      const { t0, t1, attempts } = timed;
      const released = await lockWatch.next(
        from,
        'release (holder cleared)',
        (s) => parseLease(s.lease).holder === undefined,
      );
      const granted = await lockWatch.next(from, `grant above token ${tokenBefore}`, (s) => {
        const r = parseLease(s.lease);
        return r.holder !== undefined && r.token !== undefined && r.token > tokenBefore;
      });
      const after = parseLease(granted.lease);
      // The successor confirms with its first renew, from the Lease as its watch delivered it.
      const k0 = performance.now();
      const confirmed = await confirmer.replaceNamespacedLease({
        namespace,
        name: LEASE,
        body: renewedLease(granted.lease, new Date()),
      });
      const k1 = performance.now();
      current = parseLease(confirmed);
      const sentAt = (after.acquireTime?.getTime() ?? Number.NaN) - performance.timeOrigin;
      return {
        run,
        from: holderName(before),
        to: holderName(after),
        tokenBefore: tokenBefore.toString(),
        token: after.token?.toString() ?? '?',
        releaseAttempts: attempts,
        releaseToGrantMs: r2(granted.at - t0),
        commitToGrantMs: r2(granted.at - t1),
        releaseCasMs: r2(t1 - t0),
        releaseSeenMs: r2(released.at - t1),
        releaseSeenToGrantMs: r2(granted.at - released.at),
        releaseSeenToGrantSentMs: r2(sentAt - released.at),
        grantSentToSeenMs: r2(granted.at - sentAt),
        confirmCasMs: r2(k1 - k0),
        releaseToConfirmMs: r2(k1 - t0),
      };
    };

    const samples = { handoff: [] as HandoffSample[], floor: [] as FloorSample[] };
    const warmup = { handoff: [] as HandoffSample[], floor: [] as FloorSample[] };
    for (let i = 1 - WARMUP; i <= runs; i++) {
      const into = i >= 1 ? samples : warmup;
      const f = await floorSample(i);
      into.floor.push(f);
      const h = await handoffSample(i);
      into.handoff.push(h);
      if (h.from === h.to) throw new Error(`run ${i}: the lock went back to ${h.from}; expected the other candidate`);
      await settle(t, current, signal);
      log(
        `${backend} ${i >= 1 ? `run ${i}/${runs}` : `warm-up ${i + WARMUP}/${WARMUP}`}: ${h.from} → ${h.to} token ${h.token}, ` +
          `release→grant ${h.releaseToGrantMs.toFixed(1)} ms, commit→grant ${h.commitToGrantMs.toFixed(1)} ms; ` +
          `floor CAS ${f.clientNode.casMs.toFixed(1)} ms (keep-alive ${f.keepAlive.casMs.toFixed(1)} ms), watch ${f.keepAlive.watchMs.toFixed(1)} ms`,
      );
    }

    // The tokens came from the backend under test: the Redis counter follows them, or does not exist.
    const client = redis.client();
    let redisCounter: string | null;
    try {
      redisCounter = await client.get(`fencepost:fence:${namespace}/${LOCK}`);
    } finally {
      client.disconnect();
    }
    const lastToken = current.token?.toString() ?? '?';
    if (backend === 'Redis' && redisCounter !== lastToken)
      throw new Error(`Redis series: counter is ${String(redisCounter)}, last token ${lastToken}`);
    if (backend === 'Lease' && redisCounter !== null)
      throw new Error(`Lease series: a Redis counter exists (${redisCounter})`);

    const h = samples.handoff;
    const f = samples.floor;
    const summary: Summary = {
      releaseToGrantMs: stats(h.map((s) => s.releaseToGrantMs)),
      commitToGrantMs: stats(h.map((s) => s.commitToGrantMs)),
      releaseCasMs: stats(h.map((s) => s.releaseCasMs)),
      releaseSeenMs: stats(h.map((s) => s.releaseSeenMs)),
      releaseSeenToGrantMs: stats(h.map((s) => s.releaseSeenToGrantMs)),
      releaseSeenToGrantSentMs: stats(h.map((s) => s.releaseSeenToGrantSentMs)),
      grantSentToSeenMs: stats(h.map((s) => s.grantSentToSeenMs)),
      confirmCasMs: stats(h.map((s) => s.confirmCasMs)),
      releaseToConfirmMs: stats(h.map((s) => s.releaseToConfirmMs)),
      floorClientNode: floorStats(f.map((s) => s.clientNode)),
      floorKeepAlive: floorStats(f.map((s) => s.keepAlive)),
    };
    const cn = summary.floorClientNode;
    const ka = summary.floorKeepAlive;
    const models = {
      watchRoundTripKeepAliveMs: r2(2 * Math.max(0, ka.watchMs.p50) + ka.casMs.p50),
      watchRoundTripClientNodeMs: r2(2 * Math.max(0, cn.watchMs.p50) + cn.casMs.p50),
      controllerPathClientNodeMs: r2(2 * Math.max(0, cn.watchMs.p50) + cn.casMs.p50),
      protocolFloorKeepAliveMs: r2(2 * Math.max(0, ka.watchMs.p50) + 3 * ka.casMs.p50),
    };
    const c2g = summary.commitToGrantMs.p50;
    return {
      backend,
      namespace,
      controller:
        backend === 'Redis'
          ? 'startLockController with redisUrl (locks default to the Redis backend)'
          : 'startLockController without redisUrl (locks default to the Lease backend)',
      summary,
      models,
      ratios: {
        commitToGrantOverWatchRoundTripKeepAlive: r2(c2g / models.watchRoundTripKeepAliveMs),
        commitToGrantOverWatchRoundTripClientNode: r2(c2g / models.watchRoundTripClientNodeMs),
        commitToGrantOverControllerPathClientNode: r2(c2g / models.controllerPathClientNodeMs),
        releaseToConfirmOverProtocolFloor: r2(summary.releaseToConfirmMs.p50 / models.protocolFloorKeepAliveMs),
      },
      redisCounter,
      samples,
      warmup,
    };
  } finally {
    for (const close of closers) close();
    await controller?.stop().catch(() => undefined);
  }
}

async function redisVersion(redis: RedisServer): Promise<string> {
  const client = redis.client();
  try {
    return /^redis_version:(\S+)/m.exec(await client.info('server'))?.[1] ?? 'unknown';
  } finally {
    client.disconnect();
  }
}

function clientNodeVersion(): string {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'node_modules/@kubernetes/client-node/package.json'), 'utf8')) as {
    version?: string;
  };
  return pkg.version ?? 'unknown';
}

async function main(): Promise<void> {
  const runs = parseRuns(30, USAGE);
  if (runs === undefined) return;

  const interrupt = onInterrupt();
  const signal = interrupt.signal;

  let plane: ControlPlane | undefined;
  let redis: RedisServer | undefined;
  try {
    const log = (msg: string): void => {
      process.stderr.write(`${msg}\n`);
    };
    log('Starting control plane and redis…');
    ({ plane, redis } = await startServers());

    const series: SeriesResult[] = [];
    for (const backend of ['Redis', 'Lease'] as const)
      series.push(await runSeries(plane, redis, backend, runs, signal, log));

    const result = {
      benchmark: 'handoff',
      date: new Date().toISOString(),
      command: `node bench/handoff.ts --runs ${runs}`,
      runs,
      warmup: WARMUP,
      setup: {
        leaseDurationSeconds: LEASE_SECONDS,
        pods: PODS.length,
        settleMs: SETTLE_MS,
        pollMs: POLL_MS,
        note:
          'release: releaseLease() from test/support/fixtures.ts (GET, then replace with the read resourceVersion); ' +
          't0 = performance.now() right before that replace call, t1 when it returned; t2 = arrival of the watch event ' +
          '(client-node Watch, fieldSelector metadata.name=dlock-NAME, opened before the first release) with a new holder and a larger token. ' +
          "releaseSeenToGrantSentMs / grantSentToSeenMs split at the grant's spec.acquireTime (wall clock, whole ms, stamped by the in-process controller just before its replace). " +
          "confirmCasMs: the successor's first renew (replace of the Lease as the watch delivered the grant), as its agent confirms; releaseToConfirmMs = t0 to its return. " +
          "The controller, the release and the confirmation use the one API client (a pooled connection, as the CLI); the floor's clientNode part a plain KubeConfig. " +
          'Floor, one sample before each handoff, on a scratch Lease the controller does not watch: getMs = one GET; casMs = one replace with the read resourceVersion; ' +
          'watchMs = from that replace returning to its event on a second Watch (watchFromSendMs: from the call). ' +
          'Each twice: clientNode (client-node 2.0, a new undici Agent and TLS connection per call, as the controller and fixtures make them; renewedLease body) ' +
          'and keepAlive (node:https, one kept-alive connection; one annotation changed). ' +
          'models: watchRoundTrip* = 2 × watch p50 + 1 × CAS p50; controllerPathClientNodeMs = 2 × watch + 1 × CAS (client-node p50s; the reconciler decides from its cache, no GET; Redis INCR not included); protocolFloorKeepAliveMs = 3 × CAS + 2 × watch (kept-alive p50s). ' +
          'Between samples the benchmark waits until the lock status shows the new holder, then settleMs. ' +
          'The controller, both watches and the clients share one Node process. Percentiles are nearest-rank ' +
          '(with 30 runs p99 is the maximum); warm-up samples are kept apart under warmup.',
      },
      machine: describeMachine(),
      versions: {
        node: process.version,
        kube: KUBE_VERSION,
        etcd: ETCD_VERSION,
        redis: await redisVersion(redis),
        clientNode: clientNodeVersion(),
      },
      series,
    };
    const out = writeResult('handoff.json', result);
    process.stdout.write(table(series, runs, result.machine, result.versions));
    process.stdout.write(`\nWrote ${relative(process.cwd(), out) || out}\n`);
  } finally {
    await Promise.allSettled([plane?.stop(), redis?.stop()]);
    interrupt.dispose();
  }
}

function table(
  series: readonly SeriesResult[],
  runs: number,
  machine: { cpu: string; cores: number; totalMemoryBytes: number },
  versions: { node: string; kube: string; etcd: string; redis: string; clientNode: string },
): string {
  const out = [
    `fencepost voluntary handoff: ${runs} runs (+${WARMUP} warm-up) per backend, 2 Ready pods, leaseDurationSeconds ${LEASE_SECONDS}`,
    `node ${versions.node}, kube ${versions.kube}, etcd ${versions.etcd}, redis ${versions.redis}, client-node ${versions.clientNode}`,
    machineLine(machine),
  ];
  for (const s of series) {
    const m = s.summary;
    const cn = m.floorClientNode;
    const ka = m.floorKeepAlive;
    const row = (label: string, x: Stats): string[] => [
      label,
      ...[x.p50, x.p90, x.p99, x.max].map((v) => `${v.toFixed(1)} ms`),
      `${(x.p50 / ka.casMs.p50).toFixed(1)}×`,
      `${(x.p50 / cn.casMs.p50).toFixed(1)}×`,
    ];
    const rows: string[][] = [
      [`${s.backend} backend`, 'p50', 'p90', 'p99', 'max', '÷CAS ka', '÷CAS cn'],
      row('release → grant observed (t2−t0)', m.releaseToGrantMs),
      row('commit → grant observed (t2−t1)', m.commitToGrantMs),
      row('  release CAS (t1−t0)', m.releaseCasMs),
      row('  commit → release observed', m.releaseSeenMs),
      row('  release observed → grant observed', m.releaseSeenToGrantMs),
      row('    release observed → grant sent', m.releaseSeenToGrantSentMs),
      row('    grant sent → grant observed', m.grantSentToSeenMs),
      row('  confirm CAS (successor renews)', m.confirmCasMs),
      row('release → confirmed (5 hops)', m.releaseToConfirmMs),
      row('floor, keep-alive: Lease GET', ka.getMs),
      row('floor, keep-alive: Lease CAS', ka.casMs),
      row('floor, keep-alive: watch (after return)', ka.watchMs),
      row('floor, keep-alive: watch (from send)', ka.watchFromSendMs),
      row('floor, client-node: Lease GET', cn.getMs),
      row('floor, client-node: Lease CAS', cn.casMs),
      row('floor, client-node: watch (after return)', cn.watchMs),
      row('floor, client-node: watch (from send)', cn.watchFromSendMs),
    ];
    const md = s.models;
    const ra = s.ratios;
    out.push(
      '',
      ...textTable(rows, 1),
      `commit → grant p50 ${m.commitToGrantMs.p50.toFixed(1)} ms is:`,
      `  ${ra.commitToGrantOverWatchRoundTripKeepAlive.toFixed(1)}× one watch round trip on kept-alive connections (2 × watch + 1 × CAS = ${md.watchRoundTripKeepAliveMs.toFixed(1)} ms)`,
      `  ${ra.commitToGrantOverWatchRoundTripClientNode.toFixed(1)}× one watch round trip with client-node (2 × watch + 1 × CAS = ${md.watchRoundTripClientNodeMs.toFixed(1)} ms)`,
      `  ${ra.commitToGrantOverControllerPathClientNode.toFixed(1)}× the controller's calls with client-node (2 × watch + 1 × CAS = ${md.controllerPathClientNodeMs.toFixed(1)} ms)`,
      `release → confirmed p50 ${m.releaseToConfirmMs.p50.toFixed(1)} ms is ${ra.releaseToConfirmOverProtocolFloor.toFixed(1)}× the protocol on the bare floor (3 × CAS + 2 × watch = ${md.protocolFloorKeepAliveMs.toFixed(1)} ms)`,
    );
  }
  out.push(
    '',
    'ka = one kept-alive node:https connection; cn = client-node 2.0 (a new TLS connection per call, as the controller makes them).',
  );
  return `${out.join('\n')}\n`;
}

runMain('handoff', main);
