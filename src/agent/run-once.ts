/**
 * Run once per run id (Mutex mode): the gate shared by `acquire()` (and so `fencepost exec
 * --run-id`) and the agent's HTTP API (`POST /v1/locks/NAME/acquire?runId=ID`), so that both ask
 * the same questions in the same order:
 *
 *   1. a run id already recorded completed (on the Lease or in status) is refused at once
 *      (nothing is requested);
 *   2. otherwise the pod requests the lock with the run id and waits for the grant;
 *   3. once granted, the Lease and the status are read again: a holder may have completed the
 *      run while this pod waited in the queue. Then the request is withdrawn and the term released, so the next pod
 *      in the queue is granted at once, and the run is refused.
 *
 * "Completed" is read from the lock's Lease with a direct GET, and from status.completedRuns (the
 * controller's history). A holder records the run completed with LockSession.complete before it
 * releases: a compare-and-swap on the Lease made while the Lease still names it with the run's
 * token. Every later grant is a compare-and-swap on a later version of the Lease, so the check in
 * step 3 of any holder granted after the completion sees it (run-completions.ts).
 */
import type { AgentSession } from './agent-session.ts';

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
  session: AgentSession,
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
