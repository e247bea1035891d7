/**
 * scale.ts — `npm run bench:scale [-- --locks 100,1000,10000 --steady S --timeout S]`: one
 * controller replica with many DistributedLocks whose holders keep renewing.
 *
 * For each N, on a fresh control plane (etcd + kube-apiserver + redis-server on loopback):
 *   1. setup (controller not running): N Ready pods and N locks (lock i selects pod i), created by
 *      the benchmark with bounded concurrency;
 *   2. cold start: `fencepost controller` starts (one process, --leader-elect=false, Redis
 *      fencing, 4 workers; the image's process: src/ compiled by tsc, node with the V8 flags of
 *      the Dockerfile's ENTRYPOINT) and the clock runs from its spawn until every lock is granted
 *      (`fencepost_grants_total` on its /metrics reaches N);
 *   3. steady: holders renew — one renewer in the benchmark process, which keeps every lock
 *      Lease's latest version from a watch and CASes its renewTime every renew period (the agents'
 *      write, without N agent processes) — for `--steady` seconds.
 * Every SAMPLE_MS throughout: the controller's RSS and CPU (from /proc), kube-apiserver's and
 * etcd's CPU, the controller's work-queue depth and grants, and kube-apiserver's write rate
 * (apiserver_request_total, POST/PUT/PATCH/DELETE) and total request rate.
 *
 * Locks: leaseDurationSeconds 300, renewPeriodSeconds 60 (N/60 renews per second at steady state),
 * so holders do not expire while the controller is still granting the rest.
 *
 * With `--replicas R` (R > 1) the controller is R processes sharing the locks (`--shards S`,
 * default 4 per replica, the default Lease timings): the grants are summed over the replicas, each
 * replica's grants, shards and RSS are recorded, and after the steady phase one replica is
 * SIGKILLed: the time until every shard it held is held by a survivor (its Leases expire first),
 * and the time until the survivors have granted again 50 of its locks, released at that moment.
 *
 * Writes .results/bench/scale.json (one entry per N) and prints a table. A size that does not
 * finish within --timeout is recorded as such, with how far it got.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { CoordinationV1Api, CoreV1Api, CustomObjectsApi, Watch, type V1Lease } from '@kubernetes/client-node';
import { GROUP, PLURAL, VERSION } from '../src/api/v1alpha1/distributedlock.ts';
import { apiClientFor } from '../src/kube/api-client.ts';
import { typedApi } from '../test/support/typed-api.ts';
import { parseLease, releasedLease, renewedLease } from '../src/lease/record.ts';
import { lockShard } from '../src/controllers/sharding/assign.ts';
import { lockBody } from '../test/support/fixtures.ts';
import { ETCD_VERSION, KUBE_VERSION } from '../test/support/testbed/assets.ts';
import type { ControlPlane } from '../test/support/testbed/control-plane.ts';
import { freePort } from '../test/support/testbed/ports.ts';
import type { RedisServer } from '../test/support/testbed/redis.ts';
import { LineProcess } from './candidates.ts';
import { keepAliveClient, parseMetrics, sumMetric, type KeepAliveClient } from './kube-http.ts';
import {
  describeMachine,
  loadAverage,
  machineLine,
  onInterrupt,
  runMain,
  startServers,
  textTable,
  writeResult,
  type LoadAverage,
} from './lib.ts';
import { LOCK_LABEL } from '../src/protocol/names.ts';

const ROOT = resolve(import.meta.dirname, '..');

/**
 * builtMain compiles src/ as the image's build stage does (`tsc -p tsconfig.build.json`, without
 * declarations or maps) into a scratch directory under .results/, and returns its cli/main.js: the
 * benchmark runs the JavaScript the image runs. Started from the .ts sources, Node would strip their
 * types with its own WebAssembly compiler, about 17 MiB of RSS the image's controller never loads.
 */
function builtMain(): string {
  const out = join(ROOT, '.results/bench/controller-dist');
  rmSync(out, { recursive: true, force: true });
  execFileSync(
    process.execPath,
    [
      join(ROOT, 'node_modules/typescript/bin/tsc'),
      ...['-p', join(ROOT, 'tsconfig.build.json'), '--outDir', out],
      ...['--declaration', 'false', '--sourceMap', 'false', '--inlineSources', 'false'],
    ],
    { cwd: ROOT, stdio: 'inherit' },
  );
  return join(out, 'src/cli/main.js');
}

/**
 * IMAGE_NODE_FLAGS: the V8 flags the image's ENTRYPOINT starts the controller with (the
 * Dockerfile's exec form: node, flags, script). The benchmark starts its controller with them, so
 * that it measures the process users run.
 */
const IMAGE_NODE_FLAGS: readonly string[] = (() => {
  const m = /^ENTRYPOINT\s+(\[.*\])\s*$/m.exec(readFileSync(join(ROOT, 'Dockerfile'), 'utf8'));
  if (m === null) throw new Error('Dockerfile: no exec-form ENTRYPOINT');
  return (JSON.parse(m[1] ?? '[]') as string[]).slice(1).filter((a) => a.startsWith('--'));
})();
const SAMPLE_MS = 2000;
const LEASE_SECONDS = 300;
const RENEW_PERIOD_SECONDS = 60;
const SETUP_CONCURRENCY = 16;
const RENEW_CONCURRENCY = 8;
const CLK_TCK = 100;

