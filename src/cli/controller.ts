/**
 * `fencepost controller` — the composition root: config → clients → metrics and probes → leader
 * election → the lock controller. With leader election (the default) only the leading replica
 * runs workers; losing the lead exits the process (controller-runtime's rule: state built while
 * leading cannot be trusted afterwards), and Kubernetes restarts it as a candidate. With
 * `--shards` above 1 every replica runs workers, each for the locks of the shards whose Lease it
 * holds (controllers/sharding/); losing its membership Lease exits the process the same way.
 */
import { openStoreObserver } from '../controllers/distributedlock/store-observer.ts';
import { randomUUID } from 'node:crypto';
import type { V1Lease } from '@kubernetes/client-node';
import { parseControllerConfig, type ControllerConfig } from '../config/controller.ts';
import { startLockController, type LockController } from '../controllers/distributedlock/setup.ts';
import { apiClientFor, type ApiClient } from '../kube/api-client.ts';
import { leaseRequests, leasesPath } from '../transport/resources.ts';
import { createLogger, type Logger } from '../observability/logger.ts';
import { serveProbes, type ProbeRoutes } from '../observability/http.ts';
import { metricsAuthorizer } from '../observability/metrics-auth.ts';
import { certificateFromDir, selfSignedCertificate, type ServingCertificate } from '../observability/serving-cert.ts';
import { createControllerMetrics } from '../observability/metrics.ts';
import { realClock } from '../runtime/clock.ts';
import { LeaderElector } from '../runtime/leaderelection.ts';
import { ShardManager, shardLeaseName } from '../controllers/sharding/shard-manager.ts';

/** StartupError: the process cannot start (e.g. the API server is unreachable); exit status 2. */
export class StartupError extends Error {
  readonly exitCode = 2;
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'StartupError';
  }
}

/** checkApiServer fails fast, with one line naming the server, when it cannot be reached at start. */
async function checkApiServer(api: ApiClient): Promise<void> {
  const server = api.config.server.href.replace(/\/$/, '');
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      api.request({ method: 'GET', path: '/version' }),
      new Promise((_, reject) => {
        timer = setTimeout(() => {
          reject(new Error('no answer within 10 s'));
        }, 10_000);
      }),
    ]);
  } catch (err) {
    const why = err instanceof Error ? (err.cause instanceof Error ? err.cause.message : err.message) : String(err);
    throw new StartupError(`cannot reach the API server at ${server}: ${why.split('\n')[0] ?? why}`, { cause: err });
  } finally {
    clearTimeout(timer);
  }
}

/** CERT_RELOAD_MS: how often --metrics-cert-dir is read again for a renewed certificate. */
const CERT_RELOAD_MS = 10_000;

/**
 * secureMetrics is the TLS and the authorization of the metrics listener (none with
 * --metrics-secure=false): the --metrics-cert-dir files or a self-signed certificate, and every
 * scrape checked with the API server through the controller's own credentials (it needs `create`
 * on tokenreviews and subjectaccessreviews: the chart's `-metrics-auth` ClusterRole).
 */
function secureMetrics(cfg: ControllerConfig, client: ApiClient): Pick<ProbeRoutes, 'tls' | 'authorize'> {
  if (!cfg.metricsSecure) return {};
  const dir = cfg.metricsCertDir;
  // Read at start (a missing file fails the start with exit status 2, naming the flag) and every CERT_RELOAD_MS after.
  let certificate: () => ServingCertificate;
  if (dir !== undefined) {
    try {
      certificateFromDir(dir, '--metrics-cert-dir');
    } catch (err) {
      throw new StartupError((err as Error).message, { cause: err });
    }
    certificate = () => certificateFromDir(dir, '--metrics-cert-dir');
  } else {
    const self = selfSignedCertificate({
      commonName: `${cfg.identity}-metrics`,
      hosts: [cfg.identity, 'localhost', '127.0.0.1', '::1'],
    });
    certificate = () => self;
  }
  return {
    tls: { certificate, ...(dir !== undefined ? { reloadMs: CERT_RELOAD_MS } : {}) },
    authorize: metricsAuthorizer({ review: (path, body) => client.request({ method: 'POST', path, body }) }),
  };
}

