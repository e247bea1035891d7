/**
 * The controller's configuration, parsed once from flags (and FENCEPOST_* environment variables
 * where noted) into a frozen object. The only place the controller reads process.env.
 */
import { hostname } from 'node:os';
import { parseDuration } from './duration.ts';
import { parseFlags } from './flags.ts';
import { parseLogLevel, type LogLevel } from './log-level.ts';
import { UsageError } from './usage-error.ts';
import { checkListenerFlag } from './bind-address.ts';

/** ControllerConfig: every knob of `fencepost controller`, with its default in the doc comment. */
export interface ControllerConfig {
  /** kubeconfig: path; default: $KUBECONFIG, else in-cluster, else ~/.kube/config. */
  readonly kubeconfig: string | undefined;
  /** redisUrl: Redis for fencing tokens (--redis-url or FENCEPOST_REDIS_URL); none → the Lease backend. */
  readonly redisUrl: string | undefined;
  /** redisStoreUrl: where the locks with spec.store Redis are held (--redis-store-url or FENCEPOST_REDIS_STORE_URL). */
  readonly redisStoreUrl: string | undefined;
  /** redlockStoreUrl: the masters of the locks with spec.store Redlock (--redlock-store-url or FENCEPOST_REDLOCK_STORE_URL). */
  readonly redlockStoreUrl: string | undefined;
  /** namespaces: watch only these (--namespace, repeatable); empty = all namespaces. */
  readonly namespaces: readonly string[];
  /** workers: concurrent reconciles; default 4. */
  readonly workers: number;
  /** metricsBindAddress: host:port for /metrics; default 0.0.0.0:8443; "0" disables. */
  readonly metricsBindAddress: string;
  /**
   * metricsSecure: serve /metrics over HTTPS and let in only bearer tokens the API server
   * authenticates (TokenReview) for users it allows `get` on the non-resource URL /metrics
   * (SubjectAccessReview); default true. `--metrics-secure=false` serves plain HTTP to anyone.
   */
  readonly metricsSecure: boolean;
  /**
   * metricsCertDir: a folder with `tls.crt` and `tls.key` (a mounted `kubernetes.io/tls` Secret)
   * for the secure metrics listener, re-read every 10 s; undefined: a self-signed certificate made
   * at start. Refused with `--metrics-secure=false`.
   */
  readonly metricsCertDir: string | undefined;
  /** healthProbeBindAddress: host:port for /healthz and /readyz; default 0.0.0.0:8081; "0" disables. */
  readonly healthProbeBindAddress: string;
  /**
   * leaderElect: elect one active replica on a Lease; default true. A pflag-style boolean:
   * `--leader-elect`, `--leader-elect=true|false` (and `--leader-elect false`; see flags.ts).
   */
  readonly leaderElect: boolean;
  /** leaderElectionNamespace: default $POD_NAMESPACE, else "default". */
  readonly leaderElectionNamespace: string;
  /** leaderElectionId: the controller's own Lease name; default fencepost-controller. */
  readonly leaderElectionId: string;
  readonly leaderElectionLeaseDurationMs: number;
  readonly leaderElectionRenewDeadlineMs: number;
  readonly leaderElectionRetryPeriodMs: number;
  /**
   * shards: how many shards the locks fall into (--shards); default 1, one active replica elected
   * on the controller's Lease, as without sharding. Above 1, every replica acts for the locks of
   * the shards it holds a Lease of (controllers/sharding/); all replicas must be given the same
   * number. Needs leader election; at most {@link MAX_SHARDS}.
   */
  readonly shards: number;
  /** identity: this replica's name in leader election and Events; default $POD_NAME, else the hostname. */
  readonly identity: string;
  /** cacheSyncTimeoutMs: exit if informers do not sync within this; default 2m. */
  readonly cacheSyncTimeoutMs: number;
  /**
   * podLabelSelector: watch and cache only the pods this label selector matches
   * (--pod-label-selector); undefined = every pod of the watched namespaces.
   */
  readonly podLabelSelector: string | undefined;
  /** logLevel: info (default) or debug, warn, error; silent turns logging off. */
  readonly logLevel: LogLevel;
}

