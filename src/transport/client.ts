/**
 * ApiClient — a small HTTPS client for one API server, what the agent, `fencepost exec` and
 * acquire() speak to the API server with, and the controller, the dashboard and the kubectl plugin
 * too (the tests' client-node generated classes ride on it: test/support/typed-api.ts). Built on
 * node:https / node:http only, so that it runs unchanged on Node and on Bun.
 *
 * Guarantees:
 * - one kept-alive connection pool (an https.Agent) per client, that is per cluster and
 *   credentials: sequential requests reuse one connection. When the TLS files change on disk
 *   (credentials.ts reads them again at most once a minute, never on every request) the next
 *   request starts a new pool; the old one's idle connections are closed at once and the rest
 *   after {@link RETIRE_AFTER_MS}.
 * - every request ends: by its answer, its `signal`, or its timeout (default 30 s; watches have
 *   an inactivity timeout instead).
 * - a non-2xx answer rejects with {@link ApiError} (statusCode and the parsed metav1.Status),
 *   which runtime/errors.ts classifies as it classifies client-node's ApiException.
 * - `onRequest` is told about each request once: with the status code when the answer's head
 *   arrives, or `<error>` when none came (the shape of `rest_client_requests_total`).
 * - every request carries the kubeconfig's impersonation (Impersonate-User, -Uid, -Group,
 *   -Extra-*), and goes through its `proxy-url` (an HTTP CONNECT tunnel per connection) when set.
 */
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { ClusterConfig, Impersonation } from './config.ts';
import { Credentials, type CredentialsOptions } from './credentials.ts';
import { tunnelling } from './proxy-tunnel.ts';

/** RequestRecord is one request, for `rest_client_requests_total` (observability/metrics.ts RestRequest). */
export interface RequestRecord {
  /** code is the response's status code, or `<error>` when no response came. */
  readonly code: string;
  readonly method: string;
  /** host is the API server's `host:port`. */
  readonly host: string;
}

/** Status is the part of a metav1.Status the callers read. */
export interface Status {
  readonly kind?: string;
  readonly status?: string;
  readonly reason?: string;
  readonly message?: string;
  readonly code?: number;
}

/**
 * ApiError is a non-2xx answer. `body` is the parsed metav1.Status when the body was JSON, else
 * the raw text (a proxy's HTML page): runtime/errors.ts reads the reason from it.
 */
export class ApiError extends Error {
  readonly statusCode: number;
  readonly body: Status | string;
  constructor(method: string, path: string, statusCode: number, body: Status | string) {
    const detail = typeof body === 'string' ? body.slice(0, 200) : (body.message ?? body.reason ?? '');
    super(`${method} ${path}: HTTP ${statusCode}${detail !== '' ? `: ${detail}` : ''}`);
    this.name = 'ApiError';
    this.statusCode = statusCode;
    this.body = body;
  }

  /** status is the parsed metav1.Status, when the answer carried one. */
  get status(): Status | undefined {
    return typeof this.body === 'string' ? undefined : this.body;
  }
}

/** Query is a request's query string; undefined values are left out. */
export type Query = Readonly<Record<string, string | number | boolean | undefined>>;

/** RequestSpec is one request. */
export interface RequestSpec {
  readonly method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** path below the server URL, e.g. `/apis/coordination.k8s.io/v1/namespaces/ns/leases/x`. */
  readonly path: string;
  readonly query?: Query;
  /** body is sent as JSON. */
  readonly body?: unknown;
  /** contentType of the body; default application/json (patches name theirs). */
  readonly contentType?: string;
  readonly signal?: AbortSignal | undefined;
  /** timeoutMs bounds the whole request; default the client's. */
  readonly timeoutMs?: number;
}

/** RawRequest is a request whose body is already encoded and whose answer is not interpreted. */
export interface RawRequest {
  readonly method: string;
  /** path below the server URL, with its query string. */
  readonly path: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: string;
  readonly signal?: AbortSignal | undefined;
  readonly timeoutMs?: number;
}

/** RawResponse is an answer of any status, its body read whole. */
export interface RawResponse {
  readonly statusCode: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
}

/** WatchHandlers receive a watch's stream. */
export interface WatchHandlers {
  /** onOpen: the API server accepted the watch (HTTP 200). */
  onOpen?(): void;
  /** onEvent: one watch event (`ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK`, `ERROR`). */
  onEvent(type: string, object: unknown): void;
}

