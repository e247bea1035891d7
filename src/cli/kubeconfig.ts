/** Loading a KubeConfig the same way for every subcommand. */
import { createHash } from 'node:crypto';
import { KubeConfig, bufferFromFileOrString, type RequestContext } from '@kubernetes/client-node';

type Dispatcher = NonNullable<ReturnType<RequestContext['getDispatcher']>>;

/**
 * PooledKubeConfig is a KubeConfig whose API calls share one HTTP dispatcher (connection pool)
 * per cluster and credentials. client-node 2.0 builds a new undici Agent for every request, so
 * every call paid a new TCP and TLS handshake: bench/compare.ts measured a voluntary handoff
 * (four API calls on its path) at several times the bare compare-and-swap floor because of it.
 *
 * Guarantees: requests made with the same server, CA, client certificate and key reuse kept-alive
 * connections (undici closes idle ones after its keep-alive timeout, 4 s unless the server says
 * otherwise). A change of any of those (a rotated certificate file) starts a new pool and closes
 * the old one. Bearer tokens are headers, set per request as before.
 */
export class PooledKubeConfig extends KubeConfig {
  #key: string | undefined;
  #shared: Dispatcher | undefined;

  override async applySecurityAuthentication(context: RequestContext): Promise<void> {
    await super.applySecurityAuthentication(context);
    const fresh = context.getDispatcher();
    if (fresh === undefined) return;
    const key = this.#credentialsKey();
    if (this.#shared === undefined || this.#key !== key) {
      const old = this.#shared;
      this.#shared = fresh;
      this.#key = key;
      if (old !== undefined) void old.close().catch(() => undefined);
    } else {
      void fresh.close().catch(() => undefined); // never used: it has no connections yet
    }
    context.setDispatcher(this.#shared);
  }

  /** #credentialsKey identifies what the dispatcher's TLS connections were made with. */
  #credentialsKey(): string {
    const cluster = this.getCurrentCluster();
    const user = this.getCurrentUser();
    const h = createHash('sha256');
    for (const part of [
      cluster?.server, cluster?.proxyUrl, String(cluster?.skipTLSVerify ?? ''), cluster?.tlsServerName,
      bufferFromFileOrString(cluster?.caFile, cluster?.caData), bufferFromFileOrString(user?.certFile, user?.certData),
      bufferFromFileOrString(user?.keyFile, user?.keyData),
    ]) {
      h.update(part ?? '');
      h.update('\0');
    }
    return h.digest('hex');
  }
}

/** loadKubeConfig: --kubeconfig when given, else client-node's default order ($KUBECONFIG, in-cluster, ~/.kube/config). */
export function loadKubeConfig(path: string | undefined): KubeConfig {
  const kc = new PooledKubeConfig();
  if (path !== undefined) kc.loadFromFile(path); else kc.loadFromDefault();
  return kc;
}
