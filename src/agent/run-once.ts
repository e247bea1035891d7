/**
 * Run once per run id (Mutex mode): the gate shared by `acquire()` (and so `fencepost exec
 * --run-id`) and the agent's HTTP API (`POST /v1/locks/NAME/acquire?runId=ID`), so that both ask
 * the same questions in the same order:
 *
 *   1. a run id the lock's status already records as completed is refused at once (nothing is
 *      requested);
 *   2. otherwise the pod requests the lock with the run id and waits for the grant;
 *   3. once granted, the status is read again: a holder may have completed the run while this pod
 *      waited in the queue. Then the request is withdrawn and the term released, so the next pod
 *      in the queue is granted at once, and the run is refused.
 *
 * A holder reports the run completed with LockSession.complete (a pod annotation the controller
 * records in status.completedRuns) before it releases.
 */
import type { LockSession } from './session.ts';

/** AlreadyDoneError: the run id was already reported completed by some holder. */
export class AlreadyDoneError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AlreadyDoneError';
  }
}

/**
 * requestRun requests the lock for a run (runId undefined: an ordinary request) and waits with
 * waitGranted (true: the session holds the lock; false: not granted in time). Resolves to what
 * waitGranted said; throws AlreadyDoneError when the run id was completed before the request or
 * while this pod waited (released again, see the header); the session's own errors pass through.
 */
export async function requestRun(
  session: LockSession,
  lock: string,
  runId: string | undefined,
  waitGranted: () => Promise<boolean>,
): Promise<boolean> {
  if (runId !== undefined && (await session.runCompleted(runId))) {
    throw new AlreadyDoneError(`lock ${lock}: run ${JSON.stringify(runId)} was already completed`);
  }
  await session.request(runId);
  const held = await waitGranted();
  if (held && runId !== undefined && (await session.runCompleted(runId))) {
    await session.withdraw(); // first, so that a Mutex lock is not granted back to this pod
    await session.release();
    throw new AlreadyDoneError(`lock ${lock}: run ${JSON.stringify(runId)} was completed while this pod waited`);
  }
  return held;
}
