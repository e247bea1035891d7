/**
 * startDashboard wires the dashboard: the model, the watches that fill it, the raw reader behind
 * the page's links, and the HTTP server that pushes every change. The `fencepost dashboard`
 * command (cli/dashboard.ts), the browser tests and the benchmark all start it this way.
 */
import { apiClientFor, type KubeconfigSource } from '../kube/api-client.ts';
import type { JsonClient } from '../kube/json-client.ts';
import { isNotFound } from '../runtime/errors.ts';
import type { TimerClock } from '../runtime/clock.ts';
import type { InformerLogger } from '../runtime/informer.ts';
import { loadAssets } from './assets.ts';
import { DashboardModel } from './model.ts';
import { DashboardServer, type RawKind, type RawReader } from './server.ts';
import { startSources } from './sources.ts';

/** DashboardOptions configures {@link startDashboard}. */
export interface DashboardOptions {
  /** kc: the API client, or a kubeconfig one is made for. */
  readonly kc: KubeconfigSource;
  /** namespace: only this namespace; undefined: every namespace the kubeconfig may list. */
  readonly namespace: string | undefined;
  readonly host: string;
  /** port: 0 picks a free one. */
  readonly port: number;
  readonly clock: TimerClock;
  readonly log: InformerLogger;
  /** flushMs: see DashboardServerOptions.flushMs (default 100 ms). */
  readonly flushMs?: number;
  /** syncTimeoutMs: how long to wait for the first list of locks (default: the informer's, 2 minutes). */
  readonly syncTimeoutMs?: number;
}

/** Dashboard is a running dashboard. */
export interface Dashboard {
  /** url: the page, e.g. `http://127.0.0.1:8300/`. */
  readonly url: string;
  readonly port: number;
  /** clients: open SSE streams. */
  clients(): number;
  stop(): Promise<void>;
}

/** rawReader reads the objects the page links to, through the API client. */
function rawReader(json: JsonClient): RawReader {
  const paths: Readonly<Record<RawKind, (ns: string, name: string) => string>> = {
    pods: (ns, name) => `/api/v1/namespaces/${ns}/pods/${name}`,
    leases: (ns, name) => `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/${name}`,
    events: (ns, name) =>
      `/api/v1/namespaces/${ns}/events?fieldSelector=${encodeURIComponent(`involvedObject.kind=DistributedLock,involvedObject.name=${name}`)}`,
  };
  return async (kind, namespace, name) => {
    try {
      return await json.request<unknown>({ method: 'GET', path: paths[kind](namespace, name) });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  };
}

/**
 * startDashboard starts the watches, waits for the first list of locks, then listens.
 *
 * @throws when the locks cannot be listed in time (the watches are stopped), or the address is
 * taken (EADDRINUSE; the watches are stopped too).
 */
export async function startDashboard(o: DashboardOptions): Promise<Dashboard> {
  const model = new DashboardModel();
  const api = apiClientFor(o.kc);
  // The server is made first so that no change is lost, but listens only once the locks are listed.
  let synced = (): boolean => false;
  const server = new DashboardServer({
    model,
    assets: loadAssets(),
    synced: () => synced(),
    raw: rawReader(api),
    host: o.host,
    port: o.port,
    ...(o.flushMs !== undefined ? { flushMs: o.flushMs } : {}),
    onError: (err, path) => {
      o.log.error({ err, path }, 'Failed to read an object for the page');
    },
  });
  const sources = await startSources({
    api,
    namespace: o.namespace,
    model,
    onChange: (key) => {
      server.changed(key);
    },
    clock: o.clock,
    log: o.log,
    ...(o.syncTimeoutMs !== undefined ? { syncTimeoutMs: o.syncTimeoutMs } : {}),
  });
  synced = () => sources.synced();
  let address;
  try {
    address = await server.start();
  } catch (err) {
    await sources.stop();
    throw err;
  }
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${host}:${address.port}/`,
    port: address.port,
    clients: () => server.clients(),
    stop: async () => {
      await server.close();
      await sources.stop();
    },
  };
}
