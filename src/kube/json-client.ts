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
import type { RequestOptions } from 'node:https';
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
 *
 * Under Bun (the compiled kubectl plugin) requests take {@link viaBunFetch} instead: Bun answers
 * `import 'undici'` with its own stand-in, whose `Agent` neither has `Dispatcher.request` nor
 * carries its TLS options into `fetch` (Bun's `fetch` ignores the `dispatcher` option, so the
 * kubeconfig's CA is never used and the server's certificate fails to verify). Bun's `fetch` takes
 * the same material through its own `tls` option. The runtime is fixed for the process, so the
 * choice is made once, here.
 */
export function jsonClient(kc: KubeConfig): JsonClient {
  const bun = typeof process.versions['bun'] === 'string';
  return {
    async request<T>(r: JsonRequest): Promise<T> {
      const server = kc.getCurrentCluster()?.server;
      if (server === undefined) throw new Error('No current cluster in the kubeconfig');
      const url = `${server.replace(/\/+$/, '')}${r.path}`;
      const payload = r.body !== undefined ? JSON.stringify(r.body) : undefined;
      const json = (auth: Record<string, string>): Record<string, string> => ({
        ...auth,
        accept: 'application/json',
        ...(payload !== undefined ? { 'content-type': r.contentType ?? 'application/json' } : {}),
      });
      let res: { status: number; text: string };
      if (bun) {
        res = await viaBunFetch(kc, url, r.method, json, payload, r.signal);
      } else {
        const ctx = new RequestContext(url, METHOD[r.method]);
        await kc.applySecurityAuthentication(ctx);
        const headers = json(ctx.getHeaders());
        const dispatcher = ctx.getDispatcher();
        res =
          dispatcher !== undefined
            ? await viaDispatcher(dispatcher, url, r.method, headers, payload, r.signal)
            : await viaFetch(url, r.method, headers, payload, r.signal);
      }
      const { status, text } = res;
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
  tls?: BunTls,
): Promise<{ status: number; text: string }> {
  const init: RequestInit & { tls?: BunTls } = {
    method,
    headers,
    ...(body !== undefined ? { body } : {}),
    ...(signal !== undefined ? { signal } : {}),
    ...(tls !== undefined ? { tls } : {}),
  };
  const res = await fetch(url, init);
  return { status: res.status, text: await res.text() };
}

/** BunTls is the `tls` option of Bun's `fetch`: the connection's CA, client certificate and key. */
interface BunTls {
  readonly ca?: RequestOptions['ca'];
  readonly cert?: RequestOptions['cert'];
  readonly key?: RequestOptions['key'];
  readonly rejectUnauthorized?: boolean;
  readonly serverName?: string;
}

/**
 * viaBunFetch sends a request with Bun's `fetch`, its TLS material and headers from client-node's
 * public `applyToHTTPSOptions` (the CA, client certificate and key of the kubeconfig; bearer
 * tokens, token files and exec plugins as headers; `insecure-skip-tls-verify` and
 * `tls-server-name`). Caveat: a cluster's `proxy-url` is not honoured on this path.
 */
async function viaBunFetch(
  kc: KubeConfig,
  url: string,
  method: JsonMethod,
  json: (auth: Record<string, string>) => Record<string, string>,
  body: string | undefined,
  signal: AbortSignal | undefined,
): Promise<{ status: number; text: string }> {
  const o: RequestOptions = {};
  await kc.applyToHTTPSOptions(o);
  const auth: Record<string, string> = {};
  for (const [k, v] of Object.entries(o.headers ?? {})) if (v !== undefined) auth[k] = String(v);
  if (typeof o.auth === 'string') auth['Authorization'] = `Basic ${Buffer.from(o.auth).toString('base64')}`;
  const tls: BunTls = {
    ...(o.ca !== undefined ? { ca: o.ca } : {}),
    ...(o.cert !== undefined ? { cert: o.cert } : {}),
    ...(o.key !== undefined ? { key: o.key } : {}),
    ...(o.rejectUnauthorized !== undefined ? { rejectUnauthorized: o.rejectUnauthorized } : {}),
    ...(o.servername !== undefined ? { serverName: o.servername } : {}),
  };
  return await viaFetch(url, method, json(auth), body, signal, tls);
}
