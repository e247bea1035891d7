/** The state file that `npm run testbed:up` writes and the other testbed commands read. */
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

/** TESTBED_DIR holds the person-facing testbed's data, logs, certificates and state (git-ignored). */
export const TESTBED_DIR = resolve(import.meta.dirname, '../../.testbed');

/** TestbedState describes a running testbed. */
export interface TestbedState {
  readonly pid: number;
  readonly kubeconfig: string;
  readonly apiServer: string;
  readonly redisUrl: string;
  readonly assets: string;
  /** nodes are kwok's fake nodes (testbed:up --with-nodes); absent or empty without them. */
  readonly nodes?: readonly string[];
  /** registry is the OCI registry's host:port (testbed:up --with-registry); absent without it. */
  readonly registry?: string;
  readonly startedAt: string;
}

/** readState returns the running testbed's state, or undefined when none is running. */
export function readState(): TestbedState | undefined {
  const file = join(TESTBED_DIR, 'state.json');
  if (!existsSync(file)) return undefined;
  const state = JSON.parse(readFileSync(file, 'utf8')) as TestbedState;
  try {
    process.kill(state.pid, 0);
    return state;
  } catch {
    return undefined;
  }
}
