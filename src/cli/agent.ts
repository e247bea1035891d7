/**
 * `fencepost agent` — the sidecar: one LockSession per --lock, the local HTTP API (loopback only),
 * /healthz and /readyz for the kubelet on --health-probe-bind-address, /metrics for Prometheus on
 * --metrics-bind-address, state files, a `LockLost` Event on its pod at every step-down, and on
 * SIGTERM a release of everything held (so the next candidate is granted at once) before exiting —
 * in the native-sidecar form (the default), where the kubelet sends SIGTERM only after the
 * application's containers exited. With `--sidecar plain` (the agent is one of the pod's
 * containers and gets SIGTERM together with the application) it releases nothing itself: it tells
 * the application (`stopping`) and waits for its release, bounded by --app-stop-timeout.
 *
 * Each lock is claimed for the pod first (agent/session-claim.ts): a pod runs one session per lock,
 * so an agent whose lock another session of the pod (`fencepost exec`, `acquire()`) holds exits
 * with an error naming it, before it watches or writes anything.
 *
 * Run it as a native sidecar (an init container with `restartPolicy: Always`, docs/agent.md): its
 * startupProbe on /readyz holds the application back until the Lease watches have synced, and the
 * kubelet stops it only after the application has exited.
 */
import { stateFiles } from '../agent/state-file.ts';
import { EventReason } from '../api/v1alpha1/conditions.ts';
import { serveAgentApi, type AgentApi } from '../agent/http-api.ts';
import { semaphorePermits } from '../agent/held-elsewhere.ts';
import type { AgentSession } from '../agent/agent-session.ts';
import { LockSession } from '../agent/session.ts';
import { StoreLockSession } from '../agent/store-session.ts';
import { openAgentStore } from './agent-store.ts';
import { claimSession, type SessionClaim } from '../agent/session-claim.ts';
import { parseAgentConfig, type ListenerFlag } from '../config/agent.ts';
import { recordEvents } from '../kube/event-recorder.ts';
import { parseBindAddress, serveProbes } from '../observability/http.ts';
import { createLogger } from '../observability/logger.ts';
import { TextRegistry, processMetrics } from '../observability/exposition.ts';
import { REST_REQUESTS_METRIC } from '../observability/rest-requests-metric.ts';
import { connect } from '../transport/connect.ts';
import { eventRequests } from '../transport/resources.ts';
import { realClock, sleep } from '../runtime/clock.ts';
import type { Logger } from '../observability/logger.ts';

/**
 * awaitAppRelease is SIGTERM in the plain-sidecar form, where the application got its SIGTERM at
 * the same moment and may still be writing: the agent releases nothing itself. It sends
 * `stopping` on each held lock's event stream and keeps renewing and serving until the
 * application has released every lock (POST /v1/locks/NAME/release, once it stopped writing) or
 * lost it, or until `timeoutMs` — then the caller stops the sessions without releasing, and the
 * Leases expire on the server after their duration. Never an early handover.
 */
async function awaitAppRelease(
  sessions: ReadonlyMap<string, AgentSession>,
  api: AgentApi,
  timeoutMs: number,
  signal: string,
  log: Logger,
): Promise<void> {
  const heldLocks = (): string[] => [...sessions].filter(([, s]) => s.heldToken() !== undefined).map(([l]) => l);
  const waiting = heldLocks();
  log.info(
    { signal, locks: waiting, timeoutMs },
    'Stopping agent (plain sidecar): waiting for the application to release held locks',
  );
  for (const lock of waiting) {
    const token = sessions.get(lock)?.heldToken();
    if (token === undefined) continue;
    api.announce({
      type: 'stopping',
      lock,
      token: token.toString(),
      reason: `the agent got ${signal}; release the lock once the application has stopped writing`,
    });
  }
  const deadline = realClock.monotonicMs() + timeoutMs;
  // Held, or a release in flight: the session stops trusting the term when a release begins, and
  // the Lease write and the application's answer follow; stopping the sessions then would cut the
  // write short (the successor would wait out the lease) and lose the answer.
  while ((heldLocks().length > 0 || api.busy()) && realClock.monotonicMs() < deadline)
    await sleep(realClock, Math.min(100, deadline - realClock.monotonicMs()));
  const left = heldLocks();
  if (left.length > 0)
    log.info(
      { locks: left },
      'The application did not release in time; stopping without releasing (the Leases expire on the server)',
    );
}

/** isAddressInUse: the listen failed because the port is taken (EADDRINUSE, on the error or its cause). */
function isAddressInUse(err: unknown): boolean {
  for (let e: unknown = err; e instanceof Error; e = e.cause)
    if ((e as NodeJS.ErrnoException).code === 'EADDRINUSE' || /\bEADDRINUSE\b/.test(e.message)) return true;
  return false;
}

