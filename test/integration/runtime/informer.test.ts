import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CoreV1Api, type KubeConfig, type V1ConfigMap } from '@kubernetes/client-node';
import { realClock } from '../../../src/runtime/clock.ts';
import { superviseInformer } from '../../../src/runtime/informer.ts';
import type {
  ChangeKind,
  InformerLogger,
  SupervisedInformer,
  SuperviseInformerOptions,
} from '../../../src/runtime/informer.ts';
import { silentLogger } from '../../../src/observability/logger.ts';
import { eventually, freshNamespace, sharedKubeConfig } from '../../support/env.ts';
import { startControlPlane, type ControlPlane } from '../../support/testbed/control-plane.ts';
import { apiClientFor } from '../../../src/kube/api-client.ts';
import { typedApi } from '../../support/typed-api.ts';

// Compile-time check: a pino Logger is an InformerLogger.
const _pinoIsAnInformerLogger: InformerLogger = silentLogger;

interface Recorder {
  readonly events: [ChangeKind, string][];
  readonly logs: { level: 'info' | 'debug' | 'error'; msg: string; fields: object }[];
  readonly states: boolean[];
  readonly log: InformerLogger;
  readonly names: (kind: ChangeKind) => string[];
}

function recorder(): Recorder {
  const events: [ChangeKind, string][] = [];
  const logs: Recorder['logs'] = [];
  return {
    events,
    logs,
    states: [],
    log: {
      info: (fields, msg) => logs.push({ level: 'info', msg, fields }),
      debug: (fields, msg) => logs.push({ level: 'debug', msg, fields }),
      error: (fields, msg) => logs.push({ level: 'error', msg, fields }),
    },
    names: (kind) => events.filter(([k]) => k === kind).map(([, n]) => n),
  };
}

/** configMapInformer watches the ConfigMaps of one namespace, recording events, logs and state changes. */
function configMapInformer(
  kc: KubeConfig,
  namespace: string,
  rec: Recorder,
  extra: Partial<SuperviseInformerOptions<V1ConfigMap>> = {},
): SupervisedInformer<V1ConfigMap> {
  // Lists and watches both go through the one API client, as in the controller.
  const api = apiClientFor(kc);
  const core = typedApi(api, CoreV1Api);
  const inf = superviseInformer<V1ConfigMap>({
    name: 'configmaps',
    watcher: api,
    path: `/api/v1/namespaces/${namespace}/configmaps`,
    list: () => core.listNamespacedConfigMap({ namespace }),
    clock: realClock,
    log: rec.log,
    onStateChange: (watching) => rec.states.push(watching),
    ...extra,
  });
  inf.onChange((obj, kind) => rec.events.push([kind, obj.metadata?.name ?? '']));
  return inf;
}

const cmNames = (inf: SupervisedInformer<V1ConfigMap>, namespace: string): string[] =>
  inf
    .list(namespace)
    .map((o) => o.metadata?.name ?? '')
    .sort();

