/**
 * JsonClient: plain JSON requests over the one API client (transport/client.ts: its pooled
 * connection, credentials and request counting), without client-node's generated request
 * pipeline. It carries the lock controller's writes and its informers' list pages (their watches
 * go through the same client's watcher), and the kubectl plugin's and the dashboard's reads.
 *
 * A profile of the controller granting 500 locks (bench/scale.ts --cpu-prof) spent most of its
 * busy time in client-node's per-call machinery: building the request through its middleware and
 * Observable chain, (de)serialising typed models, and undici's WHATWG `fetch`. The controller
 * makes six or seven writes per new lock and runs on the same cores as the API server it waits
 * for, so that CPU came straight out of the API server's share. This client sends the same
 * requests with `ApiClient.raw` (node:https on a kept-alive pool, also under Bun) and parses the
 * answer with `JSON.parse`.
 *
 * Errors are client-node's `ApiException` (status code, the raw body text as `body`), so
 * runtime/errors.ts classifies them exactly as before (`isConflict`, `isNotFound`,
 * `isAlreadyExists`, `errorKind`). Objects come back as plain JSON (timestamps are strings), the
 * shape the informers' watches deliver too; every reader here accepts both.
 */
import { ApiException } from '@kubernetes/client-node';
import { connect, type KubeconfigSource } from '../transport/connect.ts';

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

/** JsonClient sends JSON requests to one API server. */
export interface JsonClient {
  /** request resolves with the parsed response body, or rejects with an ApiException for any status ≥ 400. */
  request<T>(r: JsonRequest): Promise<T>;
}

/**
 * jsonClient makes a {@link JsonClient} over `source`: an ApiClient (its pool and counting are
 * shared), or a kubeconfig (a path, or a client-node KubeConfig) for which a client is made.
 */
export function jsonClient(source: KubeconfigSource): JsonClient {
  const api = connect(source);
  return {
    async request<T>(r: JsonRequest): Promise<T> {
      const payload = r.body !== undefined ? JSON.stringify(r.body) : undefined;
      const res = await api.raw({
        method: r.method,
        path: r.path,
        ...(payload !== undefined
          ? { body: payload, headers: { 'Content-Type': r.contentType ?? 'application/json' } }
          : {}),
        signal: r.signal,
      });
      const text = res.body.toString('utf8');
      if (res.statusCode >= 400) {
        throw new ApiException<string>(
          res.statusCode,
          `HTTP-Code: ${res.statusCode}\nMessage: ${r.method} ${r.path}\nBody: ${text}`,
          text,
          {},
        );
      }
      return (text === '' ? undefined : JSON.parse(text)) as T;
    },
  };
}