/** ApiClientOptions configures an {@link ApiClient}. */
export interface ApiClientOptions extends CredentialsOptions {
  /** onRequest is told about every request (module comment). Must be cheap; a throw is ignored. */
  readonly onRequest?: (r: RequestRecord) => void;
  /** timeoutMs: the default bound of a request; 30 s. */
  readonly timeoutMs?: number;
  /** watchIdleMs: a watch silent this long is ended with a TimeoutError (re-watched); 30 s, as client-node's Watch. */
  readonly watchIdleMs?: number;
}

/** DEFAULT_TIMEOUT_MS bounds a request that the caller did not bound. */
const DEFAULT_TIMEOUT_MS = 30_000;
/** DEFAULT_WATCH_IDLE_MS: client-node's Watch ends a watch after 30 s without a byte, and so do we. */
const DEFAULT_WATCH_IDLE_MS = 30_000;
/** RETIRE_AFTER_MS: a pool replaced after a rotation is destroyed this long after (its requests are done by then). */
const RETIRE_AFTER_MS = 120_000;

type Agent = HttpAgent | HttpsAgent;

/** ApiClient makes requests to one API server (module comment). */
export class ApiClient {
  readonly config: ClusterConfig;
  readonly #creds: Credentials;
  readonly #onRequest: ((r: RequestRecord) => void) | undefined;
  readonly #timeoutMs: number;
  readonly #watchIdleMs: number;
  readonly #https: boolean;
  readonly #host: string;
  readonly #base: string;
  #agent: Agent | undefined;
  #generation = -1;

  constructor(config: ClusterConfig, o: ApiClientOptions = {}) {
    this.config = config;
    this.#creds = new Credentials(config, o);
    this.#onRequest = o.onRequest;
    this.#timeoutMs = o.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.#watchIdleMs = o.watchIdleMs ?? DEFAULT_WATCH_IDLE_MS;
    this.#https = config.server.protocol === 'https:';
    this.#host = config.server.host;
    this.#base = config.server.pathname.replace(/\/$/, '');
  }

  /** host is the API server's `host:port`. */
  get host(): string {
    return this.#host;
  }

  /** request sends one request and resolves to the parsed JSON answer (undefined for an empty body). */
  async request<T>(spec: RequestSpec): Promise<T> {
    const res = await this.#send(spec, spec.timeoutMs ?? this.#timeoutMs, undefined);
    // A 401 may be a token rotated under us: the next request reads (or asks for) it again.
    if (res.res.statusCode === 401) this.#creds.invalidate();
    return (await readJson(res.res, res.finish, spec)) as T;
  }

