/**
 * Identities for processes that stand in for pods: a kubeconfig file holding a ServiceAccount
 * token from the TokenRequest API, optionally bound to a pod (as the kubelet's projected token is),
 * so that the process has exactly the permissions RBAC gives that ServiceAccount; or, for
 * containers (crun mode), the directory the kubelet mounts at
 * /var/run/secrets/kubernetes.io/serviceaccount (token, ca.crt, namespace).
 */
import { chownSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';

/** PodRef names the pod a token is bound to. */
export interface PodRef {
  readonly name: string;
  readonly uid: string;
}

/** requestToken asks the TokenRequest API for a token of namespace/serviceAccount (bound to pod when given). */
async function requestToken(
  admin: KubeConfig,
  namespace: string,
  serviceAccount: string,
  pod?: PodRef,
): Promise<string> {
  const tr = await admin.makeApiClient(CoreV1Api).createNamespacedServiceAccountToken({
    namespace,
    name: serviceAccount,
    body: {
      spec: {
        audiences: [],
        expirationSeconds: 3600,
        ...(pod !== undefined
          ? { boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: pod.name, uid: pod.uid } }
          : {}),
      },
    },
  });
  const token = tr.status?.token;
  if (token === undefined) throw new Error(`TokenRequest for ${namespace}/${serviceAccount} returned no token`);
  return token;
}

/**
 * writeServiceAccountDir writes what the kubelet mounts at /var/run/secrets/kubernetes.io/serviceaccount
 * into dir — `token` (a TokenRequest token for namespace/serviceAccount, bound to pod when given),
 * `ca.crt` (the admin config's cluster CA) and `namespace` — readable only by owner (a container's
 * host uid; default the caller); returns dir.
 */
export async function writeServiceAccountDir(
  admin: KubeConfig,
  namespace: string,
  serviceAccount: string,
  dir: string,
  pod?: PodRef,
  owner?: number,
): Promise<string> {
  const cluster = admin.getCurrentCluster();
  if (cluster === null) throw new Error('admin kubeconfig has no current cluster');
  const ca =
    cluster.caData !== undefined
      ? Buffer.from(cluster.caData, 'base64').toString('utf8')
      : cluster.caFile !== undefined
        ? readFileSync(cluster.caFile, 'utf8')
        : undefined;
  if (ca === undefined) throw new Error('admin kubeconfig has no cluster CA');
  const token = await requestToken(admin, namespace, serviceAccount, pod);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const files: [string, string][] = [
    ['token', token],
    ['ca.crt', ca],
    ['namespace', namespace],
  ];
  for (const [name, content] of files) writeFileSync(join(dir, name), content, { mode: 0o600 });
  if (owner !== undefined) for (const f of [dir, ...files.map(([name]) => join(dir, name))]) chownSync(f, owner, owner);
  return dir;
}

/**
 * writeServiceAccountKubeconfig requests a token for namespace/serviceAccount (bound to pod when
 * given) with the admin config and writes a kubeconfig using it to file; returns file.
 */
export async function writeServiceAccountKubeconfig(
  admin: KubeConfig,
  namespace: string,
  serviceAccount: string,
  file: string,
  pod?: PodRef,
): Promise<string> {
  const cluster = admin.getCurrentCluster();
  if (cluster === null) throw new Error('admin kubeconfig has no current cluster');
  const token = await requestToken(admin, namespace, serviceAccount, pod);
  const user = `system:serviceaccount:${namespace}:${serviceAccount}`;
  writeFileSync(
    file,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      'current-context': 'sa',
      clusters: [
        {
          name: 'cluster',
          cluster: {
            server: cluster.server,
            ...(cluster.caFile !== undefined ? { 'certificate-authority': cluster.caFile } : {}),
            ...(cluster.caData !== undefined ? { 'certificate-authority-data': cluster.caData } : {}),
          },
        },
      ],
      users: [{ name: user, user: { token } }],
      contexts: [{ name: 'sa', context: { cluster: 'cluster', user, namespace } }],
    }),
    { mode: 0o600 },
  );
  return file;
}