/** CONTROLLER_USAGE is printed by --help and on bad flags. */
export const CONTROLLER_USAGE = `Usage: fencepost controller [flags]

  --kubeconfig PATH                    kubeconfig (default: $KUBECONFIG, in-cluster, ~/.kube/config)
  --redis-url URL[,URL…]               Redis for fencing tokens (env FENCEPOST_REDIS_URL); several, comma-separated, are shards:
                                       each lock's counter on one, by a stable hash; without it locks use the Lease backend
  --redis-store-url URL                where the locks with spec.store Redis are held, which the controller observes
                                       (env FENCEPOST_REDIS_STORE_URL): redis://, rediss://, redis+sentinel://, redis+cluster://
  --redlock-store-url URL              the masters of the locks with spec.store Redlock (env FENCEPOST_REDLOCK_STORE_URL):
                                       redlock://host1:port,host2:port,host3:port[,…]
  --namespace NS                       watch only this namespace; repeatable (default: all namespaces)
  --workers N                          concurrent reconciles (default 4)
  --metrics-bind-address ADDR          /metrics listener (default 0.0.0.0:8443; 0 disables)
  --metrics-secure[=BOOL]              serve /metrics over HTTPS to bearer tokens allowed get on /metrics, checked
                                       with TokenReview and SubjectAccessReview (default true; false: plain HTTP, no checks)
  --metrics-cert-dir DIR               tls.crt and tls.key for the HTTPS metrics listener, re-read when they change
                                       (default: a self-signed certificate made at start)
  --health-probe-bind-address ADDR     /healthz and /readyz listener (default 0.0.0.0:8081; 0 disables)
  --leader-elect[=BOOL]                elect one active replica (default true; --leader-elect=false to turn off)
  --leader-election-namespace NS       namespace of the controller's Lease (default $POD_NAMESPACE or default)
  --leader-election-id NAME            name of the controller's Lease (default fencepost-controller)
  --leader-election-lease-duration D   (default 15s)
  --leader-election-renew-deadline D   (default 10s)
  --leader-election-retry-period D     (default 2s)
  --shards N                           share the locks among the replicas: N shards, each held by one replica
                                       through a Lease (default 1: one active replica, the others stand by);
                                       every replica must be given the same N; at most 1024
  --identity NAME                      this replica's identity (default $POD_NAME or the hostname)
  --cache-sync-timeout D               exit if caches do not sync in time (default 2m)
  --pod-label-selector SEL             watch only the pods this label selector matches, e.g.
                                       fencepost.io/candidate=true (default: every pod); a
                                       candidate it does not match is never granted
  --log-level LEVEL                    debug, info, warn or error (default info); silent turns logging off
`;

/** MAX_SHARDS bounds --shards: each shard is a Lease its owner renews every retry period. */
export const MAX_SHARDS = 1024;

function positiveInt(text: string, flag: string): number {
  if (!/^[1-9][0-9]*$/.test(text))
    throw new UsageError(flag, `must be a positive integer, got ${JSON.stringify(text)}`);
  return Number(text);
}

/** storeFlag: a store URL flag's value (undefined when unset or empty), refused unless its scheme matches. */
function storeFlag(value: string | undefined, flag: string, scheme: RegExp): string | undefined {
  if (value === undefined || value === '') return undefined;
  if (!scheme.test(value))
    throw new UsageError(
      flag,
      `${JSON.stringify(value.replace(/:[^:@/]*@/, ':***@'))} does not start with ${scheme.source.replaceAll('\\', '')}`,
    );
  return value;
}

