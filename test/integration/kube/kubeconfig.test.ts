import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CoreV1Api, KubeConfig, bufferFromFileOrString } from '@kubernetes/client-node';
import { apiClientFor, type ApiClient } from '../../../src/kube/api-client.ts';
import { typedApi } from '../../support/typed-api.ts';
import type { RestRequest } from '../../../src/observability/metrics.ts';
import { sharedKubeconfigPath } from '../../support/env.ts';
import { startTcpProxy, type TcpProxy } from '../../support/testbed/tcp-proxy.ts';

// The controller, the dashboard and the plugin make every API call through the one API client
// (client-node's typed APIs over it: kube/typed-api.ts). client-node 2.0 on its own opens a new TLS
// connection per call; a TCP proxy in front of the real API server counts the connections each opens.
describe('the one API client under client-node typed APIs', () => {
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

  const callsOpen = async (kc: KubeConfig | ApiClient, calls: number): Promise<number> => {
    connections.clear();
    const core = kc instanceof KubeConfig ? kc.makeApiClient(CoreV1Api) : typedApi(kc, CoreV1Api);
    for (let i = 0; i < calls; i++) await core.readNamespace({ name: 'default' });
    return connections.size;
  };

  it('reuses one kept-alive connection for sequential API calls', async () => {
    expect(await callsOpen(apiClientFor(kubeconfig), 5)).toBe(1);
  });

  it('reports each request once (for rest_client_requests_total): its status, method and host, or <error> when no answer came', async () => {
    const seen: RestRequest[] = [];
    const core = typedApi(
      apiClientFor(kubeconfig, {
        onRequest: (r) => {
          seen.push(r);
        },
      }),
      CoreV1Api,
    );
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
      typedApi(
        apiClientFor(refused, {
          onRequest: (r) => {
            failing.push(r);
          },
        }),
        CoreV1Api,
      ).readNamespace({ name: 'default' }),
    ).rejects.toThrow();
    expect(failing).toEqual([{ code: '<error>', method: 'GET', host: '127.0.0.1:2' }]);
  });

  it('reads credential files once, and starts a new pool when one of them changes (seen within reloadMs)', async () => {
    // The same credentials, copied to files of our own: a CA file whose contents change (one more newline: still
    // the same CA, so the new connections still verify) must start a new pool; a file rewritten
    // with the same bytes (a new mtime) must not; and nothing is noticed between checks.
    const src = new KubeConfig();
    src.loadFromFile(kubeconfig);
    const cluster = src.getCurrentCluster();
    const user = src.getCurrentUser();
    const ca = join(dir, 'ca.crt');
    const cert = join(dir, 'client.crt');
    const key = join(dir, 'client.key');
    const read = (f: string | undefined, d: string | undefined): Buffer =>
      bufferFromFileOrString(f, d) ?? Buffer.alloc(0);
    const caBytes = read(cluster?.caFile, cluster?.caData);
    writeFileSync(ca, caBytes);
    writeFileSync(cert, read(user?.certFile, user?.certData));
    writeFileSync(key, read(user?.keyFile, user?.keyData));
    const withFiles = join(dir, 'kubeconfig-files');
    writeFileSync(
      withFiles,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [{ name: 'c', cluster: { server: cluster?.server, 'certificate-authority': ca } }],
        users: [{ name: 'u', user: { 'client-certificate': cert, 'client-key': key } }],
        contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
        'current-context': 'x',
      }),
    );
    let now = 0;
    const kc = apiClientFor(withFiles, { reloadMs: 2000, nowMs: () => now });
    expect(await callsOpen(kc, 3)).toBe(1);

    writeFileSync(ca, caBytes); // same bytes, new mtime
    now += 2000;
    expect(await callsOpen(kc, 3)).toBe(1);

    writeFileSync(ca, Buffer.concat([caBytes, Buffer.from('\n')])); // rotated
    now += 1000; // within the interval: not looked at yet
    connections.clear();
    const core = typedApi(kc, CoreV1Api);
    await core.readNamespace({ name: 'default' });
    now += 1000; // the interval has passed: the change is seen, a new pool starts
    await core.readNamespace({ name: 'default' });
    await core.readNamespace({ name: 'default' });
    expect(connections.size).toBe(2);
  });

  it('is needed: a plain client-node KubeConfig opens a connection per call', async () => {
    const plain = new KubeConfig();
    plain.loadFromFile(kubeconfig);
    expect(await callsOpen(plain, 5)).toBe(5);
  });
});