const USAGE = `Usage: node bench/scale.ts [--locks LIST] [--steady S] [--timeout S] [--out FILE] [--workers N]

  --locks LIST   lock counts, comma-separated (default 100,1000,10000)
  --steady S     seconds of renewing after all are granted (default 60)
  --timeout S    give up on a size after this many seconds of cold start (default 600)
  --out FILE     results file under .results/bench/ (default scale.json)
  --workers N    the controller's --workers (default 4, its default)
  --node-options OPTS  NODE_OPTIONS for the controller (e.g. --max-old-space-size=192), on top of
                 the V8 flags of the image's ENTRYPOINT, which it always runs with
  --replicas R   controller processes sharing the locks (default 1: one, --leader-elect=false)
  --shards S     their --shards (default 4 × R); with R > 1, one replica is killed after the steady phase
`;

/** KILL_RELEASES: how many of the killed replica's locks are released to time their re-grant by the survivors. */
const KILL_RELEASES = 50;

interface Sample {
  /** t: seconds since the controller was spawned. */
  readonly t: number;
  readonly phase: 'cold' | 'steady';
  readonly granted: number;
  readonly queueDepth: number;
  readonly controllerRssMiB: number;
  /** heapUsedMiB / heapTotalMiB / externalMiB: the controller's V8 heap (its own /metrics), to tell live data from heap not yet collected. */
  readonly heapUsedMiB: number;
  readonly heapTotalMiB: number;
  readonly externalMiB: number;
  /** CPU use over the last interval, in cores (1 = one core fully busy). */
  readonly controllerCpu: number;
  readonly apiserverCpu: number;
  readonly etcdCpu: number;
  readonly apiWritesPerS: number;
  readonly apiRequestsPerS: number;
  readonly renewsPerS: number;
  /** controllerWrites: the controller's own POST/PUT/PATCH/DELETE so far (its rest_client_requests_total). */
  readonly controllerWrites: number;
  /** perReplica: with --replicas above 1, each replica's grants so far and RSS (controllerRssMiB is their sum). */
  readonly perReplica?: readonly { readonly granted: number; readonly rssMiB: number }[];
}

/** ReplicaResult: one replica of a sharded run, when every lock was granted. */
interface ReplicaResult {
  readonly replica: string;
  readonly shards: readonly number[];
  /** locks: the locks of its shards (by the same hash the controller uses). */
  readonly locks: number;
  readonly grants: number;
  readonly peakRssMiB: number;
}

/** KillResult: one replica SIGKILLed after the steady phase of a sharded run. */
interface KillResult {
  readonly replica: string;
  readonly shards: readonly number[];
  readonly locks: number;
  /** shardsHeldAgainSeconds: SIGKILL → every one of its shards' Leases held by a survivor. */
  readonly shardsHeldAgainSeconds: number | undefined;
  /** releasedRegrantedSeconds: release of `released` of its locks (when its shards were held again) → all granted again. */
  readonly releasedRegrantedSeconds: number | undefined;
  readonly released: number;
  /** survivors: each survivor's shards after the move. */
  readonly survivors: readonly { readonly replica: string; readonly shards: readonly number[] }[];
}

interface SizeResult {
  readonly locks: number;
  readonly replicas: number;
  readonly shards: number;
  readonly perReplica?: readonly ReplicaResult[];
  readonly kill?: KillResult;
  readonly completed: boolean;
  readonly note?: string;
  readonly setupSeconds: number;
  /** allGrantedSeconds: controller spawn → every lock granted (undefined if not within the timeout). */
  readonly allGrantedSeconds: number | undefined;
  readonly grantedAtEnd: number;
  readonly grantsPerSecond: number | undefined;
  readonly peakRssMiB: number;
  readonly peakHeapUsedMiB: number;
  readonly steadyRssMiB: number | undefined;
  readonly peakQueueDepth: number;
  readonly coldCpu: { readonly controller: number; readonly apiserver: number; readonly etcd: number };
  readonly steadyCpu: { readonly controller: number; readonly apiserver: number; readonly etcd: number } | undefined;
  readonly coldApiWritesPerS: number;
  readonly steadyApiWritesPerS: number | undefined;
  readonly steadyRenewsPerS: number | undefined;
  readonly renewErrors: number;
  /** writesPerGrant: the controller's own writes from its start until all were granted, per lock. */
  readonly writesPerGrant: number | undefined;
  /** writesPerGrantByResource: kube-apiserver's own write count (apiserver_request_total) per verb and resource from the controller's spawn until all were granted, per lock, the renewer's Lease PUTs taken out. */
  readonly writesPerGrantByResource: Readonly<Record<string, number>>;
  /** steadyControllerWritesPerLockPerMin: the controller's own writes in the steady phase, per held lock per minute. */
  readonly steadyControllerWritesPerLockPerMin: number | undefined;
  /** controllerAtEnd: the controller's own counters when the size ended (reconciles by result, errors, retries, mean reconcile time). */
  readonly controllerAtEnd: Record<string, number>;
  readonly loadAverage: { readonly start: LoadAverage; readonly end: LoadAverage };
  readonly samples: readonly Sample[];
}

const r2 = (n: number): number => Math.round(n * 100) / 100;
const mean = (xs: readonly number[]): number =>
  xs.length === 0 ? Number.NaN : xs.reduce((a, b) => a + b, 0) / xs.length;

/** cpuTicks reads utime + stime of a process (clock ticks). */
function cpuTicks(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]);
}

