/**
 * The plugin's only I/O: GETs and LISTs against the API server, with the kubeconfig loading every
 * fencepost command uses (transport/load-config.ts: --kubeconfig, else $KUBECONFIG, else
 * ~/.kube/config, else in-cluster) plus kubectl's --context and namespace defaulting. Read-only:
 * nothing here writes (write.ts does, for handover and release --force). Requests go through the
 * lean JSON client (kube/json-client.ts) on the one API client's pooled connection.
 */
import type { CoreV1Event, V1Lease, V1Pod } from '@kubernetes/client-node';
import { GROUP, PLURAL, VERSION, type DistributedLock } from '../../api/v1alpha1/distributedlock.ts';
import type { ControllerLeaseRef } from '../../config/plugin.ts';
import { UsageError } from '../../config/usage-error.ts';
import type { JsonClient } from '../../kube/json-client.ts';
import { apiClientFor, type ApiClient } from '../../kube/api-client.ts';
import { UnknownContextError } from '../../transport/config.ts';
import { LOCK_LABEL, leaseName, podKeys } from '../../protocol/names.ts';
import { httpStatus, isNotFound } from '../../runtime/errors.ts';
import { matchesSelector } from '../../controllers/distributedlock/pods.ts';
import { timeMs } from './format.ts';
import type { ControllerLeaseView, LockSnapshot } from './snapshot.ts';

/** Cluster is a connection to one API server, in one default namespace. */
export interface Cluster {
  readonly json: JsonClient;
  /** namespace: -n, else the context's namespace, else `default` (kubectl's rule). */
  readonly namespace: string;
  /** server: the API server's URL, for messages. */
  readonly server: string;
}

/**
 * connect loads the kubeconfig and selects --context. Throws a UsageError naming --kubeconfig when
 * that file cannot be loaded, or --context when the kubeconfig has no such context.
 */
export function connect(o: {
  readonly kubeconfig: string | undefined;
  readonly context: string | undefined;
  readonly namespace: string | undefined;
}): Cluster {
  let api: ApiClient;
  try {
    api = apiClientFor(o.kubeconfig, { context: o.context });
  } catch (err) {
    if (err instanceof UnknownContextError) {
      const known = err.known;
      throw new UsageError(
        '--context',
        `no context ${JSON.stringify(err.context)} in the kubeconfig (it has: ${known.length > 0 ? known.join(', ') : 'none'})`,
      );
    }
    // A file named on the command line that cannot be read or parsed is bad usage, named as such.
    if (o.kubeconfig === undefined) throw err;
    throw new UsageError('--kubeconfig', `cannot load ${JSON.stringify(o.kubeconfig)}: ${failureOf(err)}`);
  }
  return {
    json: api,
    namespace: o.namespace ?? api.config.namespace ?? 'default',
    server: api.config.server.href.replace(/\/$/, ''),
  };
}

interface List<T> {
  readonly items: T[];
}

/**
 * get GETs `path`. A failure becomes one line naming the API server, the path, and what it said
 * (the Status message for an HTTP error, the cause for a connection that failed); the error keeps
 * its original as `cause`, so callers still classify it (isNotFound).
 */
async function get<T>(c: Cluster, path: string): Promise<T> {
  try {
    return await c.json.request<T>({ method: 'GET', path });
  } catch (err) {
    throw new Error(`GET ${path} on ${c.server}: ${failureOf(err)}`, { cause: err });
  }
}

/** failureOf says in one line why a request failed. */
export function failureOf(err: unknown): string {
  const code = httpStatus(err);
  if (code !== undefined) {
    const body = (err as { body?: unknown }).body;
    let message: string | undefined;
    try {
      const status: unknown = typeof body === 'string' ? JSON.parse(body) : body;
      if (typeof status === 'object' && status !== null && 'message' in status && typeof status.message === 'string')
        message = status.message;
    } catch {
      // not a metav1.Status (a proxy's HTML page): the code alone
    }
    return `HTTP ${code}${message !== undefined ? `: ${message}` : ''}`;
  }
  const cause = err instanceof Error && err.cause instanceof Error ? err.cause : err;
  const text = cause instanceof Error ? cause.message : String(cause);
  return text.split('\n')[0] ?? text;
}

