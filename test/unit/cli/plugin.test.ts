/**
 * The pure parts of `kubectl fencepost`: its flags, kubectl-style formatting, and the status,
 * history and explain views computed from a snapshot (lock, Lease, pods, Events) and a clock.
 */
import { ApiException, type CoreV1Event, type V1Lease, type V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { Condition, DistributedLock, DistributedLockSpec } from '../../../src/api/v1alpha1/distributedlock.ts';
import { explainLock, explainText, type ExplainInput } from '../../../src/cli/plugin/explain.ts';
import { countdown, humanDuration, table } from '../../../src/cli/plugin/format.ts';
import { historyTable, historyView } from '../../../src/cli/plugin/history-view.ts';
import { connect, failureOf } from '../../../src/cli/plugin/read.ts';
import type { ControllerLeaseView, LockSnapshot } from '../../../src/cli/plugin/snapshot.ts';
import { statusTable, statusView } from '../../../src/cli/plugin/status-view.ts';
import { transitions } from '../../../src/cli/plugin/transitions.ts';
import { EXPLAIN, HISTORY, STATUS } from '../../../src/cli/plugin/usage.ts';
import { parsePluginArgs } from '../../../src/config/plugin.ts';
import { UsageError } from '../../../src/config/usage-error.ts';
import { grantedLease, newLease, releasedLease } from '../../../src/lease/record.ts';
import { podKeys } from '../../../src/protocol/names.ts';

const NOW = Date.parse('2026-06-01T12:00:00Z');
const ago = (s: number): string => new Date(NOW - s * 1000).toISOString();

// ----- builders: plain JSON as the API server sends it -----

function aLock(name: string, spec: Partial<DistributedLockSpec> = {}, conditions?: Condition[]): DistributedLock {
  return {
    apiVersion: 'fencepost.io/v1alpha1',
    kind: 'DistributedLock',
    metadata: { name, namespace: 'ns', uid: `uid-${name}`, generation: 1 },
    spec: { leaseDurationSeconds: 15, candidates: { selector: { matchLabels: { app: 'web' } } }, ...spec },
    status: {
      leaseName: `dlock-${name}`,
      observedGeneration: 1,
      conditions: conditions ?? [
        { type: 'Ready', status: 'True', reason: 'AsExpected', message: '', lastTransitionTime: ago(60) },
        { type: 'Degraded', status: 'False', reason: 'AsExpected', message: '', lastTransitionTime: ago(60) },
      ],
    },
  };
}

function aPod(
  name: string,
  o: { ready?: boolean; labels?: Record<string, string>; annotations?: Record<string, string>; age?: number } = {},
): V1Pod {
  const ready = o.ready ?? true;
  return {
    metadata: {
      name,
      namespace: 'ns',
      uid: `uid-${name}`,
      labels: o.labels ?? { app: 'web' },
      annotations: o.annotations ?? {},
      creationTimestamp: new Date(NOW - (o.age ?? 600) * 1000),
    },
    spec: { containers: [{ name: 'app' }] },
    status: { phase: 'Running', conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }] },
  };
}

const lockRef = (name: string) => ({
  name,
  uid: `uid-${name}`,
  apiVersion: 'fencepost.io/v1alpha1',
  kind: 'DistributedLock',
});
const timings = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, renewPeriodMs: 5_000 };

/** heldLease: the Lease of `lock` granted to `pod` with `token`, last renewed `renewedAgo` seconds ago. */
function heldLease(lock: string, pod: string, token: bigint, renewedAgo: number): V1Lease {
  const l = grantedLease(
    {
      ...newLease(lockRef(lock), undefined),
      metadata: { ...newLease(lockRef(lock), undefined).metadata, resourceVersion: '7' },
    },
    { name: pod, uid: `uid-${pod}` },
    token,
    timings,
    new Date(NOW - renewedAgo * 1000),
  );
  return JSON.parse(JSON.stringify(l)) as V1Lease;
}

function anEvent(reason: string, message: string, secondsAgo: number, count = 1): CoreV1Event {
  return {
    metadata: { name: `e-${reason}-${secondsAgo}` },
    involvedObject: { kind: 'DistributedLock', name: 'x' },
    type: reason === 'LeaseGranted' ? 'Normal' : 'Warning',
    reason,
    message,
    count,
    firstTimestamp: new Date(NOW - secondsAgo * 1000),
    lastTimestamp: new Date(NOW - secondsAgo * 1000),
  };
}