/** cpuTicksOr0: cpuTicks, or 0 for a process already gone. */
function cpuTicksOr0(pid: number): number {
  try {
    return cpuTicks(pid);
  } catch {
    return 0;
  }
}

/** rssMiBOr0: rssMiB, or 0 for a process already gone. */
function rssMiBOr0(pid: number): number {
  try {
    return rssMiB(pid);
  } catch {
    return 0;
  }
}

function rssMiB(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m?.[1] !== undefined ? r2(Number(m[1]) / 1024) : Number.NaN;
}

/** pool runs fn over items with at most `limit` in flight. */
async function pool<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<void>,
  signal: AbortSignal,
): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      signal.throwIfAborted();
      const item = items[next++] as T;
      await fn(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/** withRetry retries a call on 429/5xx/network errors a few times (the API server is loaded on purpose). */
async function withRetry<T>(fn: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      const code = (err as { code?: number }).code;
      if (attempt >= 5 || code === 409 || code === 404 || code === 422) throw err;
      await sleep(100 * attempt);
    }
  }
}

/**
 * Renewer is the holders' side at scale: a watch keeps every lock Lease's latest version, and a
 * loop CASes the renewTime of each held Lease once per renew period.
 */
class Renewer {
  readonly leases = new Map<string, V1Lease>();
  readonly lastRenew = new Map<string, number>();
  renews = 0;
  errors = 0;
  #abortWatch: AbortController | undefined;
  #stopped = false;
  #loop: Promise<void> | undefined;

  readonly api: CoordinationV1Api;
  readonly watch: Watch;
  readonly namespace: string;

  constructor(api: CoordinationV1Api, watch: Watch, namespace: string) {
    this.api = api;
    this.watch = watch;
    this.namespace = namespace;
  }

  async start(): Promise<void> {
    const list = await this.api.listNamespacedLease({ namespace: this.namespace, labelSelector: LOCK_LABEL });
    for (const l of list.items) this.leases.set(l.metadata?.name ?? '', l);
    await this.#watch(list.metadata?.resourceVersion ?? '');
  }

  async #watch(rv: string): Promise<void> {
    this.#abortWatch = await this.watch.watch(
      `/apis/coordination.k8s.io/v1/namespaces/${this.namespace}/leases`,
      { labelSelector: LOCK_LABEL, resourceVersion: rv, allowWatchBookmarks: true },
      (type: string, l: V1Lease) => {
        const name = l.metadata?.name ?? '';
        if (type === 'DELETED') {
          this.leases.delete(name);
          return;
        }
        const prev = this.leases.get(name);
        if (
          prev === undefined ||
          BigInt(l.metadata?.resourceVersion ?? '0') >= BigInt(prev.metadata?.resourceVersion ?? '0')
        )
          this.leases.set(name, l);
      },
      () => {
        if (!this.#stopped)
          void this.start().catch(() => {
            this.errors++;
          });
      },
    );
  }

  /** run renews every held Lease once per period, spread out, until stop(). */
  run(periodMs: number): void {
    this.#loop = (async () => {
      while (!this.#stopped) {
        const now = performance.now();
        const due = [...this.leases.entries()].filter(
          ([name, l]) => parseLease(l).holder !== undefined && now - (this.lastRenew.get(name) ?? 0) >= periodMs,
        );
        let i = 0;
        const worker = async (): Promise<void> => {
          while (i < due.length && !this.#stopped) {
            const [name, lease] = due[i++] as [string, V1Lease];
            this.lastRenew.set(name, performance.now());
            try {
              const stored = await this.api.replaceNamespacedLease({
                namespace: this.namespace,
                name,
                body: renewedLease(this.leases.get(name) ?? lease, new Date()),
              });
              this.leases.set(name, stored);
              this.renews++;
            } catch {
              this.errors++;
              this.lastRenew.delete(name);
            }
          }
        };
        await Promise.all(Array.from({ length: RENEW_CONCURRENCY }, worker));
        await sleep(200);
      }
    })();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#abortWatch?.abort();
    await this.#loop;
  }
}

