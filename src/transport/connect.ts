/** connect: an {@link ApiClient} from what a command or acquire() is given. */
import { ApiClient, type ApiClientOptions } from './client.ts';
import { parseKubeconfig } from './config.ts';
import { loadClusterConfig, parseKubeconfigText } from './load-config.ts';

/** ConnectOptions: the client's options, and the kubeconfig context to use (kubectl's --context). */
export interface ConnectOptions extends ApiClientOptions {
  readonly context?: string | undefined;
}

/**
 * ExportableKubeConfig is anything that can print itself as a kubeconfig document: a
 * @kubernetes/client-node `KubeConfig` is one (`exportConfig()`), so callers that hold one can
 * pass it without this layer loading client-node.
 */
export interface ExportableKubeConfig {
  exportConfig(): string;
}

/** KubeconfigSource: a kubeconfig file path (undefined: the default order, load-config.ts), a client, or a KubeConfig. */
export type KubeconfigSource = string | undefined | ApiClient | ExportableKubeConfig;

/**
 * connect returns `source` itself when it is an ApiClient, else a new client for the kubeconfig
 * it names (`options` apply only then).
 *
 * @throws ConfigError when the kubeconfig cannot be read or used.
 */
export function connect(source: KubeconfigSource, options: ConnectOptions = {}): ApiClient {
  if (source instanceof ApiClient) return source;
  const { context, ...clientOptions } = options;
  if (typeof source === 'object') {
    const text = source.exportConfig();
    return new ApiClient(
      parseKubeconfig(parseKubeconfigText(text, 'KubeConfig.exportConfig()'), 'KubeConfig.exportConfig()', context),
      clientOptions,
    );
  }
  return new ApiClient(loadClusterConfig(source, { context }), clientOptions);
}
