/**
 * JsonClient: the lock controller's write path to the API server, JSON over the KubeConfig's own
 * connection pool, without client-node's generated request pipeline.
 *
 * A profile of the controller granting 500 locks (bench/scale.ts --cpu-prof) spent most of its
 * busy time in client-node's per-call machinery: building the request through its middleware and
 * Observable chain, (de)serialising typed models, and undici's WHATWG `fetch`. The controller
 * makes six or seven writes per new lock and runs on the same cores as the API server it waits
 * for, so that CPU came straight out of the API server's share. This client sends the same
 * requests through `Dispatcher.request` (undici's own, lighter API) on the dispatcher that
 * `applySecurityAuthentication` hands out — `PooledKubeConfig`'s shared, counted pool — and parses
 * the answer with `JSON.parse`. Watches and lists stay with client-node's informers.
 *
 * Errors are client-node's `ApiException` (status code, the raw body text as `body`), so
 * runtime/errors.ts classifies them exactly as before (`isConflict`, `isNotFound`,
 * `isAlreadyExists`, `errorKind`). Objects come back as plain JSON (timestamps are strings), the
 * shape the informers' watches deliver too; every reader here accepts both.
 */
import { ApiException, HttpMethod, RequestContext, type KubeConfig } from '@kubernetes/client-node';

/** JsonMethod is an HTTP method this client sends. */
export type JsonMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** JsonRequest is one request: a path under the server, a JSON body, its content type. */
export interface JsonRequest {
  readonly method: JsonMethod;
  /** path: absolute, with any query string, e.g. `/apis/coordination.k8s.io/v1/namespaces/ns/leases/x`. */
  readonly path: string;
  readonly body?: unknown;
  /** contentType of the body; defaults to `application/json`. */
  readonly contentType?: string;
  readonly signal?: AbortSignal | undefined;
}

/** JsonClient sends JSON requests to the current cluster of a KubeConfig. */
export interface JsonClient {
  /** request resolves with the parsed response body, or rejects with an ApiException for any status ≥ 400. */
  request<T>(r: JsonRequest): Promise<T>;
}

type Dispatcher = NonNullable<ReturnType<RequestContext['getDispatcher']>>;

const METHOD: Record<JsonMethod, HttpMethod> = {
  GET: HttpMethod.GET,
  POST: HttpMethod.POST,
  PUT: HttpMethod.PUT,
  PATCH: HttpMethod.PATCH,
  DELETE: HttpMethod.DELETE,
};

/**
 * jsonClient makes a {@link JsonClient} over `kc`. Authentication (client certificates, bearer
 * tokens, exec plugins) is the KubeConfig's own, applied per request as client-node applies it.
 *
 * Caveat: a kubeconfig for which client-node makes no dispatcher (no TLS settings at all) is sent
 * with the global `fetch`, as client-node would.
 */
export function jsonClient(kc: KubeConfig): JsonClient {
  return {
    async request<T>(r: JsonRequest): Promise<T> {
      const server = kc.getCurrentCluster()?.server;
      if (server === undefined) throw new Error('No current cluster in the kubeconfig');
      const url = `${server.replace(/\/+$/, '')}${r.path}`;
      const ctx = new RequestContext(url, METHOD[r.method]);
      await kc.applySecurityAuthentication(ctx);
      const headers: Record<string, string> = { ...ctx.getHeaders(), accept: 'application/json' };
      const payload = r.body !== undefined ? JSON.stringify(r.body) : undefined;
      if (payload !== undefined) headers['content-type'] = r.contentType ?? 'application/json';
      const dispatcher = ctx.getDispatcher();
      const { status, text } =
        dispatcher !== undefined
          ? await viaDispatcher(dispatcher, url, r.method, headers, payload, r.signal)
          : await viaFetch(url, r.method, headers, payload, r.signal);
      if (status >= 400) {
        throw new ApiException<string>(
          status,
          `HTTP-Code: ${status}\nMessage: ${r.method} ${r.path}\nBody: ${text}`,
          text,
          {},
        );
      }
      return (text === '' ? undefined : JSON.parse(text)) as T;
    },
  };
}

async function viaDispatcher(
  dispatcher: Dispatcher,
  url: string,
  method: JsonMethod,
  headers: Record<string, string>,
  body: string | undefined,
  signal: AbortSignal | undefined,
): Promise<{ status: number; text: string }> {
  const u = new URL(url);
  const res = await dispatcher.request({
    origin: u.origin,
    path: `${u.pathname}${u.search}`,
    method,
    headers,
    ...(body !== undefined ? { body } : {}),
    ...(signal !== undefined ? { signal } : {}),
  });
  return { status: res.statusCode, text: await res.body.text() };
}

async function viaFetch(
  url: string,
  method: JsonMethod,
  headers: Record<string, string>,
  body: string | undefined,
  signal: AbortSignal | undefined,
): Promise<{ status: number; text: string }> {
  const res = await fetch(url, {
    method,
    headers,
    ...(body !== undefined ? { body } : {}),
    ...(signal !== undefined ? { signal } : {}),
  });
  return { status: res.status, text: await res.text() };
}
