/**
 * Builders and helpers for integration tests: DistributedLocks, Pods made Ready through the status
 * subresource (there is no kubelet), and a stand-in for the holder's renewal.
 */
import {
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  type V1Lease,
  type V1Pod,
} from '@kubernetes/client-node';
import {
  API_VERSION,
  GROUP,
  KIND,
  PLURAL,
  VERSION,
  type DistributedLock,
  type DistributedLockSpec,
} from '../../src/api/v1alpha1/distributedlock.ts';
import { releasedLease, renewedLease } from '../../src/lease/record.ts';
import { leaseName } from '../../src/protocol/names.ts';
import { HANDOVER_REQUEST_ANNOTATION, formatHandoverRequest } from '../../src/protocol/handover.ts';

/**
 * mergePatch and jsonPatch are the per-call options that make a client-node patch call send its
 * body as a JSON merge patch (RFC 7386) or a JSON Patch (RFC 6902). Its custom-object patch calls
 * default to JSON Patch and KubernetesObjectApi.patch to strategic merge (which custom resources
 * reject), so every test patch names its content type.
 */
export const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
export const jsonPatch = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);

/** lockBody builds a DistributedLock selecting `app: <app>` pods. */
export function lockBody(name: string, app: string, spec: Partial<DistributedLockSpec> = {}): DistributedLock {
  return {
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: { name },
    spec: { leaseDurationSeconds: 2, candidates: { selector: { matchLabels: { app } } }, ...spec },
  };
}

/** TestKube bundles the clients a test needs in one namespace. */
export interface TestKube {
  readonly kc: KubeConfig;
  readonly namespace: string;
  readonly core: CoreV1Api;
  readonly leases: CoordinationV1Api;
  readonly custom: CustomObjectsApi;
}

/** testKube makes the clients for a namespace. */
export function testKube(kc: KubeConfig, namespace: string): TestKube {
  return {
    kc,
    namespace,
    core: kc.makeApiClient(CoreV1Api),
    leases: kc.makeApiClient(CoordinationV1Api),
    custom: kc.makeApiClient(CustomObjectsApi),
  };
}

/** createLock creates a lock in the namespace. */
export async function createLock(t: TestKube, body: DistributedLock): Promise<DistributedLock> {
  return (await t.custom.createNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace: t.namespace,
    plural: PLURAL,
    body,
  })) as DistributedLock;
}

/** getLock reads a lock (throws 404 when gone). */
export async function getLock(t: TestKube, name: string): Promise<DistributedLock> {
  return (await t.custom.getNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace: t.namespace,
    plural: PLURAL,
    name,
  })) as DistributedLock;
}

/** deleteLock deletes a lock. */
export async function deleteLock(t: TestKube, name: string): Promise<void> {
  await t.custom.deleteNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace: t.namespace,
    plural: PLURAL,
    name,
  });
}

/** createPod creates a Pod and, unless ready is false, reports it Running and Ready as a kubelet would. */
export async function createPod(
  t: TestKube,
  name: string,
  labels: Record<string, string>,
  ready = true,
): Promise<V1Pod> {
  const pod = await t.core.createNamespacedPod({
    namespace: t.namespace,
    body: { metadata: { name, labels }, spec: { containers: [{ name: 'app', image: 'example.invalid/app:1' }] } },
  });
  return ready ? await setPodStatus(t, name, 'ready') : pod;
}

/** setPodStatus writes a kubelet-style status: Running and Ready, Running but not Ready, or all containers terminated. */
export async function setPodStatus(
  t: TestKube,
  name: string,
  state: 'ready' | 'unready' | 'terminated',
): Promise<V1Pod> {
  // The controller patches labels concurrently; like a kubelet, retry the read-modify-write on 409.
  for (let attempt = 1; ; attempt++) {
    try {
      return await writePodStatus(t, name, state);
    } catch (err) {
      if ((err as { code?: number }).code !== 409 || attempt >= 10) throw err;
    }
  }
}

