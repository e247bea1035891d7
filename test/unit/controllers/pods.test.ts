import { describe, expect, it } from 'vitest';
import type { V1ContainerStatus, V1Pod, V1PodSpec, V1PodStatus } from '@kubernetes/client-node';
import type { LabelSelector } from '../../../src/api/v1alpha1/distributedlock.ts';
import {
  byAge,
  byPriority,
  isCandidate,
  matchesSelector,
  mutexOrder,
  nextQueue,
  parsePriority,
  summarizePod,
} from '../../../src/controllers/distributedlock/pods.ts';
import type { QueuedRequest } from '../../../src/api/v1alpha1/distributedlock.ts';
import type { PodSummary } from '../../../src/controllers/distributedlock/pods.ts';
import {
  aPod,
  createdAt,
  deepFreeze,
  terminated,
  terminating,
  unready,
  withAnnotations,
  withLabels,
  withUid,
  type PodOption,
} from '../../support/builders.ts';
import { lockKeyPrefix, podKeys } from '../../../src/protocol/names.ts';

describe('matchesSelector', () => {
  const labels = { app: 'web', tier: 'db', empty: '' };
  it.each<{ name: string; selector: LabelSelector; labels?: Record<string, string>; want: boolean }>([
    { name: 'matchLabels all equal matches', selector: { matchLabels: { app: 'web', tier: 'db' } }, want: true },
    {
      name: 'matchLabels with one different value does not match',
      selector: { matchLabels: { app: 'web', tier: 'cache' } },
      want: false,
    },
    {
      name: 'matchLabels with a missing key does not match',
      selector: { matchLabels: { role: 'leader' } },
      want: false,
    },
    {
      name: 'matchLabels with an empty value matches a label set to the empty string',
      selector: { matchLabels: { empty: '' } },
      want: true,
    },
    {
      name: 'matchLabels with an empty value does not match an absent label',
      selector: { matchLabels: { missing: '' } },
      want: false,
    },
    {
      name: 'In matches when the value is listed',
      selector: { matchExpressions: [{ key: 'tier', operator: 'In', values: ['cache', 'db'] }] },
      want: true,
    },
    {
      name: 'In does not match when the value is not listed',
      selector: { matchExpressions: [{ key: 'tier', operator: 'In', values: ['cache'] }] },
      want: false,
    },
    {
      name: 'In does not match when the key is absent',
      selector: { matchExpressions: [{ key: 'role', operator: 'In', values: ['leader'] }] },
      want: false,
    },
    {
      name: 'NotIn does not match when the value is listed',
      selector: { matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['db'] }] },
      want: false,
    },
    {
      name: 'NotIn matches when the value is not listed',
      selector: { matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['cache'] }] },
      want: true,
    },
    {
      name: 'NotIn matches when the key is absent (metav1 semantics)',
      selector: { matchExpressions: [{ key: 'role', operator: 'NotIn', values: ['leader'] }] },
      want: true,
    },
    {
      name: 'Exists matches a present key',
      selector: { matchExpressions: [{ key: 'tier', operator: 'Exists' }] },
      want: true,
    },
    {
      name: 'Exists matches a key whose value is empty',
      selector: { matchExpressions: [{ key: 'empty', operator: 'Exists' }] },
      want: true,
    },
    {
      name: 'Exists does not match an absent key',
      selector: { matchExpressions: [{ key: 'role', operator: 'Exists' }] },
      want: false,
    },
    {
      name: 'DoesNotExist matches an absent key',
      selector: { matchExpressions: [{ key: 'role', operator: 'DoesNotExist' }] },
      want: true,
    },
    {
      name: 'DoesNotExist does not match a present key',
      selector: { matchExpressions: [{ key: 'tier', operator: 'DoesNotExist' }] },
      want: false,
    },
    {
      name: 'matchLabels and matchExpressions are ANDed: both hold',
      selector: {
        matchLabels: { app: 'web' },
        matchExpressions: [
          { key: 'tier', operator: 'In', values: ['db'] },
          { key: 'role', operator: 'DoesNotExist' },
        ],
      },
      want: true,
    },
    {
      name: 'matchLabels and matchExpressions are ANDed: one expression fails',
      selector: {
        matchLabels: { app: 'web' },
        matchExpressions: [
          { key: 'tier', operator: 'In', values: ['db'] },
          { key: 'app', operator: 'DoesNotExist' },
        ],
      },
      want: false,
    },
    { name: 'the empty selector matches nothing', selector: {}, want: false },
    {
      name: 'a selector with empty matchLabels and matchExpressions matches nothing',
      selector: { matchLabels: {}, matchExpressions: [] },
      want: false,
    },
    {
      name: 'the empty selector matches nothing, not even a pod without labels',
      selector: {},
      labels: {},
      want: false,
    },
    {
      name: 'a NotIn-only selector matches a pod without labels',
      selector: { matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['db'] }] },
      labels: {},
      want: true,
    },
    {
      name: 'a label named like an Object.prototype property is not present unless set',
      selector: { matchExpressions: [{ key: 'constructor', operator: 'Exists' }] },
      want: false,
    },
  ])('$name', ({ selector, labels: l, want }) => {
    expect(matchesSelector(deepFreeze(selector), deepFreeze({ ...(l ?? labels) }))).toBe(want);
  });
});

