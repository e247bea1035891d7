/**
 * Identities for processes that stand in for pods: a kubeconfig file holding a ServiceAccount
 * token from the TokenRequest API, optionally bound to a pod (as the kubelet's projected token is),
 * so that the process has exactly the permissions RBAC gives that ServiceAccount.
 */
import { writeFileSync } from 'node:fs';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';

/** PodRef names the pod a token is bound to. */
export interface PodRef {
  readonly name: string;
  readonly uid: string;
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
