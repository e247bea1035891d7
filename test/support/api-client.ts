/** apiClientFor: the agent transport's client for a plain-HTTP test server (unit tests), no TLS, no token. */
import { ApiClient, type ApiClientOptions } from '../../src/transport/client.ts';

export function apiClientFor(server: string, options: ApiClientOptions = {}): ApiClient {
  return new ApiClient(
    {
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
      namespace: undefined,
    },
    options,
  );
}
