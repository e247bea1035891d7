/**
 * The Lease clients behind the {@link LeaseClient} port of the leader elector
 * (runtime/leaderelection.ts): a typed one over client-node's CoordinationV1Api (the controller's
 * own election and shards), and the lock controller's Lease store over the {@link JsonClient}.
 */
import {
  Observable,
  type ConfigurationOptions,
  type CoordinationV1Api,
  type ObservableMiddleware,
  type RequestContext,
  type ResponseContext,
  type V1Lease,
} from '@kubernetes/client-node';
import type { JsonClient } from './json-client.ts';
import { isNotFound } from '../runtime/errors.ts';
import type { LeaseClient, LeaseRequestOptions } from '../runtime/leaderelection.ts';

export type { LeaseClient, LeaseRequestOptions } from '../runtime/leaderelection.ts';

/**
 * withSignal makes client-node request options that attach `signal` to the HTTP request (the
 * typed API's sender, kube/typed-api.ts, hands it to the transport), so an abandoned attempt does
 * not keep a connection busy.
 */
function withSignal(signal: AbortSignal | undefined): ConfigurationOptions | undefined {
  if (signal === undefined) return undefined;
  const middleware: ObservableMiddleware = {
    pre(context: RequestContext): Observable<RequestContext> {
      context.setSignal(signal);
      return new Observable(Promise.resolve(context));
    },
    post(context: ResponseContext): Observable<ResponseContext> {
      return new Observable(Promise.resolve(context));
    },
  };
  return { middleware: [middleware], middlewareMergeStrategy: 'append' };
}

/**
 * leaseClientFrom adapts client-node's `CoordinationV1Api` to a {@link LeaseClient}. Abort signals
 * are passed to the HTTP request, so an abandoned attempt does not keep a connection busy.
 *
 * Errors are the `ApiException`s client-node throws, unwrapped, so that callers can classify them.
 */
export function leaseClientFrom(api: CoordinationV1Api): LeaseClient {
  return {
    async get(namespace, name, options) {
      try {
        return await api.readNamespacedLease({ namespace, name }, withSignal(options?.signal));
      } catch (err) {
        if (isNotFound(err)) return undefined;
        throw err;
      }
    },
    create: (namespace, lease, options) =>
      api.createNamespacedLease({ namespace, body: lease }, withSignal(options?.signal)),
    replace: (namespace, name, lease, options) =>
      api.replaceNamespacedLease({ namespace, name, body: lease }, withSignal(options?.signal)),
  };
}

/**
 * LeaseDeleter deletes a Lease; a Lease already gone is not an error. With `resourceVersion`, only
 * that version of it (a DELETE precondition: the API server answers 409 when it changed since).
 */
export interface LeaseDeleter {
  delete(
    namespace: string,
    name: string,
    options?: LeaseRequestOptions & { readonly resourceVersion?: string },
  ): Promise<void>;
}

/** deleteBody is the DeleteOptions of a delete with a resourceVersion precondition, or none. */
function deleteBody(resourceVersion: string | undefined): { preconditions: { resourceVersion: string } } | undefined {
  return resourceVersion !== undefined ? { preconditions: { resourceVersion } } : undefined;
}

/** leasePath is the REST path of a namespace's Leases, or of one Lease. */
function leasePath(namespace: string, name?: string): string {
  const base = `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/leases`;
  return name === undefined ? base : `${base}/${encodeURIComponent(name)}`;
}

/**
 * leaseStoreOver is the lock controller's Lease store over a {@link JsonClient}: the
 * {@link LeaseClient} contract (get → undefined when absent, replace is a CAS on the body's
 * resourceVersion) plus delete (of an absent Lease is fine), without client-node's per-call
 * pipeline.
 * Leases come back as plain JSON (string timestamps), as the informer's watch delivers them.
 */
export function leaseStoreOver(json: JsonClient): LeaseClient & LeaseDeleter {
  return {
    async get(namespace, name, options) {
      try {
        return await json.request<V1Lease>({
          method: 'GET',
          path: leasePath(namespace, name),
          signal: options?.signal,
        });
      } catch (err) {
        if (isNotFound(err)) return undefined;
        throw err;
      }
    },
    create: (namespace, lease, options) =>
      json.request<V1Lease>({ method: 'POST', path: leasePath(namespace), body: lease, signal: options?.signal }),
    replace: (namespace, name, lease, options) =>
      json.request<V1Lease>({ method: 'PUT', path: leasePath(namespace, name), body: lease, signal: options?.signal }),
    async delete(namespace, name, options) {
      try {
        const body = deleteBody(options?.resourceVersion);
        await json.request<unknown>({
          method: 'DELETE',
          path: leasePath(namespace, name),
          signal: options?.signal,
          ...(body !== undefined ? { body } : {}),
        });
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
    },
  };
}
