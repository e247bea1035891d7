/** Loading a KubeConfig the same way for every subcommand and the library (acquire()). */
import { statSync } from 'node:fs';
import { KubeConfig, bufferFromFileOrString, type RequestContext } from '@kubernetes/client-node';
import type { RestRequest } from '../observability/metrics.ts';

type Dispatcher = NonNullable<ReturnType<RequestContext['getDispatcher']>>;
type Interceptor = Parameters<Dispatcher['compose']>[number];
type Dispatch = ReturnType<Interceptor>;
type DispatchHandler = Parameters<Dispatch>[1];

/** KubeConfigOptions configures {@link loadKubeConfig}. */
export interface KubeConfigOptions {
  /**
   * onRequest is told about every HTTP request made with this KubeConfig's API clients and watches
   * (for `rest_client_requests_total`): once per request, when its response status arrives, or with
   * code `<error>` when it fails before any (refused connection, TLS error, abort before the
   * answer). A watch counts once, with the status that opened it. Must be cheap; a throw is ignored.
   * Defaults to none.
   */
  readonly onRequest?: (r: RestRequest) => void;
  /**
   * credentialsCheckMs: how often, at most, the CA, client certificate and key files are checked
   * for a change (one `stat` each; read again only when their size, mtime, ctime or inode changed).
   * Defaults to {@link DEFAULT_CREDENTIALS_CHECK_MS}; 0 checks on every request.
   */
  readonly credentialsCheckMs?: number;
  /** now is the monotonic clock of those checks (ms). Defaults to `performance.now`. */
  readonly now?: () => number;
}

/**
 * DEFAULT_CREDENTIALS_CHECK_MS: 2 s. A rotated certificate or CA file (kubelet swaps a projected
 * volume's files atomically, ahead of their expiry) is in use within 2 s; the check costs three
 * `stat` calls per 2 s instead of three file reads and a hash per request.
 */
export const DEFAULT_CREDENTIALS_CHECK_MS = 2000;

/** TlsFiles is what the TLS connections of the current context are made with, as last read. */
interface TlsFiles {
  /** source: the context's file names and inline data these were read from. */
  readonly source: string;
  /** stamp: size, mtime, ctime and inode of each file, to tell a change without reading it. */
  readonly stamp: string;
  /** version: increases each time the contents change. */
  readonly version: number;
  readonly contents: string;
  readonly checkedAt: number;
}

/** AuthHeaders is client-node's private `applyAuthorizationHeader`, present in 2.0 (see PooledKubeConfig). */
type AuthHeaders = (opts: { headers?: Record<string, string> }) => Promise<void>;

/**
 * PooledKubeConfig is a KubeConfig whose API calls share one HTTP dispatcher (connection pool)
 * per cluster and credentials. client-node 2.0 builds a new undici Agent for every request, so
 * every call paid a new TCP and TLS handshake: bench/compare.ts measured a voluntary handoff
 * (four API calls on its path) at several times the bare compare-and-swap floor because of it.
 * It also reads the CA, certificate and key files on every request; this class reads them once,
 * and again only when a `stat` (at most every `credentialsCheckMs`) shows that one changed.
 *
 * Guarantees: requests made with the same server, CA, client certificate and key reuse kept-alive
 * connections (undici closes idle ones after its keep-alive timeout, 4 s unless the server says
 * otherwise; it limits neither connections per origin nor pipelining, so concurrent requests do
 * not queue behind each other). A change of any of those — a rotated certificate file, seen within
 * `credentialsCheckMs` — starts a new pool and closes the old one. Bearer tokens are headers, set
 * per request as before (client-node re-reads a token file every 60 s). With `onRequest`, every
 * request through the pool is reported (see {@link KubeConfigOptions.onRequest}).
 *
 * Caveats: a kubeconfig with no TLS settings at all (no CA, no client certificate, TLS
 * verification not skipped: a publicly trusted server with token auth) gets no dispatcher from
 * client-node; its requests use fetch's global one, unpooled and not reported. The fast path calls
 * client-node's own (private) authorization-header step; should a later client-node lack it, every
 * request takes client-node's full path, as before this class cached anything.
 */
export class PooledKubeConfig extends KubeConfig {
  readonly #onRequest: ((r: RestRequest) => void) | undefined;
  readonly #checkMs: number;
  readonly #now: () => number;
  #files: TlsFiles | undefined;
  #key: string | undefined;
  #shared: Dispatcher | undefined;
  /** #dispatcher is #shared, or #shared composed with the request counter when there is an onRequest. */
  #dispatcher: Dispatcher | undefined;

  constructor(options: KubeConfigOptions = {}) {
    super();
    this.#onRequest = options.onRequest;
    this.#checkMs = options.credentialsCheckMs ?? DEFAULT_CREDENTIALS_CHECK_MS;
    this.#now = options.now ?? (() => performance.now());
  }

