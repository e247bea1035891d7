import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { loadKubeConfig } from '../../../src/kube/kubeconfig.ts';
import type { RestRequest } from '../../../src/observability/metrics.ts';
import { sharedKubeconfigPath } from '../../support/env.ts';
import { startTcpProxy, type TcpProxy } from '../../support/testbed/tcp-proxy.ts';

// The agent and the controller make every API call through loadKubeConfig's KubeConfig. client-node
// 2.0 opens a new TLS connection per call unless the dispatcher is shared; a TCP proxy in front
// of the real API server counts the connections each kind of KubeConfig opens.
describe('loadKubeConfig', () => {
  let proxy: TcpProxy;
  let dir = '';
  let kubeconfig = '';
  const connections = new Set<number>();

  beforeAll(async () => {
    const shared = new KubeConfig();
    shared.loadFromFile(sharedKubeconfigPath());
    const server = new URL(shared.getCurrentCluster()?.server ?? '');
    proxy = await startTcpProxy({ targetPort: Number(server.port) });
    proxy.onClientData((_chunk, id) => {
      connections.add(id);
    });
    dir = mkdtempSync(join(tmpdir(), 'fencepost-kubeconfig-'));
    kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(
      kubeconfig,
      readFileSync(sharedKubeconfigPath(), 'utf8').replace(server.origin, `https://127.0.0.1:${proxy.port}`),
    );
  });
  afterAll(async () => {
    await proxy.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const callsOpen = async (kc: KubeConfig, calls: number): Promise<number> => {
    connections.clear();
    const core = kc.makeApiClient(CoreV1Api);
    for (let i = 0; i < calls; i++) await core.readNamespace({ name: 'default' });
    return connections.size;
  };

  it('reuses one kept-alive connection for sequential API calls', async () => {
    expect(await callsOpen(loadKubeConfig(kubeconfig), 5)).toBe(1);
  });

  it('reports each request once (for rest_client_requests_total): its status, method and host, or <error> when no answer came', async () => {
    const seen: RestRequest[] = [];
    const core = loadKubeConfig(kubeconfig, {
      onRequest: (r) => {
        seen.push(r);
      },
    }).makeApiClient(CoreV1Api);
    for (let i = 0; i < 3; i++) await core.readNamespace({ name: 'default' });
    await expect(core.readNamespace({ name: 'no-such-namespace' })).rejects.toThrow(/404/);
    await core.createNamespacedConfigMap({
      namespace: 'default',
      dryRun: 'All',
      body: { metadata: { name: 'counted' } },
    });
    const host = `127.0.0.1:${proxy.port}`;
    const get = { code: '200', method: 'GET', host };
    expect(seen).toEqual([get, get, get, { ...get, code: '404' }, { code: '201', method: 'POST', host }]);

    const refused = join(dir, 'refused');
    writeFileSync(refused, readFileSync(kubeconfig, 'utf8').replace(`https://${host}`, 'https://127.0.0.1:2')); // nothing listens on port 2
    const failing: RestRequest[] = [];
    await expect(
      loadKubeConfig(refused, {
        onRequest: (r) => {
          failing.push(r);
        },
      })
        .makeApiClient(CoreV1Api)
        .readNamespace({ name: 'default' }),
    ).rejects.toThrow();
    expect(failing).toEqual([{ code: '<error>', method: 'GET', host: '127.0.0.1:2' }]);
  });

  it('is needed: a plain client-node KubeConfig opens a connection per call', async () => {
    const plain = new KubeConfig();
    plain.loadFromFile(kubeconfig);
    expect(await callsOpen(plain, 5)).toBe(5);
  });
});