/** parseControllerConfig parses argv (after the subcommand); throws a UsageError naming the flag on bad input. */
export function parseControllerConfig(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): ControllerConfig {
  const values = parseFlags(
    argv,
    {
      kubeconfig: { type: 'string' },
      'redis-url': { type: 'string' },
      'redis-store-url': { type: 'string' },
      'redlock-store-url': { type: 'string' },
      namespace: { type: 'string', multiple: true },
      workers: { type: 'string', default: '4' },
      'metrics-bind-address': { type: 'string', default: '0.0.0.0:8443' },
      'metrics-secure': { type: 'string', default: 'true' },
      'metrics-cert-dir': { type: 'string' },
      'health-probe-bind-address': { type: 'string', default: '0.0.0.0:8081' },
      'leader-elect': { type: 'string', default: 'true' },
      'leader-election-namespace': { type: 'string' },
      'leader-election-id': { type: 'string', default: 'fencepost-controller' },
      'leader-election-lease-duration': { type: 'string', default: '15s' },
      'leader-election-renew-deadline': { type: 'string', default: '10s' },
      'leader-election-retry-period': { type: 'string', default: '2s' },
      shards: { type: 'string', default: '1' },
      identity: { type: 'string' },
      'cache-sync-timeout': { type: 'string', default: '2m' },
      'pod-label-selector': { type: 'string' },
      'log-level': { type: 'string', default: 'info' },
    },
    ['leader-elect', 'metrics-secure'],
  );
  const metricsSecure = values['metrics-secure'] === 'true';
  const metricsCertDir = values['metrics-cert-dir'];
  if (metricsCertDir !== undefined && metricsCertDir.trim() === '')
    throw new UsageError('--metrics-cert-dir', 'must name a folder, got ""');
  if (metricsCertDir !== undefined && !metricsSecure)
    throw new UsageError(
      '--metrics-cert-dir',
      `${JSON.stringify(metricsCertDir)} has no use with --metrics-secure=false (plain HTTP); drop one of the two`,
    );
  const level = parseLogLevel(values['log-level']);
  const redisUrl = values['redis-url'] ?? env['FENCEPOST_REDIS_URL'];
  // One URL, or several shards separated by commas (fencing/shards.ts places each lock's counter).
  for (const url of redisUrl !== undefined && redisUrl !== '' ? redisUrl.split(',') : [])
    if (!/^rediss?:\/\/\S+$/.test(url.trim()))
      throw new UsageError(
        '--redis-url',
        `each URL must start with redis:// or rediss://, got ${JSON.stringify(url)} in ${JSON.stringify(redisUrl)}`,
      );
  // The store URLs are parsed in full when the controller connects (stores/url.ts, errors naming
  // the flag); here only their scheme, so that a URL given to the wrong flag fails at once.
  const redisStoreUrl = storeFlag(
    values['redis-store-url'] ?? env['FENCEPOST_REDIS_STORE_URL'],
    '--redis-store-url',
    /^(rediss?|redis\+sentinel|redis\+cluster|redis\+shards):\/\//,
  );
  const redlockStoreUrl = storeFlag(
    values['redlock-store-url'] ?? env['FENCEPOST_REDLOCK_STORE_URL'],
    '--redlock-store-url',
    /^redlock:\/\//,
  );
  const leaderElect = values['leader-elect'] === 'true';
  const identity = values.identity ?? env['POD_NAME'] ?? hostname();
  const shards = positiveInt(values.shards, '--shards');
  if (shards > MAX_SHARDS) throw new UsageError('--shards', `must be at most ${MAX_SHARDS}, got ${values.shards}`);
  if (shards > 1 && !leaderElect)
    throw new UsageError(
      '--shards',
      `${values.shards} needs leader election (each shard is held through a Lease); drop --leader-elect=false or use --shards 1`,
    );
  // Sharded, the identity names this replica's membership Lease: it must be a lower-case DNS name.
  if (shards > 1 && !/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(identity))
    throw new UsageError(
      '--identity',
      `must be a lower-case DNS name with --shards above 1 (it names the replica's membership Lease), got ${JSON.stringify(identity)}`,
    );
  return Object.freeze({
    kubeconfig: values.kubeconfig,
    redisUrl: redisUrl === '' ? undefined : redisUrl,
    redisStoreUrl,
    redlockStoreUrl,
    namespaces: Object.freeze([...new Set(values.namespace ?? [])]),
    workers: positiveInt(values.workers, '--workers'),
    metricsBindAddress: checkListenerFlag(values['metrics-bind-address'], '--metrics-bind-address'),
    metricsSecure,
    metricsCertDir,
    healthProbeBindAddress: checkListenerFlag(values['health-probe-bind-address'], '--health-probe-bind-address'),
    leaderElect,
    leaderElectionNamespace: values['leader-election-namespace'] ?? env['POD_NAMESPACE'] ?? 'default',
    leaderElectionId: values['leader-election-id'],
    leaderElectionLeaseDurationMs: parseDuration(
      values['leader-election-lease-duration'],
      '--leader-election-lease-duration',
    ),
    leaderElectionRenewDeadlineMs: parseDuration(
      values['leader-election-renew-deadline'],
      '--leader-election-renew-deadline',
    ),
    leaderElectionRetryPeriodMs: parseDuration(
      values['leader-election-retry-period'],
      '--leader-election-retry-period',
    ),
    shards,
    identity,
    cacheSyncTimeoutMs: parseDuration(values['cache-sync-timeout'], '--cache-sync-timeout'),
    podLabelSelector: podLabelSelector(values['pod-label-selector']),
    logLevel: level,
  });
}

/**
 * podLabelSelector checks --pod-label-selector: comma-separated requirements of the API's
 * label-selector syntax (`key`, `!key`, `key=value`, `key==value`, `key!=value`, `key in (a,b)`,
 * `key notin (a,b)`). The API server parses it in full at the first list; this catches a typo at
 * start-up, with the flag named.
 */
function podLabelSelector(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const key = String.raw`(?:[a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`;
  const val = String.raw`(?:[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?`;
  const requirement = new RegExp(
    String.raw`^\s*(?:!?${key}|${key}\s*(?:==?|!=)\s*${val}|${key}\s+(?:in|notin)\s+\(\s*${val}(?:\s*,\s*${val})*\s*\))\s*$`,
  );
  // Commas inside `(…)` separate values, not requirements.
  const parts = value.split(/,(?![^(]*\))/);
  if (value.trim() === '' || parts.some((p) => !requirement.test(p)))
    throw new UsageError('--pod-label-selector', `not a label selector: ${JSON.stringify(value)}`);
  return value;
}