// ----- summarizePod -----

const T0 = new Date('2025-01-01T00:00:00Z');
const running: V1ContainerStatus = {
  name: 'app',
  image: 'app:1',
  imageID: '',
  ready: true,
  restartCount: 0,
  state: { running: { startedAt: T0 } },
};
const stopped: V1ContainerStatus = {
  name: 'app',
  image: 'app:1',
  imageID: '',
  ready: false,
  restartCount: 0,
  state: { terminated: { exitCode: 137, startedAt: T0, finishedAt: T0 } },
};
const agent = (s: V1ContainerStatus): V1ContainerStatus => ({ ...s, name: 'fencepost-agent' });
const debug = (s: V1ContainerStatus): V1ContainerStatus => ({ ...s, name: 'debugger' });
const completed: V1ContainerStatus = {
  name: 'init-db',
  image: 'init:1',
  imageID: '',
  ready: false,
  restartCount: 0,
  state: { terminated: { exitCode: 0, reason: 'Completed', startedAt: T0, finishedAt: T0 } },
};

/** APP_ONLY: one application container. */
const APP_ONLY: V1PodSpec = { containers: [{ name: 'app' }] };
/** TWO_CONTAINERS: the application and the agent as a regular container. */
const TWO_CONTAINERS: V1PodSpec = { containers: [{ name: 'app' }, { name: 'fencepost-agent' }] };
/** NATIVE_SIDECAR: a regular init container, the agent as a native sidecar, the application. */
const NATIVE_SIDECAR: V1PodSpec = {
  initContainers: [{ name: 'init-db' }, { name: 'fencepost-agent', restartPolicy: 'Always' }],
  containers: [{ name: 'app' }],
};
/** DEBUGGED: the application with an ephemeral debug container attached. */
const DEBUGGED: V1PodSpec = { containers: [{ name: 'app' }], ephemeralContainers: [{ name: 'debugger' }] };

function kubePod(
  status: V1PodStatus | undefined,
  metadata: V1Pod['metadata'] = { name: 'web-0', uid: 'u-1', creationTimestamp: T0 },
  spec: V1PodSpec | null = APP_ONLY, // null: no spec at all (undefined would mean the default)
): V1Pod {
  return deepFreeze({ metadata, ...(spec !== null ? { spec } : {}), ...(status !== undefined ? { status } : {}) });
}
const readyCond = (s: 'True' | 'False'): NonNullable<V1PodStatus['conditions']> => [{ type: 'Ready', status: s }];
const META: V1Pod['metadata'] = { name: 'web-0', uid: 'u-1', creationTimestamp: T0 };
/** podGcMark is what kube-controller-manager's pod GC writes on a pod of a deleted node: phase and condition only. */
const podGcMark: Pick<V1PodStatus, 'phase' | 'conditions'> = {
  phase: 'Failed',
  conditions: [
    { type: 'Ready', status: 'True' },
    { type: 'DisruptionTarget', status: 'True', reason: 'DeletionByPodGC', message: 'PodGC: node no longer exists' },
  ],
};

