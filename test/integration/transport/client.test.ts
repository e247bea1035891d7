/**
 * The agent's transport (src/transport) against the real API server: Lease CRUD and the error
 * classes the session relies on (409 → isConflict, 404 → isNotFound, 410 → relist), the Lease
 * informer, request counting, one kept-alive connection for sequential requests (counted by a TCP
 * proxy in front of the API server), and a rotated ServiceAccount token file picked up.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, RbacAuthorizationV1Api, type KubeConfig, type V1Lease } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { realClock } from '../../../src/runtime/clock.ts';
import { isAlreadyExists, isConflict, isNotFound } from '../../../src/runtime/errors.ts';
import { ApiClient, ApiError, type RequestRecord, type WatchHandlers } from '../../../src/transport/client.ts';
import { parseKubeconfig } from '../../../src/transport/config.ts';
import { connect } from '../../../src/transport/connect.ts';
import { ListWatchInformer, type ChangeKind } from '../../../src/transport/informer.ts';
import { parseKubeconfigText } from '../../../src/transport/load-config.ts';
import { leaseRequests, leasesPath } from '../../../src/transport/resources.ts';
import { eventually, freshNamespace, sharedKubeConfig, sharedKubeconfigPath } from '../../support/env.ts';
import { startTcpProxy, type TcpProxy } from '../../support/testbed/tcp-proxy.ts';

const LABEL = 'test.fencepost.io/set';

function aLease(name: string, set = 'a'): V1Lease {
  return { metadata: { name, labels: { [LABEL]: set } }, spec: { holderIdentity: 'nobody', leaseDurationSeconds: 10 } };
}

describe('the agent transport against a real API server', () => {
  const admin: KubeConfig = sharedKubeConfig();
  let namespace = '';
  let api: ApiClient;
  let dir = '';

  beforeAll(async () => {
    namespace = await freshNamespace(admin, 'transport-');
    api = connect(sharedKubeconfigPath());
    dir = mkdtempSync(join(tmpdir(), 'fencepost-transport-'));
  });
  afterAll(() => {
    api.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('creates, reads and replaces a Lease; a stale replace is a conflict, a missing Lease is undefined, a second create already exists', async () => {
    const leases = leaseRequests<V1Lease>(api);
    const created = await leases.create(namespace, aLease('crud'));
    expect(created.metadata?.resourceVersion).toMatch(/^[0-9]+$/);
    const read = await leases.get(namespace, 'crud');
    expect(read?.spec?.holderIdentity).toBe('nobody');
    const replaced = await leases.replace(namespace, 'crud', {
      ...created,
      spec: { ...created.spec, holderIdentity: 'web-0/uid-0' },
    });
    expect(replaced.spec?.holderIdentity).toBe('web-0/uid-0');
    expect(replaced.metadata?.resourceVersion).not.toBe(created.metadata?.resourceVersion);

    const stale = await leases.replace(namespace, 'crud', created).catch((e: unknown) => e);
    expect(stale).toBeInstanceOf(ApiError);
    expect(isConflict(stale)).toBe(true);
    expect((stale as ApiError).statusCode).toBe(409);
    expect((stale as ApiError).status?.reason).toBe('Conflict');

    expect(await leases.get(namespace, 'never-created')).toBeUndefined();
    const missing = await api
      .request({ method: 'GET', path: `${leasesPath(namespace)}/never-created` })
      .catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(ApiError);
    expect(isNotFound(missing)).toBe(true);
    expect((missing as ApiError).status?.reason).toBe('NotFound');

    const again = await leases.create(namespace, aLease('crud')).catch((e: unknown) => e);
    expect(isAlreadyExists(again)).toBe(true);
    expect(isConflict(again)).toBe(false);
  });

  it('sends Lease times as MicroTime (six fractional digits), which the API server accepts', async () => {
    const { renewedLease } = await import('../../../src/lease/record.ts');
    const leases = leaseRequests<V1Lease>(api);
    const created = await leases.create(namespace, aLease('micro'));
    const renewed = await leases.replace(
      namespace,
      'micro',
      renewedLease(created, new Date('2026-01-02T03:04:05.678Z')),
    );
    expect(String(renewed.spec?.renewTime)).toBe('2026-01-02T03:04:05.678000Z');
  });

  it('aborts a request on its signal, and rejects a request the server never gets with the abort reason', async () => {
    const ac = new AbortController();
    ac.abort(new Error('given up'));
    await expect(leaseRequests<V1Lease>(api).get(namespace, 'crud', { signal: ac.signal })).rejects.toThrow('given up');
  });

  it('the Lease informer lists, then delivers adds, updates and deletes from its watch', async () => {
    const leases = leaseRequests<V1Lease>(api);
    await leases.create(namespace, aLease('w-1', 'watch'));
    const seen: [ChangeKind, string][] = [];
    const informer = new ListWatchInformer<V1Lease>({
      name: 'test',
      api,
      path: leasesPath(namespace),
      labelSelector: `${LABEL}=watch`,
      clock: realClock,
    });
    informer.onChange((l, kind) => seen.push([kind, l.metadata?.name ?? '']));
    await informer.start();
    try {
      expect(informer.hasSynced()).toBe(true);
      expect(informer.watching()).toBe(true);
      expect(seen).toEqual([['add', 'w-1']]);
      const l2 = await leases.create(namespace, aLease('w-2', 'watch'));
      await leases.create(namespace, aLease('other', 'not-watched'));
      await leases.replace(namespace, 'w-2', { ...l2, spec: { ...l2.spec, holderIdentity: 'x/y' } });
      await admin
        .makeApiClient((await import('@kubernetes/client-node')).CoordinationV1Api)
        .deleteNamespacedLease({ namespace, name: 'w-1' });
      await eventually(() => {
        expect(seen).toEqual([
          ['add', 'w-1'],
          ['add', 'w-2'],
          ['update', 'w-2'],
          ['delete', 'w-1'],
        ]);
      });
      expect(informer.get(namespace, 'w-2')?.spec?.holderIdentity).toBe('x/y');
      expect(informer.get(namespace, 'w-1')).toBeUndefined();
    } finally {
      await informer.stop();
    }
    expect(informer.watching()).toBe(false);
  });

  // A young testbed's etcd has compacted nothing, so the real server replays any old
  // resourceVersion: the first watch is answered here instead, with exactly what the API server
  // sends for a compacted one (a 200 and an ERROR event with a 410 Status; or a plain HTTP 410,
  // as older servers do). The lists before and after it, the Lease deleted in between and every
  // later watch are real.
  it.each([{ answer: 'an ERROR event with code 410' as const }, { answer: 'HTTP 410' as const }])(
    'relists after a watch is answered with $answer, and reports a Lease deleted in between as a delete',
    async ({ answer }) => {
      const set = answer === 'HTTP 410' ? 'gone-http' : 'gone-event';
      const leases = leaseRequests<V1Lease>(api);
      await leases.create(namespace, aLease(`${set}-1`, set));
      await leases.create(namespace, aLease(`${set}-2`, set));
      const core = admin.makeApiClient((await import('@kubernetes/client-node')).CoordinationV1Api);
      let watches = 0;
      class FirstWatchGone extends ApiClient {
        override async watch(spec: Parameters<ApiClient['watch']>[0], h: WatchHandlers): Promise<void> {
          watches++;
          if (watches > 1) return super.watch(spec, h);
          await core.deleteNamespacedLease({ namespace, name: `${set}-2` });
          const status = {
            kind: 'Status',
            status: 'Failure',
            reason: 'Expired',
            code: 410,
            message: 'too old resource version',
          };
          if (answer === 'HTTP 410') throw new ApiError('GET', spec.path, 410, status);
          h.onOpen?.();
          h.onEvent('ERROR', status);
        }
      }
      const client = new FirstWatchGone(
        parseKubeconfig(parseKubeconfigText(readFileSync(sharedKubeconfigPath(), 'utf8'), 'k'), sharedKubeconfigPath()),
      );
      const seen: [ChangeKind, string][] = [];
      const informer = new ListWatchInformer<V1Lease>({
        name: 'gone',
        api: client,
        path: leasesPath(namespace),
        labelSelector: `${LABEL}=${set}`,
        clock: realClock,
      });
      informer.onChange((l, kind) => seen.push([kind, l.metadata?.name ?? '']));
      try {
        await informer.start();
        await eventually(() => {
          expect(seen).toEqual([
            ['add', `${set}-1`],
            ['add', `${set}-2`],
            ['delete', `${set}-2`],
          ]);
          expect(watches).toBeGreaterThanOrEqual(2);
          expect(informer.watching()).toBe(true);
        });
        expect(informer.list().map((l) => l.metadata?.name)).toEqual([`${set}-1`]);
        // And the watch after the relist is live.
        await leases.create(namespace, aLease(`${set}-3`, set));
        await eventually(() => {
          expect(seen.at(-1)).toEqual(['add', `${set}-3`]);
        });
      } finally {
        await informer.stop();
        client.close();
      }
    },
  );

  it('counts each request once: its status code, method and host, or <error> when no answer came', async () => {
    const seen: RequestRecord[] = [];
    const counted = connect(sharedKubeconfigPath(), { onRequest: (r) => seen.push(r) });
    const leases = leaseRequests<V1Lease>(counted);
    await leases.create(namespace, aLease('count'));
    await leases.get(namespace, 'count');
    await leases.get(namespace, 'never-created');
    counted.close();
    const host = new URL(sharedServer()).host;
    expect(seen).toEqual([
      { code: '201', method: 'POST', host },
      { code: '200', method: 'GET', host },
      { code: '404', method: 'GET', host },
    ]);

    // Nothing listens on the port any more: no answer at all.
    const closed = await startTcpProxy({ targetPort: 1 });
    const port = closed.port;
    await closed.close();
    const failed: RequestRecord[] = [];
    const nowhere = connect(
      { exportConfig: () => JSON.stringify(kubeconfigAt(`http://127.0.0.1:${port}`)) },
      { onRequest: (r) => failed.push(r) },
    );
    await expect(leaseRequests<V1Lease>(nowhere).get(namespace, 'x')).rejects.toThrow(/ECONNREFUSED/);
    nowhere.close();
    expect(failed).toEqual([{ code: '<error>', method: 'GET', host: `127.0.0.1:${port}` }]);
  });

  describe('through a TCP proxy that counts connections', () => {
    let proxy: TcpProxy;
    const connections = new Set<number>();
    let viaProxy = '';

    beforeAll(async () => {
      const server = new URL(sharedServer());
      proxy = await startTcpProxy({ targetPort: Number(server.port) });
      proxy.onClientData((_chunk, id) => {
        connections.add(id);
      });
      viaProxy = join(dir, 'via-proxy');
      writeFileSync(
        viaProxy,
        readFileSync(sharedKubeconfigPath(), 'utf8').replace(server.origin, `https://127.0.0.1:${proxy.port}`),
      );
    });
    afterAll(async () => {
      await proxy.close();
    });

    it('reuses one kept-alive connection for 20 sequential requests', async () => {
      connections.clear();
      const client = connect(viaProxy);
      const leases = leaseRequests<V1Lease>(client);
      for (let i = 0; i < 20; i++) await leases.get(namespace, 'crud');
      client.close();
      expect(connections.size).toBe(1);
    });
  });

  it('reads a rotated token file: the next request after the reload period authenticates as the new token', async () => {
    const core = admin.makeApiClient(CoreV1Api);
    const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
    const tokenOf = async (name: string): Promise<string> => {
      await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name } } }).catch(() => undefined);
      const tr = await core.createNamespacedServiceAccountToken({
        namespace,
        name,
        body: { spec: { audiences: [], expirationSeconds: 3600 } },
      });
      return tr.status?.token ?? '';
    };
    await rbac.createNamespacedRole({
      namespace,
      body: {
        metadata: { name: 'lease-reader' },
        rules: [{ apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get'] }],
      },
    });
    // Only the second ServiceAccount may read Leases: which token was sent shows in the answer.
    await rbac.createNamespacedRoleBinding({
      namespace,
      body: {
        metadata: { name: 'second-reads' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'lease-reader' },
        subjects: [{ kind: 'ServiceAccount', name: 'second', namespace }],
      },
    });
    const tokenFile = join(dir, 'token');
    const [first, second] = [await tokenOf('first'), await tokenOf('second')];
    writeFileSync(tokenFile, first);
    const shared = JSON.parse(readFileSync(sharedKubeconfigPath(), 'utf8')) as {
      clusters: { cluster: Record<string, unknown> }[];
    };
    const cluster = shared.clusters[0]?.cluster ?? {};
    const doc = {
      'current-context': 'sa',
      clusters: [
        { name: 'c', cluster: { server: cluster.server, 'certificate-authority': cluster['certificate-authority'] } },
      ],
      users: [{ name: 'sa', user: { tokenFile } }],
      contexts: [{ name: 'sa', context: { cluster: 'c', user: 'sa' } }],
    };
    const reloadMs = 2000;
    const client = new ApiClient(parseKubeconfig(doc, join(dir, 'kubeconfig')), { reloadMs });
    const leases = leaseRequests<V1Lease>(client);
    try {
      const refused = await leases.get(namespace, 'crud').catch((e: unknown) => e);
      expect((refused as ApiError).statusCode).toBe(403);
      expect((refused as ApiError).message).toContain(`system:serviceaccount:${namespace}:first`);
      writeFileSync(tokenFile, second);
      // Within the reload period the old token is still used (the file is not read per request) …
      const beforeReload = await leases.get(namespace, 'crud').catch((e: unknown) => e);
      expect((beforeReload as ApiError | undefined)?.statusCode).toBe(403);
      // … and after it, the new one.
      await new Promise((r) => setTimeout(r, reloadMs + 50));
      const lease = await leases.get(namespace, 'crud');
      expect(lease?.metadata?.name).toBe('crud');
    } finally {
      client.close();
    }
  });
});

/** sharedServer is the shared API server's URL (the testbed writes its kubeconfig as JSON). */
function sharedServer(): string {
  const doc = JSON.parse(readFileSync(sharedKubeconfigPath(), 'utf8')) as {
    clusters: { cluster: { server: string } }[];
  };
  return doc.clusters[0]?.cluster.server ?? '';
}

function kubeconfigAt(server: string): object {
  return {
    'current-context': 'c',
    clusters: [{ name: 'c', cluster: { server } }],
    users: [{ name: 'u', user: {} }],
    contexts: [{ name: 'c', context: { cluster: 'c', user: 'u' } }],
  };
}