  /**
   * raw sends one request with a body already encoded and resolves with the answer whatever its
   * status: the path for callers that bring their own (de)serialisation
   * (test/support/typed-api.ts).
   */
  async raw(r: RawRequest): Promise<RawResponse> {
    const { res, finish } = await this.#send(
      { method: r.method, path: r.path, rawBody: r.body, headers: r.headers, signal: r.signal },
      r.timeoutMs ?? this.#timeoutMs,
      undefined,
    );
    if (res.statusCode === 401) this.#creds.invalidate();
    const chunks: Buffer[] = [];
    try {
      for await (const c of res) chunks.push(c as Buffer);
    } catch (err) {
      throw finish(err);
    }
    finish(undefined);
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(res.headers))
      if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(', ') : v;
    return { statusCode: res.statusCode ?? 0, headers, body: Buffer.concat(chunks) };
  }

  /**
   * watch opens a watch (`watch=true` is added to the query) and feeds its events to `h` until
   * the server ends it (resolves), it fails (rejects: an ApiError when refused, a TimeoutError
   * after watchIdleMs of silence), or `spec.signal` aborts it (rejects).
   */
  async watch(spec: Omit<RequestSpec, 'method' | 'body' | 'timeoutMs'>, h: WatchHandlers): Promise<void> {
    const { res, finish, idle } = await this.#send(
      { ...spec, method: 'GET', query: { ...spec.query, watch: true } },
      undefined,
      this.#watchIdleMs,
    );
    if (res.statusCode !== 200) {
      if (res.statusCode === 401) this.#creds.invalidate();
      await readJson(res, finish, { method: 'GET', path: spec.path });
      return;
    }
    h.onOpen?.();
    res.setEncoding('utf8');
    let rest = '';
    await new Promise<void>((resolve, reject) => {
      res.on('data', (chunk: string) => {
        idle?.();
        rest += chunk;
        let nl: number;
        while ((nl = rest.indexOf('\n')) >= 0) {
          const line = rest.slice(0, nl).trim();
          rest = rest.slice(nl + 1);
          if (line === '') continue;
          let ev: { type?: unknown; object?: unknown };
          try {
            ev = JSON.parse(line) as { type?: unknown; object?: unknown };
          } catch {
            continue; // a torn line cannot happen on a healthy stream; skip it as client-node does
          }
          if (typeof ev.type === 'string') h.onEvent(ev.type, ev.object);
        }
      });
      res.on('end', () => {
        finish(undefined);
        resolve();
      });
      res.on('error', (err) => {
        reject(finish(err));
      });
      res.on('close', () => {
        // 'close' without 'end': aborted (signal, idle timeout) or reset.
        if (!res.complete) {
          const err = finish(new Error('watch connection closed'));
          reject(err);
        }
      });
    });
  }

  /**
   * close ends the pool's connections (requests in flight fail), so that nothing of this client
   * keeps a process alive. Idempotent; a later request opens a new connection (acquire() closes
   * its client at release, and a released lock may still be asked about its run).
   */
  close(): void {
    this.#agent?.destroy();
    this.#agent = undefined;
  }

  /** #agentFor returns the pool for the current TLS material, replacing it after a rotation. */
  #agentFor(): Agent {
    const tls = this.#creds.tls();
    if (this.#agent !== undefined && tls.generation === this.#generation) return this.#agent;
    const old = this.#agent;
    this.#generation = tls.generation;
    const proxy = this.config.proxy;
    this.#agent = this.#https
      ? new (proxy !== undefined ? tunnelling(HttpsAgent, proxy, true) : HttpsAgent)({
          keepAlive: true,
          ...(tls.ca !== undefined ? { ca: tls.ca } : {}),
          ...(tls.cert !== undefined ? { cert: tls.cert } : {}),
          ...(tls.key !== undefined ? { key: tls.key } : {}),
          rejectUnauthorized: !this.config.insecureSkipTlsVerify,
          ...(this.config.tlsServerName !== undefined ? { servername: this.config.tlsServerName } : {}),
        })
      : new (proxy !== undefined ? tunnelling(HttpAgent, proxy, false) : HttpAgent)({ keepAlive: true });
    if (old !== undefined) retire(old);
    return this.#agent;
  }

  /**
   * #send starts a request and resolves with the response head. `finish` (called once the body
   * is read or failed) clears the timers and returns the error to reject with; `idle` (watches)
   * restarts the inactivity timer.
   */
  async #send(
    spec: Omit<RequestSpec, 'method'> & {
      readonly method: string;
      readonly rawBody?: string | undefined;
      readonly headers?: Readonly<Record<string, string>> | undefined;
    },
    timeoutMs: number | undefined,
    idleMs: number | undefined,
  ): Promise<{ res: IncomingMessage; finish: (err: unknown) => Error; idle: (() => void) | undefined }> {
    spec.signal?.throwIfAborted();
    const agent = this.#agentFor();
    const auth = await this.#creds.authorization();
    const headers: Record<string, string> = { Accept: 'application/json', ...spec.headers };
    if (auth !== undefined) headers.Authorization = auth;
    if (this.config.impersonate !== undefined) impersonationHeaders(this.config.impersonate, headers);
    let payload: string | undefined = spec.rawBody;
    if (spec.body !== undefined) {
      payload = JSON.stringify(spec.body);
      headers['Content-Type'] = spec.contentType ?? 'application/json';
    }
    if (payload !== undefined) headers['Content-Length'] = String(Buffer.byteLength(payload));
    const path = this.#base + spec.path + queryString(spec.query);
    let counted = false;
    const count = (code: string): void => {
      if (counted) return;
      counted = true;
      try {
        this.#onRequest?.({ code, method: spec.method, host: this.#host });
      } catch {
        /* metrics never break a request */
      }
    };
    return await new Promise((resolve, reject) => {
      const req = (this.#https ? httpsRequest : httpRequest)({
        host: this.config.server.hostname.replace(/^\[|\]$/g, ''),
        port: this.config.server.port !== '' ? Number(this.config.server.port) : this.#https ? 443 : 80,
        method: spec.method,
        path,
        headers: impersonatedGroups(headers, this.config.impersonate),
        agent,
      });
      let timer: NodeJS.Timeout | undefined;
      let idleTimer: NodeJS.Timeout | undefined;
      let failure: unknown;
      let done = false;
      const cleanup = (): void => {
        done = true;
        if (timer !== undefined) clearTimeout(timer);
        if (idleTimer !== undefined) clearTimeout(idleTimer);
        spec.signal?.removeEventListener('abort', onAbort);
      };
      const abortWith = (err: unknown): void => {
        if (done) return;
        failure = err;
        req.destroy(err instanceof Error ? err : new Error(String(err)));
      };
      const onAbort = (): void => {
        abortWith(spec.signal?.reason ?? new DOMException('This operation was aborted', 'AbortError'));
      };
      spec.signal?.addEventListener('abort', onAbort, { once: true });
      if (timeoutMs !== undefined)
        timer = setTimeout(() => {
          abortWith(timeoutError(`${spec.method} ${spec.path} timed out after ${timeoutMs} ms`));
        }, timeoutMs);
      const idle =
        idleMs !== undefined
          ? (): void => {
              if (idleTimer !== undefined) clearTimeout(idleTimer);
              idleTimer = setTimeout(() => {
                abortWith(timeoutError(`watch ${spec.path} silent for ${idleMs} ms`));
              }, idleMs);
            }
          : undefined;
      idle?.();
      const finish = (err: unknown): Error => {
        cleanup();
        return asError(failure ?? err);
      };
      req.on('response', (res) => {
        count(String(res.statusCode ?? 0));
        resolve({ res, finish, idle });
      });
      req.on('error', (err) => {
        count('<error>');
        cleanup();
        reject(asError(failure ?? err));
      });
      req.end(payload);
    });
  }
}

