/**
 * The controller's secure /metrics against the real API server: HTTPS, each scrape's bearer token
 * checked with a TokenReview and its user's right to `get` the non-resource URL /metrics with a
 * SubjectAccessReview. No token and a token the API server does not know are 401, a
 * ServiceAccount without the metrics-reader rule is 403, one bound to it gets Prometheus text. A
 * client that does not trust the certificate is refused; a cached allowance is reused within its
 * TTL and not after; a renewed certificate in --metrics-cert-dir is served without a restart.
 * First through the `fencepost controller` process with its defaults (a self-signed certificate),
 * then the listener in-process with an injected clock.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import * as https from 'node:https';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { CoreV1Api, RbacAuthorizationV1Api, type KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClientFor } from '../../../src/kube/api-client.ts';
import { serveProbes, type ProbeServer } from '../../../src/observability/http.ts';
import { metricsAuthorizer } from '../../../src/observability/metrics-auth.ts';
import { createControllerMetrics } from '../../../src/observability/metrics.ts';
import {
  certificateFromDir,
  selfSignedCertificate,
  type ServingCertificate,
} from '../../../src/observability/serving-cert.ts';
import { eventually, freshNamespace, sharedKubeConfig, sharedKubeconfigPath } from '../../support/env.ts';
import { getStatus } from '../../support/testbed/http-probe.ts';
import { freePort } from '../../support/testbed/ports.ts';
import { spawnManaged, tailLog, type ManagedProcess } from '../../support/testbed/processes.ts';

const main = resolve(import.meta.dirname, '../../../src/cli/main.ts');

/** METRICS_READER_RULE is the chart's metrics-reader ClusterRole rule (chart.test.ts checks the chart has it). */
const METRICS_READER_RULE = { nonResourceURLs: ['/metrics'], verbs: ['get'] };

