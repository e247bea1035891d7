/**
 * handover.ts — `npm run bench:handover [-- --runs N]`: the gap of a planned handover (issue 18
 * item 2), and the proof that it is a clean one.
 *
 * Against the real testbed (etcd + kube-apiserver + redis-server on loopback), with the controller
 * in-process, two Ready pods and one Election lock (Lease fencing, `leaseDurationSeconds: 10`,
 * `spec.handover.drainSeconds: 0`): two applications, each a LockSession (what the agent, exec and
 * acquire() run) and a writer that sends a fenced write through the Redis guard every WRITE_EVERY_MS
 * while its session says it holds the lock, and answers a `draining` notice at once (drained(), what
 * POST …/drained does). N times, the benchmark asks for a handover to the pod that does not hold
 * the lock, as `kubectl fencepost handover` does (the lock's request annotation naming the current
 * token), and waits until the new holder's write is applied. It reports, per handover:
 *   - request → release: the request annotation written → the holder's `HandedOver` release seen
 *     on a watch of the Lease (marking, the agent's drain answer, its release CAS);
 *   - **release → first write**: that release seen → the new holder's first write applied by the
 *     store (its SET in the store's own command log, MONITOR), i.e. grant, watch, confirmation and
 *     the first write;
 *   - old writes after: writes of the old holder the store applied after the new holder's first
 *     (from the command log, in the store's execution order) — must be 0.
 * Every process it starts is stopped by PID at the end, also on failure or Ctrl-C. Writes
 * bench/results/handover.json and prints a table. Run it alone on the machine: the load average is
 * recorded at the start and the end.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { LockSession } from '../src/agent/session.ts';
import { startLockController, type LockController } from '../src/controllers/distributedlock/setup.ts';
import { redisGuard } from '../src/guards/redis-guard.ts';
import { loadKubeConfig } from '../src/kube/kubeconfig.ts';
import { silentLogger } from '../src/observability/logger.ts';
import { realClock } from '../src/runtime/clock.ts';
import { connect } from '../src/transport/connect.ts';
import {
  askHandover,
  createLock,
  createPod,
  getLease,
  lockBody,
  testKube,
  type TestKube,
} from '../test/support/fixtures.ts';
import { parseLease } from '../src/lease/record.ts';
import type { ControlPlane } from '../test/support/testbed/control-plane.ts';
import type { RedisServer } from '../test/support/testbed/redis.ts';
import { storeValue } from '../test/safety/history.ts';
import { LeaseRecorder, StoreRecorder, trialPrefix } from '../test/safety/recorders.ts';
import {
  describeMachine,
  loadAverage,
  machineLine,
  onInterrupt,
  parseRuns,
  runMain,
  startServers,
  summarize,
  textTable,
  writeResult,
  type Stats,
} from './lib.ts';

const USAGE = 'Usage: node bench/handover.ts [--runs N]   (planned handovers to measure, default 50)\n';
/** LOCK: the lock's name; also the store's key prefix (`safety:<lock>:w:<writeId>`, as the safety suite's). */
const LOCK = 'handover';
const PODS = ['ho-0', 'ho-1'] as const;
const LEASE_SECONDS = 10;
/** WRITE_EVERY_MS: each holder's pause between writes. */
const WRITE_EVERY_MS = 2;
/** WARMUP: handovers run first and not counted (connections, JIT). */
const WARMUP = 3;

interface App {
  readonly pod: string;
  readonly id: string;
  readonly session: LockSession;
  stop(): Promise<void>;
}

