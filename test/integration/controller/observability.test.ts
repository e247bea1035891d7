import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseLease } from '../../../src/lease/record.ts';
import { getStatus } from '../../support/testbed/http-probe.ts';
import { freePort } from '../../support/testbed/ports.ts';
import { spawnManaged, tailLog, type ManagedProcess } from '../../support/testbed/processes.ts';
import {
  eventually,
  freshNamespace,
  sharedKubeConfig,
  sharedKubeconfigPath,
  sharedRedisUrl,
} from '../../support/env.ts';
import { createLock, createPod, getLease, lockBody, testKube, type TestKube } from '../../support/fixtures.ts';
import { agentBinary } from '../../support/agent-binary.ts';

const main = resolve(import.meta.dirname, '../../../src/cli/main.ts');

/** Sample is one series of a Prometheus text exposition. */
interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

function parseExposition(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (m === null) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      labels[l[1] ?? ''] = l[2] ?? '';
    out.push({ name: m[1] ?? '', labels, value: Number(m[3]) });
  }
  return out;
}

/** series returns the samples named `name` whose labels include `labels`. */
function series(samples: readonly Sample[], name: string, labels: Record<string, string> = {}): Sample[] {
  return samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
}

const sum = (s: readonly Sample[]): number => s.reduce((a, x) => a + x.value, 0);

/** logLines parses every line of a process's log file as JSON (a line that is not JSON fails the test). */
function logLines(file: string): Record<string, unknown>[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => {
      try {
        return JSON.parse(l) as Record<string, unknown>;
      } catch {
        throw new Error(`not a JSON line: ${l}`);
      }
    });
}

