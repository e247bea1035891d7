/**
 * client-node's generated APIs over the one API client, for tests and benchmarks: `typedApi(api,
 * CoreV1Api)` is a client-node API object whose requests are sent by the transport's
 * {@link ApiClient} (its kubeconfig loading, pooled connection, credential re-reads, request
 * counting, proxy and impersonation) rather than by client-node's own fetch stack. fencepost's
 * binaries send their requests through the transport's typed requests and load no client-node.
 */
import {
  ResponseContext,
  ServerConfiguration,
  createConfiguration,
  wrapHttpLibrary,
  type Configuration,
  type RequestContext,
} from '@kubernetes/client-node';
import type { ApiClient } from '../../src/transport/client.ts';

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
