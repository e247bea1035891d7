/**
 * The typed requests over {@link ApiClient}: Lease get/create/replace/delete (the agent's
 * session, the controller's grants, its own election and its shards) and the Lease collection's
 * path (the informer lists and watches it), a JSON merge patch of a pod's metadata guarded by its
 * UID, Event create and patch, and a namespaced custom object's GET.
 *
 * Object types are the caller's (`L`, `E`, `O`): this layer speaks JSON and knows only the
 * metadata it needs, so the agent can keep its Kubernetes model types (type-only imports,
 * erased at run time). Timestamps arrive as strings; a Date in a body is sent as its
 * toISOString() (lease/record.ts MicroTime has six fractional digits, as MicroTime needs).
 */
import { isNotFound } from '../runtime/errors.ts';
import type { ListPage } from '../runtime/informer.ts';
import type { ApiClient } from './client.ts';
import type { KubeObject } from './informer.ts';

/** RequestOptions carry a request's abort signal. */
export interface RequestOptions {
  readonly signal?: AbortSignal | undefined;
}

/** MERGE_PATCH is the content type of a JSON merge patch (RFC 7386). */
export const MERGE_PATCH = 'application/merge-patch+json';

const seg = encodeURIComponent;

/** leasesPath is the path of a namespace's Lease collection. */
export function leasesPath(namespace: string): string {
  return `/apis/coordination.k8s.io/v1/namespaces/${seg(namespace)}/leases`;
}

/**
 * LeaseRequests are the Lease calls (runtime/leaderelection.ts LeaseClient's shape, and delete).
 * Errors are the transport's ApiError, which runtime/errors.ts classifies.
 */
export interface LeaseRequests<L> {
  /** get returns the Lease, or undefined when there is none (404). */
  get(namespace: string, name: string, options?: RequestOptions): Promise<L | undefined>;
  create(namespace: string, lease: L, options?: RequestOptions): Promise<L>;
  /** replace is a PUT: a compare-and-swap when the body carries a resourceVersion (409 when stale). */
  replace(namespace: string, name: string, lease: L, options?: RequestOptions): Promise<L>;
  /**
   * delete deletes the Lease; one already gone is not an error. With `resourceVersion`, only that
   * version of it (a DELETE precondition: 409 when it changed since).
   */
  delete(
    namespace: string,
    name: string,
    options?: RequestOptions & { readonly resourceVersion?: string },
  ): Promise<void>;
}

/** leaseRequests makes {@link LeaseRequests} over `api`. */
export function leaseRequests<L extends KubeObject>(api: ApiClient): LeaseRequests<L> {
  return {
    async get(namespace, name, options) {
      try {
        return await api.request<L>({
          method: 'GET',
          path: `${leasesPath(namespace)}/${seg(name)}`,
          signal: options?.signal,
        });
      } catch (err) {
        if (isNotFound(err)) return undefined;
        throw err;
      }
    },
    create: (namespace, lease, options) =>
      api.request<L>({ method: 'POST', path: leasesPath(namespace), body: lease, signal: options?.signal }),
    replace: (namespace, name, lease, options) =>
      api.request<L>({
        method: 'PUT',
        path: `${leasesPath(namespace)}/${seg(name)}`,
        body: lease,
        signal: options?.signal,
      }),
    async delete(namespace, name, options) {
      const rv = options?.resourceVersion;
      try {
        await api.request<unknown>({
          method: 'DELETE',
          path: `${leasesPath(namespace)}/${seg(name)}`,
          signal: options?.signal,
          ...(rv !== undefined ? { body: { preconditions: { resourceVersion: rv } } } : {}),
        });
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
    },
  };
}

/**
 * patchPodMetadata merges `metadata` (labels, annotations; null removes a key) into the pod,
 * only if it is still the incarnation with `uid`: metadata.uid in a merge patch is a
 * precondition, answered 409 for another incarnation (404 when the pod is gone).
 */
export async function patchPodMetadata(
  api: ApiClient,
  namespace: string,
  pod: { readonly name: string; readonly uid: string },
  metadata: {
    readonly labels?: Readonly<Record<string, string | null>>;
    readonly annotations?: Readonly<Record<string, string | null>>;
  },
  options?: RequestOptions,
): Promise<void> {
  await api.request({
    method: 'PATCH',
    path: `/api/v1/namespaces/${seg(namespace)}/pods/${seg(pod.name)}`,
    body: { metadata: { ...metadata, uid: pod.uid } },
    contentType: MERGE_PATCH,
    signal: options?.signal,
  });
}

/**
 * EventRequests create and patch core/v1 Events (kube/event-recorder.ts EventWriter); each
 * resolves to the Event as stored.
 */
export interface EventRequests {
  create(namespace: string, event: object): Promise<KubeObject>;
  /** patch sends a JSON merge patch of an Event (count, lastTimestamp, message). */
  patch(namespace: string, name: string, patch: object): Promise<KubeObject>;
}

/** eventRequests makes {@link EventRequests} over `api`. */
export function eventRequests(api: ApiClient): EventRequests {
  const path = (namespace: string): string => `/api/v1/namespaces/${seg(namespace)}/events`;
  return {
    create: (namespace, event) => api.request<KubeObject>({ method: 'POST', path: path(namespace), body: event }),
    patch: (namespace, name, patch) =>
      api.request<KubeObject>({
        method: 'PATCH',
        path: `${path(namespace)}/${seg(name)}`,
        body: patch,
        contentType: MERGE_PATCH,
      }),
  };
}

/** ObjectList is one page of a list: its items and the list's metadata (resourceVersion, continue). */
export interface ObjectList<T> {
  readonly metadata?: { readonly resourceVersion?: string; readonly continue?: string };
  items: T[];
}

/**
 * listPages is an informer's `listPage` (runtime/informer.ts) for the collection at `path` (which
 * may carry a query of its own, e.g. a field selector), with `labelSelector`: one GET per page,
 * answered as plain JSON (no model classes), aborted when the informer stops.
 */
export function listPages<T>(
  api: ApiClient,
  path: string,
  labelSelector?: string,
): (page: ListPage) => Promise<ObjectList<T>> {
  const q = path.indexOf('?');
  const base = q < 0 ? path : path.slice(0, q);
  const own: Record<string, string> = q < 0 ? {} : Object.fromEntries(new URLSearchParams(path.slice(q + 1)));
  return async (page) => {
    const list = await api.request<ObjectList<T> | undefined>({
      method: 'GET',
      path: base,
      query: { ...own, labelSelector, limit: page.limit, continue: page.continue },
      signal: page.signal,
    });
    return { ...list, items: list?.items ?? [] };
  };
}

/** getCustomObject reads a namespaced custom object; undefined when it does not exist (404). */
export async function getCustomObject<O>(
  api: ApiClient,
  type: { readonly group: string; readonly version: string; readonly plural: string },
  namespace: string,
  name: string,
  options?: RequestOptions,
): Promise<O | undefined> {
  try {
    return await api.request<O>({
      method: 'GET',
      path: `/apis/${seg(type.group)}/${seg(type.version)}/namespaces/${seg(namespace)}/${seg(type.plural)}/${seg(name)}`,
      signal: options?.signal,
    });
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}