async function runSize(
  n: number,
  o: {
    steadyS: number;
    timeoutS: number;
    workers: number;
    nodeOptions: string;
    main: string;
    replicas: number;
    shards: number;
    signal: AbortSignal;
    log: (m: string) => void;
  },
): Promise<SizeResult> {
  const loadStart = loadAverage();
  let plane: ControlPlane | undefined;
  let redis: RedisServer | undefined;
  const controllers: LineProcess[] = [];
  let renewer: Renewer | undefined;
  let raw: KeepAliveClient | undefined;
  const dir = mkdtempSync(join(tmpdir(), 'fencepost-scale-'));
  try {
    ({ plane, redis } = await startServers());
    const kc = plane.kubeConfig();
    const api = apiClientFor(plane.kubeconfigPath); // one pooled connection, not a TLS handshake per call
    const namespace = await plane.createNamespace('scale-');
    const core = typedApi(api, CoreV1Api);
    const custom = typedApi(api, CustomObjectsApi);
    const client = keepAliveClient(kc);
    raw = client;

    // 1: setup.
    const t0 = performance.now();
    const ids = Array.from({ length: n }, (_, i) => i);
    o.log(`N=${n}: creating ${n} Ready pods and ${n} locks…`);
    await pool(
      ids,
      SETUP_CONCURRENCY,
      async (i) => {
        const name = `p-${i}`;
        const pod = await withRetry(() =>
          core.createNamespacedPod({
            namespace,
            body: {
              metadata: { name, labels: { app: `l-${i}` } },
              spec: { containers: [{ name: 'app', image: 'example.invalid/app:1' }] },
            },
          }),
        );
        const now = new Date();
        pod.status = {
          phase: 'Running',
          conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: now }],
          containerStatuses: [
            {
              name: 'app',
              image: 'example.invalid/app:1',
              imageID: '',
              ready: true,
              restartCount: 0,
              state: { running: { startedAt: now } },
            },
          ],
        };
        await withRetry(() => core.replaceNamespacedPodStatus({ name, namespace, body: pod }));
        await withRetry(() =>
          custom.createNamespacedCustomObject({
            group: GROUP,
            version: VERSION,
            namespace,
            plural: PLURAL,
            body: lockBody(`l-${i}`, `l-${i}`, {
              leaseDurationSeconds: LEASE_SECONDS,
              renewPeriodSeconds: RENEW_PERIOD_SECONDS,
            }),
          }),
        );
      },
      o.signal,
    );
    const setupSeconds = r2((performance.now() - t0) / 1000);
    o.log(`N=${n}: setup took ${setupSeconds} s; starting the controller`);

    // 2: cold start.
    const metricsPort = await freePort();
    renewer = new Renewer(typedApi(api, CoordinationV1Api), new Watch(kc), namespace);
    await renewer.start();
    const spawnAt = performance.now();
    const sharded = o.replicas > 1;
    const metricsPorts: number[] = [metricsPort];
    for (let i = 1; i < o.replicas; i++) metricsPorts.push(await freePort());
    for (const [i, port] of metricsPorts.entries())
      controllers.push(
        new LineProcess(
          sharded ? `replica-${i}` : 'controller',
          process.execPath,
          [
            ...IMAGE_NODE_FLAGS,
            o.main,
            'controller',
            '--kubeconfig',
            plane.kubeconfigPath,
            '--redis-url',
            redis.url,
            ...(sharded
              ? ['--shards', String(o.shards), '--identity', `replica-${i}`, '--leader-election-namespace', namespace]
              : ['--leader-elect', 'false']),
            '--namespace',
            namespace,
            '--metrics-secure=false', // plain HTTP: the bench reads the controller's metrics, not its TLS
            '--metrics-bind-address',
            `127.0.0.1:${port}`,
            '--health-probe-bind-address',
            '0',
            '--log-level',
            sharded ? 'info' : 'error', // sharded: the shard moves are in the logs
            '--cache-sync-timeout',
            '10m',
            '--workers',
            String(o.workers),
          ],
          o.nodeOptions !== '' ? { ...process.env, NODE_OPTIONS: o.nodeOptions } : process.env,
          join(dir, sharded ? `replica-${i}.log` : 'controller.log'),
        ),
      );
    // CPU and RSS over the replicas alive (a killed one counts no more).
    const controllerTicks = (): number => controllers.reduce((a, c) => a + (c.isRunning() ? cpuTicksOr0(c.pid) : 0), 0);
    const apiPid = plane.apiServer.process().pid;
    const etcdPid = plane.etcd.process().pid;
    renewer.run(RENEW_PERIOD_SECONDS * 1000);

    const samples: Sample[] = [];
    let last = {
      at: performance.now(),
      c: controllerTicks(),
      a: cpuTicks(apiPid),
      e: cpuTicks(etcdPid),
      writes: 0,
      requests: 0,
      renews: 0,
    };
    const apiCounts = async (): Promise<{ writes: number; requests: number }> => {
      const m = parseMetrics(await client.text('/metrics'));
      let writes = 0;
      for (const verb of ['POST', 'PUT', 'PATCH', 'DELETE'])
        writes += sumMetric(m, 'apiserver_request_total', { verb });
      return { writes, requests: sumMetric(m, 'apiserver_request_total') };
    };
    ({ writes: last.writes, requests: last.requests } = await apiCounts());
    // The API server's own count of writes by resource and verb, at the controller's spawn and when
    // all are granted: the renewer writes Leases with PUT too, so the per-grant breakdown subtracts
    // its renews (counted by the benchmark) from the Lease PUTs.
    const writesByResource = async (): Promise<Record<string, number>> => {
      const m = parseMetrics(await client.text('/metrics'));
      const out: Record<string, number> = {};
      for (const x of m) {
        if (x.name !== 'apiserver_request_total') continue;
        const verb = x.labels['verb'] ?? '';
        if (!['POST', 'PUT', 'PATCH', 'DELETE', 'CREATE', 'UPDATE', 'APPLY'].includes(verb)) continue;
        const sub = x.labels['subresource'] ?? '';
        const k = `${verb} ${x.labels['resource'] ?? ''}${sub !== '' ? `/${sub}` : ''}`;
        out[k] = (out[k] ?? 0) + x.value;
      }
      return out;
    };
    const writesAtSpawn = await writesByResource();
    const renewsAtSpawn = renewer.renews + renewer.errors;
    const replicaMetrics = async (
      port: number,
    ): Promise<{
      granted: number;
      depth: number;
      heapUsed: number;
      heapTotal: number;
      external: number;
      writes: number;
    }> => {
      try {
        const text = await (
          await fetch(`http://127.0.0.1:${port}/metrics`, { signal: AbortSignal.timeout(5000) })
        ).text();
        const m = parseMetrics(text);
        const mib = (name: string): number => r2(sumMetric(m, name) / 2 ** 20);
        return {
          granted: sumMetric(m, 'fencepost_grants_total'),
          depth: sumMetric(m, 'workqueue_depth'),
          heapUsed: mib('nodejs_heap_size_used_bytes'),
          heapTotal: mib('nodejs_heap_size_total_bytes'),
          external: mib('nodejs_external_memory_bytes'),
          writes: ['POST', 'PUT', 'PATCH', 'DELETE'].reduce(
            (sum, method) => sum + sumMetric(m, 'rest_client_requests_total', { method }),
            0,
          ),
        };
      } catch {
        return {
          granted: Number.NaN,
          depth: Number.NaN,
          heapUsed: Number.NaN,
          heapTotal: Number.NaN,
          external: Number.NaN,
          writes: Number.NaN,
        };
      }
    };
    // The replicas' metrics summed (one replica: its own); a killed replica's last figures are kept.
    const lastByReplica = new Map<number, Awaited<ReturnType<typeof replicaMetrics>>>();
    const controllerMetrics = async (): Promise<Awaited<ReturnType<typeof replicaMetrics>>> => {
      const each = await Promise.all(
        metricsPorts.map(async (port, i) => {
          const c = controllers[i];
          const m = c?.isRunning() === true ? await replicaMetrics(port) : lastByReplica.get(i);
          if (m !== undefined && !Number.isNaN(m.granted)) lastByReplica.set(i, m);
          return m ?? lastByReplica.get(i);
        }),
      );
      const sum = (k: keyof Awaited<ReturnType<typeof replicaMetrics>>): number =>
        each.reduce((a, m) => a + (m?.[k] ?? Number.NaN), 0);
      return {
        granted: sum('granted'),
        depth: sum('depth'),
        heapUsed: sum('heapUsed'),
        heapTotal: sum('heapTotal'),
        external: sum('external'),
        writes: sum('writes'),
      };
    };
    const sample = async (phase: Sample['phase']): Promise<Sample> => {
      const [api, cm] = await Promise.all([apiCounts(), controllerMetrics()]);
      const rss = controllers.map((c) => (c.isRunning() ? rssMiBOr0(c.pid) : 0));
      const now = {
        at: performance.now(),
        c: controllerTicks(),
        a: cpuTicks(apiPid),
        e: cpuTicks(etcdPid),
        ...api,
        renews: renewer?.renews ?? 0,
      };
      const dt = (now.at - last.at) / 1000;
      const s: Sample = {
        t: r2((now.at - spawnAt) / 1000),
        phase,
        granted: cm.granted,
        queueDepth: cm.depth,
        controllerRssMiB: r2(rss.reduce((a, b) => a + b, 0)),
        heapUsedMiB: cm.heapUsed,
        heapTotalMiB: cm.heapTotal,
        externalMiB: cm.external,
        controllerCpu: r2((now.c - last.c) / CLK_TCK / dt),
        apiserverCpu: r2((now.a - last.a) / CLK_TCK / dt),
        etcdCpu: r2((now.e - last.e) / CLK_TCK / dt),
        apiWritesPerS: r2((now.writes - last.writes) / dt),
        apiRequestsPerS: r2((now.requests - last.requests) / dt),
        renewsPerS: r2((now.renews - last.renews) / dt),
        controllerWrites: cm.writes,
        ...(sharded
          ? {
              perReplica: controllers.map((_, i) => ({
                granted: lastByReplica.get(i)?.granted ?? 0,
                rssMiB: rss[i] ?? 0,
              })),
            }
          : {}),
      };
      last = now;
      return s;
    };

    let allGrantedSeconds: number | undefined;
    const writesPerGrantByResource: Record<string, number> = {};
    const deadline = spawnAt + o.timeoutS * 1000;
    while (performance.now() < deadline) {
      await sleep(SAMPLE_MS, undefined, { signal: o.signal });
      for (const c of controllers) if (!c.isRunning()) throw new Error(`${c.name} exited; see ${c.logFile}`);
      const s = await sample('cold');
      samples.push(s);
      if (samples.length % 5 === 0)
        o.log(
          `N=${n}: t=${s.t.toFixed(0)} s granted ${s.granted}, queue ${s.queueDepth}, RSS ${s.controllerRssMiB.toFixed(0)} MiB (heap ${s.heapUsedMiB.toFixed(0)}/${s.heapTotalMiB.toFixed(0)}), CPU ${s.controllerCpu}, writes ${s.apiWritesPerS}/s`,
        );
      if (s.granted >= n) {
        allGrantedSeconds = s.t;
        const atEnd = await writesByResource();
        const renews = renewer.renews + renewer.errors - renewsAtSpawn;
        for (const [k, v] of Object.entries(atEnd)) {
          const d = v - (writesAtSpawn[k] ?? 0) - (k === 'PUT leases' ? renews : 0);
          if (d > 0) writesPerGrantByResource[k] = r2(d / n);
        }
        break;
      }
    }
    const completed = allGrantedSeconds !== undefined;
    o.log(
      completed
        ? `N=${n}: all granted after ${allGrantedSeconds?.toFixed(1)} s; steady for ${o.steadyS} s`
        : `N=${n}: not all granted within ${o.timeoutS} s`,
    );
    if (completed) {
      const steadyEnd = performance.now() + o.steadyS * 1000;
      while (performance.now() < steadyEnd) {
        await sleep(SAMPLE_MS, undefined, { signal: o.signal });
        samples.push(await sample('steady'));
      }
    }
    // Sharded: each replica's shards and grants, then one replica killed and its shards timed.
    let perReplica: ReplicaResult[] | undefined;
    let kill: KillResult | undefined;
    if (sharded && completed) {
      const leaseApi = typedApi(api, CoordinationV1Api);
      const shardHolders = async (): Promise<string[]> =>
        Promise.all(
          Array.from({ length: o.shards }, async (_, s) => {
            try {
              return (
                (await leaseApi.readNamespacedLease({ namespace, name: `fencepost-controller-shard-${s}` })).spec
                  ?.holderIdentity ?? ''
              );
            } catch {
              return '';
            }
          }),
        );
      const shardsOf = (holders: readonly string[], i: number): number[] =>
        holders.flatMap((h, s) => (h.startsWith(`replica-${i}_`) ? [s] : []));
      const lockCount = (shards: readonly number[]): number =>
        ids.filter((i) => shards.includes(lockShard(`${namespace}/l-${i}`, o.shards))).length;
      const before = await shardHolders();
      perReplica = controllers.map((c, i) => ({
        replica: c.name,
        shards: shardsOf(before, i),
        locks: lockCount(shardsOf(before, i)),
        grants: lastByReplica.get(i)?.granted ?? 0,
        peakRssMiB: Math.max(...samples.map((x) => x.perReplica?.[i]?.rssMiB ?? 0)),
      }));
      const victim = 0;
      const victimShards = shardsOf(before, victim);
      const victimLocks = ids.filter((i) => victimShards.includes(lockShard(`${namespace}/l-${i}`, o.shards)));
      o.log(`N=${n}: SIGKILL replica-${victim} (shards ${victimShards.join(',')}, ${victimLocks.length} locks)`);
      const killedAt = controllers[victim]?.signal('SIGKILL') ?? performance.now();
      let shardsHeldAgainSeconds: number | undefined;
      let after: string[] = before;
      const moveDeadline = killedAt + 180_000;
      while (performance.now() < moveDeadline) {
        await sleep(250, undefined, { signal: o.signal });
        after = await shardHolders();
        if (victimShards.every((s) => /^replica-[1-9]\d*_/.test(after[s] ?? ''))) {
          shardsHeldAgainSeconds = r2((performance.now() - killedAt) / 1000);
          break;
        }
      }
      o.log(
        `N=${n}: its shards held again after ${shardsHeldAgainSeconds ?? '—'} s; releasing ${KILL_RELEASES} of its locks`,
      );
      let releasedRegrantedSeconds: number | undefined;
      const chosen = victimLocks.slice(0, KILL_RELEASES);
      if (shardsHeldAgainSeconds !== undefined && chosen.length > 0) {
        const tokens = new Map<string, bigint>();
        const releasedAt = performance.now();
        await pool(
          chosen,
          RENEW_CONCURRENCY,
          async (i) => {
            const name = `dlock-l-${i}`;
            for (let attempt = 0; attempt < 5; attempt++) {
              const lease = await leaseApi.readNamespacedLease({ namespace, name });
              tokens.set(name, parseLease(lease).token ?? 0n);
              try {
                await leaseApi.replaceNamespacedLease({ namespace, name, body: releasedLease(lease, 'Released') });
                return;
              } catch (err) {
                if ((err as { code?: number }).code !== 409) throw err;
              }
            }
          },
          o.signal,
        );
        const regrantDeadline = releasedAt + 180_000;
        while (performance.now() < regrantDeadline) {
          await sleep(250, undefined, { signal: o.signal });
          const again = await Promise.all(
            chosen.map(async (i) => {
              const name = `dlock-l-${i}`;
              const r = parseLease(await leaseApi.readNamespacedLease({ namespace, name }));
              return r.holder !== undefined && (r.token ?? 0n) > (tokens.get(name) ?? 0n);
            }),
          );
          if (again.every(Boolean)) {
            releasedRegrantedSeconds = r2((performance.now() - releasedAt) / 1000);
            break;
          }
        }
      }
      kill = {
        replica: `replica-${victim}`,
        shards: victimShards,
        locks: victimLocks.length,
        shardsHeldAgainSeconds,
        releasedRegrantedSeconds,
        released: chosen.length,
        survivors: controllers.flatMap((c, i) =>
          i === victim ? [] : [{ replica: c.name, shards: shardsOf(after, i) }],
        ),
      };
      o.log(`N=${n}: released locks granted again after ${releasedRegrantedSeconds ?? '—'} s`);
    }
    const controllerAtEnd: Record<string, number> = {};
    try {
      const m = parseMetrics(
        await (
          await fetch(`http://127.0.0.1:${metricsPorts.at(-1) ?? metricsPort}/metrics`, {
            signal: AbortSignal.timeout(5000),
          })
        ).text(),
      );
      for (const result of ['success', 'error', 'requeue', 'requeue_after'])
        controllerAtEnd[`reconcile_total{result=${result}}`] = sumMetric(m, 'controller_runtime_reconcile_total', {
          result,
        });
      for (const e of m.filter((x) => x.name === 'fencepost_reconcile_errors_total'))
        controllerAtEnd[`reconcile_errors_total{error_kind=${e.labels['error_kind'] ?? ''}}`] = e.value;
      controllerAtEnd['workqueue_adds_total'] = sumMetric(m, 'workqueue_adds_total');
      controllerAtEnd['workqueue_retries_total'] = sumMetric(m, 'workqueue_retries_total');
      controllerAtEnd['grants_total'] = sumMetric(m, 'fencepost_grants_total');
      for (const method of ['GET', 'LIST', 'WATCH', 'POST', 'PUT', 'PATCH', 'DELETE'])
        controllerAtEnd[`rest_client_requests_total{method=${method}}`] = sumMetric(m, 'rest_client_requests_total', {
          method,
        });
      const count = sumMetric(m, 'controller_runtime_reconcile_time_seconds_count');
      controllerAtEnd['reconcile_time_mean_ms'] =
        count > 0 ? r2((sumMetric(m, 'controller_runtime_reconcile_time_seconds_sum') / count) * 1000) : Number.NaN;
      const qCount = sumMetric(m, 'workqueue_queue_duration_seconds_count');
      controllerAtEnd['queue_wait_mean_ms'] =
        qCount > 0 ? r2((sumMetric(m, 'workqueue_queue_duration_seconds_sum') / qCount) * 1000) : Number.NaN;
    } catch {
      /* the controller is gone; recorded as empty */
    }
    const cold = samples.filter((s) => s.phase === 'cold');
    const steady = samples.filter((s) => s.phase === 'steady').slice(1); // the first steady interval still holds the last grants
    const lastGranted = samples.at(-1)?.granted ?? 0;
    const allGrantedAt = cold.at(-1);
    const steadyMinutes = steady.length > 0 ? ((steady.at(-1)?.t ?? 0) - (steady[0]?.t ?? 0)) / 60 : 0;
    return {
      locks: n,
      replicas: o.replicas,
      shards: sharded ? o.shards : 1,
      ...(perReplica !== undefined ? { perReplica } : {}),
      ...(kill !== undefined ? { kill } : {}),
      completed,
      setupSeconds,
      allGrantedSeconds,
      ...(completed ? {} : { note: `cold start stopped after ${o.timeoutS} s with ${lastGranted} of ${n} granted` }),
      grantedAtEnd: lastGranted,
      grantsPerSecond: allGrantedSeconds !== undefined ? r2(n / allGrantedSeconds) : undefined,
      peakRssMiB: Math.max(...samples.map((s) => s.controllerRssMiB)),
      peakHeapUsedMiB: Math.max(...samples.map((s) => (Number.isNaN(s.heapUsedMiB) ? 0 : s.heapUsedMiB))),
      steadyRssMiB: steady.length > 0 ? r2(mean(steady.map((s) => s.controllerRssMiB))) : undefined,
      peakQueueDepth: Math.max(...samples.map((s) => (Number.isNaN(s.queueDepth) ? 0 : s.queueDepth))),
      coldCpu: {
        controller: r2(mean(cold.map((s) => s.controllerCpu))),
        apiserver: r2(mean(cold.map((s) => s.apiserverCpu))),
        etcd: r2(mean(cold.map((s) => s.etcdCpu))),
      },
      steadyCpu:
        steady.length > 0
          ? {
              controller: r2(mean(steady.map((s) => s.controllerCpu))),
              apiserver: r2(mean(steady.map((s) => s.apiserverCpu))),
              etcd: r2(mean(steady.map((s) => s.etcdCpu))),
            }
          : undefined,
      coldApiWritesPerS: r2(mean(cold.map((s) => s.apiWritesPerS))),
      steadyApiWritesPerS: steady.length > 0 ? r2(mean(steady.map((s) => s.apiWritesPerS))) : undefined,
      steadyRenewsPerS: steady.length > 0 ? r2(mean(steady.map((s) => s.renewsPerS))) : undefined,
      renewErrors: renewer.errors,
      writesPerGrant: completed && allGrantedAt !== undefined ? r2(allGrantedAt.controllerWrites / n) : undefined,
      writesPerGrantByResource,
      steadyControllerWritesPerLockPerMin:
        steady.length > 1 && steadyMinutes > 0
          ? r2(((steady.at(-1)?.controllerWrites ?? 0) - (steady[0]?.controllerWrites ?? 0)) / n / steadyMinutes)
          : undefined,
      controllerAtEnd,
      loadAverage: { start: loadStart, end: loadAverage() },
      samples,
    };
  } finally {
    await renewer?.stop();
    raw?.close();
    await Promise.allSettled(controllers.map((c) => c.stop(10_000)));
    await Promise.allSettled([plane?.stop(), redis?.stop()]);
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      locks: { type: 'string', default: '100,1000,10000' },
      steady: { type: 'string', default: '60' },
      timeout: { type: 'string', default: '600' },
      out: { type: 'string', default: 'scale.json' },
      'node-options': { type: 'string', default: '' },
      workers: { type: 'string', default: '4' },
      replicas: { type: 'string', default: '1' },
      shards: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help === true) {
    process.stdout.write(USAGE);
    return;
  }
  const sizes = values.locks.split(',').map(Number);
  if (sizes.some((x) => !Number.isInteger(x) || x < 1))
    throw new Error(`--locks: positive integers, got ${JSON.stringify(values.locks)}`);
  const steadyS = Number(values.steady);
  const timeoutS = Number(values.timeout);
  const workers = Number(values.workers);
  const replicas = Number(values.replicas);
  if (!Number.isInteger(replicas) || replicas < 1)
    throw new Error(`--replicas: a positive integer, got ${JSON.stringify(values.replicas)}`);
  const shards = values.shards !== undefined ? Number(values.shards) : 4 * replicas;
  if (!Number.isInteger(shards) || shards < replicas)
    throw new Error(`--shards: an integer of at least --replicas, got ${JSON.stringify(values.shards)}`);
  const log = (msg: string): void => {
    process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${msg}\n`);
  };
  const main = builtMain();
  const interrupt = onInterrupt();
  try {
    const results: SizeResult[] = [];
    for (const n of sizes)
      results.push(
        await runSize(n, {
          steadyS,
          timeoutS,
          workers,
          nodeOptions: values['node-options'],
          main,
          replicas,
          shards,
          signal: interrupt.signal,
          log,
        }),
      );
    const result = {
      benchmark: 'scale',
      date: new Date().toISOString(),
      command: `node bench/scale.ts ${process.argv.slice(2).join(' ')}`.trimEnd(),
      settings: {
        leaseDurationSeconds: LEASE_SECONDS,
        renewPeriodSeconds: RENEW_PERIOD_SECONDS,
        sampleMs: SAMPLE_MS,
        setupConcurrency: SETUP_CONCURRENCY,
        renewConcurrency: RENEW_CONCURRENCY,
        steadySeconds: steadyS,
        timeoutSeconds: timeoutS,
        controller:
          replicas > 1
            ? `fencepost controller, ${replicas} replicas, --shards ${shards} (default Lease timings: 15 s / 10 s / 2 s), Redis fencing, --workers ${workers} each`
            : `fencepost controller, 1 replica, --leader-elect=false, Redis fencing, --workers ${workers}, node ${IMAGE_NODE_FLAGS.join(' ')} (the image's) running src/ compiled by tsc (as the image's build does)`,
        replicas,
        shards: replicas > 1 ? shards : 1,
        workers,
        nodeFlags: IMAGE_NODE_FLAGS,
        nodeOptions: values['node-options'],
        note:
          'one fresh control plane per size; pods and locks created before the controller starts; allGrantedSeconds from controller spawn to fencepost_grants_total = N; ' +
          'CPU in cores (1.0 = one core busy) averaged over the phase; the renewer (holders) runs in the benchmark process from controller spawn on; ' +
          'apiWritesPerS = POST/PUT/PATCH/DELETE in apiserver_request_total',
      },
      machine: describeMachine(),
      versions: { node: process.version, kube: KUBE_VERSION, etcd: ETCD_VERSION },
      sizes: results,
    };
    const out = writeResult(values.out, result);
    process.stdout.write(table(results, result.machine));
    process.stdout.write(`\nWrote ${relative(process.cwd(), out) || out}\n`);
  } finally {
    interrupt.dispose();
  }
}

function table(rs: readonly SizeResult[], machine: { cpu: string; cores: number; totalMemoryBytes: number }): string {
  const f = (v: number | undefined, d = 1): string => (v === undefined || Number.isNaN(v) ? '—' : v.toFixed(d));
  const rows = [
    [
      'locks',
      'all granted',
      'grants/s',
      'peak RSS',
      'steady RSS',
      'peak queue',
      'cold CPU ctl/api/etcd',
      'steady CPU ctl/api/etcd',
      'writes/s cold',
      'writes/s steady',
      'ctl writes/grant',
      'ctl writes/lock/min steady',
    ],
  ];
  for (const r of rs) {
    rows.push([
      String(r.locks),
      r.completed ? `${f(r.allGrantedSeconds)} s` : `no (${r.grantedAtEnd})`,
      f(r.grantsPerSecond),
      `${f(r.peakRssMiB, 0)} MiB`,
      `${f(r.steadyRssMiB, 0)} MiB`,
      String(r.peakQueueDepth),
      `${f(r.coldCpu.controller, 2)}/${f(r.coldCpu.apiserver, 2)}/${f(r.coldCpu.etcd, 2)}`,
      r.steadyCpu !== undefined
        ? `${f(r.steadyCpu.controller, 2)}/${f(r.steadyCpu.apiserver, 2)}/${f(r.steadyCpu.etcd, 2)}`
        : '—',
      f(r.coldApiWritesPerS),
      f(r.steadyApiWritesPerS),
      f(r.writesPerGrant, 2),
      f(r.steadyControllerWritesPerLockPerMin, 3),
    ]);
  }
  const sharded: string[] = [];
  for (const r of rs) {
    for (const p of r.perReplica ?? [])
      sharded.push(
        `N=${r.locks}: ${p.replica} shards ${p.shards.join(',')} (${p.locks} locks), granted ${p.grants}, peak RSS ${f(p.peakRssMiB, 0)} MiB`,
      );
    if (r.kill !== undefined)
      sharded.push(
        `N=${r.locks}: SIGKILL ${r.kill.replica} (shards ${r.kill.shards.join(',')}, ${r.kill.locks} locks): shards held again after ${f(r.kill.shardsHeldAgainSeconds)} s; ` +
          `${r.kill.released} of its locks released then, granted again after ${f(r.kill.releasedRegrantedSeconds)} s; ` +
          r.kill.survivors.map((x) => `${x.replica} now ${x.shards.join(',')}`).join('; '),
      );
  }
  const title =
    rs[0] !== undefined && rs[0].replicas > 1
      ? `fencepost scale: ${rs[0].replicas} controller replicas sharing the locks (--shards ${rs[0].shards}), holders renewing`
      : 'fencepost scale: one controller replica, holders renewing';
  return `${[title, machineLine(machine), '', ...textTable(rows, 0, false), ...(sharded.length > 0 ? ['', ...sharded] : [])].join('\n')}\n`;
}

runMain('scale', main);
