/**
 * The agent's configuration: the pod identity from the downward API (POD_NAME, POD_NAMESPACE,
 * POD_UID) and flags. The only place the agent reads process.env.
 */
import { parseFlags } from './flags.ts';
import { parseLogLevel, type LogLevel } from './log-level.ts';
import { UsageError } from './usage-error.ts';
import { checkListenerFlag, parseBindAddress } from './bind-address.ts';
import { parseDuration } from './duration.ts';

/** ListenerFlag names one of the agent's three listeners. */
export type ListenerFlag = '--listen' | '--health-probe-bind-address' | '--metrics-bind-address';

/**
 * The agent's default listeners: 7370-7372, away from the ports applications use most (8080,
 * 8081, 8443, 9090, 3000, 5000…), so that a sidecar with default flags leaves them to the app it
 * sits beside. The lock API stays on 7370, where every client looks first.
 */
export const AGENT_DEFAULT_LISTEN = '127.0.0.1:7370';
export const AGENT_DEFAULT_HEALTH_PROBE = '0.0.0.0:7371';
export const AGENT_DEFAULT_METRICS = '0.0.0.0:7372';

/** AgentConfig: every knob of `fencepost agent`. */
export interface AgentConfig {
  readonly kubeconfig: string | undefined;
  readonly podName: string;
  readonly podNamespace: string;
  readonly podUid: string;
  /** locks: --lock NAME, repeatable, at least one. */
  readonly locks: readonly string[];
  /** listen: loopback host:port of the local API; default {@link AGENT_DEFAULT_LISTEN}. */
  readonly listen: string;
  /** healthProbeBindAddress: host:port of /healthz and /readyz for the kubelet; default {@link AGENT_DEFAULT_HEALTH_PROBE}; "0" disables. */
  readonly healthProbeBindAddress: string;
  /** metricsBindAddress: host:port of /metrics for Prometheus; default {@link AGENT_DEFAULT_METRICS}; "0" disables. */
  readonly metricsBindAddress: string;
  /**
   * defaultedListeners names the listener flags left at their defaults. Such a listener whose port
   * is taken (a second agent on the host, or in the pod) moves to a free port of the same host and
   * says so; a listener given explicitly fails the start instead, naming the flag and the address.
   */
  readonly defaultedListeners: readonly ListenerFlag[];
  /** stateDir: where per-lock state files are written; none by default. */
  readonly stateDir: string | undefined;
  /** logLevel: info (default) or debug, warn, error; silent turns logging off. */
  readonly logLevel: LogLevel;
  /**
   * sidecar: how the agent runs beside the application, which decides what SIGTERM means.
   * `native` (default): an init container with restartPolicy Always; the kubelet sends it SIGTERM
   * only after the application's containers exited, so it releases at once. `plain`: one of the
   * pod's containers, SIGTERMed together with the application; it tells the application
   * (`stopping` event) and releases nothing itself (see {@link AgentConfig.appStopTimeoutMs}).
   */
  readonly sidecar: 'native' | 'plain';
  /**
   * appStopTimeoutMs (plain): how long after SIGTERM the agent keeps renewing and serving, waiting
   * for the application to release its locks; then it stops without releasing (the Lease expires).
   * Default 25 s, below the kubelet's default grace period of 30 s.
   */
  readonly appStopTimeoutMs: number;
  /**
   * storeUrl: where this agent holds its locks with spec.store Redis or Redlock (--store-url or
   * FENCEPOST_STORE_URL): a redis:// or rediss:// URL, or redlock://h1:p1,h2:p2,…; parsed in full
   * when the agent connects. Lease locks ignore it.
   */
  readonly storeUrl: string | undefined;
}

/** AGENT_USAGE is printed by --help and on bad flags. */
export const AGENT_USAGE = `Usage: fencepost agent --lock NAME [--lock NAME ...] [flags]

Identity (downward API, required): POD_NAME, POD_NAMESPACE, POD_UID

  --lock NAME          a DistributedLock in POD_NAMESPACE this pod is a candidate for (repeatable)
  --listen ADDR        loopback address of the local HTTP API (default ${AGENT_DEFAULT_LISTEN})
  --health-probe-bind-address ADDR  /healthz, /readyz for the kubelet's probes (default ${AGENT_DEFAULT_HEALTH_PROBE}; 0 disables)
  --metrics-bind-address ADDR       /metrics for Prometheus (default ${AGENT_DEFAULT_METRICS}; 0 disables)
                       A default whose port is taken (another agent on this host) moves to a free
                       port, logged and written to <state-dir>/<lock>.agent.json; an address given
                       explicitly must bind, or the agent exits naming the flag
  --state-dir DIR      write <DIR>/<lock>.json while the lock is held (atomic; removed on loss)
  --kubeconfig PATH    (default: in-cluster, $KUBECONFIG, ~/.kube/config)
  --log-level LEVEL    debug, info, warn or error (default info); silent turns logging off
  --sidecar FORM       native (default): an init container with restartPolicy Always, stopped after
                       the application, so SIGTERM releases at once; plain: one of the pod's
                       containers, stopped together with the application, so SIGTERM releases
                       nothing: the application is sent a 'stopping' event and releases itself
  --app-stop-timeout D with --sidecar plain: how long to wait for that release after SIGTERM
                       (default 25s); then the agent stops without releasing (the Lease expires)
  --store-url URL      where the locks with spec.store Redis or Redlock are held (env FENCEPOST_STORE_URL):
                       redis://[user:pass@]host:port[/db], rediss://…, or redlock://h1:p1,h2:p2,h3:p3;
                       the agent takes, renews and releases them there itself
`;