  override async applySecurityAuthentication(context: RequestContext): Promise<void> {
    const key = this.#credentialsKey();
    const authHeaders = (this as unknown as { applyAuthorizationHeader?: AuthHeaders }).applyAuthorizationHeader;
    const user = this.getCurrentUser();
    if (this.#dispatcher !== undefined && this.#key === key && typeof authHeaders === 'function' && user !== null) {
      // Fast path: the pool is current; only the headers are per request (what client-node's
      // applyOptions sets besides the TLS material, which the pool's connections already carry).
      const opts: { headers: Record<string, string> } = { headers: {} };
      if (user.impersonateUser != null) opts.headers['Impersonate-User'] = user.impersonateUser;
      await authHeaders.call(this, opts);
      if (user.username) {
        const auth = Buffer.from(`${user.username}:${user.password ?? ''}`).toString('base64');
        context.setHeaderParam('Authorization', `Basic ${auth}`);
      }
      for (const [k, v] of Object.entries(opts.headers)) context.setHeaderParam(k, v);
      context.setDispatcher(this.#dispatcher);
      return;
    }
    await super.applySecurityAuthentication(context);
    const fresh = context.getDispatcher();
    if (fresh === undefined) return;
    if (this.#shared === undefined || this.#key !== key) {
      const old = this.#shared;
      this.#shared = fresh;
      this.#dispatcher = this.#onRequest !== undefined ? fresh.compose(countingInterceptor(this.#onRequest)) : fresh;
      this.#key = key;
      if (old !== undefined) void old.close().catch(() => undefined);
    } else {
      void fresh.close().catch(() => undefined); // never used: it has no connections yet
    }
    context.setDispatcher(this.#dispatcher ?? this.#shared);
  }

  /** #credentialsKey identifies what the dispatcher's TLS connections are made with. */
  #credentialsKey(): string {
    const cluster = this.getCurrentCluster();
    const files = this.#tlsFiles();
    return [
      cluster?.server,
      cluster?.proxyUrl,
      String(cluster?.skipTLSVerify ?? ''),
      cluster?.tlsServerName,
      files.source,
      String(files.version),
    ].join('\0');
  }

  /**
   * #tlsFiles returns the current TLS material's version: from memory within `credentialsCheckMs`
   * of the last check; else after a `stat` of each file, reading them only when one changed.
   */
  #tlsFiles(): TlsFiles {
    const cluster = this.getCurrentCluster();
    const user = this.getCurrentUser();
    const parts: readonly [string | undefined, string | undefined][] = [
      [cluster?.caFile, cluster?.caData],
      [user?.certFile, user?.certData],
      [user?.keyFile, user?.keyData],
    ];
    const source = parts.map(([f, d]) => (f !== undefined && f !== '' ? `file:${f}` : `data:${d ?? ''}`)).join('\0');
    const now = this.#now();
    const prev = this.#files;
    if (prev !== undefined && prev.source === source && now - prev.checkedAt < this.#checkMs) return prev;
    const stamp = parts.map(([f]) => (f !== undefined && f !== '' ? fileStamp(f) : '')).join('\0');
    if (prev !== undefined && prev.source === source && prev.stamp === stamp) {
      this.#files = { ...prev, checkedAt: now };
      return this.#files;
    }
    const contents = parts.map(([f, d]) => bufferFromFileOrString(f, d)?.toString('base64') ?? '').join('\0');
    const same = prev !== undefined && prev.source === source && prev.contents === contents;
    this.#files = { source, stamp, contents, version: same ? prev.version : (prev?.version ?? 0) + 1, checkedAt: now };
    return this.#files;
  }
}

/** fileStamp: what changes when a file is written or replaced; empty when it cannot be read. */
function fileStamp(path: string): string {
  try {
    const s = statSync(path, { bigint: true });
    return `${s.size}:${s.mtimeNs}:${s.ctimeNs}:${s.ino}:${s.dev}`;
  } catch {
    return '';
  }
}

/**
 * countingInterceptor reports each request dispatched through it to `onRequest`, once: with the
 * final (non-1xx) status when the response starts, or `<error>` when it fails before one. It
 * wraps the handler in a Proxy so that every other handler method and property passes through
 * untouched (fetch's handler sets properties on itself).
 */
function countingInterceptor(onRequest: (r: RestRequest) => void): Interceptor {
  const hosts = new Map<string, string>();
  const hostOf = (origin: string | URL | undefined): string => {
    const o = String(origin ?? '');
    let host = hosts.get(o);
    if (host === undefined) {
      try {
        host = new URL(o).host;
      } catch {
        host = o;
      }
      hosts.set(o, host);
    }
    return host;
  };
  return (dispatch) => (opts, handler) => {
    let counted = false;
    const count = (code: string): void => {
      if (counted) return;
      counted = true;
      try {
        onRequest({ code, method: opts.method, host: hostOf(opts.origin) });
      } catch {
        /* metrics never break a request */
      }
    };
    const counting = new Proxy<DispatchHandler>(handler, {
      get(target, key, receiver): unknown {
        const value: unknown = Reflect.get(target, key, receiver);
        if (typeof value !== 'function') return value;
        if (key === 'onResponseStart' || key === 'onHeaders') {
          return function (this: unknown, ...args: unknown[]): unknown {
            const status = args[key === 'onResponseStart' ? 1 : 0];
            if (typeof status === 'number' && status >= 200) count(String(status));
            return Reflect.apply(value, this, args);
          };
        }
        if (key === 'onResponseError' || key === 'onError') {
          return function (this: unknown, ...args: unknown[]): unknown {
            count('<error>');
            return Reflect.apply(value, this, args);
          };
        }
        return value;
      },
    });
    return dispatch(opts, counting);
  };
}

/**
 * loadKubeConfig: --kubeconfig when given, else client-node's default order ($KUBECONFIG, else
 * ~/.kube/config, else in-cluster). Its API calls share a connection pool (see {@link PooledKubeConfig}).
 */
export function loadKubeConfig(path: string | undefined, options: KubeConfigOptions = {}): KubeConfig {
  const kc = new PooledKubeConfig(options);
  if (path !== undefined) kc.loadFromFile(path);
  else kc.loadFromDefault();
  return kc;
}
