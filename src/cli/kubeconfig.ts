/** Loading a KubeConfig the same way for every subcommand. */
import { KubeConfig } from '@kubernetes/client-node';

/** loadKubeConfig: --kubeconfig when given, else client-node's default order ($KUBECONFIG, in-cluster, ~/.kube/config). */
export function loadKubeConfig(path: string | undefined): KubeConfig {
  const kc = new KubeConfig();
  if (path !== undefined) kc.loadFromFile(path); else kc.loadFromDefault();
  return kc;
}