const LOCK_NAME = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** parseAgentConfig parses argv after the subcommand; throws a UsageError naming the flag or variable. */
export function parseAgentConfig(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): AgentConfig {
  const values = parseFlags(argv, {
    lock: { type: 'string', multiple: true },
    listen: { type: 'string' },
    'health-probe-bind-address': { type: 'string' },
    'metrics-bind-address': { type: 'string' },
    'state-dir': { type: 'string' },
    kubeconfig: { type: 'string' },
    'log-level': { type: 'string', default: 'info' },
    sidecar: { type: 'string', default: 'native' },
    'app-stop-timeout': { type: 'string', default: '25s' },
    'store-url': { type: 'string' },
  });
  const need = (name: string): string => {
    const v = env[name];
    if (v === undefined || v === '')
      throw new UsageError(
        name,
        `not set; pass it from the downward API (fieldRef metadata.${name === 'POD_UID' ? 'uid' : name === 'POD_NAME' ? 'name' : 'namespace'})`,
      );
    return v;
  };
  const locks = values.lock ?? [];
  if (locks.length === 0) throw new UsageError('--lock', 'at least one lock name is required');
  for (const l of locks)
    if (!LOCK_NAME.test(l))
      throw new UsageError(
        '--lock',
        `${JSON.stringify(l)} is not a valid lock name (a DNS label of at most 63 characters)`,
      );
  const defaultedListeners: ListenerFlag[] = [];
  const listener = (flag: ListenerFlag, given: string | undefined, fallback: string): string => {
    if (given !== undefined) return given;
    defaultedListeners.push(flag);
    return fallback;
  };
  const listen = listener('--listen', values.listen, AGENT_DEFAULT_LISTEN);
  const { host } = parseBindAddress(listen, '--listen');
  if (!['127.0.0.1', 'localhost', '::1'].includes(host))
    throw new UsageError(
      '--listen',
      `${JSON.stringify(listen)} is not a loopback address; the agent API is for the pod's own containers only`,
    );
  const healthProbeBindAddress = checkListenerFlag(
    listener('--health-probe-bind-address', values['health-probe-bind-address'], AGENT_DEFAULT_HEALTH_PROBE),
    '--health-probe-bind-address',
  );
  const metricsBindAddress = checkListenerFlag(
    listener('--metrics-bind-address', values['metrics-bind-address'], AGENT_DEFAULT_METRICS),
    '--metrics-bind-address',
  );
  const level = parseLogLevel(values['log-level']);
  const sidecar = values.sidecar;
  if (sidecar !== 'native' && sidecar !== 'plain')
    throw new UsageError('--sidecar', `${JSON.stringify(sidecar)} is neither native nor plain`);
  const appStopTimeoutMs = parseDuration(values['app-stop-timeout'], '--app-stop-timeout');
  const storeUrl = values['store-url'] ?? env['FENCEPOST_STORE_URL'];
  if (storeUrl !== undefined && storeUrl !== '' && !/^(rediss?|redis\+shards|redlock):\/\/\S+$/.test(storeUrl))
    throw new UsageError(
      '--store-url',
      `must start with redis://, rediss://, redis+shards:// or redlock://, got ${JSON.stringify(storeUrl.replace(/:[^:@/]*@/, ':***@'))}`,
    );
  return Object.freeze({
    kubeconfig: values.kubeconfig,
    podName: need('POD_NAME'),
    podNamespace: need('POD_NAMESPACE'),
    podUid: need('POD_UID'),
    locks: Object.freeze([...new Set(locks)]),
    listen,
    healthProbeBindAddress,
    metricsBindAddress,
    defaultedListeners: Object.freeze(defaultedListeners),
    stateDir: values['state-dir'],
    logLevel: level,
    sidecar,
    appStopTimeoutMs,
    storeUrl: storeUrl === '' ? undefined : storeUrl,
  });
}
