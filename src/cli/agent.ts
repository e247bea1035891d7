/**
 * `fencepost agent` — the sidecar: one LockSession per --lock, the local HTTP API, state files,
 * metrics, a `LockLost` Event on its pod at every step-down, and on SIGTERM a release of
 * everything held (so the next candidate is granted at once) before exiting.
 */
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { stateFiles } from '../agent/state-file.ts';
import { serveAgentApi } from '../agent/http-api.ts';
import { LockSession } from '../agent/session.ts';
import { parseAgentConfig } from '../config/agent.ts';
import { eventRecorder } from '../kube/events.ts';
import { parseBindAddress } from '../observability/http.ts';
import { createLogger } from '../observability/logger.ts';
import { realClock } from '../runtime/clock.ts';
import { loadKubeConfig } from './kubeconfig.ts';

/** runAgent runs until SIGTERM/SIGINT; returns the exit code. */
export async function runAgent(argv: readonly string[]): Promise<number> {
  const cfg = parseAgentConfig(argv);
  const log = createLogger(cfg.logLevel, { component: 'agent', pod: cfg.podName });
  const kc = loadKubeConfig(cfg.kubeconfig);
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'fencepost_agent_' });
  const held = new Gauge({ name: 'fencepost_agent_lock_held', help: '1 while this agent validly holds the lock.', labelNames: ['lock'], registers: [registry] });
  const lockEvents = new Counter({ name: 'fencepost_agent_lock_events_total', help: 'Lock events (granted, renewed, lost, released).', labelNames: ['lock', 'type'], registers: [registry] });
  const files = cfg.stateDir !== undefined ? stateFiles(cfg.stateDir) : undefined;
  // A step-down is usually caused by an unreachable API server, so its Event is retried (about
  // two minutes in all) until the API server takes it.
  const events = eventRecorder(kc, 'fencepost-agent', cfg.podName, log, { attempts: 12, firstDelayMs: 500, maxDelayMs: 15_000, clock: realClock });
  const self = { apiVersion: 'v1', kind: 'Pod', namespace: cfg.podNamespace, name: cfg.podName, uid: cfg.podUid };
  const sessions = new Map<string, LockSession>();
  for (const lock of cfg.locks) {
    const s = new LockSession({ kc, namespace: cfg.podNamespace, lock, self: { name: cfg.podName, uid: cfg.podUid }, clock: realClock, log });
    s.onEvent((e) => {
      lockEvents.inc({ lock, type: e.type });
      if (e.type === 'lost') events.emit(self, 'Warning', 'LockLost', `Stepped down from lock ${lock} (fencing token ${e.token}): ${e.reason ?? 'lost'}`);
      const isHeld = e.type === 'granted' || e.type === 'renewed';
      held.set({ lock }, isHeld ? 1 : 0);
      if (files !== undefined) { if (isHeld) files.write(s.snapshot()); else files.remove(lock); }
    });
    sessions.set(lock, s);
  }
  let synced = false;
  const { host, port } = parseBindAddress(cfg.listen, '--listen');
  const api = await serveAgentApi(host, port, sessions, { registry, ready: () => synced });
  log.info({ listen: api.address, locks: cfg.locks }, 'Started agent');
  await Promise.all([...sessions.values()].map((s) => s.start()));
  synced = true;

  return await new Promise<number>((resolve) => {
    let stopping = false;
    const shutdown = (signal: string): void => {
      if (stopping) return;
      stopping = true;
      log.info({ signal }, 'Stopping agent; releasing held locks');
      void (async () => {
        const results = await Promise.allSettled([...sessions.values()].map((s) => s.release()));
        for (const r of results) if (r.status === 'rejected') log.error({ err: r.reason as unknown }, 'Failed to release lock');
        await Promise.allSettled([...sessions.values()].map((s) => s.stop()));
        for (const l of cfg.locks) files?.remove(l);
        await api.stop();
        resolve(0);
      })();
    };
    process.once('SIGTERM', () => { shutdown('SIGTERM'); });
    process.once('SIGINT', () => { shutdown('SIGINT'); });
  });
}