const locksPath = (namespace: string | undefined): string =>
  namespace !== undefined
    ? `/apis/${GROUP}/${VERSION}/namespaces/${encodeURIComponent(namespace)}/${PLURAL}`
    : `/apis/${GROUP}/${VERSION}/${PLURAL}`;

/** NotFoundError: the LOCK named on the command line does not exist (exit status 1). */
export class NotFoundError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'NotFoundError';
  }
}

/** readLock reads one lock, or throws a NotFoundError naming it and its namespace. */
export async function readLock(c: Cluster, namespace: string, name: string): Promise<DistributedLock> {
  try {
    return await get<DistributedLock>(c, `${locksPath(namespace)}/${encodeURIComponent(name)}`);
  } catch (err) {
    if (isNotFound(err))
      throw new NotFoundError(
        `distributedlock ${JSON.stringify(name)} not found in namespace ${JSON.stringify(namespace)}`,
      );
    throw err;
  }
}

/** listLocks lists the locks of a namespace, or of all namespaces (undefined), sorted by namespace and name. */
export async function listLocks(c: Cluster, namespace: string | undefined): Promise<DistributedLock[]> {
  let list: List<DistributedLock>;
  try {
    list = await get<List<DistributedLock>>(c, locksPath(namespace));
  } catch (err) {
    // The resource itself is unknown: the CRD is not installed on this cluster.
    if (isNotFound(err))
      throw new Error(`no DistributedLocks on ${c.server}: the CRD ${GROUP}/${VERSION} ${PLURAL} is not installed`, {
        cause: err,
      });
    throw err;
  }
  return list.items.toSorted(
    (a, b) =>
      (a.metadata.namespace ?? '').localeCompare(b.metadata.namespace ?? '') ||
      (a.metadata.name ?? '').localeCompare(b.metadata.name ?? ''),
  );
}

/** snapshot reads what the controller reads of one lock (its Lease and pods), and the lock's Events. */
export async function snapshot(c: Cluster, lock: DistributedLock): Promise<LockSnapshot> {
  const namespace = lock.metadata.namespace ?? c.namespace;
  const name = lock.metadata.name ?? '';
  const [lease, pods, events] = await Promise.all([
    readLease(c, namespace, leaseName(name)),
    lockPods(c, lock),
    lockEvents(c, namespace, name),
  ]);
  return { lock, lease, pods, events };
}

/** snapshots reads many locks' snapshots with one list of Leases, pods and Events per namespace. */
export async function snapshots(c: Cluster, locks: readonly DistributedLock[]): Promise<LockSnapshot[]> {
  const namespaces = [...new Set(locks.map((l) => l.metadata.namespace ?? c.namespace))];
  const perNamespace = new Map(
    await Promise.all(
      namespaces.map(
        async (ns) =>
          [
            ns,
            await Promise.all([
              listOf<V1Lease>(
                c,
                `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(ns)}/leases?labelSelector=${encodeURIComponent(LOCK_LABEL)}`,
              ),
              listOf<V1Pod>(c, `/api/v1/namespaces/${encodeURIComponent(ns)}/pods`),
              listOf<CoreV1Event>(
                c,
                `/api/v1/namespaces/${encodeURIComponent(ns)}/events?fieldSelector=${encodeURIComponent('involvedObject.kind=DistributedLock')}`,
              ),
            ]),
          ] as const,
      ),
    ),
  );
  return locks.map((lock) => {
    const ns = lock.metadata.namespace ?? c.namespace;
    const name = lock.metadata.name ?? '';
    const [leases = [], pods = [], events = []] = perNamespace.get(ns) ?? [];
    return {
      lock,
      lease: leases.find((l) => l.metadata?.name === leaseName(name)),
      pods: pods.filter((p) => concerns(lock, p)),
      events: events.filter((e) => e.involvedObject.name === name),
    };
  });
}