describe('summarizePod', () => {
  it.each<{ name: string; pod: V1Pod; want: Partial<PodSummary> }>([
    {
      name: 'a Running pod with Ready=True is ready and not terminated',
      pod: kubePod({ phase: 'Running', conditions: readyCond('True'), containerStatuses: [running] }),
      want: { ready: true, terminated: false, terminating: false },
    },
    {
      name: 'a Running pod with Ready=False is not ready',
      pod: kubePod({ phase: 'Running', conditions: readyCond('False'), containerStatuses: [running] }),
      want: { ready: false, terminated: false },
    },
    {
      name: 'a Running pod without a Ready condition is not ready',
      pod: kubePod({
        phase: 'Running',
        conditions: [{ type: 'ContainersReady', status: 'True' }],
        containerStatuses: [running],
      }),
      want: { ready: false, terminated: false },
    },
    {
      name: 'a Pending pod is not ready even with a Ready=True condition',
      pod: kubePod({ phase: 'Pending', conditions: readyCond('True') }),
      want: { ready: false, terminated: false },
    },
    {
      name: 'a pod without status is neither ready nor terminated',
      pod: kubePod(undefined),
      want: { ready: false, terminated: false },
    },
    {
      name: 'a Succeeded pod whose container terminated is terminated and not ready',
      pod: kubePod({ phase: 'Succeeded', conditions: readyCond('False'), containerStatuses: [stopped] }),
      want: { ready: false, terminated: true },
    },
    {
      name: 'a Failed pod without container statuses is not terminated: the phase is no proof',
      pod: kubePod({ phase: 'Failed' }),
      want: { ready: false, terminated: false },
    },
    {
      name: 'a pod the pod GC marked Failed (DeletionByPodGC) whose containers still run is not terminated',
      pod: kubePod({ ...podGcMark, containerStatuses: [running] }),
      want: { ready: false, terminated: false },
    },
    {
      name: 'a pod the pod GC marked Failed whose native sidecar agent still runs is not terminated',
      pod: kubePod(
        {
          ...podGcMark,
          initContainerStatuses: [completed, agent(running)],
          containerStatuses: [running],
        },
        META,
        NATIVE_SIDECAR,
      ),
      want: { ready: false, terminated: false },
    },
    {
      name: 'a Succeeded phase with a container still running is not terminated',
      pod: kubePod({ phase: 'Succeeded', containerStatuses: [running] }, META, APP_ONLY),
      want: { ready: false, terminated: false },
    },
    {
      name: 'a Running pod whose every container terminated is terminated, and not ready despite a stale Ready=True',
      pod: kubePod(
        { phase: 'Running', conditions: readyCond('True'), containerStatuses: [stopped, agent(stopped)] },
        META,
        TWO_CONTAINERS,
      ),
      want: { ready: false, terminated: true },
    },
    {
      name: 'a pod with one container still running is not terminated',
      pod: kubePod(
        { phase: 'Running', conditions: readyCond('False'), containerStatuses: [stopped, agent(running)] },
        META,
        TWO_CONTAINERS,
      ),
      want: { ready: false, terminated: false },
    },
    {
      name: 'a pod with a container that has no status yet is not terminated',
      pod: kubePod({ phase: 'Failed', containerStatuses: [stopped] }, META, TWO_CONTAINERS),
      want: { ready: false, terminated: false },
    },
    {
      name: 'a status for a container the spec does not name does not count',
      pod: kubePod({ phase: 'Failed', containerStatuses: [agent(stopped)] }, META, APP_ONLY),
      want: { terminated: false },
    },
    {
      name: 'a pod whose main container terminated but whose native sidecar still runs is not terminated',
      pod: kubePod(
        {
          phase: 'Running',
          conditions: readyCond('False'),
          initContainerStatuses: [completed, agent(running)],
          containerStatuses: [stopped],
        },
        META,
        NATIVE_SIDECAR,
      ),
      want: { ready: false, terminated: false },
    },
    {
      name: 'a pod whose native sidecar has no init container status is not terminated',
      pod: kubePod({ phase: 'Failed', containerStatuses: [stopped] }, META, NATIVE_SIDECAR),
      want: { terminated: false },
    },
    {
      name: 'a pod whose main container, native sidecar and init container all terminated is terminated',
      pod: kubePod(
        { phase: 'Failed', initContainerStatuses: [completed, agent(stopped)], containerStatuses: [stopped] },
        META,
        NATIVE_SIDECAR,
      ),
      want: { ready: false, terminated: true },
    },
    {
      name: 'a pod with an ephemeral container still running is not terminated',
      pod: kubePod(
        { phase: 'Failed', containerStatuses: [stopped], ephemeralContainerStatuses: [debug(running)] },
        META,
        DEBUGGED,
      ),
      want: { terminated: false },
    },
    {
      name: 'a pod whose ephemeral container terminated too is terminated',
      pod: kubePod(
        { phase: 'Failed', containerStatuses: [stopped], ephemeralContainerStatuses: [debug(stopped)] },
        META,
        DEBUGGED,
      ),
      want: { terminated: true },
    },
    {
      name: 'a crashed container waiting to restart is not terminated',
      pod: kubePod(
        {
          phase: 'Running',
          containerStatuses: [
            { ...stopped, state: { waiting: { reason: 'CrashLoopBackOff' } }, lastState: stopped.state ?? {} },
          ],
        },
        META,
        APP_ONLY,
      ),
      want: { terminated: false },
    },
    {
      name: 'a pod without a spec is not terminated, whatever its statuses say',
      pod: kubePod({ phase: 'Failed', containerStatuses: [stopped] }, META, null),
      want: { terminated: false },
    },
    {
      name: 'a Running pod with no container statuses yet is not terminated',
      pod: kubePod({ phase: 'Running', conditions: readyCond('True'), containerStatuses: [] }),
      want: { ready: true, terminated: false },
    },
    {
      name: 'a pod with a deletionTimestamp is terminating, and may still be ready',
      pod: kubePod(
        { phase: 'Running', conditions: readyCond('True'), containerStatuses: [running] },
        { name: 'web-0', uid: 'u-1', deletionTimestamp: T0 },
      ),
      want: { ready: true, terminating: true, terminated: false },
    },
  ])('$name', ({ pod, want }) => {
    expect(summarizePod(pod)).toMatchObject(want);
  });

  it('carries name, uid, labels, annotations and the creation time in epoch milliseconds', () => {
    const pod = kubePod(
      { phase: 'Running' },
      {
        name: 'web-0',
        uid: 'u-1',
        creationTimestamp: new Date('2025-01-01T00:00:01.500Z'),
        labels: { app: 'web' },
        annotations: { note: 'x' },
      },
    );
    expect(summarizePod(pod)).toEqual({
      ref: { name: 'web-0', uid: 'u-1' },
      labels: { app: 'web' },
      annotations: { note: 'x' },
      createdAt: Date.parse('2025-01-01T00:00:01.500Z'),
      ready: false,
      terminating: false,
      terminated: false,
      priority: 0,
    });
  });

  it('a pod without metadata gets empty names, no labels and creation time 0', () => {
    expect(summarizePod(deepFreeze({}))).toEqual({
      ref: { name: '', uid: '' },
      labels: {},
      annotations: {},
      createdAt: 0,
      ready: false,
      terminating: false,
      terminated: false,
      priority: 0,
    });
  });
});

