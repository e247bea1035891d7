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
import { createTestNamespace } from '../support/testbed/control-plane.ts';
import { spawnManaged, tailLog, type ManagedProcess } from '../support/testbed/processes.ts';
import { startRedis, type RedisServer } from '../support/testbed/redis.ts';
import { startTcpProxy, type TcpProxy } from '../support/testbed/tcp-proxy.ts';
import { testKube, type TestKube } from '../support/fixtures.ts';
import { LeaseRecorder, StoreRecorder } from './recorders.ts';
import { WorkerPool } from './workers.ts';

const MAIN = resolve(import.meta.dirname, '../../src/cli/main.ts');
const UNSAFE_CONTROLLER = resolve(import.meta.dirname, 'unsafe-controller.ts');

/** libfaketime's preload library on Debian (package faketime). */
export const LIBFAKETIME = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1';

function readLog(file: string | undefined): string {
  try { return file !== undefined ? readFileSync(file, 'utf8') : ''; } catch { return ''; }
}

/** SafetyBedOptions configures startSafetyBed. */
export interface SafetyBedOptions {
  readonly kubeconfigPath: string;
  /** noFloor: run the calibration controller that ignores the etcd high-water mark. */
  readonly noFloor?: boolean;
  /** keepDir: keep the logs folder after close (the runner keeps it when a trial failed). */
  readonly keepDir?: boolean;
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
  /** kubeconfigPath: the admin kubeconfig the bed was started with. */
  readonly kubeconfigPath: string;
  /** suspendController stops the bed's controller (SIGTERM) until resumeController (the controller-split phase runs its own replicas). */
  suspendController(): Promise<void>;
  /** resumeController starts the bed's controller again and waits until its workers run. */
  resumeController(): Promise<void>;
  /** exclusive runs fn while no other global fault runs. */
  exclusive<T>(fn: () => Promise<T>): Promise<T>;
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
  const leases = new LeaseRecorder(kc, t.namespace);
  await leases.start();
  const storeLog = new StoreRecorder(store.url);
  await storeLog.start();
  const pool = new WorkerPool({ dir, kubeconfigPath: o.kubeconfigPath, storePort: store.port });
  const skewed = new Map<string, WorkerPool>();
  const clockFile = (id: string): string => join(dir, `${id}.faketime`);
  const jumpPool = new WorkerPool({
    dir, kubeconfigPath: o.kubeconfigPath, storePort: store.port, name: 'jump',
    env: (id) => {
      writeFileSync(clockFile(id), '+0\n');
      return { LD_PRELOAD: LIBFAKETIME, FAKETIME_TIMESTAMP_FILE: clockFile(id), FAKETIME_CACHE_DURATION: '1', FAKETIME_DONT_FAKE_MONOTONIC: '1' };
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
    const args = o.noFloor === true
      ? [UNSAFE_CONTROLLER, '--kubeconfig', o.kubeconfigPath, '--redis-url', redisUrl, '--namespace', t.namespace]
      : [MAIN, 'controller', '--kubeconfig', o.kubeconfigPath, '--redis-url', redisUrl, '--namespace', t.namespace,
        // One replica: its own leader election would only add a lease wait to every restart.
        '--leader-elect', 'false', '--metrics-bind-address', '127.0.0.1:0', '--health-probe-bind-address', '127.0.0.1:0',
        '--identity', identity, '--log-level', 'info'];
    controller = spawnManaged(identity, process.execPath, { args, logFile });
  };
  startController();

  let chain: Promise<unknown> = Promise.resolve();
  const bed: SafetyBed = {
    dir, t, counterProxy, store, storeClient, leases, storeLog, pool, jumpPool, clockFile,
    get counter() { return counter; },
    replaceCounter(next) {
      retiredCounters.push(counter);
      counter = next;
      counterProxy.retarget(next.port);
    },
    skewedPool(spec) {
      let p = skewed.get(spec);
      if (p === undefined) {
        p = new WorkerPool({ dir, kubeconfigPath: o.kubeconfigPath, storePort: store.port, name: `skewed${skewed.size}`, env: () => ({ LD_PRELOAD: LIBFAKETIME, FAKETIME: spec }) });
        skewed.set(spec, p);
      }
      return p;
    },
    get controllerRestarts() { return generation - 1; },
    async killController() {
      controller?.signal('SIGKILL');
      await controller?.exited;
      startController();
      // Until the new process has synced its caches and started its workers nothing is granted;
      // the next global fault waits for that (its log line; readyz is always true without leader election).
      const started = performance.now();
      while (performance.now() - started < 60_000 && controller?.isRunning() === true && !/Started workers|unsafe controller/.test(readLog(logs.at(-1)))) await sleep(100);
    },
    kubeconfigPath: o.kubeconfigPath,
    async suspendController() { await controller?.stop(); },
    async resumeController() {
      if (controller?.isRunning() === true) return;
      startController();
      const started = performance.now();
      while (performance.now() - started < 60_000 && controller?.isRunning() === true && !/Started workers|unsafe controller/.test(readLog(logs.at(-1)))) await sleep(100);
    },
    exclusive<T>(fn: () => Promise<T>): Promise<T> {
      const run = chain.then(fn, fn);
      chain = run.catch(() => undefined);
      return run;
    },
    controllerLog: () => logs.slice(-2).map((f) => `--- ${f}\n${tailLog(f, 30)}`).join('\n'),
    async close(keepDir = false) {
      await Promise.allSettled([pool.close(), jumpPool.close(), ...[...skewed.values()].map((p) => p.close())]);
      await controller?.stop();
      leases.stop();
      storeLog.stop();
      storeClient.disconnect();
      await counterProxy.close();
      await Promise.allSettled([counter.stop(), store.stop(), ...retiredCounters.map((c) => c.stop())]);
      if (!keepDir && o.keepDir !== true) rmSync(dir, { recursive: true, force: true });
    },
  };
  return bed;
}
