/**
 * handover.ts — `node bench/handover.ts [--runs N]` (default 50): planned handovers between two
 * real agents, with a fenced store, measuring the gap and checking that it is safe.
 *
 * Against the real testbed (etcd + kube-apiserver + redis-server on loopback), with the controller
 * in-process (Redis fencing backend), two Ready pods each with its agent as a real process (the
 * shipped binary), one Election DistributedLock (`leaseDurationSeconds: 10`,
 * `handover.drainSeconds: 5`), and one fenced store: the Redis guard (src/guards/redis-guard.ts,
 * scope `lock`) on the same redis-server. Two "apps" in this process, one per pod, each:
 *   - polls its agent's `GET /v1/locks/NAME` every POLL_MS; while `held` and not draining, writes
 *     the store through the guard with the snapshot's token (each write recorded: when it was sent
 *     and answered, accepted or not);
 *   - on `draining`, stops taking new writes and answers `POST …/drained` (the agent then stops
 *     believing and releases);
 *   - after its term ended, sends one more write with its old token STALE_DELAY_MS later, as a
 *     paused app that woke up late would: the guard must refuse it once the successor has written.
 * Each run asks for a handover to the other pod (the lock's `fencepost.io/handover` annotation,
 * naming the current token, as `kubectl fencepost handover` writes it), and a watch on the Lease
 * notes when the released Lease (no holder, the old token) arrives.
 *
 * Reported per run: release observed → the new holder's first accepted write (the gap), request →
 * release observed, request → new holder's first accepted write; and, over the whole run, how many
 * writes of an old holder the store accepted after the new holder's first accepted write (must be
 * 0). Writes .results/bench/handover.json with the machine and its load average.
 */
import { mkdtempSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Watch, type V1Lease } from '@kubernetes/client-node';
import type { LockSnapshot } from '../src/agent/session.ts';
import { startLockController, type LockController } from '../src/controllers/distributedlock/setup.ts';
import { redisGuard } from '../src/guards/redis-guard.ts';
import { apiClientFor } from '../src/kube/api-client.ts';
import { parseLease } from '../src/lease/record.ts';
import { silentLogger } from '../src/observability/logger.ts';
import { leaseName } from '../src/protocol/names.ts';
import { realClock } from '../src/runtime/clock.ts';
import { agentBinary } from '../test/support/agent-binary.ts';
import { askHandover, createLock, createPod, getLease, lockBody, testKube } from '../test/support/fixtures.ts';
import { ETCD_VERSION, KUBE_VERSION } from '../test/support/testbed/assets.ts';
import type { ControlPlane } from '../test/support/testbed/control-plane.ts';
import { freePort } from '../test/support/testbed/ports.ts';
import { spawnManaged, type ManagedProcess } from '../test/support/testbed/processes.ts';
import type { RedisServer } from '../test/support/testbed/redis.ts';
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

const LOCK = 'bench-handover';
const PODS = ['ho-0', 'ho-1'] as const;
const LEASE_SECONDS = 10;
const DRAIN_SECONDS = 5;
/** POLL_MS: how often each app reads its agent's snapshot (the app's own reaction time is part of the gap). */
const POLL_MS = 5;
const STEP_TIMEOUT_MS = 30_000;
/** STALE_DELAY_MS: how long after its term ended an old app sends its late write (a pause), so that it lands after the successor's first write. */
const STALE_DELAY_MS = 300;
const USAGE = `Usage: node bench/handover.ts [--runs N]\n\nPlanned handovers between two real agents with a fenced Redis store (default 50 runs).\n`;

interface WriteRecord {
  readonly pod: string;
  readonly token: bigint;
  readonly sentAt: number;
  readonly doneAt: number;
  readonly accepted: boolean;
  /** stale: the extra write an app sends after its term ended (a paused app waking up). */
  readonly stale: boolean;
}

function http(port: number, method: string, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        timeout: 5000,
        ...(method === 'POST' ? { headers: { 'content-type': 'application/json' } } : {}),
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', reject);
    req.end(method === 'POST' ? '{}' : undefined);
  });
}

