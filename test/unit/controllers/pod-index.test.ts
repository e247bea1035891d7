/**
 * The pod and lock indexes that spare the controller a scan of every pod and every lock of a
 * namespace on every reconcile: a lookup through them finds exactly what the scan found.
 */
import { describe, expect, it } from 'vitest';
import type { V1Pod } from '@kubernetes/client-node';
import type { DistributedLock, LabelSelector } from '../../../src/api/v1alpha1/distributedlock.ts';
import {
  LOCK_SELECTOR_INDEX,
  POD_LABEL_INDEX,
  POD_MARK_INDEX,
  lockSelectorValues,
  locksSelecting,
  podLabelValues,
  podLookup,
  podMarkValues,
  type Indexed,
} from '../../../src/controllers/distributedlock/pod-index.ts';
import { matchesSelector, slimPod } from '../../../src/controllers/distributedlock/pods.ts';
import { podKeys } from '../../../src/protocol/names.ts';
import { aLock } from '../../support/builders.ts';

/** indexed is an in-memory cache with the given indexers, as the informer keeps them. */
function indexed<T extends { metadata?: { namespace?: string; name?: string } }>(
  objs: readonly T[],
  indexers: Record<string, (o: T) => readonly string[]>,
): Indexed<T> {
  return {
    list: (ns) => objs.filter((o) => ns === undefined || o.metadata?.namespace === ns),
    byIndex: (index, value) => objs.filter((o) => indexers[index]?.(o).includes(value) === true),
  };
}

const pod = (
  name: string,
  labels: Record<string, string>,
  annotations: Record<string, string> = {},
  ns = 'default',
): V1Pod => ({
  metadata: { name, namespace: ns, uid: `${name}-uid`, labels, annotations },
  spec: { containers: [{ name: 'app' }] },
});

const pods = [
  pod('a', { app: 'web', tier: 'front' }),
  pod('b', { app: 'web', tier: 'back' }),
  pod('c', { app: 'db' }),
  pod('d', { other: 'x' }, { [podKeys('lock1').token]: '7' }),
  pod('e', { [podKeys('lock2').holder]: 'true' }),
  pod('f', { app: 'web' }, {}, 'elsewhere'),
];
const cache = indexed(pods, { [POD_LABEL_INDEX]: podLabelValues, [POD_MARK_INDEX]: podMarkValues });
const lookup = podLookup(cache);
const names = (ps: readonly V1Pod[]): string[] => ps.map((p) => p.metadata?.name ?? '').sort();

describe('podLookup', () => {
  it.each<{ name: string; selector: LabelSelector }>([
    { name: 'matchLabels', selector: { matchLabels: { app: 'web' } } },
    { name: 'two matchLabels (the rarer one narrows)', selector: { matchLabels: { app: 'web', tier: 'back' } } },
    { name: 'In', selector: { matchExpressions: [{ key: 'app', operator: 'In', values: ['web', 'db'] }] } },
    { name: 'Exists', selector: { matchExpressions: [{ key: 'tier', operator: 'Exists' }] } },
    {
      name: 'NotIn only (no index: the list)',
      selector: { matchExpressions: [{ key: 'app', operator: 'NotIn', values: ['web'] }] },
    },
    { name: 'DoesNotExist only', selector: { matchExpressions: [{ key: 'app', operator: 'DoesNotExist' }] } },
    {
      name: 'matchLabels and NotIn',
      selector: {
        matchLabels: { app: 'web' },
        matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['back'] }],
      },
    },
    { name: 'no match', selector: { matchLabels: { app: 'none' } } },
    { name: 'empty (matches none)', selector: {} },
  ])('selects what a scan of the namespace selects: $name', ({ selector }) => {
    const scan = pods.filter(
      (p) => p.metadata?.namespace === 'default' && matchesSelector(selector, p.metadata.labels ?? {}),
    );
    expect(names(lookup.selected('default', selector))).toEqual(names(scan));
  });

  it('finds the pods marked for a lock by its holder label or its token annotation, in that namespace only', () => {
    expect(names(lookup.marked('default', 'lock1'))).toEqual(['d']);
    expect(names(lookup.marked('default', 'lock2'))).toEqual(['e']);
    expect(names(lookup.marked('elsewhere', 'lock1'))).toEqual([]);
  });
});

describe('locksSelecting', () => {
  const lock = (name: string, selector: LabelSelector, ns = 'default'): DistributedLock => {
    const l = aLock(name);
    return { ...l, metadata: { ...l.metadata, namespace: ns }, spec: { ...l.spec, candidates: { selector } } };
  };
  const locks = [
    lock('web', { matchLabels: { app: 'web' } }),
    lock('web-back', { matchLabels: { app: 'web', tier: 'back' } }),
    lock('any-tier', { matchExpressions: [{ key: 'tier', operator: 'Exists' }] }),
    lock('web-or-db', { matchExpressions: [{ key: 'app', operator: 'In', values: ['web', 'db'] }] }),
    lock('not-web', { matchExpressions: [{ key: 'app', operator: 'NotIn', values: ['web'] }] }),
    lock('web-elsewhere', { matchLabels: { app: 'web' } }, 'elsewhere'),
  ];
  const lockCache = indexed(locks, { [LOCK_SELECTOR_INDEX]: lockSelectorValues });
  it.each(pods.map((p) => [p.metadata?.name ?? '', p] as const))(
    'finds every lock that selects pod %s, as a scan does',
    (_n, p) => {
      const scan = locks.filter(
        (l) =>
          l.metadata.namespace === p.metadata?.namespace &&
          matchesSelector(l.spec.candidates.selector, p.metadata?.labels ?? {}),
      );
      const found = locksSelecting(lockCache, p).map((l) => l.metadata.name ?? '');
      expect(found.sort()).toEqual(scan.map((l) => l.metadata.name ?? '').sort());
    },
  );
});

describe('slimPod', () => {
  it('keeps what the controller reads and drops the rest', () => {
    const full: V1Pod = {
      metadata: {
        name: 'a',
        namespace: 'default',
        uid: 'u',
        resourceVersion: '5',
        labels: { app: 'web' },
        annotations: { x: 'y' },
        creationTimestamp: new Date(1000),
        managedFields: [{ manager: 'kubectl', operation: 'Apply' }],
      },
      spec: { containers: [{ name: 'app', image: 'img', env: [{ name: 'A', value: 'B' }] }], nodeName: 'n1' },
      status: {
        phase: 'Running',
        hostIP: '10.0.0.1',
        conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: new Date(2000) }],
        containerStatuses: [
          {
            name: 'app',
            image: 'img',
            imageID: 'sha',
            ready: true,
            restartCount: 0,
            state: { running: { startedAt: new Date(3000) } },
          },
        ],
      },
    };
    expect(slimPod(full)).toEqual({
      metadata: {
        name: 'a',
        namespace: 'default',
        uid: 'u',
        resourceVersion: '5',
        labels: { app: 'web' },
        annotations: { x: 'y' },
        creationTimestamp: new Date(1000),
      },
      spec: { containers: [{ name: 'app' }] },
      status: {
        phase: 'Running',
        conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: new Date(2000) }], // kept: preemption's hysteresis
        containerStatuses: [
          {
            name: 'app',
            image: '',
            imageID: '',
            ready: true,
            restartCount: 0,
            state: { running: { startedAt: new Date(3000) } },
          },
        ],
      },
    });
  });
});
