/**
 * The safety testbed on top of a running control plane: a namespace for the run, two real
 * redis-servers (the controller's token counter, behind a TCP proxy so a grant can be cut in
 * half, and the fenced store the workers write to), the lock controller as a real child process
 * (`fencepost controller`, or the calibration build without the etcd floor), the two recorders,
 * and the worker pools. Global faults (controller kill, Redis server faults) take `exclusive`,
 * so that two of them never overlap.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import type { Redis } from 'ioredis';
import { createTestNamespace, type ControlPlane } from '../support/testbed/control-plane.ts';
import { spawnManaged, tailLog, type ManagedProcess } from '../support/testbed/processes.ts';
import { startRedis, type RedisServer } from '../support/testbed/redis.ts';
import { startTcpProxy, type TcpProxy } from '../support/testbed/tcp-proxy.ts';
import {
  kubeconfigVia,
  proxyTargetOf,
  startHttpFaultProxy,
  type HttpFaultProxy,
} from '../support/testbed/http-fault-proxy.ts';
import { testKube, type TestKube } from '../support/fixtures.ts';
import { runOutage, type OutagePlan } from './faults/apiserver.ts';
import { OutageScheduler } from './faults/outage-scheduler.ts';
import { startWitness, type Witness } from './faults/witness.ts';
import { LeaseRecorder, StoreRecorder } from './recorders.ts';
import { WorkerPool } from './workers.ts';

const MAIN = resolve(import.meta.dirname, '../../src/cli/main.ts');
const UNSAFE_CONTROLLER = resolve(import.meta.dirname, 'unsafe-controller.ts');
const PHASE_PROOF_CONTROLLER = resolve(import.meta.dirname, 'phase-proof-controller.ts');
const OVER_GRANTING_CONTROLLER = resolve(import.meta.dirname, 'over-granting-controller.ts');

/** libfaketime's preload library on Debian (package faketime). */
export const LIBFAKETIME = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1';

function readLog(file: string | undefined): string {
  try {
    return file !== undefined ? readFileSync(file, 'utf8') : '';
  } catch {
    return '';
  }
}

/** KillRoundKind: whether a controller kill round holds the token counter's replies. */
export type KillRoundKind = 'hold-counter-replies' | 'plain';

/** KILL_ROUND_GATHER_MS: how long a kill round waits for more trials to join it. */
export const KILL_ROUND_GATHER_MS = 1000;
/** KILL_ROUND_COOLDOWN_MS: the pause after a kill round before the next may begin. */
const KILL_ROUND_COOLDOWN_MS = 3000;
/**
 * KILL_ROUND_HOLD_MAX caps a 'hold-counter-replies' round: the controller runs 4 reconciles at a
 * time (--workers default), and each waits on its held reply, so a 5th token request would never
 * leave before the kill.
 */
const KILL_ROUND_HOLD_MAX = 4;
/** KILL_ROUND_PREPARE_MS bounds the wait for the trials' `prepare` steps before the kill. */
const KILL_ROUND_PREPARE_MS = 10_000;

/** SafetyBedOptions configures startSafetyBed. */
export interface SafetyBedOptions {
  readonly kubeconfigPath: string;
  /** noFloor: run the calibration controller that ignores the etcd high-water mark. */
  readonly noFloor?: boolean;
  /** phaseProof: run the calibration controller that takes a pod's phase Failed as proof its containers stopped. */
  readonly phaseProof?: boolean;
  /** overGrant: run the calibration controller that grants a Semaphore one permit more than spec.permits. */
  readonly overGrant?: boolean;
  /** keepDir: keep the logs folder after close (the runner keeps it when a trial failed). */
  readonly keepDir?: boolean;
  /**
   * plane: the control plane behind kubeconfigPath, when this bed may stop and pause its processes
   * (the `apiserver` fault). Never the shared CI plane. The Lease recorder then watches through a
   * witness API server of its own (faults/witness.ts), so that it sees every version across outages.
   */
  readonly plane?: ControlPlane;
}

