import type { KubernetesListObject, KubernetesObject } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../../src/observability/logger.ts';
import { ControllerBuilder, collectionPath, type InformerFactory } from '../../../src/runtime/builder.ts';
import type { ObjectKey, Reconciler } from '../../../src/runtime/controller.ts';
import type {
  ChangeHandler,
  ListPage,
  SuperviseInformerOptions,
  SupervisedInformer,
} from '../../../src/runtime/informer.ts';
import { FakeClock, flushAsync } from '../../support/fake-clock.ts';

/** FakeInformer records how the builder made it, and lets a test deliver changes and fail the sync. */
interface FakeInformer {
  readonly opts: SuperviseInformerOptions<KubernetesObject>;
  deliver(obj: KubernetesObject, kind?: 'add' | 'update' | 'delete'): void;
  objects: KubernetesObject[];
  started: boolean;
  stopped: boolean;
  failSync: boolean;
}

function fakes(): { factory: InformerFactory; made: FakeInformer[] } {
  const made: FakeInformer[] = [];
  const factory = <T extends KubernetesObject>(opts: SuperviseInformerOptions<T>): SupervisedInformer<T> => {
    const handlers: ChangeHandler<T>[] = [];
    const f: FakeInformer = {
      opts: opts as unknown as SuperviseInformerOptions<KubernetesObject>,
      deliver: (obj, kind = 'add') => {
        for (const h of handlers) h(obj as T, kind);
      },
      objects: [],
      started: false,
      stopped: false,
      failSync: false,
    };
    made.push(f);
    return {
      start: () => {
        f.started = true;
        return f.failSync ? Promise.reject(new Error('sync timed out')) : Promise.resolve();
      },
      hasSynced: () => f.started && !f.failSync,
      watching: () => f.started && !f.stopped,
      list: () => f.objects as T[],
      get: () => undefined,
      byIndex: () => [],
      onChange: (h) => {
        handlers.push(h);
      },
      stop: () => {
        f.stopped = true;
        return Promise.resolve();
      },
    };
  };
  return { factory: factory, made };
}

const obj = (namespace: string, name: string, labels: Record<string, string> = {}): KubernetesObject => ({
  metadata: { namespace, name, labels },
});

function builder(
  factory: InformerFactory,
  lists: [string, string | undefined, ListPage][] = [],
  namespace?: string,
): { b: ControllerBuilder; clock: FakeClock } {
  const clock = new FakeClock();
  const b = new ControllerBuilder({
    name: 'widget',
    group: 'example.io',
    kind: 'Widget',
    watcher: { watch: () => Promise.reject(new Error('no watch in this test')) },
    clock,
    log: silentLogger,
    namespace,
    informer: factory,
    pages:
      <T extends KubernetesObject>(path: string, labelSelector: string | undefined) =>
      (page: ListPage) => {
        lists.push([path, labelSelector, page]);
        return Promise.resolve({ items: [] as T[] } as KubernetesListObject<T>);
      },
    workers: 1,
  });
  return { b, clock };
}

/** recording is a reconciler that records the keys it was given. */
function recording(): Reconciler & { keys: ObjectKey[] } {
  const keys: ObjectKey[] = [];
  return {
    keys,
    reconcile: (key) => {
      keys.push(key);
      return Promise.resolve({});
    },
  };
}