describe('superviseInformer on the shared API server', () => {
  const kc = sharedKubeConfig();
  const core = kc.makeApiClient(CoreV1Api);
  let namespace = '';
  const running: SupervisedInformer<V1ConfigMap>[] = [];
  const track = (inf: SupervisedInformer<V1ConfigMap>): SupervisedInformer<V1ConfigMap> => {
    running.push(inf);
    return inf;
  };
  const create = (
    name: string,
    data: Record<string, string> = {},
    labels?: Record<string, string>,
  ): Promise<V1ConfigMap> =>
    core.createNamespacedConfigMap({ namespace, body: { metadata: { name, ...(labels && { labels }) }, data } });

  beforeAll(async () => {
    namespace = await freshNamespace(kc, 'informer-');
  });
  afterEach(async () => {
    await Promise.all(running.splice(0).map((inf) => inf.stop()));
  });

  it('has delivered the existing objects to its cache and handlers when start() resolves', async () => {
    await create('pre-a', { v: '1' });
    await create('pre-b');
    const rec = recorder();
    const inf = track(configMapInformer(kc, namespace, rec));
    expect(inf.hasSynced()).toBe(false);
    expect(inf.watching()).toBe(false);

    await inf.start();

    expect(inf.hasSynced()).toBe(true);
    expect(inf.watching()).toBe(true);
    expect(rec.states).toEqual([true]);
    expect(rec.names('add')).toEqual(expect.arrayContaining(['pre-a', 'pre-b']));
    expect(cmNames(inf, namespace)).toEqual(expect.arrayContaining(['pre-a', 'pre-b']));
    expect(inf.get(namespace, 'pre-a')?.data).toEqual({ v: '1' });
    expect(inf.get(namespace, 'missing')).toBeUndefined();
    expect(inf.get('other-namespace', 'pre-a')).toBeUndefined();
    expect(inf.list('other-namespace')).toEqual([]);
    expect(rec.logs.find((l) => l.msg === 'Synced informer cache')).toBeDefined();
  });

  it('keeps objects as its transform made them, and its indexes current through add, update and delete', async () => {
    await create('idx-pre', { big: 'x'.repeat(1000) }, { team: 'a' });
    const rec = recorder();
    const inf = track(
      configMapInformer(kc, namespace, rec, {
        // Keep the metadata the cache needs and drop the data, as the controller drops pods' specs.
        transform: (cm) => ({
          metadata: {
            name: cm.metadata?.name ?? '',
            namespace: cm.metadata?.namespace ?? '',
            resourceVersion: cm.metadata?.resourceVersion ?? '',
            ...(cm.metadata?.labels !== undefined ? { labels: cm.metadata.labels } : {}),
          },
        }),
        indexers: { team: (cm) => (cm.metadata?.labels?.['team'] !== undefined ? [cm.metadata.labels['team']] : []) },
      }),
    );
    await inf.start();
    const team = (t: string): string[] =>
      inf
        .byIndex('team', t)
        .map((o) => o.metadata?.name ?? '')
        .sort();
    expect(inf.get(namespace, 'idx-pre')).toEqual({
      metadata: expect.objectContaining({ name: 'idx-pre', labels: { team: 'a' } }) as object,
    }); // listed: no data
    expect(team('a')).toEqual(['idx-pre']);

    await create('idx-live', { big: 'y' }, { team: 'a' });
    await eventually(() => {
      expect(team('a')).toEqual(['idx-live', 'idx-pre']);
    });
    expect(inf.get(namespace, 'idx-live')?.data).toBeUndefined(); // watched: no data either

    await core.replaceNamespacedConfigMap({
      name: 'idx-live',
      namespace,
      body: { metadata: { name: 'idx-live', labels: { team: 'b' } }, data: {} },
    });
    await eventually(() => {
      expect(team('a')).toEqual(['idx-pre']);
      expect(team('b')).toEqual(['idx-live']);
    });

    await core.deleteNamespacedConfigMap({ name: 'idx-live', namespace });
    await core.deleteNamespacedConfigMap({ name: 'idx-pre', namespace });
    await eventually(() => {
      expect(team('a')).toEqual([]);
      expect(team('b')).toEqual([]);
    });
    expect(inf.byIndex('no-such-index', 'a')).toEqual([]);
  });

  it('lists in pages with listPage (limit and continue), transforming each page, then watches from the list', async () => {
    for (const n of ['pg-1', 'pg-2', 'pg-3', 'pg-4', 'pg-5']) await create(n, { big: 'z' }, { paged: 'yes' });
    const pages: (string | undefined)[] = [];
    const rec = recorder();
    const inf = track(
      configMapInformer(kc, namespace, rec, {
        labelSelector: 'paged=yes',
        list: () => Promise.reject(new Error('listPage is used instead')),
        listPage: ({ limit, continue: token }) => {
          pages.push(token);
          return core.listNamespacedConfigMap({
            namespace,
            labelSelector: 'paged=yes',
            limit,
            ...(token !== undefined ? { _continue: token } : {}),
          });
        },
        pageSize: 2,
        transform: (cm) => ({ metadata: cm.metadata ?? {} }),
      }),
    );
    await inf.start();
    expect(pages).toHaveLength(3); // 2 + 2 + 1
    expect(pages[0]).toBeUndefined();
    expect(cmNames(inf, namespace)).toEqual(['pg-1', 'pg-2', 'pg-3', 'pg-4', 'pg-5']);
    expect(inf.list(namespace).every((cm) => cm.data === undefined)).toBe(true);
    await create('pg-6', {}, { paged: 'yes' }); // the watch continues from the paged list
    await eventually(() => {
      expect(cmNames(inf, namespace)).toContain('pg-6');
    });
  });

  it('reports add, update and delete of ConfigMaps and keeps list and get current', async () => {
    const rec = recorder();
    const inf = track(configMapInformer(kc, namespace, rec));
    await inf.start();

    await create('live', { v: '1' });
    await eventually(() => {
      expect(rec.names('add')).toContain('live');
      expect(inf.get(namespace, 'live')?.data).toEqual({ v: '1' });
    });

    await core.replaceNamespacedConfigMap({
      name: 'live',
      namespace,
      body: { metadata: { name: 'live' }, data: { v: '2' } },
    });
    await eventually(() => {
      expect(rec.names('update')).toContain('live');
      expect(inf.get(namespace, 'live')?.data).toEqual({ v: '2' });
    });

    await core.deleteNamespacedConfigMap({ name: 'live', namespace });
    await eventually(() => {
      expect(rec.names('delete')).toEqual(['live']);
      expect(inf.get(namespace, 'live')).toBeUndefined();
      expect(cmNames(inf, namespace)).not.toContain('live');
    });
    expect(inf.watching()).toBe(true);
  });

  it('watches only what matches labelSelector when the list applies the same selector', async () => {
    const selector = 'fencepost.io/test=selected';
    const rec = recorder();
    const inf = track(
      configMapInformer(kc, namespace, rec, {
        labelSelector: selector,
        list: () => core.listNamespacedConfigMap({ namespace, labelSelector: selector }),
      }),
    );
    await create('sel-before', {}, { 'fencepost.io/test': 'selected' });
    await inf.start();
    await create('sel-ignored');
    await create('sel-after', {}, { 'fencepost.io/test': 'selected' });

    await eventually(() => expect(cmNames(inf, namespace)).toEqual(['sel-after', 'sel-before']));
    expect(rec.names('add')).not.toContain('sel-ignored');
  });

  it('keeps delivering to every handler when one handler throws, and logs the failure', async () => {
    const rec = recorder();
    const inf = track(configMapInformer(kc, namespace, rec));
    inf.onChange(() => {
      throw new Error('handler bug');
    });
    const after: string[] = [];
    inf.onChange((obj) => after.push(obj.metadata?.name ?? ''));
    await inf.start();

    await create('throwing-1');
    await create('throwing-2');
    await eventually(() => {
      expect(after).toEqual(expect.arrayContaining(['throwing-1', 'throwing-2']));
      expect(cmNames(inf, namespace)).toEqual(expect.arrayContaining(['throwing-1', 'throwing-2']));
    });
    const failures = rec.logs.filter((l) => l.msg === 'Failed to handle informer event');
    expect(failures.length).toBeGreaterThanOrEqual(2);
    expect(failures[0]?.fields).toMatchObject({ informer: 'configmaps', kind: 'add' });
    expect((failures[0]?.fields as { err?: unknown }).err).toBeInstanceOf(Error);
    expect(inf.watching()).toBe(true);
  });

  it('retries a failing list with backoff and rejects start() after syncTimeoutMs, with the failure as cause', async () => {
    const rec = recorder();
    const refused = new Error('list refused');
    let lists = 0;
    const inf = track(
      configMapInformer(kc, namespace, rec, {
        list: () => {
          lists++;
          return Promise.reject(refused);
        },
        backoff: { baseMs: 20, maxMs: 50 },
        syncTimeoutMs: 500,
      }),
    );

    const err: unknown = await inf.start().catch((e: unknown) => e);

    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toMatch(/did not sync within 500 ms/);
    expect((err as Error).cause).toBe(refused);
    expect(inf.hasSynced()).toBe(false);
    expect(inf.watching()).toBe(false);
    expect(rec.states).toEqual([]);
    expect(lists).toBeGreaterThan(2);
    expect(rec.logs.filter((l) => l.msg === 'Failed to list or watch resource').length).toBe(lists);
  });

  it('stops for good: no events after stop(), stop() is idempotent, start() afterwards rejects', async () => {
    const rec = recorder();
    const inf = configMapInformer(kc, namespace, rec);
    await inf.start();
    await inf.stop();
    await inf.stop();
    expect(inf.watching()).toBe(false);
    expect(inf.hasSynced()).toBe(true);
    expect(rec.states).toEqual([true, false]);

    const seen = rec.events.length;
    await create('after-stop');
    // Give a (wrongly) live watch time to deliver: a fresh informer sees the object first.
    const probe = track(configMapInformer(kc, namespace, recorder()));
    await probe.start();
    await eventually(() => expect(probe.get(namespace, 'after-stop')).toBeDefined());
    expect(rec.events.length).toBe(seen);
    expect(inf.get(namespace, 'after-stop')).toBeUndefined();
    await expect(inf.start()).rejects.toThrow(/stopped/);
    expect(rec.logs.filter((l) => l.level === 'error')).toEqual([]);
  });

  it('rejects start() when stopped before it synced', async () => {
    const inf = configMapInformer(kc, namespace, recorder(), {
      list: () => new Promise(() => {}),
    });
    const started = inf.start();
    await inf.stop();
    await expect(started).rejects.toThrow(/stopped before it synced/);
  });
});