/** SafetyBed is everything the trials share. */
export interface SafetyBed {
  readonly dir: string;
  readonly t: TestKube;
  /** counter: the token counter's redis-server now (a failover replaces it: `replaceCounter`). */
  readonly counter: RedisServer;
  readonly counterProxy: TcpProxy;
  /**
   * replaceCounter makes `next` the token counter (a promoted replica) and points the controller's
   * counter proxy at it; the old server is stopped at close (a failover has already killed it).
   */
  replaceCounter(next: RedisServer): void;
  readonly store: RedisServer;
  readonly storeClient: Redis;
  readonly leases: LeaseRecorder;
  readonly storeLog: StoreRecorder;
  readonly pool: WorkerPool;
  /** httpPool: workers that reach the API server through an HTTP fault proxy each (`api-errors`). */
  readonly httpPool: WorkerPool;
  /** controllerApi: the HTTP fault proxy between the controller and the API server (pass-through unless a fault is set; `watch-delay`). */
  readonly controllerApi: HttpFaultProxy;
  /** skewedPool returns (creating once) a pool whose workers run under libfaketime with FAKETIME=spec (rate skew, from start). */
  skewedPool(spec: string): WorkerPool;
  /**
   * jumpPool: workers under libfaketime reading their offset from a file (`clockFile`), starting
   * at +0, so a trial can step one process's wall clock at the moment it chooses. The monotonic
   * clock is left alone, as an NTP step leaves it.
   */
  readonly jumpPool: WorkerPool;
  /** clockFile is the libfaketime offset file of a jumpPool worker. */
  clockFile(workerId: string): string;
  /** controllerRestarts counts SIGKILL + restart cycles. */
  readonly controllerRestarts: number;
  /** killController SIGKILLs the controller process, starts a new one and waits until its workers run. */
  killController(): Promise<void>;
  /**
   * killTogether joins the open kill round of `kind` (or opens one) and resolves after that
   * round's one SIGKILL + restart. A round gathers the trials that reach their kill point within
   * KILL_ROUND_GATHER_MS, then runs each one's `prepare` (its part of the fault: release the lock,
   * wait for its INCR to leave) and kills once every `prepare` is done: a restart costs seconds,
   * and one serves every trial in the round. With 'hold-counter-replies' the counter proxy holds
   * every reply from before the `prepare`s until after the kill, so a grant that has drawn its
   * token never reaches its Lease write (the kill lands between INCR and the Lease update).
   */
  killTogether(kind: KillRoundKind, prepare: () => Promise<void>): Promise<void>;
  /** killRoundSizes: how many trials each kill round served, in order. */
  readonly killRoundSizes: readonly number[];
  /** kubeconfigPath: the admin kubeconfig the bed was started with. */
  readonly kubeconfigPath: string;
  /** suspendController stops the bed's controller (SIGTERM) until resumeController (the controller-split phase runs its own replicas). */
  suspendController(): Promise<void>;
  /** resumeController starts the bed's controller again and waits until its workers run. */
  resumeController(): Promise<void>;
  /** exclusive runs fn while no other global fault runs. */
  exclusive<T>(fn: () => Promise<T>): Promise<T>;
  /** outages: the shared control-plane outages of the `apiserver` fault (only with a plane). */
  readonly outages?: OutageScheduler<OutagePlan>;
  /** controllerLog: the tail of the controller logs (for failure messages). */
  controllerLog(): string;
  close(keepDir?: boolean): Promise<void>;
}

