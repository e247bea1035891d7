/**
 * A fleet pod of the `run-id-fleet` fault type (run-id-fleet.ts), as a long-lived process reused
 * from trial to trial: it reads one JSON command per line on stdin and, for each, goes through the
 * trial's run ids in order as one pod, the way `fencepost exec --run-id` does — `acquire(lock,
 * { runId })`, run (sleep), `complete()`, `release()` — printing one JSON event per step on stdout:
 * `ran`, `completed`, `complete-failed`, `skipped`, `error`, `finished` (see FleetEvent).
 *
 * Calibration (`recheck: false`): the run-once gate without its check after the grant — the pod
 * looks once before it asks (Lease and status), is granted without a run id, runs, and records the
 * run completed all the same. That is the check a later holder missed before it was added (the
 * completion reached status after the next grant), so the checker must catch it.
 *
 * Usage: node test/safety/faults/run-id-fleet-worker.ts --kubeconfig FILE
 */
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { RunCompletions } from '../../../src/agent/run-completions.ts';
import { acquire, AlreadyDoneError, type HeldLock } from '../../../src/index.ts';
import { connect } from '../../../src/transport/connect.ts';
import { realClock } from '../../../src/runtime/clock.ts';

/** FleetCommand: one trial's run ids for one pod. */
export interface FleetCommand {
  readonly trial: string;
  readonly namespace: string;
  readonly lock: string;
  readonly pod: { readonly name: string; readonly uid: string };
  readonly runIds: readonly string[];
  /** runMs: a run lasts U[min, max] ms. */
  readonly runMs: readonly [number, number];
  readonly waitMs: number;
  readonly attempts: number;
  /** recheck: false for the calibration (no check after the grant). */
  readonly recheck: boolean;
}

/** FleetEvent: one line of a fleet worker's stdout. */
export interface FleetEvent {
  readonly trial: string;
  readonly kind: 'ready' | 'ran' | 'completed' | 'complete-failed' | 'skipped' | 'error' | 'finished';
  readonly pod: string;
  readonly runId?: string;
  readonly token?: string;
  readonly detail?: string;
}

const { values } = parseArgs({ options: { kubeconfig: { type: 'string' } } });
const api = connect(values.kubeconfig);
const emit = (e: FleetEvent): void => {
  process.stdout.write(`${JSON.stringify(e)}\n`);
};
const oneLine = (err: unknown): string => (err instanceof Error ? err.message : String(err)).replace(/\s+/g, ' ');

/** acquireFor is the gate (recheck) or the calibration's gate without its post-grant check. */
async function acquireFor(c: FleetCommand, runId: string): Promise<HeldLock> {
  const opts = { kubeconfig: api, namespace: c.namespace, pod: c.pod, waitMs: c.waitMs };
  if (c.recheck) return acquire(c.lock, { ...opts, runId });
  const runs = new RunCompletions({ api, namespace: c.namespace, lock: c.lock, self: c.pod, clock: realClock });
  if (await runs.runCompleted(runId)) throw new AlreadyDoneError(`run ${runId} was already completed`);
  return acquire(c.lock, opts);
}

async function complete(c: FleetCommand, runId: string, lock: HeldLock): Promise<void> {
  if (c.recheck) {
    await lock.complete({ timeoutMs: 10_000 });
    return;
  }
  const runs = new RunCompletions({ api, namespace: c.namespace, lock: c.lock, self: c.pod, clock: realClock });
  await runs.complete(runId, lock.token, { signal: AbortSignal.timeout(10_000) });
}

async function run(c: FleetCommand): Promise<void> {
  const base = { trial: c.trial, pod: c.pod.name };
  for (const runId of c.runIds) {
    for (let attempt = 0; attempt < c.attempts; attempt++) {
      try {
        const lock = await acquireFor(c, runId);
        const token = lock.token.toString();
        try {
          emit({ ...base, kind: 'ran', runId, token });
          const [min, max] = c.runMs;
          await sleep(min + Math.random() * (max - min));
          try {
            await complete(c, runId, lock);
            emit({ ...base, kind: 'completed', runId, token });
          } catch (err) {
            emit({ ...base, kind: 'complete-failed', runId, token, detail: oneLine(err) });
          }
        } finally {
          await lock.release({ timeoutMs: 10_000 }).catch(() => undefined);
        }
        break;
      } catch (err) {
        if (err instanceof AlreadyDoneError) {
          emit({ ...base, kind: 'skipped', runId });
          break;
        }
        emit({ ...base, kind: 'error', runId, detail: oneLine(err) });
      }
    }
  }
  emit({ ...base, kind: 'finished' });
}

let queue = Promise.resolve();
createInterface({ input: process.stdin }).on('line', (line) => {
  let c: FleetCommand;
  try {
    c = JSON.parse(line) as FleetCommand;
  } catch {
    return;
  }
  queue = queue.then(() => run(c));
});
process.stdin.on('end', () => {
  void queue.then(() => process.exit(0));
});
emit({ trial: '', kind: 'ready', pod: '' });
