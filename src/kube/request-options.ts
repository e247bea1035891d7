/**
 * Per-request options for client-node calls: an abort signal on the HTTP request and the patch
 * content type. Every write of the lock controller carries its reconcile's signal, so a shutdown
 * (or a lost leadership) abandons the request instead of finishing it on the wire.
 */
import {
  Observable,
  PatchStrategy,
  setHeaderOptions,
  type ConfigurationOptions,
  type ObservableMiddleware,
  type RequestContext,
  type ResponseContext,
} from '@kubernetes/client-node';

/** withSignal makes client-node request options that attach `signal` to the HTTP request. */
export function withSignal(signal: AbortSignal | undefined): ConfigurationOptions | undefined {
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

/** mergePatchWith sends a body as a JSON merge patch (RFC 7386), aborted by `signal`. */
export function mergePatchWith(signal: AbortSignal | undefined): ConfigurationOptions {
  return setHeaderOptions('Content-Type', PatchStrategy.MergePatch, withSignal(signal));
}

/** jsonPatchWith sends a body as a JSON Patch (RFC 6902), aborted by `signal`. */
export function jsonPatchWith(signal: AbortSignal | undefined): ConfigurationOptions {
  return setHeaderOptions('Content-Type', PatchStrategy.JsonPatch, withSignal(signal));
}