describe('isCandidate', () => {
  const selector: LabelSelector = deepFreeze({ matchLabels: { app: 'web' } });
  it.each<{ name: string; pod: PodSummary; want: boolean }>([
    { name: 'a Ready selected pod is a candidate', pod: aPod('web-0'), want: true },
    { name: 'an unready pod is not', pod: aPod('web-0', unready()), want: false },
    { name: 'a terminating pod is not, even while Ready', pod: aPod('web-0', terminating()), want: false },
    { name: 'a terminated pod is not', pod: aPod('web-0', terminated()), want: false },
    { name: 'an unselected pod is not', pod: aPod('api-0', withLabels({ app: 'api' })), want: false },
  ])('$name', ({ pod, want }) => {
    expect(isCandidate(pod, selector)).toBe(want);
  });
});

describe('byAge', () => {
  it('orders oldest first, then by name, and does not depend on the input order', () => {
    const pods = [aPod('c', createdAt(2)), aPod('b', createdAt(1)), aPod('z', createdAt(0)), aPod('a', createdAt(1))];
    const want = ['z', 'a', 'b', 'c'];
    expect([...pods].sort(byAge).map((p) => p.ref.name)).toEqual(want);
    expect(
      [...pods]
        .reverse()
        .sort(byAge)
        .map((p) => p.ref.name),
    ).toEqual(want);
  });

  it('is zero only for the same name and age', () => {
    expect(byAge(aPod('a', createdAt(1)), aPod('a', createdAt(1)))).toBe(0);
    expect(Math.sign(byAge(aPod('a', createdAt(1)), aPod('b', createdAt(1))))).toBe(-1);
    expect(Math.sign(byAge(aPod('b', createdAt(1)), aPod('a', createdAt(1))))).toBe(1);
  });
});

