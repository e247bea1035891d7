/**
 * The one request path under client-node's generated APIs: `typedApi(api, CoreV1Api)` is a
 * client-node API object whose requests are sent by the transport's {@link ApiClient} — its
 * kubeconfig loading (every form kubectl loads), its pooled connection, its credential re-reads,
 * its request counting, its proxy and impersonation — rather than by client-node's own fetch
 * stack. client-node keeps only what it is good at here: the typed calls and their
 * (de)serialisation, until each caller moves to the transport's typed requests.
 */
import {
  ResponseContext,
  ServerConfiguration,
  createConfiguration,
  wrapHttpLibrary,
  type Configuration,
  type RequestContext,
} from '@kubernetes/client-node';
import type { ApiClient } from '../transport/client.ts';
import { connect, type ConnectOptions, type KubeconfigSource } from '../transport/connect.ts';

export { ApiClient } from '../transport/client.ts';
export { listPages } from '../transport/resources.ts';
export type { KubeconfigSource, ConnectOptions } from '../transport/connect.ts';

/**
 * apiClientFor returns `source` itself when it is an ApiClient, else a client for the kubeconfig
 * it names (a path, undefined for kubectl's default order, or a client-node KubeConfig).
 */
export function apiClientFor(source: KubeconfigSource, options: ConnectOptions = {}): ApiClient {
  return connect(source, options);
}

/** typedApi makes a client-node generated API (CoreV1Api, …) that sends through `api`. */
export function typedApi<T>(api: ApiClient, Api: new (configuration: Configuration) => T): T {
  const base = api.config.server.href.replace(/\/+$/, '');
  const basePath = api.config.server.pathname.replace(/\/+$/, '');
  return new Api(
    createConfiguration({
      baseServer: new ServerConfiguration<Record<string, never>>(base, {}),
      httpApi: wrapHttpLibrary({ send: (ctx) => send(api, basePath, ctx) }),
      authMethods: {},
    }),
  );
}

async function send(api: ApiClient, basePath: string, ctx: RequestContext): Promise<ResponseContext> {
  const url = new URL(ctx.getUrl());
  const body = ctx.getBody();
  if (body !== undefined && typeof body !== 'string')
    throw new Error(`${ctx.getHttpMethod()} ${url.pathname}: only JSON bodies are sent`);
  const res = await api.raw({
    method: ctx.getHttpMethod(),
    path: url.pathname.slice(basePath.length) + url.search,
    headers: ctx.getHeaders(),
    ...(body !== undefined ? { body } : {}),
    signal: ctx.getSignal(),
  });
  const bytes = res.body;
  return new ResponseContext(
    res.statusCode,
    { ...res.headers },
    {
      text: () => Promise.resolve(bytes.toString('utf8')),
      binary: () => Promise.resolve(bytes),
      stream: () => null,
    },
  );
}