/** required: serveProbes returns undefined only for "0", which the callers have ruled out. */
function required<T>(server: T | undefined): T {
  if (server === undefined) throw new Error('listener disabled');
  return server;
}

/** runAgent runs until SIGTERM/SIGINT; returns the exit code. */
export async function runAgent(argv: readonly string[]): Promise<number> {
  const cfg = parseAgentConfig(argv);
  const log = createLogger(cfg.logLevel, { component: 'agent', pod: cfg.podName });
  // The agent's metrics without prom-client (about 11 MiB of RSS): exposition.ts, same names.
  const registry = new TextRegistry();
  processMetrics(registry); // process_* and nodejs_*, as every Node exporter names them
  // client-go's name, as the controller exports it (the same definition): an agent whose renewals
  // fail shows it here first.
  const requests = registry.counter(REST_REQUESTS_METRIC);
  const kube = connect(cfg.kubeconfig, {
    onRequest: (r) => {
      requests.inc({ code: r.code, method: r.method, host: r.host });
    },
  });
  const held = registry.gauge({
    name: 'fencepost_agent_lock_held',
    help: '1 while this agent validly holds the lock.',
    labelNames: ['lock'],
  });
  const lockEvents = registry.counter({
    name: 'fencepost_agent_lock_events_total',
    help: 'Lock events (granted, renewed, lost, released).',
    labelNames: ['lock', 'type'],
  });
  const files = cfg.stateDir !== undefined ? stateFiles(cfg.stateDir) : undefined;
  // A file left by a previous process of this agent (killed while it held the lock) says nothing
  // about this one: remove it before anything else.
  for (const lock of cfg.locks) files?.remove(lock);
  // A step-down is usually caused by an unreachable API server, so its Event is retried (about
  // two minutes in all) until the API server takes it.
  const events = recordEvents(eventRequests(kube), 'fencepost-agent', cfg.podName, log, {
    attempts: 12,
    firstDelayMs: 500,
    maxDelayMs: 15_000,
    clock: realClock,
  });
  const self = { apiVersion: 'v1', kind: 'Pod', namespace: cfg.podNamespace, name: cfg.podName, uid: cfg.podUid };
  const claims: SessionClaim[] = [];
  const releaseClaims = (): Promise<unknown> => Promise.all(claims.map((c) => c.release()));
  try {
    for (const lock of cfg.locks)
      claims.push(
        await claimSession({
          namespace: cfg.podNamespace,
          lock,
          self: { name: cfg.podName, uid: cfg.podUid },
          program: 'fencepost agent',
        }),
      );
  } catch (err) {
    await releaseClaims();
    throw err;
  }
  // Which locks are held in a Redis or Redlock store (spec.store, which cannot change on a lock):
  // read once, before anything is watched; the agent holds those in the store itself.
  let storeSetup: Awaited<ReturnType<typeof openAgentStore>>;
  try {
    storeSetup = await openAgentStore(kube, cfg, log);
  } catch (err) {
    await releaseClaims();
    throw err;
  }
  const sessions = new Map<string, AgentSession>();
  for (const lock of cfg.locks) {
    const inStore = storeSetup.locks.get(lock);
    const s: AgentSession =
      inStore !== undefined && storeSetup.open !== undefined
        ? new StoreLockSession({
            lock,
            namespace: cfg.podNamespace,
            self: { name: cfg.podName, uid: cfg.podUid },
            mode: inStore.mode,
            ttlMs: inStore.ttlMs,
            store: storeSetup.open.store,
            stores: storeSetup.open,
            clock: realClock,
            log,
          })
        : new LockSession({
            api: kube,
            namespace: cfg.podNamespace,
            lock,
            self: { name: cfg.podName, uid: cfg.podUid },
            clock: realClock,
            log,
          });
    s.onEvent((e) => {
      lockEvents.inc({ lock, type: e.type });
      if (e.type === 'lost')
        events.emit(
          self,
          'Warning',
          EventReason.LockLost,
          `Stepped down from lock ${lock} (fencing token ${e.token}): ${e.reason ?? 'lost'}`,
        );
      const isHeld = e.type === 'granted' || e.type === 'renewed';
      held.set({ lock }, isHeld ? 1 : 0);
      if (files !== undefined) {
        if (isHeld) files.write(s.snapshot());
        else files.remove(lock);
      }
    });
    // A planned handover shows in the state file too (snapshot.draining), while the lock is still held.
    s.onHandover(() => {
      if (files !== undefined && s.heldToken() !== undefined) files.write(s.snapshot());
    });
    sessions.set(lock, s);
  }
  let synced = false;
  const ready = (): boolean => synced;
  // A port in use fails the start; whatever listens already is closed, or it would keep the process alive.
  const started: { stop(): Promise<void> }[] = [];
  const listen = async <T extends { stop(): Promise<void> } | undefined>(start: Promise<T>): Promise<T> => {
    try {
      const server = await start;
      if (server !== undefined) started.push(server);
      return server;
    } catch (err) {
      await Promise.all(started.map((x) => x.stop()));
      await releaseClaims();
      throw err;
    }
  };
  // A listener left at its default whose port is taken (another agent on this host, or a second
  // agent container in the pod) moves to a free port of the same host rather than fail: the
  // defaults are conveniences, and the bound addresses are logged and written beside the state
  // files. An address the user gave must be the one served — the kubelet probes it, Prometheus
  // scrapes it, the application calls it —, so it fails the start, naming the flag and address.
  const bind = async <T extends { readonly address: string }>(
    flag: ListenerFlag,
    addr: string,
    start: (addr: string) => Promise<T>,
  ): Promise<T> => {
    // The runtime's message names the address (listen EADDRINUSE: 127.0.0.1:7370); add the flag.
    const named = (err: unknown): Error =>
      new Error(`${flag}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    try {
      return await start(addr);
    } catch (err) {
      if (!cfg.defaultedListeners.includes(flag) || !isAddressInUse(err)) throw named(err);
      const { host: h } = parseBindAddress(addr, flag);
      const free = `${h.includes(':') ? `[${h}]` : h}:0`;
      const server = await start(free).catch((e: unknown) => {
        throw named(e);
      });
      log.warn(
        { flag, default: addr, address: server.address },
        `The default ${flag} ${addr} is in use (another agent on this host?); listening on ${server.address} instead`,
      );
      return server;
    }
  };
  const probes = await listen(
    cfg.healthProbeBindAddress === '0'
      ? Promise.resolve(undefined)
      : bind('--health-probe-bind-address', cfg.healthProbeBindAddress, async (a) =>
          required(await serveProbes(a, '--health-probe-bind-address', { readyz: ready })),
        ),
  );
  const metrics = await listen(
    cfg.metricsBindAddress === '0'
      ? Promise.resolve(undefined)
      : bind('--metrics-bind-address', cfg.metricsBindAddress, async (a) =>
          required(await serveProbes(a, '--metrics-bind-address', { registry })),
        ),
  );
  const api = await listen(
    bind('--listen', cfg.listen, (a) => {
      const { host, port } = parseBindAddress(a, '--listen');
      return serveAgentApi(host, port, sessions, {
        ready,
        log,
        permits: (lock) => semaphorePermits(kube, cfg.podNamespace, lock),
      });
    }),
  );
  const addresses = {
    api: `http://${api.address}`,
    healthProbes: probes?.address ?? 'off',
    metrics: metrics?.address ?? 'off',
    pid: process.pid,
  };
  for (const lock of cfg.locks) files?.writeAgent(lock, addresses);
  log.info(
    {
      listen: api.address,
      healthProbes: addresses.healthProbes,
      metrics: addresses.metrics,
      locks: cfg.locks,
    },
    'Started agent',
  );
  try {
    await Promise.all([...sessions.values()].map((s) => s.start()));
  } catch (err) {
    // a watch that never synced (2 minutes): exit, and the kubelet restarts the sidecar
    await Promise.allSettled([...sessions.values()].map((s) => s.stop()));
    await Promise.all(started.map((x) => x.stop()));
    for (const l of cfg.locks) files?.removeAgent(l);
    await releaseClaims();
    throw err;
  }
  synced = true;

  return await new Promise<number>((resolve) => {
    let stopping = false;
    const shutdown = (signal: string): void => {
      if (stopping) return;
      stopping = true;
      void (async () => {
        if (cfg.sidecar === 'native') {
          // The kubelet stops a native sidecar only after the application's containers exited.
          log.info({ signal }, 'Stopping agent; releasing held locks');
          const results = await Promise.allSettled([...sessions.values()].map((s) => s.release()));
          for (const r of results)
            if (r.status === 'rejected') log.error({ err: r.reason as unknown }, 'Failed to release lock');
        } else {
          await awaitAppRelease(sessions, api, cfg.appStopTimeoutMs, signal, log);
        }
        await Promise.allSettled([...sessions.values()].map((s) => s.stop()));
        await storeSetup.open?.store.close();
        for (const l of cfg.locks) {
          files?.remove(l);
          files?.removeAgent(l);
        }
        await releaseClaims();
        await Promise.all(started.map((x) => x.stop()));
        kube.close();
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
}