describe('ControllerBuilder', () => {
  it('derives each collection path from the resource: the core group under /api, others under /apis, one namespace or all', () => {
    expect(collectionPath({ group: '', version: 'v1', plural: 'pods' }, 'ns')).toBe('/api/v1/namespaces/ns/pods');
    expect(collectionPath({ group: '', version: 'v1', plural: 'pods' }, undefined)).toBe('/api/v1/pods');
    expect(collectionPath({ group: 'coordination.k8s.io', version: 'v1', plural: 'leases' }, 'ns')).toBe(
      '/apis/coordination.k8s.io/v1/namespaces/ns/leases',
    );
    expect(collectionPath({ group: 'fencepost.io', version: 'v1alpha1', plural: 'distributedlocks' }, undefined)).toBe(
      '/apis/fencepost.io/v1alpha1/distributedlocks',
    );
  });

  it('gives each informer its path, the label selector for the watch, and its paged list with that same selector', async () => {
    const { factory, made } = fakes();
    const lists: [string, string | undefined, ListPage][] = [];
    const { b } = builder(factory, lists, 'ns');
    b.for({ resource: { group: 'example.io', version: 'v1', plural: 'widgets' } });
    b.watches({ resource: { group: '', version: 'v1', plural: 'pods' }, labelSelector: 'app' }, () => []);
    const [widgets, pods] = made;
    expect(widgets?.opts.name).toBe('widgets');
    expect(widgets?.opts.path).toBe('/apis/example.io/v1/namespaces/ns/widgets');
    expect(widgets?.opts.labelSelector).toBeUndefined();
    expect(pods?.opts.path).toBe('/api/v1/namespaces/ns/pods');
    expect(pods?.opts.labelSelector).toBe('app');
    const signal = new AbortController().signal;
    await pods?.opts.listPage?.({ limit: 500, continue: 'c1', signal });
    await widgets?.opts.listPage?.({ limit: 500, continue: undefined, signal });
    expect(lists).toEqual([
      ['/api/v1/namespaces/ns/pods', 'app', { limit: 500, continue: 'c1', signal }],
      ['/apis/example.io/v1/namespaces/ns/widgets', undefined, { limit: 500, continue: undefined, signal }],
    ]);
  });

  it("queues a primary object's own key and a secondary object's mapped keys, once each, and reconciles them after the caches synced", async () => {
    const { factory, made } = fakes();
    const { b, clock } = builder(factory);
    b.for({ resource: { group: 'example.io', version: 'v1', plural: 'widgets' } });
    b.watches({ resource: { group: '', version: 'v1', plural: 'pods' } }, (p) =>
      Object.keys(p.metadata?.labels ?? {}).map((w): ObjectKey => `${p.metadata?.namespace ?? ''}/${w}`),
    );
    const [widgets, pods] = made;
    widgets?.deliver(obj('a', 'w1'));
    pods?.deliver(obj('a', 'p1', { w1: '', w2: '' }));
    const r = recording();
    const running = await b.start(r);
    await clock.advanceAsync(0);
    await flushAsync();
    expect(r.keys.sort()).toEqual(['a/w1', 'a/w2']);
    expect(running.synced()).toBe(true);
    await running.stop();
    expect(made.every((i) => i.stopped)).toBe(true);
  });

  it('drops a key the event filter refuses, both when it is queued and when it comes due; enqueueAll offers every primary object again', async () => {
    const { factory, made } = fakes();
    const { b, clock } = builder(factory);
    let owned = new Set(['a/w1']);
    b.for({ resource: { group: 'example.io', version: 'v1', plural: 'widgets' } }).onChange(() => undefined);
    b.withEventFilter((key) => owned.has(key));
    const [widgets] = made;
    const r = recording();
    const running = await b.start(r);
    widgets?.deliver(obj('a', 'w1'));
    widgets?.deliver(obj('a', 'w2'));
    await clock.advanceAsync(0);
    await flushAsync();
    expect(r.keys).toEqual(['a/w1']);
    // Queued while owned, refused by the time a worker takes it: not reconciled.
    b.queue.addAfter('a/w1', 1000);
    owned = new Set(['a/w2']);
    await clock.advanceAsync(1000);
    await flushAsync();
    expect(r.keys).toEqual(['a/w1']);
    // The shard moved here: every primary object is offered again, and only the owned one passes.
    if (widgets !== undefined) widgets.objects = [obj('a', 'w1'), obj('a', 'w2')];
    b.enqueueAll();
    await clock.advanceAsync(0);
    await flushAsync();
    expect(r.keys).toEqual(['a/w1', 'a/w2']);
    await running.stop();
  });

  it('tells `delivered` of each change for each accepted key, in order, before the key is queued', async () => {
    const { factory, made } = fakes();
    const { b } = builder(factory);
    b.for({ resource: { group: 'example.io', version: 'v1', plural: 'widgets' } });
    b.withEventFilter((key) => key !== 'a/refused');
    const told: string[] = [];
    b.watches(
      { resource: { group: '', version: 'v1', plural: 'pods' } },
      () => ['a/w1', 'a/refused'] as const,
      (key, o, kind) => {
        told.push(`${key} ${o.metadata?.name ?? ''} ${kind} queued=${String(b.queue.len() > 0)}`);
      },
    );
    made[1]?.deliver(obj('a', 'p1'), 'update');
    made[1]?.deliver(obj('a', 'p1'), 'delete');
    expect(told).toEqual(['a/w1 p1 update queued=false', 'a/w1 p1 delete queued=true']);
    const r = recording();
    const running = await b.start(r);
    await flushAsync();
    expect(r.keys).toEqual(['a/w1']);
    await running.stop();
  });

  it('stops every informer and runs cleanup when a cache does not sync, and starts no worker', async () => {
    const { factory, made } = fakes();
    const { b } = builder(factory);
    b.for({ resource: { group: 'example.io', version: 'v1', plural: 'widgets' } });
    b.watches({ resource: { group: '', version: 'v1', plural: 'pods' } }, () => []);
    const pods = made[1];
    if (pods !== undefined) pods.failSync = true;
    let cleaned = false;
    const r = recording();
    await expect(
      b.start(r, {
        cleanup: () => {
          cleaned = true;
          return Promise.resolve();
        },
      }),
    ).rejects.toThrow('Caches did not sync');
    expect(made.every((i) => i.stopped)).toBe(true);
    expect(cleaned).toBe(true);
    made[0]?.deliver(obj('a', 'w1'));
    await flushAsync();
    expect(r.keys).toEqual([]);
  });

  it('refuses a second primary resource, a watch declared after start, and a start without a primary resource', async () => {
    const { factory } = fakes();
    const { b } = builder(factory);
    await expect(b.start(recording())).rejects.toThrow('no for() resource');
    b.for({ resource: { group: 'example.io', version: 'v1', plural: 'widgets' } });
    expect(() => b.for({ resource: { group: 'example.io', version: 'v1', plural: 'gadgets' } })).toThrow(
      'for() called twice',
    );
    const running = await b.start(recording());
    expect(() => b.watches({ resource: { group: '', version: 'v1', plural: 'pods' } }, () => [])).toThrow(
      'before start()',
    );
    await running.stop();
  });
});
