/**
 * The agent's configuration: the pod identity from the downward API (POD_NAME, POD_NAMESPACE,
 * POD_UID) and flags. The only place the agent reads process.env.
 */
import { parseFlags } from './flags.ts';
import { parseLogLevel, type LogLevel } from './log-level.ts';
import { UsageError } from './usage-error.ts';
import { checkListenerFlag, parseBindAddress } from './bind-address.ts';
import { parseDuration } from './duration.ts';

/** AgentConfig: every knob of `fencepost agent`. */
export interface AgentConfig {
  readonly kubeconfig: string | undefined;
  readonly podName: string;
  readonly podNamespace: string;
  readonly podUid: string;
  /** locks: --lock NAME, repeatable, at least one. */
  readonly locks: readonly string[];
  /** listen: loopback host:port of the local API; default 127.0.0.1:7370. */
  readonly listen: string;
  /** healthProbeBindAddress: host:port of /healthz and /readyz for the kubelet; default 0.0.0.0:8081; "0" disables. */
  readonly healthProbeBindAddress: string;
  /** metricsBindAddress: host:port of /metrics for Prometheus; default 0.0.0.0:8080; "0" disables. */
  readonly metricsBindAddress: string;
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
  --listen ADDR        loopback address of the local HTTP API (default 127.0.0.1:7370)
  --health-probe-bind-address ADDR  /healthz, /readyz for the kubelet's probes (default 0.0.0.0:8081; 0 disables)
  --metrics-bind-address ADDR       /metrics for Prometheus (default 0.0.0.0:8080; 0 disables)
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
    listen: { type: 'string', default: '127.0.0.1:7370' },
    'health-probe-bind-address': { type: 'string', default: '0.0.0.0:8081' },
    'metrics-bind-address': { type: 'string', default: '0.0.0.0:8080' },
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
  const { host } = parseBindAddress(values.listen, '--listen');
  if (!['127.0.0.1', 'localhost', '::1'].includes(host))
    throw new UsageError(
      '--listen',
      `${JSON.stringify(values.listen)} is not a loopback address; the agent API is for the pod's own containers only`,
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
    listen: values.listen,
    healthProbeBindAddress: checkListenerFlag(values['health-probe-bind-address'], '--health-probe-bind-address'),
    metricsBindAddress: checkListenerFlag(values['metrics-bind-address'], '--metrics-bind-address'),
    stateDir: values['state-dir'],
    logLevel: level,
    sidecar,
    appStopTimeoutMs,
    storeUrl: storeUrl === '' ? undefined : storeUrl,
  });
}
