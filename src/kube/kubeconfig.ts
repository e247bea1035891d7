/** Loading a KubeConfig the same way for every subcommand and the library (acquire()). */
import { createHash } from 'node:crypto';
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
}

/**
 * PooledKubeConfig is a KubeConfig whose API calls share one HTTP dispatcher (connection pool)
 * per cluster and credentials. client-node 2.0 builds a new undici Agent for every request, so
 * every call paid a new TCP and TLS handshake: bench/compare.ts measured a voluntary handoff
 * (four API calls on its path) at several times the bare compare-and-swap floor because of it.
 *
 * Guarantees: requests made with the same server, CA, client certificate and key reuse kept-alive
 * connections (undici closes idle ones after its keep-alive timeout, 4 s unless the server says
 * otherwise). A change of any of those (a rotated certificate file) starts a new pool and closes
 * the old one. Bearer tokens are headers, set per request as before. With `onRequest`, every
 * request through the pool is reported (see {@link KubeConfigOptions.onRequest}).
 *
 * Caveat: a kubeconfig with no TLS settings at all (no CA, no client certificate, TLS verification
 * not skipped: a publicly trusted server with token auth) gets no dispatcher from client-node; its
 * requests use fetch's global one, unpooled and not reported.
 */
export class PooledKubeConfig extends KubeConfig {
  readonly #onRequest: ((r: RestRequest) => void) | undefined;
  #key: string | undefined;
  #shared: Dispatcher | undefined;
  /** #dispatcher is #shared, or #shared composed with the request counter when there is an onRequest. */
  #dispatcher: Dispatcher | undefined;

  constructor(options: KubeConfigOptions = {}) {
    super();
    this.#onRequest = options.onRequest;
  }

  override async applySecurityAuthentication(context: RequestContext): Promise<void> {
    await super.applySecurityAuthentication(context);
    const fresh = context.getDispatcher();
    if (fresh === undefined) return;
    const key = this.#credentialsKey();
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

  /** #credentialsKey identifies what the dispatcher's TLS connections were made with. */
  #credentialsKey(): string {
    const cluster = this.getCurrentCluster();
    const user = this.getCurrentUser();
    const h = createHash('sha256');
    for (const part of [
      cluster?.server,
      cluster?.proxyUrl,
      String(cluster?.skipTLSVerify ?? ''),
      cluster?.tlsServerName,
      bufferFromFileOrString(cluster?.caFile, cluster?.caData),
      bufferFromFileOrString(user?.certFile, user?.certData),
      bufferFromFileOrString(user?.keyFile, user?.keyData),
    ]) {
      h.update(part ?? '');
      h.update('\0');
    }
    return h.digest('hex');
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
 * loadKubeConfig: --kubeconfig when given, else client-node's default order ($KUBECONFIG,
 * in-cluster, ~/.kube/config). Its API calls share a connection pool (see {@link PooledKubeConfig}).
 */
export function loadKubeConfig(path: string | undefined, options: KubeConfigOptions = {}): KubeConfig {
  const kc = new PooledKubeConfig(options);
  if (path !== undefined) kc.loadFromFile(path);
  else kc.loadFromDefault();
  return kc;
}
