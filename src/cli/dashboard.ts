/**
 * `fencepost dashboard` — the composition root of the read-only dashboard: flags → the user's
 * kubeconfig (and --context) → the watches and the page's server (dashboard/start.ts). Prints the
 * page's URL on stdout when it is ready; runs until SIGINT or SIGTERM, then exits 0. Exit 1 when
 * the locks cannot be listed or the address is taken; 2 on bad usage.
 */
import { parseDashboardArgs } from '../config/dashboard.ts';
import { UsageError } from '../config/usage-error.ts';
import { startDashboard } from '../dashboard/start.ts';
import { apiClientFor, type ApiClient } from '../kube/api-client.ts';
import { UnknownContextError } from '../transport/config.ts';
import { createLogger } from '../observability/logger.ts';
import { realClock } from '../runtime/clock.ts';

/** runDashboard serves the dashboard until a signal; resolves with the exit code. */
export async function runDashboard(argv: readonly string[]): Promise<number> {
  const cfg = parseDashboardArgs(argv);
  const log = createLogger(cfg.logLevel, { component: 'dashboard' });
  let kc: ApiClient;
  try {
    kc = apiClientFor(cfg.kubeconfig, { context: cfg.context });
  } catch (err) {
    if (err instanceof UnknownContextError)
      throw new UsageError('--context', `no context ${JSON.stringify(err.context)} in the kubeconfig`);
    if (cfg.kubeconfig === undefined) throw err;
    throw new UsageError('--kubeconfig', `cannot load ${JSON.stringify(cfg.kubeconfig)}: ${String(err)}`);
  }
  const dashboard = await startDashboard({
    kc,
    namespace: cfg.namespace,
    host: cfg.address.host,
    port: cfg.address.port,
    clock: realClock,
    log,
  });
  process.stdout.write(`fencepost dashboard: ${dashboard.url} (read-only; Ctrl-C stops it)\n`);
  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  log.info({ signal }, 'Stopping the dashboard');
  await dashboard.stop();
  return 0;
}