/**
 * CREDENTIALS_RELOAD_MS: how old the controller's kubeconfig files (CA, client certificate and
 * key, token) may get before a request reads them again. The transport's default is a minute, as
 * client-go reads a token file; the controller checks every 2 s, as it did before the transport,
 * so a rotated certificate or CA is in use within 2 s. A check reads three small files at most once
 * per 2 s, and only when a request is made.
 */
export const CREDENTIALS_RELOAD_MS = 2_000;

/** runController runs until SIGTERM/SIGINT (exit 0) or loss of leadership (exit 1). */
export async function runController(argv: readonly string[]): Promise<number> {
  const cfg: ControllerConfig = parseControllerConfig(argv);
  const log: Logger = createLogger(cfg.logLevel, { component: 'controller' });
  const metrics = createControllerMetrics();
  // One API client for every request and watch of this process: one pool, every request counted.
  const kube = apiClientFor(cfg.kubeconfig, {
    reloadMs: CREDENTIALS_RELOAD_MS,
    onRequest: (r) => {
      metrics.countRestRequest(r);
    },
  });
  // leader_election_master_status{name}: 0 while standing by, 1 while leading (and always 1 without
  // leader election, where this replica runs the workers), so one max() by name finds the leader.
  const leading = (on: boolean): void => {
    metrics.leader.set({ name: cfg.leaderElectionId }, on ? 1 : 0);
  };
  // The identity must be unique per process incarnation: an elector takes over a Lease naming its own identity.
  const identity = `${cfg.identity}_${randomUUID().slice(0, 8)}`;
  // Before the API server is asked anything: an unreadable --metrics-cert-dir fails the start at once.
  const metricsSecurity = secureMetrics(cfg, kube);
  await checkApiServer(kube);
  // The stores of spec.store Redis and Redlock locks, observed (never written); a bad URL fails the start, naming its flag.
  const stores =
    cfg.redisStoreUrl !== undefined || cfg.redlockStoreUrl !== undefined
      ? await openStoreObserver({ redis: cfg.redisStoreUrl, redlock: cfg.redlockStoreUrl }, log)
      : undefined;
  let controllers: LockController[] = [];
  let elector: LeaderElector | undefined;
  let sharding: ShardManager | undefined;
  let stopping = false;

  const metricsServer = await serveProbes(cfg.metricsBindAddress, '--metrics-bind-address', {
    registry: metrics.registry,
    ...metricsSecurity,
  });
  const probeServer = await serveProbes(cfg.healthProbeBindAddress, '--health-probe-bind-address', {
    healthz: () => (elector === undefined || elector.healthy(5000)) && (sharding?.healthy(5000) ?? true),
    // Ready: a standby replica is ready (it is waiting to lead); a leader, or a sharded replica, once its caches synced.
    readyz: () =>
      !cfg.leaderElect ||
      (sharding === undefined && elector?.isLeader() !== true) ||
      (controllers.length > 0 && controllers.every((c) => c.synced())),
  });
  log.info(
    {
      identity,
      metrics: metricsServer?.address,
      metricsScheme: cfg.metricsSecure ? 'https' : 'http',
      probes: probeServer?.address,
      redis: cfg.redisUrl !== undefined,
      stores: { redis: cfg.redisStoreUrl !== undefined, redlock: cfg.redlockStoreUrl !== undefined },
      namespaces: cfg.namespaces.length > 0 ? cfg.namespaces : ['(all)'],
      shards: cfg.shards,
    },
    'Started controller process',
  );

  // One controller per watched namespace (or one for all): each has its own informers and queue.
  const startWorkers = async (): Promise<void> => {
    const scopes: (string | undefined)[] = cfg.namespaces.length > 0 ? [...cfg.namespaces] : [undefined];
    controllers = await Promise.all(
      scopes.map((namespace) =>
        startLockController({
          kc: kube,
          redisUrl: cfg.redisUrl,
          namespace,
          workers: cfg.workers,
          identity,
          clock: realClock,
          log,
          metrics,
          cacheSyncTimeoutMs: cfg.cacheSyncTimeoutMs,
          ...(cfg.podLabelSelector !== undefined ? { podLabelSelector: cfg.podLabelSelector } : {}),
          ...(stores !== undefined ? { stores } : {}),
          ...(sharding !== undefined ? { shards: sharding } : {}),
        }),
      ),
    );
  };

  const done = new Promise<number>((resolve) => {
    const shutdown = (signal: string): void => {
      if (stopping) return;
      stopping = true;
      log.info({ signal }, 'Stopping controller');
      void (async () => {
        await Promise.allSettled(controllers.map((c) => c.stop())); // drain workers first, then give up the lead, so that no worker acts unled
        await sharding?.stop(); // the shards and the membership, released for the others to take at once
        abort.abort(new Error(signal));
        await running;
        await Promise.allSettled([metricsServer?.stop(), probeServer?.stop(), stores?.close()]);
        resolve(0);
      })();
    };
    process.once('SIGTERM', () => {
      shutdown('SIGTERM');
    });
    process.once('SIGINT', () => {
      shutdown('SIGINT');
    });
  });

  const abort = new AbortController();
  let running: Promise<void> = Promise.resolve();
  if (cfg.shards > 1) {
    // Sharded: every replica runs workers, each acting for the locks of the shards it holds;
    // leader_election_master_status{name=<id>-shard-<n>} is 1 on the replica holding shard n.
    const shardMetric = (owned: readonly number[]): void => {
      for (let s = 0; s < cfg.shards; s++)
        metrics.leader.set({ name: shardLeaseName(cfg.leaderElectionId, s) }, owned.includes(s) ? 1 : 0);
    };
    shardMetric([]);
    sharding = new ShardManager({
      leases: leaseRequests<V1Lease>(kube),
      members: {
        list: async (namespace, labelSelector) =>
          (
            await kube.request<{ items: V1Lease[] }>({
              method: 'GET',
              path: leasesPath(namespace),
              query: { labelSelector },
            })
          ).items,
      },
      namespace: cfg.leaderElectionNamespace,
      id: cfg.leaderElectionId,
      member: cfg.identity,
      identity,
      shards: cfg.shards,
      leaseDurationMs: cfg.leaderElectionLeaseDurationMs,
      renewDeadlineMs: cfg.leaderElectionRenewDeadlineMs,
      retryPeriodMs: cfg.leaderElectionRetryPeriodMs,
      clock: realClock,
      log: log.child({ component: 'sharding' }),
      onMembershipLost: () => {
        if (stopping) return;
        log.error({ identity }, 'Lost controller membership; exiting');
        process.exit(1);
      },
      onShardsChanged: (owned) => {
        shardMetric(owned);
        log.info({ shards: owned }, 'Changed shards held');
      },
    });
    // The workers start first (caches synced, no shard held yet: nothing is reconciled), so that a
    // shard gained is reconciled from full caches at once.
    await startWorkers();
    await sharding.start();
  } else if (cfg.leaderElect) {
    leading(false);
    elector = new LeaderElector({
      leases: leaseRequests<V1Lease>(kube),
      namespace: cfg.leaderElectionNamespace,
      name: cfg.leaderElectionId,
      identity,
      leaseDurationMs: cfg.leaderElectionLeaseDurationMs,
      renewDeadlineMs: cfg.leaderElectionRenewDeadlineMs,
      retryPeriodMs: cfg.leaderElectionRetryPeriodMs,
      clock: realClock,
      releaseOnCancel: true,
      log: log.child({ component: 'leaderelection' }),
      callbacks: {
        onStartedLeading: () => {
          leading(true);
          log.info({ identity }, 'Started leading');
          startWorkers().catch((err: unknown) => {
            log.error({ err }, 'Failed to start workers');
            process.exit(1);
          });
        },
        onStoppedLeading: () => {
          leading(false);
          if (stopping) return;
          log.error({ identity }, 'Lost leadership; exiting');
          process.exit(1);
        },
        onNewLeader: (leader) => {
          log.info({ leader }, 'Observed new leader');
        },
      },
    });
    running = elector.run(abort.signal).catch((err: unknown) => {
      log.error({ err }, 'Leader election failed');
      process.exit(1);
    });
  } else {
    leading(true);
    await startWorkers();
  }
  return await done;
}