/** startSafetyBed starts Redis servers, the controller, the recorders and a worker pool. */
export async function startSafetyBed(o: SafetyBedOptions): Promise<SafetyBed> {
  const dir = mkdtempSync(join(tmpdir(), 'fencepost-safety-'));
  const kc = new KubeConfig();
  kc.loadFromFile(o.kubeconfigPath);
  const t = testKube(kc, await createTestNamespace(kc, 'safety-'));
  const [firstCounter, store] = await Promise.all([startRedis(), startRedis()]);
  let counter = firstCounter;
  const retiredCounters: RedisServer[] = [];
  const counterProxy = await startTcpProxy({ targetPort: firstCounter.port });
  const storeClient = store.client();
  storeClient.on('error', () => undefined);
  const witness: Witness | undefined = o.plane !== undefined ? await startWitness(o.plane) : undefined;
  const plane = o.plane;
  const leases = new LeaseRecorder(witness?.kubeConfig() ?? kc, t.namespace);
  await leases.start();
  const storeLog = new StoreRecorder(store.url);
  await storeLog.start();
  const pool = new WorkerPool({ dir, kubeconfigPath: o.kubeconfigPath, storePort: store.port });
  const httpPool = new WorkerPool({
    dir,
    kubeconfigPath: o.kubeconfigPath,
    storePort: store.port,
    name: 'http',
    httpFaults: true,
  });
  const controllerApi = await startHttpFaultProxy(proxyTargetOf(o.kubeconfigPath));
  const controllerKubeconfig = join(dir, 'controller.kubeconfig');
  writeFileSync(controllerKubeconfig, kubeconfigVia(o.kubeconfigPath, controllerApi.url), { mode: 0o600 });
  const skewed = new Map<string, WorkerPool>();
  const clockFile = (id: string): string => join(dir, `${id}.faketime`);
  const jumpPool = new WorkerPool({
    dir,
    kubeconfigPath: o.kubeconfigPath,
    storePort: store.port,
    name: 'jump',
    env: (id) => {
      writeFileSync(clockFile(id), '+0\n');
      return {
        LD_PRELOAD: LIBFAKETIME,
        FAKETIME_TIMESTAMP_FILE: clockFile(id),
        FAKETIME_CACHE_DURATION: '1',
        FAKETIME_DONT_FAKE_MONOTONIC: '1',
      };
    },
  });

  let generation = 0;
  let controller: ManagedProcess | undefined;
  const logs: string[] = [];
  const startController = (): void => {
    const identity = `safety-controller-${generation++}`;
    const logFile = join(dir, `${identity}.log`);
    logs.push(logFile);
    const redisUrl = `redis://127.0.0.1:${counterProxy.port}`;
    const args =
      o.noFloor === true || o.phaseProof === true || o.overGrant === true
        ? [
            o.noFloor === true
              ? UNSAFE_CONTROLLER
              : o.phaseProof === true
                ? PHASE_PROOF_CONTROLLER
                : OVER_GRANTING_CONTROLLER,
            '--kubeconfig',
            controllerKubeconfig,
            '--redis-url',
            redisUrl,
            '--namespace',
            t.namespace,
          ]
        : [
            MAIN,
            'controller',
            '--kubeconfig',
            controllerKubeconfig,
            '--redis-url',
            redisUrl,
            '--namespace',
            t.namespace,
            // One replica: its own leader election would only add a lease wait to every restart.
            '--leader-elect',
            'false',
            '--metrics-bind-address',
            '127.0.0.1:0',
            '--health-probe-bind-address',
            '127.0.0.1:0',
            '--identity',
            identity,
            '--log-level',
            'info',
          ];
    controller = spawnManaged(identity, process.execPath, { args, logFile });
  };
  startController();

  /**
   * untilWorkersRun waits (up to 60 s) until the newest controller process has synced its caches
   * and started its workers: until then nothing is granted, so the next global fault waits for it
   * (its log line; readyz is always true without leader election).
   */
  const untilWorkersRun = async (): Promise<void> => {
    const started = performance.now();
    while (
      performance.now() - started < 60_000 &&
      controller?.isRunning() === true &&
      !/Started workers|unsafe controller/.test(readLog(logs.at(-1)))
    )
      await sleep(100);
  };
  let chain: Promise<unknown> = Promise.resolve();
  interface KillRound {
    readonly kind: KillRoundKind;
    readonly prepared: Promise<unknown>[];
    readonly closed: Promise<void>;
    readonly done: Promise<void>;
  }
  const rounds = new Map<KillRoundKind, KillRound>();
  const killRoundSizes: number[] = [];
  const openRound = (kind: KillRoundKind): KillRound => {
    let close = (): void => undefined;
    const closed = new Promise<void>((r) => {
      close = r;
    });
    const prepared: Promise<unknown>[] = [];
    const done = bed.exclusive(async () => {
      await sleep(KILL_ROUND_GATHER_MS);
      rounds.delete(kind); // later arrivals open the next round
      if (kind === 'hold-counter-replies') counterProxy.holdReplies();
      close();
      killRoundSizes.push(prepared.length);
      await Promise.race([Promise.allSettled(prepared), sleep(KILL_ROUND_PREPARE_MS)]);
      try {
        await bed.killController();
      } finally {
        counterProxy.release();
      }
      // Let trials in set-up get their first grant from the new process before the next round:
      // back-to-back kills on a loaded machine otherwise starve every set-up of a grant.
      await sleep(KILL_ROUND_COOLDOWN_MS);
    });
    const round: KillRound = { kind, prepared, closed, done };
    rounds.set(kind, round);
    return round;
  };
  const bed: SafetyBed = {
    dir,
    t,
    counterProxy,
    store,
    storeClient,
    leases,
    storeLog,
    pool,
    httpPool,
    controllerApi,
    jumpPool,
    clockFile,
    ...(plane !== undefined ? { outages: new OutageScheduler<OutagePlan>((p) => runOutage(plane, p)) } : {}),
    get counter() {
      return counter;
    },
    replaceCounter(next) {
      retiredCounters.push(counter);
      counter = next;
      counterProxy.retarget(next.port);
    },
    skewedPool(spec) {
      let p = skewed.get(spec);
      if (p === undefined) {
        p = new WorkerPool({
          dir,
          kubeconfigPath: o.kubeconfigPath,
          storePort: store.port,
          name: `skewed${skewed.size}`,
          env: () => ({ LD_PRELOAD: LIBFAKETIME, FAKETIME: spec }),
        });
        skewed.set(spec, p);
      }
      return p;
    },
    get controllerRestarts() {
      return generation - 1;
    },
    async killController() {
      controller?.signal('SIGKILL');
      await controller?.exited;
      startController();
      await untilWorkersRun();
    },
    killRoundSizes,
    async killTogether(kind, prepare) {
      let round = rounds.get(kind) ?? openRound(kind);
      if (kind === 'hold-counter-replies' && round.prepared.length >= KILL_ROUND_HOLD_MAX) round = openRound(kind);
      const mine = round.closed.then(prepare);
      round.prepared.push(mine);
      await Promise.all([mine, round.done]);
    },
    kubeconfigPath: o.kubeconfigPath,
    async suspendController() {
      await controller?.stop();
    },
    async resumeController() {
      if (controller?.isRunning() === true) return;
      startController();
      await untilWorkersRun();
    },
    exclusive<T>(fn: () => Promise<T>): Promise<T> {
      const run = chain.then(fn, fn);
      chain = run.catch(() => undefined);
      return run;
    },
    controllerLog: () =>
      logs
        .slice(-2)
        .map((f) => `--- ${f}\n${tailLog(f, 30)}`)
        .join('\n'),
    async close(keepDir = false) {
      await Promise.allSettled([
        pool.close(),
        httpPool.close(),
        jumpPool.close(),
        ...[...skewed.values()].map((p) => p.close()),
      ]);
      await controller?.stop();
      leases.stop();
      storeLog.stop();
      storeClient.disconnect();
      await counterProxy.close();
      await controllerApi.close();
      await Promise.allSettled([
        counter.stop(),
        store.stop(),
        witness?.stop(),
        ...retiredCounters.map((c) => c.stop()),
      ]);
      if (!keepDir && o.keepDir !== true) rmSync(dir, { recursive: true, force: true });
    },
  };
  return bed;
}