async function listOf<T>(c: Cluster, path: string): Promise<T[]> {
  return (await get<List<T>>(c, path)).items;
}

/** readLease reads a Lease, or undefined when it does not exist. */
export async function readLease(c: Cluster, namespace: string, name: string): Promise<V1Lease | undefined> {
  try {
    return await get<V1Lease>(
      c,
      `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/leases/${encodeURIComponent(name)}`,
    );
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

/** concerns: the pod is one the controller looks at for this lock (selected, or marked as its holder). */
function concerns(lock: DistributedLock, pod: V1Pod): boolean {
  const keys = podKeys(lock.metadata.name ?? '');
  const labels = pod.metadata?.labels ?? {};
  return (
    labels[keys.holder] !== undefined ||
    pod.metadata?.annotations?.[keys.token] !== undefined ||
    matchesSelector(lock.spec.candidates.selector, labels)
  );
}

/** lockPods lists the namespace's pods and keeps those the controller looks at for the lock. */
async function lockPods(c: Cluster, lock: DistributedLock): Promise<V1Pod[]> {
  const ns = lock.metadata.namespace ?? c.namespace;
  return (await listOf<V1Pod>(c, `/api/v1/namespaces/${encodeURIComponent(ns)}/pods`)).filter((p) => concerns(lock, p));
}

/** lockEvents lists the Events recorded about the lock. */
async function lockEvents(c: Cluster, namespace: string, name: string): Promise<CoreV1Event[]> {
  const selector = `involvedObject.kind=DistributedLock,involvedObject.name=${name}`;
  return await listOf<CoreV1Event>(
    c,
    `/api/v1/namespaces/${encodeURIComponent(namespace)}/events?fieldSelector=${encodeURIComponent(selector)}`,
  );
}

/**
 * readPod reads one pod, or undefined when it does not exist (explain --pod names a pod the lock
 * may not select).
 */
export async function readPod(c: Cluster, namespace: string, name: string): Promise<V1Pod | undefined> {
  try {
    return await get<V1Pod>(c, `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(name)}`);
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

/**
 * controllerLease finds the controller's leader-election Lease: in the namespace given, or by
 * name in every namespace (the chart installs the controller in a namespace of its own). A user
 * who may not list Leases gets `unknown`, not a failure: the rest of explain still holds.
 */
export async function controllerLease(c: Cluster, ref: ControllerLeaseRef): Promise<ControllerLeaseView> {
  try {
    if (ref.namespace !== undefined) {
      const lease = await readLease(c, ref.namespace, ref.name);
      return lease !== undefined ? { state: 'found', lease } : { state: 'absent', where: `namespace ${ref.namespace}` };
    }
    const found = await listOf<V1Lease>(
      c,
      `/apis/coordination.k8s.io/v1/leases?fieldSelector=${encodeURIComponent(`metadata.name=${ref.name}`)}`,
    );
    const [lease] = found.toSorted((a, b) => (timeMs(b.spec?.renewTime) ?? 0) - (timeMs(a.spec?.renewTime) ?? 0));
    return lease !== undefined ? { state: 'found', lease } : { state: 'absent', where: 'any namespace' };
  } catch (err) {
    const code = httpStatus(err) ?? httpStatus(err instanceof Error ? err.cause : undefined);
    if (code === 401 || code === 403)
      return {
        state: 'unknown',
        detail: `not allowed to read Leases (${ref.namespace !== undefined ? `namespace ${ref.namespace}` : 'all namespaces'}); pass --controller-lease NAMESPACE/NAME`,
      };
    throw err;
  }
}
