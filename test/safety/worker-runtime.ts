/**
 * The runtime the safety workers run on. A worker is a candidate pod's lock session (the code the
 * agent sidecar, `fencepost-agent exec` and `acquire()` share) plus its application loop; it runs
 * on the runtime the shipped agent runs on — the Bun that hack/build-agent.ts compiles the agent
 * with, the devDependency's own, running the same TypeScript sources — so the suite and the soak
 * try the session under the runtime pods run it with. `SAFETY_WORKER_RUNTIME=node` runs the workers
 * on Node instead (the runtime of an application that calls `acquire()`).
 */
import { bunPath } from '../../hack/build-agent.ts';

/** WorkerRuntime is what runs the worker scripts. */
export type WorkerRuntime = 'bun' | 'node';

/** workerRuntime reads SAFETY_WORKER_RUNTIME (default bun); anything else is an error naming it. */
export function workerRuntime(env: NodeJS.ProcessEnv = process.env): WorkerRuntime {
  const v = env['SAFETY_WORKER_RUNTIME'] ?? 'bun';
  if (v !== 'bun' && v !== 'node')
    throw new Error(`SAFETY_WORKER_RUNTIME: must be bun or node, got ${JSON.stringify(v)}`);
  return v;
}

/** workerExecutable is the program that runs a worker script (`<it> script.ts args…`). */
export function workerExecutable(runtime: WorkerRuntime = workerRuntime()): string {
  return runtime === 'bun' ? bunPath() : process.execPath;
}