/** readJson reads a whole answer: the parsed JSON of a 2xx, else an ApiError. */
async function readJson(
  res: IncomingMessage,
  finish: (err: unknown) => Error,
  spec: Pick<RequestSpec, 'method' | 'path'>,
): Promise<unknown> {
  const chunks: Buffer[] = [];
  try {
    for await (const c of res) chunks.push(c as Buffer);
  } catch (err) {
    throw finish(err);
  }
  finish(undefined);
  const text = Buffer.concat(chunks).toString('utf8');
  const code = res.statusCode ?? 0;
  if (code >= 200 && code < 300) {
    if (text === '') return undefined;
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw new Error(`${spec.method} ${spec.path}: HTTP ${code} with a body that is not JSON`);
    }
  }
  let body: Status | string = text;
  try {
    const parsed = JSON.parse(text) as unknown;
    if (typeof parsed === 'object' && parsed !== null) body = parsed;
  } catch {
    /* not JSON: keep the text */
  }
  throw new ApiError(spec.method, spec.path, code, body);
}

function queryString(q: Query | undefined): string {
  if (q === undefined) return '';
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) if (v !== undefined) p.set(k, String(v));
  const s = p.toString();
  return s === '' ? '' : `?${s}`;
}

function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}

function timeoutError(message: string): Error {
  const e = new Error(message);
  e.name = 'TimeoutError';
  return e;
}

/** retire closes a replaced pool: its idle connections now, the rest after RETIRE_AFTER_MS. */
function retire(agent: Agent): void {
  // freeSockets is Node's; a runtime without it (Bun pools connections itself) only gets the timer.
  const free = (agent as { freeSockets?: Record<string, { destroy(): void }[] | undefined> }).freeSockets ?? {};
  for (const list of Object.values(free)) for (const s of list ?? []) s.destroy();
  setTimeout(() => {
    agent.destroy();
  }, RETIRE_AFTER_MS).unref();
}

/**
 * impersonationHeaders sets the single-valued Impersonate-* headers (as client-go's
 * ImpersonatingRoundTripper); groups and extras may repeat, so {@link impersonatedGroups} adds them
 * as header lists.
 */
function impersonationHeaders(who: Impersonation, headers: Record<string, string>): void {
  if (who.user !== undefined) headers['Impersonate-User'] = who.user;
  if (who.uid !== undefined) headers['Impersonate-Uid'] = who.uid;
}

/** impersonatedGroups returns `headers` with one Impersonate-Group per group and one Impersonate-Extra-<key> per value. */
function impersonatedGroups(
  headers: Record<string, string>,
  who: Impersonation | undefined,
): Record<string, string | string[]> {
  if (who === undefined || (who.groups.length === 0 && Object.keys(who.extra).length === 0)) return headers;
  const out: Record<string, string | string[]> = { ...headers };
  if (who.groups.length > 0) out['Impersonate-Group'] = [...who.groups];
  // Keys are escaped as client-go escapes them: a header name carries only token characters.
  for (const [k, v] of Object.entries(who.extra)) out[`Impersonate-Extra-${encodeURIComponent(k)}`] = [...v];
  return out;
}