/** startApp runs one pod's application: its session, a drain answered at once, and a fenced writer. */
async function startApp(
  kubeconfigPath: string,
  namespace: string,
  pod: { name: string; uid: string },
  store: Redis,
): Promise<App> {
  const session = new LockSession({
    api: connect(kubeconfigPath),
    namespace,
    lock: LOCK,
    self: pod,
    clock: realClock,
    log: silentLogger,
  });
  session.onHandover((e) => {
    if (e.type === 'draining') void session.drained().catch(() => undefined);
  });
  await session.start();
  const id = `${pod.name}/${pod.uid}`;
  const guard = redisGuard(store, { fenceKey: () => `${trialPrefix(LOCK)}fence` });
  let running = true;
  let seq = 0;
  const loop = (async () => {
    while (running) {
      const token = session.heldToken();
      if (token !== undefined) {
        const writeId = `${pod.name}.${++seq}`;
        await guard
          .write(`${trialPrefix(LOCK)}w:${writeId}`, token, storeValue(writeId, token, id))
          .catch(() => undefined);
      }
      await sleep(WRITE_EVERY_MS);
    }
  })();
  return {
    pod: pod.name,
    id,
    session,
    stop: async () => {
      running = false;
      await loop;
      await session.stop();
    },
  };
}

/** Sample is one measured handover. */
interface Sample {
  readonly from: string;
  readonly to: string;
  readonly oldToken: string;
  readonly newToken: string;
  readonly requestToReleaseMs: number;
  readonly releaseToFirstWriteMs: number;
  readonly requestToFirstWriteMs: number;
  readonly oldWritesAfter: number;
}

/** until polls f every 5 ms until it returns a value, or throws after ms. */
async function until<T>(what: string, ms: number, f: () => Promise<T | undefined> | T | undefined): Promise<T> {
  const end = performance.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (performance.now() > end) throw new Error(`no ${what} within ${ms} ms`);
    await sleep(5);
  }
}

async function measure(
  t: TestKube,
  apps: readonly App[],
  leases: LeaseRecorder,
  store: StoreRecorder,
): Promise<Sample> {
  const record = parseLease((await getLease(t, LOCK)) ?? {});
  const holder = apps.find((a) => a.pod === record.holder?.name);
  const target = apps.find((a) => a !== holder);
  if (holder === undefined || target === undefined || record.token === undefined)
    throw new Error(`no holder to hand over from (Lease names ${String(record.holder?.name)})`);
  const oldToken = record.token;
  const askedAt = performance.now();
  await askHandover(t, LOCK, target.pod, oldToken, { drainSeconds: 0, by: 'bench/handover.ts' });
  const released = await until('HandedOver release', 30_000, async () =>
    (await leases.versions(LOCK)).find((v) => v.release === 'HandedOver' && v.at >= askedAt && v.token === oldToken),
  );
  const applies = (): ReturnType<StoreRecorder['applies']> => store.applies(LOCK);
  const first = await until('first write of the new holder', 30_000, () => {
    const i = applies().findIndex((a) => a.writer === target.id && a.token > oldToken);
    return i >= 0 ? i : undefined;
  });
  // Let the old holder's writer run on a while: any write it still has in flight lands now.
  await sleep(100);
  const log = applies();
  const firstApply = log[first];
  if (firstApply === undefined) throw new Error('the store log lost an entry');
  const oldWritesAfter = log
    .slice(first + 1)
    .filter((a) => a.writer === holder.id || a.token < firstApply.token).length;
  return {
    from: holder.pod,
    to: target.pod,
    oldToken: oldToken.toString(),
    newToken: firstApply.token.toString(),
    requestToReleaseMs: released.at - askedAt,
    releaseToFirstWriteMs: firstApply.at - released.at,
    requestToFirstWriteMs: firstApply.at - askedAt,
    oldWritesAfter,
  };
}