const snap = (
  lock: DistributedLock,
  lease: V1Lease | undefined,
  pods: V1Pod[] = [],
  events: CoreV1Event[] = [],
): LockSnapshot => ({
  lock,
  lease,
  pods,
  events,
});
const ABSENT: ControllerLeaseView = { state: 'absent', where: 'any namespace' };
const explain = (s: LockSnapshot, extra: Partial<ExplainInput> = {}) =>
  explainLock({ snapshot: s, controller: ABSENT, nowMs: NOW, ...extra });
const codes = (s: LockSnapshot, extra: Partial<ExplainInput> = {}) => explain(s, extra).reasons.map((r) => r.code);
const unheld = (lock: string): V1Lease =>
  JSON.parse(
    JSON.stringify({
      ...newLease(lockRef(lock), undefined),
      metadata: { ...newLease(lockRef(lock), undefined).metadata, resourceVersion: '7' },
    }),
  ) as V1Lease;

// ----- flags -----

describe('the plugin flags', () => {
  it('reads kubectl spellings: -n, -A, -o, --context, --kubeconfig, a LOCK', () => {
    expect(parsePluginArgs(STATUS, ['-A', '-o', 'json'])).toMatchObject({
      allNamespaces: true,
      output: 'json',
      lock: undefined,
    });
    expect(
      parsePluginArgs(EXPLAIN, ['db', '-n', 'prod', '--pod', 'web-0', '--context', 'kind', '--kubeconfig', '/k']),
    ).toMatchObject({
      lock: 'db',
      namespace: 'prod',
      pod: 'web-0',
      context: 'kind',
      kubeconfig: '/k',
      output: 'table',
      controllerLease: { namespace: undefined, name: 'fencepost-controller' },
    });
    expect(parsePluginArgs(EXPLAIN, ['db', '--controller-lease', 'fp/ctl']).controllerLease).toEqual({
      namespace: 'fp',
      name: 'ctl',
    });
  });

  it.each([
    { spec: STATUS, argv: ['-o', 'yaml'], message: '--output: must be table or json, got "yaml"' },
    {
      spec: STATUS,
      argv: ['a', '-A'],
      message: '--all-namespaces: cannot be used with a LOCK ("a"); use -n NAMESPACE',
    },
    { spec: STATUS, argv: ['a', 'b'], message: '"b": unexpected argument; status takes at most one LOCK' },
    { spec: HISTORY, argv: [], message: 'LOCK: missing: kubectl fencepost history LOCK' },
    {
      spec: HISTORY,
      argv: ['h', '--pod', 'p'],
      message: '--pod: not a flag of history (see kubectl fencepost history --help)',
    },
    { spec: STATUS, argv: ['--bogus'], message: '--bogus: unknown flag (see kubectl fencepost status --help)' },
    { spec: STATUS, argv: ['-n'], message: '-n: missing value (see kubectl fencepost status --help)' },
    { spec: STATUS, argv: ['Bad_Name'], message: 'LOCK: must be a Kubernetes object name, got "Bad_Name"' },
    {
      spec: EXPLAIN,
      argv: ['a', '--controller-lease', 'a/b/c'],
      message: '--controller-lease: must be NAME or NAMESPACE/NAME, got "a/b/c"',
    },
  ])('refuses $argv with "$message"', ({ spec, argv, message }) => {
    expect(() => parsePluginArgs(spec, argv)).toThrow(UsageError);
    expect(() => parsePluginArgs(spec, argv)).toThrow(message);
  });
});

// ----- formatting -----