async function until<T>(
  what: string,
  f: () => Promise<T | undefined> | T | undefined,
  signal: AbortSignal,
): Promise<T> {
  const deadline = performance.now() + STEP_TIMEOUT_MS;
  for (;;) {
    signal.throwIfAborted();
    let v: T | undefined;
    try {
      v = await f();
    } catch {
      v = undefined;
    }
    if (v !== undefined) return v;
    if (performance.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await sleep(POLL_MS);
  }
}

async function main(): Promise<void> {
  const runs = parseRuns(50, USAGE);
  if (runs === undefined) return;
  const interrupt = onInterrupt();
  const signal = interrupt.signal;
  const log = (m: string): void => void process.stderr.write(`${m}\n`);
  let plane: ControlPlane | undefined;
  let redis: RedisServer | undefined;
  let controller: LockController | undefined;
  const agents: ManagedProcess[] = [];
  const stopApps = new AbortController();
  try {
    log('Starting control plane and redis…');
    ({ plane, redis } = await startServers());
    const kc = plane.kubeConfig();
    const namespace = await plane.createNamespace('bench-handover-');
    const t = testKube(kc, namespace);
    controller = await startLockController({
      kc: apiClientFor(plane.kubeconfigPath),
      redisUrl: redis.url,
      namespace,
      identity: 'bench-controller',
      clock: realClock,
      log: silentLogger,
    });
    const dir = mkdtempSync(join(tmpdir(), 'fencepost-bench-handover-'));
    const ports = new Map<string, number>();
    for (const pod of PODS) {
      const p = await createPod(t, pod, { app: LOCK });
      const port = await freePort();
      ports.set(pod, port);
      agents.push(
        spawnManaged(`agent-${pod}`, agentBinary(), {
          args: [
            'agent',
            '--lock',
            LOCK,
            '--listen',
            `127.0.0.1:${port}`,
            '--kubeconfig',
            plane.kubeconfigPath,
            '--health-probe-bind-address=0',
            '--metrics-bind-address=0',
          ],
          logFile: join(dir, `${pod}.log`),
          env: { ...process.env, POD_NAME: pod, POD_NAMESPACE: namespace, POD_UID: p.metadata?.uid ?? '' },
        }),
      );
    }
    await createLock(
      t,
      lockBody(LOCK, LOCK, { leaseDurationSeconds: LEASE_SECONDS, handover: { drainSeconds: DRAIN_SECONDS } }),
    );

    // The fenced store and the two apps.
    const client = redis.client();
    const guard = redisGuard(client, { lock: LOCK });
    const writes: WriteRecord[] = [];
    const app = async (pod: string): Promise<void> => {
      const port = ports.get(pod) ?? 0;
      let term: bigint | undefined;
      let n = 0;
      while (!stopApps.signal.aborted) {
        let s: LockSnapshot | undefined;
        try {
          s = JSON.parse((await http(port, 'GET', `/v1/locks/${LOCK}`)).body) as LockSnapshot;
        } catch {
          await sleep(POLL_MS);
          continue;
        }
        const token = s.held && s.token !== undefined ? BigInt(s.token) : undefined;
        if (s.draining !== undefined) {
          await http(port, 'POST', `/v1/locks/${LOCK}/drained`).catch(() => undefined);
        } else if (token !== undefined) {
          term = token;
          const sentAt = performance.now();
          const r = await guard.write('bench:value', token, `${pod}:${n++}`);
          writes.push({ pod, token, sentAt, doneAt: performance.now(), accepted: r.accepted, stale: false });
          continue; // write as fast as the store answers while held
        } else if (term !== undefined) {
          // The term ended: one late write with the old token, as an app paused for STALE_DELAY_MS
          // and waking up would (by then the successor has written: the guard must refuse it).
          await sleep(STALE_DELAY_MS);
          const sentAt = performance.now();
          const r = await guard.write('bench:value', term, `${pod}:stale`);
          writes.push({ pod, token: term, sentAt, doneAt: performance.now(), accepted: r.accepted, stale: true });
          term = undefined;
        }
        await sleep(POLL_MS);
      }
    };
    const appsDone = Promise.all(PODS.map((p) => app(p)));

    // The Lease watch: when each release (no holder, a voluntary release kind) arrives.
    const releases: { token: bigint; at: number }[] = [];
    const watch = await new Watch(kc).watch(
      `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases`,
      { fieldSelector: `metadata.name=${leaseName(LOCK)}` },
      (_type: string, obj: V1Lease) => {
        const r = parseLease(obj);
        if (
          r.holder === undefined &&
          (r.released === 'Released' || r.released === 'HandedOver') &&
          r.token !== undefined
        )
          if (!releases.some((x) => x.token === r.token)) releases.push({ token: r.token, at: performance.now() });
      },
      () => undefined,
    );

    const holder = async (): Promise<{ name: string; token: bigint } | undefined> => {
      const l = await getLease(t, LOCK);
      const r = l !== undefined ? parseLease(l) : undefined;
      return r?.holder !== undefined && r.token !== undefined ? { name: r.holder.name, token: r.token } : undefined;
    };
    const firstAccepted = (pod: string, token: bigint) =>
      writes.find((w) => w.pod === pod && w.token === token && w.accepted && !w.stale);
    let current = await until('the first grant', holder, signal);
    await until('the first write', () => firstAccepted(current.name, current.token), signal);
    const samples: { gapMs: number; requestToReleaseMs: number; requestToFirstWriteMs: number }[] = [];
    for (let i = 0; i < runs; i++) {
      const to = current.name === PODS[0] ? PODS[1] : PODS[0];
      const requestedAt = performance.now();
      await askHandover(t, LOCK, to, current.token, { by: 'bench/handover.ts' });
      const next = await until(
        `the grant to ${to}`,
        async () => {
          const h = await holder();
          return h !== undefined && h.name === to && h.token > current.token ? h : undefined;
        },
        signal,
      );
      const first = await until(`${to}'s first accepted write`, () => firstAccepted(to, next.token), signal);
      const released = await until(
        'the release on the watch',
        () => releases.find((r) => r.token === current.token),
        signal,
      );
      samples.push({
        gapMs: first.doneAt - released.at,
        requestToReleaseMs: released.at - requestedAt,
        requestToFirstWriteMs: first.doneAt - requestedAt,
      });
      log(
        `run ${i + 1}/${runs}: ${current.name} → ${to}, token ${current.token} → ${next.token}, gap ${(first.doneAt - released.at).toFixed(1)} ms`,
      );
      current = next;
      await sleep(STALE_DELAY_MS + 100); // the old app's late write goes out
    }
    stopApps.abort();
    await appsDone;
    watch.abort();
    client.disconnect();

    // Safety: after a holder's first accepted write, no write with a smaller token was accepted.
    let staleAccepted = 0;
    let staleRefused = 0;
    const firsts = new Map<bigint, number>();
    for (const w of writes) if (w.accepted && !w.stale && !firsts.has(w.token)) firsts.set(w.token, w.sentAt);
    for (const w of writes) {
      const newerFirst = [...firsts].filter(([tok, at]) => tok > w.token && at < w.sentAt);
      if (newerFirst.length === 0) continue;
      if (w.accepted) staleAccepted++;
      else staleRefused++;
    }
    const gap = summarize(samples.map((s) => s.gapMs));
    const result = {
      benchmark: 'handover',
      date: new Date().toISOString(),
      command: `node bench/handover.ts --runs ${runs}`,
      runs,
      setup: {
        leaseDurationSeconds: LEASE_SECONDS,
        drainSeconds: DRAIN_SECONDS,
        pollMs: POLL_MS,
        staleDelayMs: STALE_DELAY_MS,
        note:
          "gap = from the arrival of the released Lease (no holder, released by the agent) on a watch in this process to the return of the successor app's first accepted fenced write. " +
          `Apps poll their agent every ${POLL_MS} ms, answer draining with POST /drained at once, and write through the Redis guard as fast as it answers while held. ` +
          'oldWritesAcceptedAfterNewFirst counts every write whose token is below a token whose first accepted write was sent before it, and which the store accepted (must be 0).',
      },
      machine: describeMachine(),
      load: loadAverage(),
      versions: { node: process.version, kube: KUBE_VERSION, etcd: ETCD_VERSION },
      summary: {
        releaseToNewFirstWriteMs: gap,
        requestToReleaseMs: summarize(samples.map((s) => s.requestToReleaseMs)),
        requestToNewFirstWriteMs: summarize(samples.map((s) => s.requestToFirstWriteMs)),
        writes: writes.length,
        lateWritesOfOldHolders: writes.filter((w) => w.stale).length,
        oldWritesAcceptedAfterNewFirst: staleAccepted,
        oldWritesRefusedAfterNewFirst: staleRefused,
      },
      samples,
    };
    const out = writeResult('handover.json', result);
    const row = (label: string, s: Stats): string[] => [
      label,
      ...[s.p50, s.p90, s.p99, s.max].map((v) => `${v.toFixed(1)} ms`),
    ];
    process.stdout.write(
      [
        `fencepost planned handover: ${runs} runs, 2 agents, Redis guard; ${machineLine(result.machine)}`,
        `load average ${JSON.stringify(result.load)}`,
        ...textTable(
          [
            ['', 'p50', 'p90', 'p99', 'max'],
            row('release observed → new first write', gap),
            row('request → release observed', result.summary.requestToReleaseMs),
            row('request → new first write', result.summary.requestToNewFirstWriteMs),
          ],
          1,
        ),
        `writes ${writes.length}; old holders' writes after the new holder's first: accepted ${staleAccepted}, refused ${staleRefused}`,
        `Wrote ${out}`,
        '',
      ].join('\n'),
    );
    if (staleAccepted > 0) process.exitCode = 1;
  } finally {
    stopApps.abort();
    await Promise.allSettled([controller?.stop(), ...agents.map((a) => a.stop())]);
    await Promise.allSettled([plane?.stop(), redis?.stop()]);
    interrupt.dispose();
  }
}

runMain('handover', main);