describe('secure /metrics (TokenReview + SubjectAccessReview)', () => {
  const admin: KubeConfig = sharedKubeConfig();
  const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
  const core = admin.makeApiClient(CoreV1Api);
  let ns = '';
  let role = '';
  let readerToken = '';
  let strangerToken = '';
  let dir = '';
  const bearer = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });

  const token = async (name: string): Promise<string> => {
    const tr = await core.createNamespacedServiceAccountToken({
      namespace: ns,
      name,
      body: { spec: { audiences: [], expirationSeconds: 3600 } },
    });
    return tr.status?.token ?? '';
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fencepost-metrics-auth-'));
    ns = await freshNamespace(admin, 'metrics-auth-');
    role = `${ns}-metrics-reader`;
    for (const name of ['reader', 'stranger'])
      await core.createNamespacedServiceAccount({ namespace: ns, body: { metadata: { name } } });
    await rbac.createClusterRole({ body: { metadata: { name: role }, rules: [METRICS_READER_RULE] } });
    await rbac.createClusterRoleBinding({
      body: {
        metadata: { name: role },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
        subjects: [{ kind: 'ServiceAccount', name: 'reader', namespace: ns }],
      },
    });
    readerToken = await token('reader');
    strangerToken = await token('stranger');
  });
  afterAll(async () => {
    await rbac.deleteClusterRoleBinding({ name: role }).catch(() => undefined);
    await rbac.deleteClusterRole({ name: role }).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });

  describe('the fencepost controller process, with its defaults', () => {
    let controller: ManagedProcess | undefined;
    let url = '';
    beforeAll(async () => {
      const port = await freePort();
      url = `https://127.0.0.1:${port}/metrics`;
      controller = spawnManaged('controller', process.execPath, {
        args: [
          main,
          'controller',
          '--kubeconfig',
          sharedKubeconfigPath(),
          '--namespace',
          ns,
          '--leader-elect=false',
          '--metrics-bind-address',
          `127.0.0.1:${port}`,
          '--health-probe-bind-address',
          '0',
        ],
        logFile: join(dir, 'controller.log'),
      });
      await eventually(async () => {
        expect(controller?.isRunning(), tailLog(join(dir, 'controller.log'))).toBe(true);
        expect((await getStatus(url, undefined, 2000, { insecure: true })).status).toBe(401);
      }, 30_000);
    });
    afterAll(async () => {
      await controller?.stop();
    });

    it('fails to start, naming the flag, when --metrics-cert-dir has no certificate', async () => {
      const bad = spawnManaged('controller-no-cert', process.execPath, {
        args: [main, 'controller', '--kubeconfig', sharedKubeconfigPath(), '--metrics-cert-dir', join(dir, 'none')],
        logFile: join(dir, 'controller-no-cert.log'),
      });
      expect(await bad.exited).toBe(2);
      expect(tailLog(join(dir, 'controller-no-cert.log'))).toContain(
        `fencepost: --metrics-cert-dir ${join(dir, 'none')}: cannot read ${join(dir, 'none', 'tls.crt')}: ENOENT`,
      );
    });

    it('answers 401 without a token or with one the API server does not know', async () => {
      const none = await getStatus(url, undefined, 2000, { insecure: true });
      expect([none.status, none.body]).toEqual([401, 'Unauthorized: no bearer token\n']);
      const unknown = await getStatus(url, undefined, 2000, { insecure: true, ...bearer('not-a-token') });
      expect(unknown.status).toBe(401);
    });

    it('answers 403 to a ServiceAccount without the metrics-reader rule', async () => {
      const r = await getStatus(url, undefined, 2000, { insecure: true, ...bearer(strangerToken) });
      expect(r.status).toBe(403);
      expect(r.body).toContain(`user "system:serviceaccount:${ns}:stranger" cannot get path "/metrics"`);
    });

    it('answers 200 with Prometheus text to a ServiceAccount bound to it', async () => {
      const r = await getStatus(url, undefined, 2000, { insecure: true, ...bearer(readerToken) });
      expect(r.status).toBe(200);
      expect(r.body).toMatch(/^# TYPE leader_election_master_status gauge$/m);
      expect(r.body).toMatch(/^leader_election_master_status\{name="fencepost-controller"\} 1$/m);
    });

    it('refuses a client that does not trust its self-signed certificate; plain HTTP gets no metrics', async () => {
      await expect(getStatus(url, undefined, 2000, bearer(readerToken))).rejects.toThrow(/self-signed certificate/);
      const plain = await getStatus(url.replace('https:', 'http:'), undefined, 2000, bearer(readerToken)).catch(
        (err: unknown) => ({ status: 0, body: String(err) }),
      );
      expect(plain.status).not.toBe(200);
    });
  });

  describe('the listener in-process: certificate folder, cached decisions', () => {
    let server: ProbeServer | undefined;
    let now = 0;
    let reviews = 0;
    let url = '';
    const write = (c: ServingCertificate): void => {
      writeFileSync(join(dir, 'tls.key'), c.key);
      writeFileSync(join(dir, 'tls.crt'), c.cert);
    };
    const first = selfSignedCertificate({ commonName: 'first', hosts: ['127.0.0.1'] });
    const second = selfSignedCertificate({ commonName: 'second', hosts: ['127.0.0.1'] });

    beforeAll(async () => {
      write(first);
      const api = apiClientFor(admin);
      server = await serveProbes('127.0.0.1:0', '--metrics-bind-address', {
        registry: createControllerMetrics().registry,
        tls: { certificate: () => certificateFromDir(dir, '--metrics-cert-dir'), reloadMs: 50 },
        authorize: metricsAuthorizer({
          review: (path, body) => {
            reviews++;
            return api.request({ method: 'POST', path, body });
          },
          allowTtlMs: 60_000,
          now: () => now,
        }),
      });
      url = `https://${server?.address ?? ''}/metrics`;
    });
    afterAll(async () => {
      await server?.stop();
    });

    it('is trusted by a client given its certificate, and serves a renewed one without a restart', async () => {
      const r = await getStatus(url, undefined, 2000, { caPem: first.cert, ...bearer(readerToken) });
      expect(r.status).toBe(200);
      write(second);
      await eventually(async () => {
        expect((await getStatus(url, undefined, 2000, { caPem: second.cert, ...bearer(readerToken) })).status).toBe(
          200,
        );
      });
      await expect(
        getStatus(url, undefined, 2000, { caPem: first.cert, newConnection: true, ...bearer(readerToken) }),
      ).rejects.toThrow(/self-signed certificate/);
    });

    it('names the Bearer scheme in a 401 (RFC 6750)', async () => {
      const header = await new Promise<string | undefined>((done, fail) => {
        https
          .get(url, { rejectUnauthorized: false, agent: false }, (res) => {
            res.resume();
            done(res.headers['www-authenticate']);
          })
          .on('error', fail);
      });
      expect(header).toBe('Bearer');
    });

    it('reuses an allowance within its TTL, and asks again after it: a removed binding then answers 403', async () => {
      const reader = await token('reader'); // a token not seen yet: nothing cached
      const get = () => getStatus(url, undefined, 2000, { insecure: true, ...bearer(reader) });
      const before = reviews;
      expect((await get()).status).toBe(200);
      expect(reviews - before).toBe(2); // one TokenReview, one SubjectAccessReview
      await rbac.deleteClusterRoleBinding({ name: role });
      now += 59_000;
      expect((await get()).status).toBe(200); // both decisions cached: no review sent
      expect(reviews - before).toBe(2);
      // Past the allowance's TTL (and the token's 60 s): reviewed again, and RBAC now denies.
      await eventually(async () => {
        now += 61_000;
        const r = await get();
        expect(r.status).toBe(403);
      });
      expect(reviews - before).toBeGreaterThan(2);
    });
  });
});
