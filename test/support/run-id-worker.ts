/**
 * One pod of a run-id fleet, as a real process: it goes through the run ids in order and tries
 * each once with `acquire(lock, { runId })`, as `fencepost exec --run-id` does — granted: it
 * "runs" (sleeps a random while), reports the run completed, releases; refused as already done:
 * it moves on. Every step is one line appended to the shared log (O_APPEND, one write per line, so
 * the lines of several processes never interleave):
 *
 *   ran <runId> <pod> <token> <wall ms>          the run started (the lock was held)
 *   completed <runId> <pod> <token> <wall ms>    complete() succeeded
 *   complete-failed <runId> <pod> <token> <message>
 *   skipped <runId> <pod> <reason>               AlreadyDoneError (before or after the grant)
 *   error <runId> <pod> <message>                anything else (the run id is tried again)
 *   finished <pod>                               after the last run id
 *
 * Usage (argv[2] is one JSON object, see WorkerArgs):
 *   node test/support/run-id-worker.ts '{"kubeconfig":…,"namespace":…,"lock":…,"pod":{…},…}'
 */
import { appendFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { acquire, AlreadyDoneError } from '../../src/index.ts';

/** WorkerArgs: what one fleet pod needs. */
export interface RunIdWorkerArgs {
  readonly kubeconfig: string;
  readonly namespace: string;
  readonly lock: string;
  readonly pod: { readonly name: string; readonly uid: string };
  readonly runIds: readonly string[];
  readonly log: string;
  /** runMs: how long a run lasts, drawn uniformly from [min, max]. */
  readonly runMs: readonly [number, number];
  /** waitMs: acquire's wait for one run id (then it is tried again). */
  readonly waitMs: number;
  /** attempts: how many times one run id is tried after errors before giving up on it. */
  readonly attempts: number;
}

const args = JSON.parse(process.argv[2] ?? '{}') as RunIdWorkerArgs;
const line = (text: string): void => {
  appendFileSync(args.log, `${text}\n`);
};
const oneLine = (err: unknown): string => (err instanceof Error ? err.message : String(err)).replace(/\s+/g, ' ');

for (const runId of args.runIds) {
  for (let attempt = 0; attempt < args.attempts; attempt++) {
    try {
      const lock = await acquire(args.lock, {
        kubeconfig: args.kubeconfig,
        namespace: args.namespace,
        pod: args.pod,
        runId,
        waitMs: args.waitMs,
      });
      const token = lock.token.toString();
      try {
        line(`ran ${runId} ${args.pod.name} ${token} ${Date.now()}`);
        const [min, max] = args.runMs;
        await sleep(min + Math.random() * (max - min));
        try {
          await lock.complete({ timeoutMs: 10_000 });
          line(`completed ${runId} ${args.pod.name} ${token} ${Date.now()}`);
        } catch (err) {
          line(`complete-failed ${runId} ${args.pod.name} ${token} ${oneLine(err)}`);
        }
      } finally {
        await lock.release({ timeoutMs: 10_000 }).catch(() => undefined);
      }
      break;
    } catch (err) {
      if (err instanceof AlreadyDoneError) {
        line(
          `skipped ${runId} ${args.pod.name} ${/while this pod waited/.test(err.message) ? 'after-grant' : 'before'}`,
        );
        break;
      }
      line(`error ${runId} ${args.pod.name} ${oneLine(err)}`);
    }
  }
}
line(`finished ${args.pod.name}`);