async function writePodStatus(t: TestKube, name: string, state: 'ready' | 'unready' | 'terminated'): Promise<V1Pod> {
  const now = new Date();
  const pod = await t.core.readNamespacedPod({ name, namespace: t.namespace });
  const containerState =
    state === 'terminated'
      ? { terminated: { exitCode: 137, reason: 'Error', startedAt: now, finishedAt: now } }
      : { running: { startedAt: now } };
  pod.status = {
    phase: state === 'terminated' ? 'Failed' : 'Running',
    conditions: [{ type: 'Ready', status: state === 'ready' ? 'True' : 'False', lastTransitionTime: now }],
    containerStatuses: [
      {
        name: 'app',
        image: 'example.invalid/app:1',
        imageID: '',
        ready: state === 'ready',
        restartCount: 0,
        state: containerState,
      },
    ],
  };
  return await t.core.replaceNamespacedPodStatus({ name, namespace: t.namespace, body: pod });
}

/** getLease reads the lock's Lease, or undefined. */
export async function getLease(t: TestKube, lockName: string): Promise<V1Lease | undefined> {
  try {
    return await t.leases.readNamespacedLease({ namespace: t.namespace, name: leaseName(lockName) });
  } catch (err) {
    if ((err as { code?: number }).code === 404) return undefined;
    throw err;
  }
}

/** renewLease is what the holder's agent does each renew period: CAS the renewTime forward. */
export async function renewLease(t: TestKube, lockName: string): Promise<V1Lease> {
  const lease = await getLease(t, lockName);
  if (lease === undefined) throw new Error(`no Lease for ${lockName}`);
  return await t.leases.replaceNamespacedLease({
    namespace: t.namespace,
    name: leaseName(lockName),
    body: renewedLease(lease, new Date()),
  });
}

/** releaseLease is what an agent does on SIGTERM: clear the holder, mark it Released (CAS). */
export async function releaseLease(t: TestKube, lockName: string): Promise<V1Lease> {
  // As an agent does: on 409 re-read and try again (the Lease changed between read and write).
  for (let attempt = 1; ; attempt++) {
    const lease = await getLease(t, lockName);
    if (lease === undefined) throw new Error(`no Lease for ${lockName}`);
    try {
      return await t.leases.replaceNamespacedLease({
        namespace: t.namespace,
        name: leaseName(lockName),
        body: releasedLease(lease, 'Released'),
      });
    } catch (err) {
      if ((err as { code?: number }).code !== 409 || attempt >= 5) throw err;
    }
  }
}

/** keepRenewing renews every periodMs until the returned stop() is called (a well-behaved holder). */
export function keepRenewing(t: TestKube, lockName: string, periodMs: number): () => Promise<void> {
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      try {
        await renewLease(t, lockName);
      } catch {
        /* a conflict or a lost lease; the test asserts */
      }
      await new Promise((r) => setTimeout(r, periodMs));
    }
  })();
  return async () => {
    stopped = true;
    await loop;
  };
}

/**
 * serviceAccountKubeConfig: a kubeconfig for the API server of `admin` that authenticates with a
 * fresh TokenRequest token of ServiceAccount namespace/name — bound to `pod` when given (the API
 * server then puts the pod's name and uid in the user's extra fields, as for a kubelet-projected
 * token).
 */
export async function serviceAccountKubeConfig(
  admin: KubeConfig,
  namespace: string,
  name: string,
  pod?: { readonly name: string; readonly uid: string },
): Promise<KubeConfig> {
  const tr = await admin.makeApiClient(CoreV1Api).createNamespacedServiceAccountToken({
    name,
    namespace,
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
  const cluster = admin.getCurrentCluster();
  if (cluster === null || tr.status?.token === undefined) throw new Error('no cluster or token');
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [cluster],
    users: [{ name, token: tr.status.token }],
    contexts: [{ name, cluster: cluster.name, user: name, namespace }],
    currentContext: name,
  });
  return kc;
}

/**
 * askHandover asks for a planned handover of `lock` to pod `to` as `kubectl fencepost handover`
 * does: the lock's request annotation, made against `token` (the grant it means to move).
 */
export async function askHandover(
  t: TestKube,
  lock: string,
  to: string,
  token: bigint,
  opts: { readonly drainSeconds?: number | undefined; readonly by?: string } = {},
): Promise<void> {
  await t.custom.patchNamespacedCustomObject(
    {
      group: GROUP,
      version: VERSION,
      plural: PLURAL,
      namespace: t.namespace,
      name: lock,
      body: {
        metadata: {
          annotations: {
            [HANDOVER_REQUEST_ANNOTATION]: formatHandoverRequest({
              to,
              token,
              drainSeconds: opts.drainSeconds,
              requestedAt: new Date().toISOString(),
              by: opts.by ?? 'test',
            }),
          },
        },
      },
    },
    mergePatch,
  );
}