describe('kubectl-style formatting', () => {
  it.each([
    [0, '0s'],
    [119_000, '119s'],
    [120_000, '2m'],
    [200_000, '3m20s'],
    [25 * 60_000, '25m'],
    [5.5 * 3600_000, '5h30m'],
    [30 * 3600_000, '30h'],
    [51 * 3600_000, '2d3h'],
    [40 * 86400_000, '40d'],
    [-5000, '0s'],
  ])('humanDuration(%d) is %s, as kubectl prints an AGE', (ms, text) => {
    expect(humanDuration(ms)).toBe(text);
  });

  it('counts down to a deadline and up past it', () => {
    expect(countdown(NOW + 12_000, NOW)).toBe('in 12s');
    expect(countdown(NOW - 3_000, NOW)).toBe('3s ago');
  });

  it('lays out a table with upper-case headers, columns three spaces apart, <none> for empty cells', () => {
    expect(
      table(
        ['name', 'holder'],
        [
          ['a', 'pod-0'],
          ['longer', ''],
        ],
      ),
    ).toBe('NAME     HOLDER\na        pod-0\nlonger   <none>\n');
  });
});

// ----- status -----

describe('status', () => {
  const lock = aLock('db');
  const lease = heldLease('db', 'web-0', 42n, 5);
  const events = [anEvent('LeaseGranted', 'Granted to pod web-0 with fencing token 42 (it was vacant)', 5)];

  it('shows the holder, its token, and the expiry from renewTime + leaseDurationSeconds', () => {
    const v = statusView(snap(lock, lease, [], events), NOW);
    expect(v).toMatchObject({
      holder: { name: 'web-0', uid: 'uid-web-0' },
      token: '42',
      lastToken: '42',
      leaseDurationSeconds: 15,
      renewTime: ago(5),
      expireTime: ago(-10),
      expiresInSeconds: 10,
    });
    expect(v.lastTransitions.map((t) => [t.reason, t.holder, t.token])).toEqual([['LeaseGranted', 'web-0', '42']]);
    expect(statusTable([v], NOW, false).split('\n')[1]).toMatch(
      /^db\s+Election\s+web-0\s+42\s+in 10s\s+0\s+Unknown\s+LeaseGranted \(5s ago\)$/,
    );
  });

  it('shows an overdue holder as such, and the last token issued in parentheses when nobody holds the lock', () => {
    expect(statusView(snap(lock, heldLease('db', 'web-0', 42n, 20)), NOW).expiresInSeconds).toBe(-5);
    const vacant = statusView(
      snap(
        { ...lock, status: { ...lock.status, fencingToken: '43' } },
        JSON.parse(JSON.stringify(releasedLease(lease, 'Released'))) as V1Lease,
      ),
      NOW,
    );
    expect([vacant.holder, vacant.token, vacant.lastToken, vacant.expireTime]).toEqual([null, null, '43', null]);
    expect(statusTable([vacant], NOW, true).split('\n')[1]).toMatch(/^ns\s+db\s+Election\s+<none>\s+\(43\)\s+<none>/);
  });

  it('lists the Mutex queue in grant order', () => {
    const m = aLock('mx', { mode: 'Mutex' });
    const queued = {
      ...m,
      status: {
        ...m.status,
        queue: [
          { pod: 'b', uid: 'u', since: ago(30), requestTime: ago(31) },
          { pod: 'a', uid: 'u', since: ago(10), requestTime: ago(40) },
        ],
      },
    };
    expect(statusView(snap(queued, undefined), NOW).queue.map((q) => q.pod)).toEqual(['b', 'a']);
  });
});

// ----- Events → transitions → history -----

