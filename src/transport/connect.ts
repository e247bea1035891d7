/** connect: an {@link ApiClient} from what a command or acquire() is given. */
import { ApiClient, type ApiClientOptions } from './client.ts';
import { parseKubeconfig } from './config.ts';
import { loadClusterConfig, parseKubeconfigText } from './load-config.ts';

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
export function connect(source: KubeconfigSource, options: ApiClientOptions = {}): ApiClient {
  if (source instanceof ApiClient) return source;
  if (typeof source === 'object') {
    const text = source.exportConfig();
    return new ApiClient(
      parseKubeconfig(parseKubeconfigText(text, 'KubeConfig.exportConfig()'), 'KubeConfig.exportConfig()'),
      options,
    );
  }
  return new ApiClient(loadClusterConfig(source), options);
}
