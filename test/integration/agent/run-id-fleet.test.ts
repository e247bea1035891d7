/**
 * `--run-id` "exactly once" with no fault but a slow pod watch (a gate that looked only before its
 * grant let a second pod run an id the first had just completed). A fleet of
 * three pods, each a real process (test/support/run-id-worker.ts), goes through the same run ids
 * in order with `acquire(lock, { runId })` — the gate of `fencepost exec --run-id` — against a
 * real controller whose pod watch events reach it late (an HTTP fault proxy between the
 * controller and the API server delays every pod watch event U[0, POD_WATCH_DELAY_MS]; Leases
 * and locks are not delayed). Every run is a line in one shared append-only log; each run id must
 * have run exactly once.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NotRunHolderError } from '../../../src/agent/run-completions.ts';
import { LockSession } from '../../../src/agent/session.ts';
import { connect } from '../../../src/transport/connect.ts';
import { acquire } from '../../../src/index.ts';
import { completedLease, parseLease } from '../../../src/lease/record.ts';
import { leaseName } from '../../../src/protocol/names.ts';
import { startLockController, type LockController } from '../../../src/controllers/distributedlock/setup.ts';
import { silentLogger } from '../../../src/observability/logger.ts';
import { realClock } from '../../../src/runtime/clock.ts';
import {
  eventually,
  freshNamespace,
  sharedKubeConfig,
  sharedKubeconfigPath,
  sharedRedisUrl,
} from '../../support/env.ts';
import { createLock, createPod, getLease, getLock, lockBody, testKube, type TestKube } from '../../support/fixtures.ts';
import type { RunIdWorkerArgs } from '../../support/run-id-worker.ts';
import {
  kubeconfigVia,
  proxyTargetOf,
  startHttpFaultProxy,
  type HttpFaultProxy,
} from '../../support/testbed/http-fault-proxy.ts';
import { spawnManaged, type ManagedProcess } from '../../support/testbed/processes.ts';
import { tierSize } from '../../support/tier.ts';

const WORKER = resolve(import.meta.dirname, '../../support/run-id-worker.ts');
// Before the fix 130 of 200 run ids ran twice, so CI's 40 would catch it about 26 times over; the long
// tier (`hack/npm run test:long`) runs 120.
const RUN_IDS = tierSize('RUN_ID_FLEET_RUN_IDS', 40, 120);
const PODS = 3;
const POD_WATCH_DELAY_MS = 600;

/** runsPerId counts the `ran` lines of the log per run id. */
function runsPerId(log: string): Map<string, string[]> {
  const runs = new Map<string, string[]>();
  for (const l of log.split('\n')) {
    const [kind, runId, pod, token] = l.split(' ');
    if (kind !== 'ran' || runId === undefined) continue;
    runs.set(runId, [...(runs.get(runId) ?? []), `${pod ?? '?'}@${token ?? '?'}`]);
  }
  return runs;
}