describe('history', () => {
  it("reads grants from the controller's Events, combined ones included, and leaves other reasons out", () => {
    const t = transitions([
      anEvent('LeaseGranted', 'Granted to pod a with fencing token 7 (it was vacant)', 60),
      anEvent(
        'LeaseGranted',
        '(combined from similar events): Granted to pod b with fencing token 9 (the previous holder released it)',
        10,
        3,
      ),
      anEvent('Scheduled', 'not ours', 5),
    ]);
    expect(t.map((x) => [x.holder, x.token, x.cause, x.combined, x.count])).toEqual([
      ['a', '7', 'it was vacant', false, 1],
      ['b', '9', 'the previous holder released it', true, 3],
    ]);
  });

  it('orders Events of the same second (a handoff) by the tokens they name, else by write order', () => {
    const at = (e: CoreV1Event, rv: string): CoreV1Event => ({
      ...e,
      metadata: { ...e.metadata, resourceVersion: rv },
    });
    const t = transitions([
      at(anEvent('LeaseGranted', 'Granted to pod b with fencing token 10 (pod a stopped renewing)', 5), '901'),
      at(anEvent('LeaseGranted', 'Granted to pod a with fencing token 9 (it was vacant)', 5), '950'),
      at(anEvent('HolderExpired', 'Pod a stopped renewing for a full lease duration; lock handed over', 5), '900'),
    ]);
    expect(t.map((x) => `${x.reason}:${x.token ?? '-'}`)).toEqual([
      'HolderExpired:-',
      'LeaseGranted:9',
      'LeaseGranted:10',
    ]);
  });

  it('merges Events, the Lease grant no Event tells of any more, and completed runs, oldest first', () => {
    const lock = aLock('x', { mode: 'Mutex' });
    const withRuns = {
      ...lock,
      status: { ...lock.status, completedRuns: [{ runId: 'r1', completedAt: ago(30), holder: 'a', token: '7' }] },
    };
    const v = historyView(
      snap(
        withRuns,
        heldLease('x', 'b', 9n, 2),
        [],
        [
          anEvent('LeaseGranted', 'Granted to pod a with fencing token 7 (it was vacant)', 60),
          anEvent('HolderExpired', 'Pod a stopped renewing for a full lease duration; lock revoked', 20),
        ],
      ),
    );
    expect(v.entries.map((e) => [e.source, e.reason, e.holder, e.token])).toEqual([
      ['Event', 'LeaseGranted', 'a', '7'],
      ['Status', 'RunCompleted', 'a', '7'],
      ['Event', 'HolderExpired', null, null],
      ['Lease', 'Holding', 'b', '9'],
    ]);
    expect(v.grants).toBe(1);
    const text = historyTable(v, NOW);
    expect(text).toContain('What the cluster keeps:');
    expect(text).toContain('--event-ttl (1 h by default)');
  });
});

// ----- explain -----