/** expectLogShape checks the fields every line must have, in the shape controller-runtime operators log. */
function expectLogShape(lines: readonly Record<string, unknown>[]): void {
  expect(lines.length).toBeGreaterThan(0);
  for (const l of lines) {
    expect(l['ts'], JSON.stringify(l)).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(['debug', 'info', 'warn', 'error'], JSON.stringify(l)).toContain(l['level']);
    expect(typeof l['msg'], JSON.stringify(l)).toBe('string');
    expect(l, JSON.stringify(l)).not.toHaveProperty('err');
    expect(l, JSON.stringify(l)).not.toHaveProperty('time');
    if ('error' in l) expect(typeof l['error'], JSON.stringify(l)).toBe('string');
  }
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

// A real `fencepost controller` process against the real API server: what Prometheus scrapes from
// it and what a log pipeline reads on its stderr carry controller-runtime's and client-go's names.
describe("fencepost controller speaks controller-runtime's metrics and logs", () => {
  const kc = sharedKubeConfig();
  const apiHost = new URL(kc.getCurrentCluster()?.server ?? '').host;
  let t: TestKube;
  let dir: string;
  let proc: ManagedProcess;
  let metricsPort: number;
  const others: ManagedProcess[] = [];
  const scrape = async (port = metricsPort): Promise<Sample[]> =>
    parseExposition((await getStatus(`http://127.0.0.1:${port}/metrics`)).body);

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fencepost-observability-'));
    t = testKube(kc, await freshNamespace(kc, 'obs-'));
    metricsPort = await freePort();
    proc = spawnManaged('controller', process.execPath, {
      args: [
        main,
        'controller',
        '--kubeconfig',
        sharedKubeconfigPath(),
        '--redis-url',
        sharedRedisUrl(),
        '--namespace',
        t.namespace,
        '--leader-election-namespace',
        t.namespace,
        // Plain HTTP: this file reads the metrics themselves; metrics-auth.test.ts covers the secure listener.
        '--metrics-secure=false',
        '--metrics-bind-address',
        `127.0.0.1:${metricsPort}`,
        '--health-probe-bind-address',
        '0',
        '--workers',
        '3',
        '--log-level',
        'debug',
      ],
      logFile: join(dir, 'controller.log'),
    });
  });
  afterAll(async () => {
    await Promise.all([proc.stop(), ...others.map((p) => p.stop())]);
    rmSync(dir, { recursive: true, force: true });
  });

  it("exports every metric under controller-runtime's, client-go's and Node's standard names, and counts its real API requests", async () => {
    const before = await eventually(async () => {
      const m = await scrape();
      expect(series(m, 'leader_election_master_status', { name: 'fencepost-controller' })[0]?.value).toBe(1);
      expect(series(m, 'controller_runtime_max_concurrent_reconciles')).not.toHaveLength(0); // workers started
      return m;
    }, 30_000).catch((err: unknown) => {
      throw new Error(`${String(err)}\n${tailLog(proc.logFile)}`);
    });
    // Nothing is PATCHed before there is a lock: leader election creates and PUTs its Lease.
    const patchesBefore = sum(series(before, 'rest_client_requests_total', { method: 'PATCH' }));

    const c = { controller: 'distributedlock' };
    const q = { name: 'distributedlock', controller: 'distributedlock' };
    await createPod(t, 'obs-0', { app: 'obs' });
    await createLock(t, lockBody('obs', 'obs', { leaseDurationSeconds: 30 }));
    await eventually(async () => {
      expect(parseLease((await getLease(t, 'obs')) ?? {}).holder?.name).toBe('obs-0');
    }, 30_000);
    const m = await eventually(async () => {
      const s = await scrape();
      expect(series(s, 'fencepost_grants_total', { cause: 'Vacant' })[0]?.value).toBe(1);
      // The grant is counted when its Lease write lands, the reconcile only when it returns (after
      // the pod patches): wait for the reconcile that granted to finish, or this scrape races it.
      expect(sum(series(s, 'controller_runtime_reconcile_total', c))).toBeGreaterThanOrEqual(1);
      expect(series(s, 'workqueue_work_duration_seconds_count', q)[0]?.value).toBeGreaterThanOrEqual(1);
      return s;
    });

    for (const result of ['success', 'error', 'requeue', 'requeue_after']) {
      expect(series(m, 'controller_runtime_reconcile_total', { ...c, result }), result).toHaveLength(1);
    }
    expect(sum(series(m, 'controller_runtime_reconcile_total', c))).toBeGreaterThanOrEqual(1);
    for (const name of [
      'controller_runtime_reconcile_errors_total',
      'controller_runtime_terminal_reconcile_errors_total',
      'controller_runtime_active_workers',
    ]) {
      expect(series(m, name, c), name).toHaveLength(1);
    }
    expect(series(m, 'controller_runtime_max_concurrent_reconciles', c)[0]?.value).toBe(3);
    expect(series(m, 'controller_runtime_reconcile_time_seconds_count', c)[0]?.value).toBeGreaterThanOrEqual(1);
    expect(series(m, 'controller_runtime_reconcile_time_seconds_bucket', { ...c, le: '+Inf' })).toHaveLength(1);
    for (const name of [
      'workqueue_depth',
      'workqueue_adds_total',
      'workqueue_retries_total',
      'workqueue_unfinished_work_seconds',
      'workqueue_longest_running_processor_seconds',
      'workqueue_queue_duration_seconds_count',
      'workqueue_work_duration_seconds_count',
    ]) {
      expect(series(m, name, q), name).toHaveLength(1);
    }
    expect(series(m, 'workqueue_adds_total', q)[0]?.value).toBeGreaterThanOrEqual(1);
    expect(series(m, 'workqueue_work_duration_seconds_count', q)[0]?.value).toBeGreaterThanOrEqual(1);
    expect(series(m, 'leader_election_master_status', { name: 'fencepost-controller' })[0]?.value).toBe(1);

    // rest_client_requests_total{code,method,host}: the lists and watches of the informers, the
    // leader Lease's creation, and the PATCHes a grant makes (finalizer, pod label, status).
    const rest = series(m, 'rest_client_requests_total');
    for (const s of rest) expect(Object.keys(s.labels).sort()).toEqual(['code', 'host', 'method']);
    expect(new Set(rest.map((s) => s.labels['host']))).toEqual(new Set([apiHost]));
    expect(sum(series(m, 'rest_client_requests_total', { code: '200', method: 'GET' }))).toBeGreaterThanOrEqual(4);
    expect(sum(series(m, 'rest_client_requests_total', { code: '201', method: 'POST' }))).toBeGreaterThanOrEqual(1);
    expect(sum(series(m, 'rest_client_requests_total', { method: 'PATCH' }))).toBeGreaterThan(patchesBefore);

    for (const name of [
      'process_cpu_seconds_total',
      'process_resident_memory_bytes',
      'process_start_time_seconds',
      'nodejs_heap_size_used_bytes',
      'nodejs_eventloop_lag_seconds',
    ]) {
      expect(series(m, name), name).not.toHaveLength(0);
    }
    expect(
      m
        .filter((s) => /^fencepost_(process|nodejs|workqueue|reconcile_total|leader\b|active_workers)/.test(s.name))
        .map((s) => s.name),
    ).toEqual([]);
  });

  it("logs JSON lines with ts, a level word, msg, and controller-runtime's keys on reconcile lines", async () => {
    const lines = await eventually(() => {
      const ls = logLines(proc.logFile);
      expect(ls.some((l) => l['msg'] === 'Granted Lease')).toBe(true);
      return ls;
    }, 30_000);
    expectLogShape(lines);
    const levels = new Set(lines.map((l) => l['level']));
    expect(levels.has('debug') && levels.has('info'), [...levels].join(' ')).toBe(true);
    const granted = lines.find((l) => l['msg'] === 'Granted Lease');
    expect(granted).toMatchObject({
      level: 'info',
      controller: 'distributedlock',
      controllerGroup: 'fencepost.io',
      controllerKind: 'DistributedLock',
      DistributedLock: { name: 'obs', namespace: t.namespace },
      namespace: t.namespace,
      name: 'obs',
      holder: 'obs-0',
    });
    expect(granted?.['reconcileID']).toMatch(UUID);
  });

  it('logs a failure from the real API server with `error` as text', async () => {
    // A second controller whose election namespace does not exist: creating its Lease fails with 404.
    const port = await freePort();
    const bad = spawnManaged('controller-bad-election', process.execPath, {
      args: [
        main,
        'controller',
        '--kubeconfig',
        sharedKubeconfigPath(),
        '--namespace',
        t.namespace,
        '--leader-election-namespace',
        `${t.namespace}-missing`,
        '--leader-election-retry-period',
        '300ms',
        // Plain HTTP: this file reads the metrics themselves; metrics-auth.test.ts covers the secure listener.
        '--metrics-secure=false',
        '--metrics-bind-address',
        `127.0.0.1:${port}`,
        '--health-probe-bind-address',
        '0',
      ],
      logFile: join(dir, 'controller-bad.log'),
    });
    others.push(bad);
    const failed = await eventually(() => {
      const f = logLines(bad.logFile).find((l) => l['msg'] === 'Failed to create leader Lease');
      expect(f).toBeDefined();
      return f;
    }, 30_000);
    expectLogShape(logLines(bad.logFile));
    expect(failed).toMatchObject({ level: 'error' });
    expect(failed?.['error']).toMatch(/404/);
    expect(failed?.['stacktrace']).toMatch(/^at /);
    const m = await scrape(port);
    expect(
      sum(series(m, 'rest_client_requests_total', { code: '404', method: 'POST', host: apiHost })),
    ).toBeGreaterThanOrEqual(1);
    expect(series(m, 'leader_election_master_status', { name: 'fencepost-controller' })[0]?.value).toBe(0);
  });

  it('fencepost exec logs in the same shape', async () => {
    const pod = await createPod(t, 'job-0', { app: 'job' });
    await createLock(t, lockBody('job', 'job', { leaseDurationSeconds: 30 }));
    const r = await new Promise<{ code: number | null; stderr: string }>((res) => {
      execFile(
        agentBinary(),
        [
          'exec',
          '--kubeconfig',
          sharedKubeconfigPath(),
          '--lock',
          'job',
          '--wait',
          '20s',
          '--log-level',
          'info',
          '--',
          'true',
        ],
        {
          env: { ...process.env, POD_NAME: 'job-0', POD_NAMESPACE: t.namespace, POD_UID: pod.metadata?.uid ?? '' },
          timeout: 60_000,
        },
        (err, _stdout, stderr) => {
          res({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : null, stderr });
        },
      );
    });
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stderr
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expectLogShape(lines);
    expect(lines.find((l) => l['msg'] === 'Acquired lock')).toMatchObject({
      level: 'info',
      component: 'exec',
      lock: 'job',
    });
  });
});
