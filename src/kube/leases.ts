/**
 * The Lease client: client-node's CoordinationV1Api adapted to the {@link LeaseClient} port that
 * the leader elector (runtime/leaderelection.ts) and the agent's session use.
 */
import { Observable } from '@kubernetes/client-node';
import type {
  ConfigurationOptions,
  CoordinationV1Api,
  ObservableMiddleware,
  RequestContext,
  ResponseContext,
} from '@kubernetes/client-node';
import { isNotFound } from '../runtime/errors.ts';
import type { LeaseClient } from '../runtime/leaderelection.ts';

export type { LeaseClient, LeaseRequestOptions } from '../runtime/leaderelection.ts';

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

/** withSignal makes client-node request options that attach `signal` to the HTTP request. */
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