// The Mutex queue order is the controller's record (the order in which it first saw each request),
// never the time a pod wrote in its own request annotation, which anyone who can patch the pod
// could backdate to jump the queue.
describe('mutexOrder and nextQueue (the Mutex queue)', () => {
  const qKeys = podKeys('db');
  const selector: LabelSelector = deepFreeze({ matchLabels: { app: 'web' } });
  const NOW = new Date('2026-12-04T06:00:00.000Z');
  const asks = (name: string, at: string, ...opts: PodOption[]): PodSummary =>
    aPod(name, withAnnotations({ [qKeys.request]: at }), ...opts);
  const entry = (pod: string, requestTime: string, since = '2026-12-04T05:00:00.000Z'): QueuedRequest => ({
    pod,
    uid: `${pod}-uid`,
    since,
    requestTime,
  });
  const order = (record: readonly QueuedRequest[], pods: readonly PodSummary[]): string[] =>
    [...pods].sort(mutexOrder(record, qKeys)).map((p) => p.ref.name);
  const next = (record: readonly QueuedRequest[], pods: readonly PodSummary[], holder?: PodSummary, max = 100) =>
    nextQueue(deepFreeze(record), deepFreeze(pods), { keys: qKeys, selector, holder: holder?.ref, now: NOW, max });

  it.each<{ name: string; record: QueuedRequest[]; pods: PodSummary[]; want: string[] }>([
    {
      name: 'a request dated 1970 does not jump a recorded one',
      record: [entry('early', '2026-12-04T05:00:00.000Z'), entry('late', '2026-12-04T05:00:01.000Z')],
      pods: [asks('early', '2026-12-04T05:00:00.000Z'), asks('late', '1970-01-01T00:00:00.000Z')],
      want: ['early', 'late'],
    },
    {
      name: 'recorded requests go in the record order, whatever their request times',
      record: [entry('b', '2026-12-04T05:00:09.000Z'), entry('a', '2026-12-04T05:00:01.000Z')],
      pods: [asks('a', '2026-12-04T05:00:01.000Z'), asks('b', '2026-12-04T05:00:09.000Z')],
      want: ['b', 'a'],
    },
    {
      name: 'a request with no record goes behind every recorded one, even dated 1970 and from an older pod',
      record: [entry('b', '2026-12-04T05:00:00.000Z')],
      pods: [
        asks('b', '2026-12-04T05:00:00.000Z', createdAt(2_000)),
        asks('a', '1970-01-01T00:00:00.000Z', createdAt(1)),
      ],
      want: ['b', 'a'],
    },
    {
      name: 'requests with no record (a cold start): oldest pod first, whatever the request times',
      record: [],
      pods: [
        asks('young', '1970-01-01T00:00:00.000Z', createdAt(3_000)),
        asks('old', '2026-12-04T05:00:09.000Z', createdAt(1_000)),
      ],
      want: ['old', 'young'],
    },
    {
      name: 'with no record and the same creation time, the pod’s request time breaks the tie, then the name',
      record: [],
      pods: [
        asks('c', '2026-12-04T05:00:02.000Z', createdAt(1_000)),
        asks('b', '2026-12-04T05:00:01.000Z', createdAt(1_000)),
        asks('a', '2026-12-04T05:00:02.000Z', createdAt(1_000)),
      ],
      want: ['b', 'a', 'c'],
    },
    {
      name: 'a recorded request whose time changed keeps its place: asking again while waiting, or a forged time, changes nothing',
      record: [entry('a', '2026-12-04T05:00:00.000Z'), entry('b', '2026-12-04T05:00:01.000Z')],
      pods: [asks('a', '2026-12-04T05:30:00.000Z'), asks('b', '1970-01-01T00:00:00.000Z')],
      want: ['a', 'b'],
    },
    {
      name: 'an entry of another incarnation of the pod (same name, new uid) is not its record',
      record: [entry('a', '2026-12-04T05:00:00.000Z'), entry('b', '2026-12-04T05:00:01.000Z')],
      pods: [asks('a', '2026-12-04T05:00:00.000Z', withUid('a-new')), asks('b', '2026-12-04T05:00:01.000Z')],
      want: ['b', 'a'],
    },
    {
      name: 'the same time written another way is the same request',
      record: [entry('a', '2026-12-04T05:00:00.000Z'), entry('b', '2026-12-04T05:00:01.000Z')],
      pods: [asks('b', '2026-12-04T05:00:01Z'), asks('a', '2026-12-04T07:00:00+02:00')],
      want: ['a', 'b'],
    },
  ])('$name', ({ record, pods, want }) => {
    expect(order(deepFreeze(record), deepFreeze(pods))).toEqual(want);
    expect(order(deepFreeze(record), deepFreeze([...pods].reverse()))).toEqual(want);
  });

  it('appends a new request at the back with since = now, and keeps recorded entries as they were', () => {
    const record = [entry('b', '2026-12-04T05:00:01.000Z')];
    expect(
      next(record, [asks('a', '1970-01-01T00:00:00.000Z', createdAt(1)), asks('b', '2026-12-04T05:00:01.000Z')]),
    ).toEqual([
      entry('b', '2026-12-04T05:00:01.000Z'),
      { pod: 'a', uid: 'a-uid', since: NOW.toISOString(), requestTime: '1970-01-01T00:00:00.000Z' },
    ]);
  });

  it('drops the holder, withdrawn requests, terminating and deselected pods; keeps an unready one in place', () => {
    const record = ['h', 'gone', 'withdrawn', 'leaving', 'moved', 'unready', 'stays'].map((n) =>
      entry(n, '2026-12-04T05:00:00.000Z'),
    );
    const at = '2026-12-04T05:00:00.000Z';
    const holder = asks('h', at);
    const pods = [
      holder,
      aPod('withdrawn'),
      asks('leaving', at, terminating()),
      asks('moved', at, withLabels({ app: 'api' })),
      asks('unready', at, unready()),
      asks('stays', at),
    ];
    expect(next(record, pods, holder).map((e) => e.pod)).toEqual(['unready', 'stays']);
  });

  it('a holder that asks again after its term goes to the back', () => {
    const at = '2026-12-04T05:00:00.000Z';
    const h = asks('h', at, createdAt(1));
    const whileHeld = next([entry('w', at)], [h, asks('w', at, createdAt(2_000))], h);
    expect(whileHeld.map((e) => e.pod)).toEqual(['w']);
    expect(next(whileHeld, [h, asks('w', at, createdAt(2_000))], undefined).map((e) => e.pod)).toEqual(['w', 'h']);
  });

  it('a request whose time changed while it stayed keeps its entry as first seen (since and requestTime)', () => {
    const record = [entry('a', '2026-12-04T05:00:00.000Z'), entry('b', '2026-12-04T05:00:01.000Z')];
    expect(next(record, [asks('a', '2026-12-04T05:30:00.000Z'), asks('b', '1970-01-01T00:00:00.000Z')])).toEqual(
      record,
    );
  });

  it('a request withdrawn and made again goes to the back, with a new entry', () => {
    const record = [entry('a', '2026-12-04T05:00:00.000Z'), entry('b', '2026-12-04T05:00:01.000Z')];
    const withdrawn = next(record, [aPod('a'), asks('b', '2026-12-04T05:00:01.000Z')]);
    expect(withdrawn).toEqual([entry('b', '2026-12-04T05:00:01.000Z')]);
    expect(
      next(withdrawn, [asks('a', '1970-01-01T00:00:00.000Z', createdAt(1)), asks('b', '2026-12-04T05:00:01.000Z')]),
    ).toEqual([
      entry('b', '2026-12-04T05:00:01.000Z'),
      { pod: 'a', uid: 'a-uid', since: NOW.toISOString(), requestTime: '1970-01-01T00:00:00.000Z' },
    ]);
  });

  it('records at most max requests, the first in order; the rest queue behind them unrecorded', () => {
    const at = '2026-12-04T05:00:00.000Z';
    const pods = [0, 1, 2, 3].map((i) => asks(`p${i}`, at, createdAt(10 - i)));
    expect(next([entry('p0', at)], pods, undefined, 2).map((e) => e.pod)).toEqual(['p0', 'p3']);
  });

  it('ignores a request that is not a time', () => {
    expect(next([], [asks('a', 'soon'), asks('b', '2026-12-04T05:00:00.000Z')]).map((e) => e.pod)).toEqual(['b']);
  });

  it('records a time outside years 0000-9999 as the signed-year form, within the CRD’s 32 characters', () => {
    const q = next([], [asks('a', '+275760-09-13T00:00:00.000Z')]);
    expect(q.map((e) => e.requestTime)).toEqual(['+275760-09-13T00:00:00.000Z']);
    expect(q[0]?.requestTime.length).toBeLessThanOrEqual(32);
  });
});

