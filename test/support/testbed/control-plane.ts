/**
 * ControlPlane: a real etcd and kube-apiserver on loopback, the way envtest runs them, with an
 * admin kubeconfig, the project's CRDs applied, fresh namespaces for tests, and non-admin
 * identities (ServiceAccount tokens, client certificates) for RBAC tests.
 */
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  ApiextensionsV1Api,
  CoreV1Api,
  KubeConfig,
  loadAllYaml,
  type V1CustomResourceDefinition,
} from '@kubernetes/client-node';
import { startApiServer, type ApiServer } from './apiserver.ts';
import { ensurePki, issueClientCert, type Pki } from './certs.ts';
import { startEtcd, type Etcd } from './etcd.ts';
import { reapStale } from './processes.ts';

/** CRD_DIR is the repository's crds/ folder, the one source of the schema. */
export const CRD_DIR = resolve(import.meta.dirname, '../../../crds');

/** ControlPlaneOptions configures startControlPlane. */
export interface ControlPlaneOptions {
  /** dir keeps certificates, data and logs; a fresh temporary folder by default (removed on stop). */
  readonly dir?: string;
  /** installCrds applies every YAML file in crds/ and waits for Established (default true). */
  readonly installCrds?: boolean;
  /** serviceAccountAdmission: see ApiServerOptions (on for a cluster with a real node). */
  readonly serviceAccountAdmission?: boolean;
}

/** ControlPlane is a running test control plane. */
export interface ControlPlane {
  readonly dir: string;
  readonly pki: Pki;
  readonly apiServer: ApiServer;
  readonly etcd: Etcd;
  /** kubeconfigPath is an admin kubeconfig file (client certificate in system:masters). */
  readonly kubeconfigPath: string;
  /** kubeConfig returns a fresh admin KubeConfig. */
  kubeConfig(): KubeConfig;
  /** applyCrds (re)applies every CRD in crds/ and waits until each is Established. */
  applyCrds(): Promise<void>;
  /** createNamespace makes a namespace with a generated name for one test and returns its name. */
  createNamespace(prefix?: string): Promise<string>;
  /** serviceAccountConfig creates (if needed) a ServiceAccount and returns a KubeConfig using a TokenRequest token for it. */
  serviceAccountConfig(namespace: string, name: string, expirationSeconds?: number): Promise<KubeConfig>;
  /** userConfig returns a KubeConfig for a client-certificate user in the given groups. */
  userConfig(user: string, groups?: readonly string[]): KubeConfig;
  /** stop ends kube-apiserver, then etcd, and removes dir when it was a temporary one. */
  stop(): Promise<void>;
}

function kubeConfigFor(
  server: string,
  pki: Pki,
  user: { name: string; cert?: string; key?: string; token?: string },
): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'fencepost-testbed', server, caFile: pki.caCert, skipTLSVerify: false }],
    users: [{ name: user.name, certFile: user.cert, keyFile: user.key, token: user.token }],
    contexts: [{ name: 'fencepost-testbed', cluster: 'fencepost-testbed', user: user.name, namespace: 'default' }],
    currentContext: 'fencepost-testbed',
  });
  return kc;
}

/** createTestNamespace makes a namespace with a generated name (prefix + random suffix) and returns its name. */
export async function createTestNamespace(kc: KubeConfig, prefix = 'test-'): Promise<string> {
  const ns = await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { generateName: prefix } } });
  const name = ns.metadata?.name;
  if (name === undefined) throw new Error('Created Namespace has no name');
  return name;
}

/** readCrds loads every CRD document from crds/. */
export function readCrds(): V1CustomResourceDefinition[] {
  const out: V1CustomResourceDefinition[] = [];
  for (const f of readdirSync(CRD_DIR)
    .filter((n) => n.endsWith('.yaml'))
    .sort()) {
    for (const doc of loadAllYaml(readFileSync(join(CRD_DIR, f), 'utf8'))) out.push(doc as V1CustomResourceDefinition);
  }
  return out;
}

/** startControlPlane starts etcd and kube-apiserver and, by default, installs the CRDs. */
export async function startControlPlane(opts: ControlPlaneOptions = {}): Promise<ControlPlane> {
  const temporary = opts.dir === undefined;
  const dir = opts.dir ?? mkdtempSync(join(tmpdir(), 'fencepost-testbed-'));
  mkdirSync(dir, { recursive: true });
  const pidFile = join(dir, 'pids');
  reapStale(pidFile);
  const pki = ensurePki(join(dir, 'pki'));
  const etcd = await startEtcd(dir, pidFile);
  let apiServer: ApiServer;
  try {
    apiServer = await startApiServer(dir, pki, etcd.clientUrl, pidFile, {
      ...(opts.serviceAccountAdmission === true ? { serviceAccountAdmission: true } : {}),
    });
  } catch (err) {
    await etcd.stop();
    throw err;
  }
  const admin = (): KubeConfig =>
    kubeConfigFor(apiServer.url, pki, { name: 'admin', cert: pki.adminCert, key: pki.adminKey });
  const kubeconfigPath = join(dir, 'kubeconfig');
  writeFileSync(kubeconfigPath, admin().exportConfig(), { mode: 0o600 });

  const plane: ControlPlane = {
    dir,
    pki,
    apiServer,
    etcd,
    kubeconfigPath,
    kubeConfig: admin,
    async applyCrds() {
      const api = admin().makeApiClient(ApiextensionsV1Api);
      for (const crd of readCrds()) {
        const name = crd.metadata?.name ?? '';
        try {
          const existing = await api.readCustomResourceDefinition({ name });
          await api.replaceCustomResourceDefinition({
            name,
            body: { ...crd, metadata: { ...crd.metadata, resourceVersion: existing.metadata?.resourceVersion ?? '' } },
          });
        } catch (err) {
          if ((err as { code?: number }).code !== 404) throw err;
          await api.createCustomResourceDefinition({ body: crd });
        }
        await waitEstablished(api, name);
      }
    },
    createNamespace: (prefix = 'test-') => createTestNamespace(admin(), prefix),
    async serviceAccountConfig(namespace, name, expirationSeconds = 3600) {
      const core = admin().makeApiClient(CoreV1Api);
      try {
        await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name } } });
      } catch (err) {
        if ((err as { code?: number }).code !== 409) throw err;
      }
      const tr = await core.createNamespacedServiceAccountToken({
        name,
        namespace,
        body: { spec: { audiences: [], expirationSeconds } },
      });
      const token = tr.status?.token;
      if (token === undefined) throw new Error(`TokenRequest for ${namespace}/${name} returned no token`);
      return kubeConfigFor(apiServer.url, pki, { name: `system:serviceaccount:${namespace}:${name}`, token });
    },
    userConfig(user, groups = []) {
      const { cert, key } = issueClientCert(pki, user, groups);
      return kubeConfigFor(apiServer.url, pki, { name: user, cert, key });
    },
    async stop() {
      await apiServer.stop();
      await etcd.stop();
      if (temporary) rmSync(dir, { recursive: true, force: true });
    },
  };
  if (opts.installCrds ?? true) {
    try {
      await plane.applyCrds();
    } catch (err) {
      await plane.stop();
      throw err;
    }
  }
  return plane;
}

async function waitEstablished(api: ApiextensionsV1Api, name: string, timeoutMs = 30_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    const crd = await api.readCustomResourceDefinition({ name });
    if (crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')) return;
    await sleep(100);
  }
  throw new Error(`CustomResourceDefinition ${name} not Established after ${timeoutMs} ms`);
}
