/**
 * runExec: `fencepost exec` as a real child process (the shipped binary, agentBinary()), with a
 * pod's downward-API identity, for the integration tests of exec.
 */
import { execFile } from 'node:child_process';
import { agentBinary } from './agent-binary.ts';
import { sharedKubeconfigPath } from './env.ts';

/** ExecRun is how a run of exec ended: its exit code (null when killed by a signal) and output. */
export interface ExecRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** ExecPod is the pod incarnation exec runs as (POD_NAME, POD_UID). */
export interface ExecPod {
  readonly name: string;
  readonly uid: string;
}

/**
 * runExec runs `fencepost exec --kubeconfig K ARGS` as `pod` in `namespace` and resolves when it
 * exits. kubeconfig: the shared admin kubeconfig unless given. The timeout only catches hangs.
 */
export function runExec(o: {
  readonly namespace: string;
  readonly pod: ExecPod;
  readonly args: readonly string[];
  readonly kubeconfig?: string;
  readonly timeoutMs?: number;
}): Promise<ExecRun> {
  return new Promise((done) => {
    execFile(
      agentBinary(),
      ['exec', '--kubeconfig', o.kubeconfig ?? sharedKubeconfigPath(), ...o.args],
      {
        env: { ...process.env, POD_NAME: o.pod.name, POD_NAMESPACE: o.namespace, POD_UID: o.pod.uid },
        timeout: o.timeoutMs ?? 90_000,
      },
      (err, stdout, stderr) => {
        done({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : null, stdout, stderr });
      },
    );
  });
}
