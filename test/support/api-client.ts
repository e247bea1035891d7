/** The agent transport's client for a plain-HTTP test server (unit tests): no TLS, no token. */
import { ApiClient, type ApiClientOptions } from '../../src/transport/client.ts';
import type { ClusterConfig } from '../../src/transport/config.ts';

/** plainClusterConfig is a ClusterConfig for `server` with nothing set but what `overrides` sets. */
export function plainClusterConfig(server: string, overrides: Partial<ClusterConfig> = {}): ClusterConfig {
  return {
    server: new URL(server),
    source: 'test',
    ca: undefined,
    insecureSkipTlsVerify: false,
    tlsServerName: undefined,
    clientCert: undefined,
    clientKey: undefined,
    token: undefined,
    tokenFile: undefined,
    exec: undefined,
    basic: undefined,
    oidc: undefined,
    impersonate: undefined,
    proxy: undefined,
    namespace: undefined,
    ...overrides,
  };
}

/** apiClientFor: an ApiClient for `server` with {@link plainClusterConfig}. */
export function apiClientFor(server: string, options: ApiClientOptions = {}): ApiClient {
  return new ApiClient(plainClusterConfig(server), options);
}