describe('podKeys', () => {
  it('puts every key under the per-lock prefix <lock>.lock.fencepost.io', () => {
    expect(lockKeyPrefix('db')).toBe('db.lock.fencepost.io');
    expect(podKeys('db')).toEqual({
      holder: 'db.lock.fencepost.io/holder',
      token: 'db.lock.fencepost.io/fencing-token',
      lease: 'db.lock.fencepost.io/lease',
      acquireTime: 'db.lock.fencepost.io/acquire-time',
      expireTime: 'db.lock.fencepost.io/expire-time',
      request: 'db.lock.fencepost.io/request',
      runId: 'db.lock.fencepost.io/run-id',
    });
  });

  it('keeps the keys of two locks apart, so that one pod can hold both', () => {
    const a = Object.values(podKeys('a'));
    const b = Object.values(podKeys('b'));
    expect(a.filter((k) => b.includes(k))).toEqual([]);
  });

  it('gives a 63-character lock name a valid label key (prefix at most 253, name at most 63)', () => {
    const name = 'x'.repeat(63);
    const keys: readonly string[] = Object.values(podKeys(name));
    for (const key of keys) {
      const slash = key.indexOf('/');
      const prefix = key.slice(0, slash);
      const local = key.slice(slash + 1);
      expect(prefix.length).toBeLessThanOrEqual(253);
      expect(local.length).toBeLessThanOrEqual(63);
      expect(prefix).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/);
    }
  });
});