describe('a run-id fleet under a delayed pod watch', () => {
  const adminKc = sharedKubeConfig();
  let t: TestKube;
  let proxy: HttpFaultProxy;
  let controller: LockController | undefined;
  let dir: string;
  const workers: ManagedProcess[] = [];

  beforeAll(async () => {
    t = testKube(adminKc, await freshNamespace(adminKc, 'runid-fleet-'));
    dir = mkdtempSync(join(tmpdir(), 'fencepost-runid-'));
    proxy = await startHttpFaultProxy(proxyTargetOf(sharedKubeconfigPath()));
    const kc = new KubeConfig();
    kc.loadFromString(kubeconfigVia(sharedKubeconfigPath(), proxy.url));
    controller = await startLockController({
      kc,
      redisUrl: sharedRedisUrl(),
      namespace: t.namespace,
      identity: 'runid-fleet-controller',
      clock: realClock,
      log: silentLogger,
    });
  });
  afterAll(async () => {
    for (const w of workers) await w.stop(2000);
    await controller?.stop();
    await proxy.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it(`${RUN_IDS} run ids through a 3-pod fleet with a delayed pod watch — each runs exactly once`, async () => {
    const pods = [];
    for (let i = 0; i < PODS; i++) {
      const p = await createPod(t, `fleet-${i}`, { app: 'fleet' });
      pods.push({ name: p.metadata?.name ?? '', uid: p.metadata?.uid ?? '' });
    }
    await createLock(t, lockBody('fleet', 'fleet', { mode: 'Mutex', leaseDurationSeconds: 10 }));
    proxy.watchDelay(
      () => Math.random() * POD_WATCH_DELAY_MS,
      (r) => r.path.endsWith('/pods'),
    );
    const log = join(dir, 'runs.log');
    writeFileSync(log, '');
    const runIds = Array.from({ length: RUN_IDS }, (_, i) => `slot-${String(i).padStart(3, '0')}`);
    const started = performance.now();
    for (const p of pods) {
      const args: RunIdWorkerArgs = {
        kubeconfig: sharedKubeconfigPath(),
        namespace: t.namespace,
        lock: 'fleet',
        pod: p,
        runIds,
        log,
        runMs: [10, 60],
        waitMs: 30_000,
        attempts: 3,
      };
      workers.push(
        spawnManaged(`runid-${p.name}`, process.execPath, {
          args: [WORKER, JSON.stringify(args)],
          logFile: join(dir, `${p.name}.log`),
        }),
      );
    }
    const codes = await Promise.all(workers.map((w) => w.exited));
    const wallMs = performance.now() - started;
    const text = readFileSync(log, 'utf8');
    const runs = runsPerId(text);
    const twice = [...runs].filter(([, r]) => r.length > 1);
    const never = runIds.filter((id) => !runs.has(id));
    const errors = text.split('\n').filter((l) => l.startsWith('error ') || l.startsWith('complete-failed '));
    process.stdout.write(
      `run-id fleet: ${RUN_IDS} run ids, ${PODS} pods, pod watch delay U[0, ${POD_WATCH_DELAY_MS}] ms: ` +
        `${twice.length} ran more than once, ${never.length} never ran, ${errors.length} errors, ` +
        `${proxy.counts.watchEventsDelayed} pod watch events delayed, ${Math.round(wallMs / 1000)} s\n`,
    );
    expect(codes).toEqual(pods.map(() => 0));
    expect(errors).toEqual([]);
    expect(
      twice.map(([id, r]) => `${id}: ${r.join(', ')}`),
      `${twice.length} of ${RUN_IDS} run ids ran more than once`,
    ).toEqual([]);
    expect(never).toEqual([]);
  }, 300_000);

  it("refuses a completion by anyone but the holder of the run's term", async () => {
    const a = await createPod(t, 'only-a', { app: 'only' });
    const b = await createPod(t, 'only-b', { app: 'only' });
    const podA = { name: a.metadata?.name ?? '', uid: a.metadata?.uid ?? '' };
    const podB = { name: b.metadata?.name ?? '', uid: b.metadata?.uid ?? '' };
    await createLock(t, lockBody('only', 'only', { mode: 'Mutex', leaseDurationSeconds: 10 }));
    const held = await acquire('only', {
      kubeconfig: adminKc,
      namespace: t.namespace,
      pod: podA,
      runId: 'r-1',
      waitMs: 30_000,
    });
    // Another pod, with the holder's token: refused, nothing written.
    const other = new LockSession({
      api: connect(adminKc),
      namespace: t.namespace,
      lock: 'only',
      self: podB,
      clock: realClock,
      log: silentLogger,
    });
    await expect(other.complete('r-1', undefined, held.token)).rejects.toThrow(NotRunHolderError);
    await expect(other.complete('r-1', undefined, held.token)).rejects.toThrow(
      "only the holder of the run's term may complete it",
    );
    expect(parseLease((await getLease(t, 'only')) ?? {}).completedRuns).toEqual([]);
    // The holder itself, after its term ended: refused too.
    await held.release();
    await expect(held.complete()).rejects.toThrow("only the holder of the run's term may complete it");
    expect(parseLease((await getLease(t, 'only')) ?? {}).completedRuns).toEqual([]);
    const again = await acquire('only', {
      kubeconfig: adminKc,
      namespace: t.namespace,
      pod: podB,
      runId: 'r-1',
      waitMs: 30_000,
    });
    await again.complete();
    await again.release();
    await eventually(async () => {
      expect((await getLock(t, 'only')).status?.completedRuns).toEqual([
        expect.objectContaining({ runId: 'r-1', holder: 'only-b', token: again.token.toString() }),
      ]);
    });
  });

  it('refuses a completed-at in the future: not in status, a CompletionRefused Event, and the run is not done', async () => {
    const a = await createPod(t, 'future-a', { app: 'future' });
    const b = await createPod(t, 'future-b', { app: 'future' });
    const podA = { name: a.metadata?.name ?? '', uid: a.metadata?.uid ?? '' };
    const podB = { name: b.metadata?.name ?? '', uid: b.metadata?.uid ?? '' };
    await createLock(t, lockBody('future', 'future', { mode: 'Mutex', leaseDurationSeconds: 10 }));
    const held = await acquire('future', {
      kubeconfig: adminKc,
      namespace: t.namespace,
      pod: podA,
      runId: 'f-1',
      waitMs: 30_000,
    });
    // The entry the holder's agent would write, dated an hour ahead (written here as the admin).
    const lease = (await getLease(t, 'future')) ?? {};
    const ahead = new Date(Date.now() + 3_600_000);
    await t.leases.replaceNamespacedLease({
      namespace: t.namespace,
      name: leaseName('future'),
      body: completedLease(lease, { runId: 'f-1', token: held.token, holder: podA.name, completedAt: ahead }),
    });
    await held.release();
    await eventually(async () => {
      const events = await t.core.listNamespacedEvent({
        namespace: t.namespace,
        fieldSelector: 'involvedObject.name=future',
      });
      expect(events.items.map((e) => `${e.reason ?? ''}: ${e.message ?? ''}`)).toContainEqual(
        expect.stringMatching(/^CompletionRefused: Run "f-1" .* in the future/),
      );
    });
    expect((await getLock(t, 'future')).status?.completedRuns ?? []).toEqual([]);
    // Not done: the next pod is granted the run and does it.
    const next = await acquire('future', {
      kubeconfig: adminKc,
      namespace: t.namespace,
      pod: podB,
      runId: 'f-1',
      waitMs: 30_000,
    });
    await next.complete();
    await next.release();
    await eventually(async () => {
      expect((await getLock(t, 'future')).status?.completedRuns).toEqual([
        expect.objectContaining({ runId: 'f-1', holder: 'future-b' }),
      ]);
    });
  });
});