describe('superviseInformer across an API server restart', () => {
  let plane: ControlPlane;
  let namespace = '';

  beforeAll(async () => {
    plane = await startControlPlane({ installCrds: false });
    namespace = await plane.createNamespace('informer-restart-');
  });
  afterAll(async () => {
    await plane.stop();
  });

  it('notices the outage, restarts with backoff, keeps its cache, and catches up with changes made meanwhile and after', async () => {
    const kc = plane.kubeConfig();
    const core = kc.makeApiClient(CoreV1Api);
    await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'keep' }, data: { v: '1' } } });
    await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'doomed' } } });

    const rec = recorder();
    const inf = configMapInformer(kc, namespace, rec, { backoff: { baseMs: 100, maxMs: 1_000 } });
    try {
      await inf.start();
      expect(cmNames(inf, namespace)).toEqual(['doomed', 'keep']);

      // 1. Outage: the watch breaks, every restart fails, the cache stays as it was.
      await plane.apiServer.stop();
      await eventually(() => expect(inf.watching()).toBe(false), 30_000);
      await eventually(
        () => expect(rec.logs.filter((l) => l.msg === 'Failed to list or watch resource').length).toBeGreaterThan(1),
        30_000,
      );
      expect(inf.hasSynced()).toBe(true);
      expect(cmNames(inf, namespace)).toEqual(['doomed', 'keep']);

      // No client can change the world through a stopped API server, but etcd can: delete 'doomed'
      // behind its back, so the informer can only learn of it by resuming or relisting.
      const key = Buffer.from(`/registry/configmaps/${namespace}/doomed`).toString('base64');
      const res = await fetch(`${plane.etcd.clientUrl}/v3/kv/deleterange`, {
        method: 'POST',
        body: JSON.stringify({ key }),
      });
      expect(await res.json()).toMatchObject({ deleted: '1' });

      // 2. Recovery: the informer reconnects by itself.
      await plane.apiServer.start();
      await eventually(() => expect(inf.watching()).toBe(true), 30_000);

      // A change made right after the restart, by a client independent of the informer's.
      const other = plane.kubeConfig().makeApiClient(CoreV1Api);
      await other.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'after' } } });

      await eventually(() => {
        expect(cmNames(inf, namespace)).toEqual(['after', 'keep']);
        expect(rec.names('delete')).toEqual(['doomed']);
        expect(rec.names('add')).toContain('after');
      }, 30_000);
      expect(inf.get(namespace, 'keep')?.data).toEqual({ v: '1' });

      // 3. Fully caught up: later updates and deletes arrive as usual.
      await other.replaceNamespacedConfigMap({
        name: 'keep',
        namespace,
        body: { metadata: { name: 'keep' }, data: { v: '2' } },
      });
      await other.deleteNamespacedConfigMap({ name: 'after', namespace });
      await eventually(() => {
        expect(inf.get(namespace, 'keep')?.data).toEqual({ v: '2' });
        expect(cmNames(inf, namespace)).toEqual(['keep']);
        expect(rec.names('delete')).toEqual(['doomed', 'after']);
      }, 30_000);

      // onStateChange saw transitions only: up, down, (possibly more flaps while the server warmed up), up.
      expect(rec.states.slice(0, 2)).toEqual([true, false]);
      expect(rec.states.at(-1)).toBe(true);
      expect(rec.states.every((s, i) => i === 0 || s !== rec.states[i - 1])).toBe(true);
      expect(rec.logs.find((l) => l.msg === 'Restored informer watch')).toBeDefined();
      expect(inf.hasSynced()).toBe(true);
    } finally {
      await inf.stop();
    }
  }, 180_000);
});
