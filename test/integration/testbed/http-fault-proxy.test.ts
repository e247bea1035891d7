import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoordinationV1Api, KubeConfig, Watch, type V1Lease } from '@kubernetes/client-node';
import { freshNamespace, sharedKubeconfigPath } from '../../support/env.ts';
import {
  kubeconfigVia,
  proxyTargetOf,
  startHttpFaultProxy,
  type HttpFaultProxy,
} from '../../support/testbed/http-fault-proxy.ts';
import { apiClientFor } from '../../../src/kube/api-client.ts';
import { leaseRequests } from '../../../src/transport/resources.ts';

// The HTTP fault proxy in front of the real API server: client-node, trusting the testbed CA,
// talks to it as to the API server, and sees the faults as the API server's own answers.
describe('the HTTP fault proxy in front of the real API server', () => {
  let proxy: HttpFaultProxy;
  let dir = '';
  let kc: KubeConfig;
  let leases: CoordinationV1Api;
  let namespace = '';

  beforeAll(async () => {
    const target = proxyTargetOf(sharedKubeconfigPath());
    proxy = await startHttpFaultProxy(target);
    dir = mkdtempSync(join(tmpdir(), 'http-fault-proxy-'));
    const file = join(dir, 'kubeconfig');
    writeFileSync(file, kubeconfigVia(sharedKubeconfigPath(), proxy.url), { mode: 0o600 });
    kc = new KubeConfig();
    kc.loadFromFile(file);
    leases = kc.makeApiClient(CoordinationV1Api);
    namespace = await freshNamespace(kc);
  });
  afterAll(async () => {
    await proxy?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('passes requests through to the API server when no fault is set', async () => {
    const created = await leases.createNamespacedLease({
      namespace,
      body: { metadata: { name: 'pass' }, spec: { holderIdentity: 'a' } },
    });
    const read = await leases.readNamespacedLease({ namespace, name: 'pass' });
    expect(read.metadata?.uid).toBe(created.metadata?.uid);
    expect(proxy.counts.forwarded).toBeGreaterThanOrEqual(2);
  });

  it.each([429, 500, 503] as const)(
    'answers the next request with %i and a Status body, then forwards again',
    async (status) => {
      proxy.errors({ status, count: 1, retryAfterSeconds: 2 });
      const err: unknown = await leases.readNamespacedLease({ namespace, name: 'pass' }).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: status });
      const body = JSON.parse(String((err as { body?: unknown }).body)) as {
        kind?: string;
        code?: number;
        reason?: string;
      };
      expect(body).toMatchObject({ kind: 'Status', code: status });
      if (status === 429) expect((err as { headers?: Record<string, string> }).headers?.['retry-after']).toBe('2');
      await expect(leases.readNamespacedLease({ namespace, name: 'pass' })).resolves.toMatchObject({
        metadata: { name: 'pass' },
      });
    },
  );

  it('answers every request with the error for a period, then forwards again', async () => {
    proxy.errors({ status: 503, forMs: 300 });
    await expect(leases.readNamespacedLease({ namespace, name: 'pass' })).rejects.toMatchObject({ code: 503 });
    await expect(leases.readNamespacedLease({ namespace, name: 'pass' })).rejects.toMatchObject({ code: 503 });
    await new Promise((r) => setTimeout(r, 350));
    await expect(leases.readNamespacedLease({ namespace, name: 'pass' })).resolves.toBeDefined();
  });

  it('answers writes with 409 Conflict without forwarding them, and lets reads through', async () => {
    const before = await leases.readNamespacedLease({ namespace, name: 'pass' });
    proxy.conflictWrites();
    const body: V1Lease = { ...before, spec: { ...before.spec, holderIdentity: 'b' } };
    await expect(leases.replaceNamespacedLease({ namespace, name: 'pass', body })).rejects.toMatchObject({ code: 409 });
    const after = await leases.readNamespacedLease({ namespace, name: 'pass' });
    expect(after.metadata?.resourceVersion).toBe(before.metadata?.resourceVersion); // not forwarded
    proxy.heal();
    await expect(leases.replaceNamespacedLease({ namespace, name: 'pass', body })).resolves.toMatchObject({
      spec: { holderIdentity: 'b' },
    });
  });

  it('hangs requests until heal: the client gives up at its own timeout', async () => {
    proxy.hang();
    const client = leaseRequests<V1Lease>(apiClientFor(kc));
    const began = performance.now();
    await expect(client.get(namespace, 'pass', { signal: AbortSignal.timeout(300) })).rejects.toThrow();
    expect(performance.now() - began).toBeLessThan(10_000); // bounded by the client's timeout, not by the proxy
    expect(proxy.counts.hung).toBeGreaterThanOrEqual(1);
    proxy.heal();
    await expect(client.get(namespace, 'pass')).resolves.toBeDefined();
  });

  it('delivers watch events late, each after its delay and never before the one before it', async () => {
    const created = await leases.createNamespacedLease({
      namespace,
      body: { metadata: { name: 'watched' }, spec: { holderIdentity: 'h0' } },
    });
    const seen: { rv: number; holder: string; at: number }[] = [];
    const watch = new Watch(kc);
    const req = await watch.watch(
      `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases`,
      { fieldSelector: 'metadata.name=watched', resourceVersion: created.metadata?.resourceVersion ?? '' },
      (_type: string, obj: V1Lease) => {
        seen.push({
          rv: Number(obj.metadata?.resourceVersion),
          holder: obj.spec?.holderIdentity ?? '',
          at: performance.now(),
        });
      },
      () => undefined,
    );
    try {
      // Alternating delays: without order preservation the 0 ms events would overtake the 600 ms ones.
      let i = 0;
      proxy.watchDelay(() => (i++ % 2 === 0 ? 600 : 0));
      const sentAt: number[] = [];
      let current = created;
      for (let k = 1; k <= 4; k++) {
        sentAt.push(performance.now());
        current = await leases.replaceNamespacedLease({
          namespace,
          name: 'watched',
          body: { ...current, spec: { ...current.spec, holderIdentity: `h${k}` } },
        });
      }
      const deadline = performance.now() + 20_000;
      while (seen.length < 4 && performance.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(seen.map((s) => s.holder)).toEqual(['h1', 'h2', 'h3', 'h4']);
      const rvs = seen.map((s) => s.rv);
      expect([...rvs].sort((a, b) => a - b)).toEqual(rvs);
      // The first event was held 600 ms from when it reached the proxy, which is after its write was sent.
      expect((seen[0]?.at ?? 0) - (sentAt[0] ?? 0)).toBeGreaterThanOrEqual(600);
      // The second (0 ms) waited behind it.
      expect(seen[1]?.at ?? 0).toBeGreaterThanOrEqual(seen[0]?.at ?? Infinity);
      expect(proxy.counts.watchEventsDelayed).toBeGreaterThanOrEqual(2);
    } finally {
      proxy.heal();
      req.abort();
    }
  });
});
