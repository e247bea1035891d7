/**
 * Agent sidecars as real child processes for integration tests: start one for a pod (directly or
 * through a kubeconfig that points at a fault proxy), read its lock snapshot, and time the first
 * SSE event of a type.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import type { LockSnapshot } from '../../src/agent/session.ts';
import { agentBinary } from './agent-binary.ts';
import { eventually, sharedKubeconfigPath } from './env.ts';
import { getStatus } from './testbed/http-probe.ts';
import { freePort } from './testbed/ports.ts';
import { spawnManaged, type ManagedProcess } from './testbed/processes.ts';

/** AgentProcess is one running `fencepost agent`. */
export interface AgentProcess {
  readonly port: number;
  readonly metricsPort: number;
  readonly process: ManagedProcess;
  snapshot(): Promise<LockSnapshot>;
}

/** startAgent runs `fencepost agent --lock LOCK` as pod `pod`, and waits until it is ready. */
export async function startAgent(o: {
  readonly lock: string;
  readonly pod: string;
  readonly uid: string;
  readonly namespace: string;
  readonly kubeconfig: string;
  readonly logDir: string;
  /** args: more flags (e.g. --state-dir). */
  readonly args?: readonly string[];
  /** env: more environment variables (e.g. an LD_PRELOAD shim). */
  readonly env?: Readonly<Record<string, string>>;
}): Promise<AgentProcess> {
  const port = await freePort();
  const metricsPort = await freePort();
  const proc = spawnManaged(`agent-${o.pod}`, agentBinary(), {
    args: [
      'agent',
      '--lock',
      o.lock,
      '--listen',
      `127.0.0.1:${port}`,
      '--kubeconfig',
      o.kubeconfig,
      '--health-probe-bind-address=0',
      `--metrics-bind-address=127.0.0.1:${metricsPort}`,
      ...(o.args ?? []),
    ],
    logFile: join(o.logDir, `${o.pod}.log`),
    env: { ...process.env, ...o.env, POD_NAME: o.pod, POD_NAMESPACE: o.namespace, POD_UID: o.uid },
  });
  await eventually(async () => {
    expect((await getStatus(`http://127.0.0.1:${port}/readyz`)).status).toBe(200);
  }, 30_000);
  return {
    port,
    metricsPort,
    process: proc,
    snapshot: async () =>
      JSON.parse((await getStatus(`http://127.0.0.1:${port}/v1/locks/${o.lock}`)).body) as LockSnapshot,
  };
}

/** AgentFleet starts agents for pods of one namespace on the shared admin kubeconfig, and stops them all. */
export interface AgentFleet {
  /** start runs an agent for `lock` as pod `pod` (uid `uid`), logging under the fleet's directory. */
  start(lock: string, pod: string, uid: string): Promise<AgentProcess>;
  /** stopAll stops every agent the fleet started and removes its log directory. */
  stopAll(): Promise<void>;
}

/** agentFleet makes an {@link AgentFleet} for `namespace`; its logs go to a fresh temporary directory. */
export function agentFleet(namespace: string, name: string): AgentFleet {
  const logDir = mkdtempSync(join(tmpdir(), `fencepost-${name}-`));
  const agents: AgentProcess[] = [];
  return {
    start: async (lock, pod, uid) => {
      const a = await startAgent({ lock, pod, uid, namespace, kubeconfig: sharedKubeconfigPath(), logDir });
      agents.push(a);
      return a;
    },
    stopAll: async () => {
      await Promise.all(agents.map((a) => a.process.stop()));
      rmSync(logDir, { recursive: true, force: true });
    },
  };
}

/** firstEvent resolves with the performance.now() time of the first SSE event of that type. */
export function firstEvent(port: number, lock: string, type: string): { at: Promise<number>; stop: () => void } {
  let stop = (): void => undefined;
  const at = new Promise<number>((resolveAt) => {
    const req = request(`http://127.0.0.1:${port}/v1/locks/${lock}/events`, (res) => {
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        if (chunk.includes(`event: ${type}\n`)) resolveAt(performance.now());
      });
    });
    req.on('error', () => undefined);
    req.end();
    stop = () => {
      req.destroy();
    };
  });
  return {
    at,
    stop: () => {
      stop();
    },
  };
}
