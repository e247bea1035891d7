/**
 * The flags of `fencepost dashboard`, parsed once into a frozen object. Like `kubectl proxy`, the
 * dashboard runs on the user's machine with the user's kubeconfig and listens on loopback only,
 * unless the user says otherwise twice: with an --address that is not loopback AND
 * --allow-remote (everyone who can reach the port then sees what the kubeconfig may list).
 */
import { parseBindAddress, type BindAddress } from './bind-address.ts';
import { parseFlags } from './flags.ts';
import { parseLogLevel, type LogLevel } from './log-level.ts';
import { UsageError } from './usage-error.ts';

/** DashboardConfig: every knob of `fencepost dashboard`, with its default in the doc comment. */
export interface DashboardConfig {
  /** kubeconfig: path; default $KUBECONFIG, else ~/.kube/config, else in-cluster. */
  readonly kubeconfig: string | undefined;
  /** context: the kubeconfig context; default its current context. */
  readonly context: string | undefined;
  /** namespace: show only this namespace's locks; default every namespace the user may list. */
  readonly namespace: string | undefined;
  /** address: where to listen; default 127.0.0.1:8300 (port 0 picks a free port). */
  readonly address: BindAddress;
  /** allowRemote: permit an --address that is not loopback; default false. */
  readonly allowRemote: boolean;
  /** logLevel: info (default) or debug, warn, error, silent. */
  readonly logLevel: LogLevel;
}

/** DEFAULT_DASHBOARD_ADDRESS: loopback only, as `kubectl proxy` binds. */
export const DEFAULT_DASHBOARD_ADDRESS = '127.0.0.1:8300';

/** DASHBOARD_USAGE is printed by --help. */
export const DASHBOARD_USAGE = `Usage: fencepost dashboard [flags]

A read-only web page of every DistributedLock the kubeconfig can list: holder, token, mode,
permits and queue, a live countdown to expiry, the last transitions, and per lock a timeline,
updated live from watches (Server-Sent Events). It changes nothing in the cluster.

  --kubeconfig PATH      kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster)
  --context NAME         kubeconfig context (default: its current context)
  --namespace NS         show only this namespace (default: every namespace you may list)
  --address HOST:PORT    where to listen (default ${DEFAULT_DASHBOARD_ADDRESS}; port 0 picks a free one)
  --allow-remote[=BOOL]  permit an --address that is not loopback (default false); anyone who
                         can reach it then reads what your kubeconfig may list
  --log-level LEVEL      debug, info, warn or error (default info); silent turns logging off

It prints the page's URL when it is ready, and stops on Ctrl-C (SIGINT) or SIGTERM.
`;

const DNS_NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

/** isLoopbackAddress: a literal loopback address or `localhost`. */
function isLoopbackAddress(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127(\.\d{1,3}){3}$/.test(host);
}

/**
 * parseDashboardArgs parses the words after `dashboard`.
 *
 * @throws UsageError naming the flag, for: an unknown flag, a missing value, a malformed
 * --address, a non-loopback --address without --allow-remote, a namespace that is not a
 * Kubernetes name, a bad --log-level.
 */
export function parseDashboardArgs(argv: readonly string[]): DashboardConfig {
  const v = parseFlags(
    argv,
    {
      kubeconfig: { type: 'string' },
      context: { type: 'string' },
      namespace: { type: 'string' },
      address: { type: 'string', default: DEFAULT_DASHBOARD_ADDRESS },
      'allow-remote': { type: 'string', default: 'false' },
      'log-level': { type: 'string', default: 'info' },
    },
    ['allow-remote'],
  );
  const address = parseBindAddress(v.address, '--address');
  const allowRemote = v['allow-remote'] === 'true';
  if (!isLoopbackAddress(address.host) && !allowRemote)
    throw new UsageError(
      '--address',
      `${JSON.stringify(v.address)} is not a loopback address: the dashboard shows what your kubeconfig may read to whoever reaches it; add --allow-remote if that is meant`,
    );
  if (v.namespace !== undefined && !DNS_NAME.test(v.namespace))
    throw new UsageError('--namespace', `must be a Kubernetes namespace name, got ${JSON.stringify(v.namespace)}`);
  return Object.freeze({
    kubeconfig: v.kubeconfig,
    context: v.context,
    namespace: v.namespace,
    address,
    allowRemote,
    logLevel: parseLogLevel(v['log-level']),
  });
}