describe('parsePriority', () => {
  it.each<{ value: string; want: number | undefined }>([
    { value: '0', want: 0 },
    { value: '10', want: 10 },
    { value: '-5', want: -5 },
    { value: '2147483647', want: 2147483647 },
    { value: '-2147483648', want: -2147483648 },
    { value: '2147483648', want: undefined },
    { value: '-2147483649', want: undefined },
    { value: '+1', want: undefined },
    { value: '01', want: undefined },
    { value: '-0', want: undefined },
    { value: '1.5', want: undefined },
    { value: ' 1', want: undefined },
    { value: 'high', want: undefined },
    { value: '', want: undefined },
  ])('$value reads as $want', ({ value, want }) => {
    expect(parsePriority(value)).toBe(want);
  });

  it('summarizePod reads the annotation; an invalid value counts as 0 and is kept for the Event', () => {
    const pod = (v: string): V1Pod => ({
      metadata: { name: 'p', uid: 'u', annotations: { 'fencepost.io/priority': v } },
    });
    expect(summarizePod(pod('7'))).toMatchObject({ priority: 7 });
    expect(summarizePod(pod('7')).invalidPriority).toBeUndefined();
    expect(summarizePod(pod('seven'))).toMatchObject({ priority: 0, invalidPriority: 'seven' });
    expect(summarizePod({ metadata: { name: 'p', uid: 'u' } })).toMatchObject({ priority: 0 });
  });
});

describe('byPriority', () => {
  const prio =
    (v: number): PodOption =>
    (d) => {
      d.priority = v;
    };
  it('higher priority first, then the existing order (oldest first, then name)', () => {
    const old = aPod('old', createdAt(1_000));
    const young = aPod('young', createdAt(5_000), prio(10));
    const youngToo = aPod('a-young', createdAt(5_000), prio(10));
    const low = aPod('low', createdAt(500), prio(-1));
    expect([old, young, low, youngToo].sort(byPriority).map((p) => p.ref.name)).toEqual([
      'a-young',
      'young',
      'old',
      'low',
    ]);
  });
  it('without priorities it is byAge', () => {
    const x = aPod('x', createdAt(2_000));
    const y = aPod('y', createdAt(1_000));
    expect([x, y].sort(byPriority)).toEqual([x, y].sort(byAge));
  });
});