async function main(): Promise<void> {
  const runs = parseRuns(50, USAGE);
  if (runs === undefined) return;
  const interrupt = onInterrupt();
  const loadAtStart = loadAverage();
  let plane: ControlPlane | undefined;
  let redis: RedisServer | undefined;
  let controller: LockController | undefined;
  const apps: App[] = [];
  const clients: Redis[] = [];
  let leases: LeaseRecorder | undefined;
  let store: StoreRecorder | undefined;
  try {
    process.stderr.write('Starting control plane and redis…\n');
    ({ plane, redis } = await startServers());
    const kc = loadKubeConfig(plane.kubeconfigPath);
    const namespace = await plane.createNamespace('bench-handover-');
    const t = testKube(kc, namespace);
    controller = await startLockController({
      kc,
      redisUrl: undefined,
      namespace,
      identity: 'bench-controller',
      clock: realClock,
      log: silentLogger,
    });
    leases = new LeaseRecorder(kc, namespace);
    await leases.start();
    store = new StoreRecorder(redis.url);
    await store.start();
    for (const name of PODS) {
      const pod = await createPod(t, name, { app: LOCK });
      const client = redis.client();
      clients.push(client);
      apps.push(await startApp(plane.kubeconfigPath, namespace, { name, uid: pod.metadata?.uid ?? '' }, client));
    }
    await createLock(
      t,
      lockBody(LOCK, LOCK, {
        leaseDurationSeconds: LEASE_SECONDS,
        fencing: { backend: 'Lease' },
        handover: { drainSeconds: 0 },
      }),
    );
    await until('first grant', 30_000, async () => parseLease((await getLease(t, LOCK)) ?? {}).holder);
    const samples: Sample[] = [];
    const warmup: Sample[] = [];
    for (let i = 0; i < runs + WARMUP && !interrupt.signal.aborted; i++) {
      const s = await measure(t, apps, leases, store);
      (i < WARMUP ? warmup : samples).push(s);
      process.stderr.write(
        `handover ${i + 1}/${runs + WARMUP}: release → first write ${s.releaseToFirstWriteMs.toFixed(1)} ms${i < WARMUP ? ' (warm-up)' : ''}\n`,
      );
      await sleep(200);
    }
    const loadAtEnd = loadAverage();
    const stats = (f: (s: Sample) => number): Stats => summarize(samples.map(f));
    const result = {
      benchmark: 'handover',
      date: new Date().toISOString(),
      command: `node bench/handover.ts --runs ${runs}`,
      runs: samples.length,
      warmup: WARMUP,
      setup: {
        leaseDurationSeconds: LEASE_SECONDS,
        drainSeconds: 0,
        writeEveryMs: WRITE_EVERY_MS,
        note:
          'Controller, both sessions, writers and recorders in one Node process; the drain is answered at once (drained()). ' +
          'Release: the Lease version with release HandedOver, as a watch (LeaseRecorder) delivered it; first write: the ' +
          "new holder's first SET in redis-server's MONITOR stream (StoreRecorder); both stamped with performance.now() on arrival.",
      },
      machine: describeMachine(),
      load: { start: loadAtStart, end: loadAtEnd },
      requestToReleaseMs: stats((s) => s.requestToReleaseMs),
      releaseToFirstWriteMs: stats((s) => s.releaseToFirstWriteMs),
      requestToFirstWriteMs: stats((s) => s.requestToFirstWriteMs),
      oldWritesAfterNewFirst: samples.reduce((n, s) => n + s.oldWritesAfter, 0),
      storeLogBroken: store.broken,
      samples,
      warmupSamples: warmup,
    };
    const path = writeResult('handover.json', result);
    const row = (name: string, s: Stats): string[] => [
      name,
      s.p50.toFixed(1),
      s.p90.toFixed(1),
      s.p99.toFixed(1),
      s.max.toFixed(1),
    ];
    process.stdout.write(
      [
        `Planned handover, ${samples.length} runs (${WARMUP} warm-up), ${machineLine(result.machine)}, load ${loadAtStart.one} → ${loadAtEnd.one}`,
        ...textTable(
          [
            ['ms', 'p50', 'p90', 'p99', 'max'],
            row('request → release', result.requestToReleaseMs),
            row('release → first write', result.releaseToFirstWriteMs),
            row('request → first write', result.requestToFirstWriteMs),
          ],
          1,
        ),
        `old holder's writes applied after the new holder's first: ${result.oldWritesAfterNewFirst}`,
        `results: ${path}`,
        '',
      ].join('\n'),
    );
    if (result.oldWritesAfterNewFirst > 0 || store.broken) process.exitCode = 1;
  } finally {
    await Promise.allSettled(apps.map((a) => a.stop()));
    for (const c of clients) c.disconnect();
    leases?.stop();
    store?.stop();
    await controller?.stop();
    await redis?.stop();
    await plane?.stop();
    interrupt.dispose();
  }
}

runMain('handover', main);