describe('explain', () => {
  const lease = unheld('db');

  it.each<{ name: string; s: () => LockSnapshot; code: string; says?: string }>([
    {
      name: 'no pod matches the selector',
      s: () => snap(aLock('db'), lease, []),
      code: 'NoCandidatesSelected',
      says: 'No pod in namespace ns matches spec.candidates.selector (app=web).',
    },
    {
      name: 'the selected pods are not Ready',
      s: () => snap(aLock('db'), lease, [aPod('web-0', { ready: false })]),
      code: 'CandidatesNotReady',
      says: 'web-0 (not Ready)',
    },
    {
      name: 'a Mutex lock nobody asked for',
      s: () => snap(aLock('db', { mode: 'Mutex' }), lease, [aPod('web-0')]),
      code: 'NoRequests',
      says: 'annotation db.lock.fencepost.io/request',
    },
    {
      name: 'the fencing backend is down',
      s: () =>
        snap(
          aLock('db', {}, [
            {
              type: 'Degraded',
              status: 'True',
              reason: 'RedisUnavailable',
              message: 'Fencing backend Redis unavailable: connect ECONNREFUSED',
              lastTransitionTime: ago(5),
            },
          ]),
          lease,
          [aPod('web-0')],
        ),
      code: 'FencingUnavailable',
      says: 'connect ECONNREFUSED',
    },
    {
      name: 'the lock asks for a backend the controller lacks',
      s: () =>
        snap(
          aLock('db', { fencing: { backend: 'Redis' } }, [
            {
              type: 'Ready',
              status: 'False',
              reason: 'InvalidSpec',
              message: 'no --redis-url',
              lastTransitionTime: ago(5),
            },
          ]),
          lease,
          [aPod('web-0')],
        ),
      code: 'FencingNotConfigured',
      says: 'spec.fencing.backend is Redis but the controller was started without it',
    },
    {
      name: 'the lock delay after an expiry',
      s: () => {
        const l = JSON.parse(JSON.stringify(releasedLease(heldLease('db', 'web-0', 5n, 30), 'Expired'))) as V1Lease;
        l.metadata = {
          ...l.metadata,
          managedFields: [{ manager: 'fencepost', operation: 'Update', time: new Date(NOW - 4000) }],
        };
        return snap(aLock('db', { lockDelaySeconds: 10 }), l, [aPod('web-1')]);
      },
      code: 'LockDelay',
      says: 'about 6s more',
    },
    {
      name: 'a held lock',
      s: () => snap(aLock('db'), heldLease('db', 'web-0', 42n, 1), [aPod('web-0')]),
      code: 'Held',
      says: 'Pod web-0 holds the lock with fencing token 42',
    },
    {
      name: 'a vacant lock the controller could grant now',
      s: () => snap(aLock('db'), lease, [aPod('web-0')]),
      code: 'GrantPending',
      says: 'to pod web-0',
    },
    {
      name: 'a Lease with a malformed token',
      s: () => {
        const l = heldLease('db', 'web-0', 42n, 1);
        l.metadata = {
          ...l.metadata,
          annotations: { ...l.metadata?.annotations, 'fencepost.io/fencing-token': '007' },
        };
        return snap(aLock('db'), l, [aPod('web-0')]);
      },
      code: 'LeaseUnreadable',
    },
  ])('names the reason for $name: $code', ({ s, code, says }) => {
    const e = explain(s());
    expect(e.reasons.map((r) => r.code)).toEqual([code]);
    if (says !== undefined) expect(e.reasons[0]?.message).toContain(says);
  });

  it('says that a holder whose pod vanished keeps the lock until its lease runs out', () => {
    expect(codes(snap(aLock('db'), heldLease('db', 'web-0', 42n, 1), [aPod('web-1')]))).toEqual([
      'Held',
      'HolderPodGone',
    ]);
    expect(codes(snap(aLock('db'), heldLease('db', 'web-0', 42n, 1), [aPod('web-0', { ready: false })]))).toEqual([
      'Held',
      'HolderNotReady',
    ]);
  });

  it('names a lowered Lease token, a Lease deleted while held, and a missing Lease', () => {
    const lowered = { ...aLock('db'), status: { ...aLock('db').status, fencingToken: '9' } };
    const low = JSON.parse(JSON.stringify(releasedLease(heldLease('db', 'web-0', 5n, 30), 'Released'))) as V1Lease;
    expect(codes(snap(lowered, low, [aPod('web-1')]))).toEqual(['TokenRegressed', 'GrantPending']); // granted above 9, not wedged
    const lost = unheld('db');
    lost.metadata = {
      ...lost.metadata,
      annotations: { 'fencepost.io/release': 'Lost' },
      managedFields: [{ manager: 'fencepost', operation: 'Update', time: new Date(NOW - 1000) }],
    };
    lost.spec = { leaseDurationSeconds: 15 };
    expect(codes(snap(aLock('db'), lost, [aPod('web-1')]))).toEqual(['LeaseLost']);
    expect(codes(snap(aLock('db'), undefined, [aPod('web-1')]))).toEqual(['LeaseMissing']);
  });

  it('says when the holder is overdue by this clock, before the controller has ended its term', () => {
    expect(codes(snap(aLock('db'), heldLease('db', 'web-0', 42n, 20), [aPod('web-0'), aPod('web-1')]))).toEqual([
      'HolderOverdue',
      'GrantPending',
    ]);
  });

  it('says that no controller has reconciled a lock without status', () => {
    const l = aLock('db');
    const { status: _s, ...bare } = l;
    expect(codes(snap(bare, undefined, [aPod('web-0')]))[0]).toBe('NotReconciled');
  });

  it.each<{ name: string; pods: V1Pod[]; mode?: 'Mutex'; pod: string; code: string; says?: string }>([
    { name: 'a pod that does not exist', pods: [], pod: 'ghost', code: 'PodNotFound' },
    {
      name: 'a pod the selector does not select',
      pods: [aPod('api-0', { labels: { app: 'api' } })],
      pod: 'api-0',
      code: 'PodNotSelected',
      says: 'its labels (app=api) do not match spec.candidates.selector (app=web)',
    },
    {
      name: 'a pod that is not Ready',
      pods: [aPod('web-1', { ready: false })],
      pod: 'web-1',
      code: 'PodNotReady',
      says: 'phase Running, Ready condition False',
    },
    {
      name: 'a Mutex pod that did not ask',
      pods: [aPod('web-1')],
      mode: 'Mutex',
      pod: 'web-1',
      code: 'PodNotRequested',
    },
    { name: 'the holder itself', pods: [aPod('web-0')], pod: 'web-0', code: 'PodIsHolder', says: 'fencing token 42' },
    {
      name: 'a Mutex pod waiting in line',
      pods: [
        aPod('web-1', { annotations: { [podKeys('db').request]: ago(20) } }),
        aPod('web-2', { annotations: { [podKeys('db').request]: ago(30) }, age: 60 }),
      ],
      mode: 'Mutex',
      pod: 'web-2',
      code: 'PodWaiting',
      says: 'it is #2 in the queue, behind web-1',
    },
  ])('explains $name with $code', ({ pods, mode, pod, code, says }) => {
    const lock = aLock('db', mode !== undefined ? { mode } : {});
    const queued =
      mode === 'Mutex'
        ? {
            ...lock,
            status: {
              ...lock.status,
              queue: [{ pod: 'web-1', uid: 'uid-web-1', since: ago(20), requestTime: ago(20) }],
            },
          }
        : lock;
    const object = pods.find((p) => p.metadata?.name === pod);
    const e = explain(snap(queued, heldLease('db', 'web-0', 42n, 1), [aPod('web-0'), ...pods]), {
      pod: { name: pod, object },
    });
    expect(e.pod?.reasons.map((r) => r.code)).toEqual([code]);
    if (says !== undefined) expect(e.pod?.reasons[0]?.message).toContain(says);
  });

  it.each<{ view: ControllerLeaseView; code: string }>([
    {
      view: {
        state: 'found',
        lease: {
          metadata: { namespace: 'fp', name: 'fencepost-controller' },
          spec: { holderIdentity: 'ctl-0_ab', renewTime: new Date(NOW - 2000), leaseDurationSeconds: 15 },
        },
      },
      code: 'ControllerLeading',
    },
    {
      view: {
        state: 'found',
        lease: {
          metadata: { namespace: 'fp', name: 'fencepost-controller' },
          spec: { holderIdentity: 'ctl-0_ab', renewTime: new Date(NOW - 60_000), leaseDurationSeconds: 15 },
        },
      },
      code: 'ControllerNotLeading',
    },
    {
      view: { state: 'found', lease: { metadata: { namespace: 'fp', name: 'fencepost-controller' }, spec: {} } },
      code: 'ControllerNotLeading',
    },
    { view: ABSENT, code: 'ControllerLeaseAbsent' },
    { view: { state: 'unknown', detail: 'forbidden' }, code: 'ControllerUnknown' },
  ])('reports the controller as $code', ({ view, code }) => {
    const e = explain(snap(aLock('db'), lease, []), { controller: view });
    expect(e.controller.code).toBe(code);
    expect(explainText(e)).toContain(`Controller:\n  ${code}: `);
  });
});

