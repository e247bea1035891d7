/**
 * The one API client of the controller, the kubectl plugin and the dashboard: the transport's
 * {@link ApiClient} (every kubeconfig form kubectl loads, its pooled connection, its credential
 * re-reads, its request counting). Nothing here loads client-node: its generated API modules hold
 * about 20 MiB of source text in the heap of any process that imports them.
 */
import { connect, type ConnectOptions, type KubeconfigSource } from '../transport/connect.ts';
import type { ApiClient } from '../transport/client.ts';

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
