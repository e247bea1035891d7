/**
 * JsonClient: the port the controller's writers, the kubectl plugin and the dashboard send plain
 * JSON requests through. The one API client (transport/client.ts `ApiClient.request`: its pooled
 * connection, credentials and request counting) is one, passed as it is; tests may pass a fake.
 *
 * A profile of the controller granting 500 locks (bench/scale.ts --cpu-prof) once spent most of
 * its busy time in client-node's per-call machinery: building the request through its middleware
 * and Observable chain, (de)serialising typed models, and undici's WHATWG `fetch`. The controller
 * runs on the same cores as the API server it waits for, so that CPU came straight out of the API
 * server's share; requests now go out with node:https on a kept-alive pool and come back through
 * `JSON.parse`.
 *
 * Errors are the transport's `ApiError` (status code, the metav1.Status as `body`), which
 * runtime/errors.ts classifies (`isConflict`, `isNotFound`, `isAlreadyExists`, `errorKind`).
 * Objects come back as plain JSON (timestamps are strings), the shape the informers' watches
 * deliver too.
 */
import type { RequestSpec } from '../transport/client.ts';

/**
 * JsonRequest is one request: a path under the server (a query string may be in it or in
 * `query`), a JSON body, its content type.
 */
export type JsonRequest = Omit<RequestSpec, 'timeoutMs'>;

/** JsonClient sends JSON requests to one API server. */
export interface JsonClient {
  /** request resolves with the parsed response body, or rejects with an ApiError for any status ≥ 400. */
  request<T>(r: JsonRequest): Promise<T>;
}