// ----- errors -----

describe('a failed request, in one line', () => {
  it.each([
    {
      name: 'an HTTP error with a Status body',
      err: new ApiException(
        403,
        'HTTP-Code: 403\nMessage: ...\nBody: ...',
        JSON.stringify({
          kind: 'Status',
          reason: 'Forbidden',
          message: 'leases is forbidden: User "x" cannot list resource "leases"',
        }),
        {},
      ),
      line: 'HTTP 403: leases is forbidden: User "x" cannot list resource "leases"',
    },
    {
      name: "a proxy's HTML page",
      err: new ApiException(502, 'HTTP-Code: 502', '<html>bad gateway</html>', {}),
      line: 'HTTP 502',
    },
    {
      name: 'a refused connection',
      err: new TypeError('fetch failed', { cause: new Error('connect ECONNREFUSED 127.0.0.1:2') }),
      line: 'connect ECONNREFUSED 127.0.0.1:2',
    },
    { name: 'a message over several lines', err: new Error('first\nsecond'), line: 'first' },
  ])('says $name as "$line"', ({ err, line }) => {
    expect(failureOf(err)).toBe(line);
  });
});

describe('connecting', () => {
  it('names a --kubeconfig that cannot be loaded as bad usage', () => {
    const load = () => connect({ kubeconfig: '/nonexistent/kubeconfig', context: undefined, namespace: undefined });
    expect(load).toThrow(UsageError);
    expect(load).toThrow(
      '--kubeconfig: cannot load "/nonexistent/kubeconfig": kubeconfig /nonexistent/kubeconfig: ENOENT: no such file or directory',
    );
  });
});
