/**
 * RunCompletions — the run-once record of a Mutex lock (`fencepost exec --run-id`,
 * acquire({ runId }), the agent's `POST …/complete`): a holder records a run completed on the
 * lock's Lease, and anyone asks whether a run id was completed.
 *
 * Why the Lease: every grant is a compare-and-swap on the Lease, made after the previous holder's
 * release (or expiry) — itself a compare-and-swap after the completion. A completion is written
 * in a compare-and-swap that succeeds only while the Lease still names this pod with the run's
 * token, so it is on every later version of the Lease, and a holder granted after it reads it with
 * a direct GET (a quorum read). A report that the controller copies from a pod annotation into
 * status, as before, can reach status after the next holder was granted and looked.
 *
 * Who may write it: only the holder of the run's term (the agent Lease policy lets only the
 * holder's pod write its Lease; the compare-and-swap here checks the holder and the token). The
 * controller copies the entries into status.completedRuns for history (and keeps them when the
 * Lease is re-created); entries whose completedAt is in the future or whose token the Lease never
 * reached are refused by both sides (lease/record.ts completionVerdict).
 */
import type { V1Lease } from '@kubernetes/client-node';
import { GROUP, PLURAL, VERSION, type DistributedLock } from '../api/v1alpha1/distributedlock.ts';
import { acceptedCompletions, completedLease, parseLease } from '../lease/record.ts';
import type { HolderRef } from '../protocol/holder.ts';
import { leaseName } from '../protocol/names.ts';
import type { Clock } from '../runtime/clock.ts';
import { isConflict } from '../runtime/errors.ts';
import type { LeaseClient } from '../runtime/leaderelection.ts';
import type { ApiClient } from '../transport/client.ts';
import { getCustomObject, leaseRequests } from '../transport/resources.ts';
import type { RequestBound } from './mutex-requests.ts';
import { namesTerm } from './session-state.ts';

/**
 * NotRunHolderError: a completion was refused because this pod does not hold the run's term on
 * the Lease (the term ended, or the token is not this pod's). Nothing was written.
 */
export class NotRunHolderError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'NotRunHolderError';
  }
}

/** hasCompletedRun: the lock's status records `runId` as completed (a lock with no status has none). */
export function hasCompletedRun(lock: DistributedLock, runId: string): boolean {
  return (lock.status?.completedRuns ?? []).some((r) => r.runId === runId);
}

/** leaseHasCompletedRun: the Lease records `runId` completed by an entry that counts, judged at `now`. */
export function leaseHasCompletedRun(lease: V1Lease, runId: string, now: Date): boolean {
  return acceptedCompletions(parseLease(lease), now).some((e) => e.runId === runId);
}

/** RunCompletionsOptions are what the reads and the write need; a LockSessionOptions is one. */
export interface RunCompletionsOptions {
  readonly api: ApiClient;
  readonly namespace: string;
  readonly lock: string;
  /** self is this pod incarnation; only its term can complete a run. */
  readonly self: HolderRef;
  /** clock stamps completedAt and judges entries (wall clock). */
  readonly clock: Clock;
  /** leases overrides the Lease client (tests); defaults to one made from api. */
  readonly leases?: LeaseClient;
}

/** MAX_ATTEMPTS bounds the compare-and-swap retries of one completion (each a fresh GET). */
const MAX_ATTEMPTS = 5;

/** RunCompletions records and reads the completed runs of one lock for one pod. */
export class RunCompletions {
  readonly #o: RunCompletionsOptions;
  readonly #leases: LeaseClient;

  constructor(o: RunCompletionsOptions) {
    this.#o = o;
    this.#leases = o.leases ?? leaseRequests<V1Lease>(o.api);
  }

  /**
   * complete records `runId` completed by the term of `token`: a fresh GET of the Lease, then a
   * compare-and-swap of it with the entry appended, made only while the Lease names this pod with
   * `token` (a conflict reads again, at most 5 times). Idempotent for the same run and token.
   * Throws NotRunHolderError when the Lease names another holder, nobody, or another token (then
   * nothing is written); `bound.signal` aborts the requests on the wire.
   */
  async complete(runId: string, token: bigint, bound?: RequestBound): Promise<void> {
    const { namespace, lock, self, clock } = this.#o;
    const name = leaseName(lock);
    const opts = bound?.signal !== undefined ? { signal: bound.signal } : undefined;
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const lease = await this.#leases.get(namespace, name, opts);
      const record = lease !== undefined ? parseLease(lease) : undefined;
      if (lease === undefined || record === undefined || !namesTerm(record, self, token)) {
        const holds =
          record?.holder !== undefined
            ? `the Lease names pod ${record.holder.name} with token ${record.token ?? '?'}`
            : 'nobody holds the Lease';
        throw new NotRunHolderError(
          `lock ${lock}: only the holder of the run's term may complete it; run ${JSON.stringify(runId)} was done with token ${token} by pod ${self.name}, and ${holds}`,
        );
      }
      if (record.completedRuns.some((e) => e.runId === runId && e.token === token)) return; // already recorded
      try {
        await this.#leases.replace(
          namespace,
          name,
          completedLease(lease, { runId, token, holder: self.name, completedAt: clock.now() }),
          opts,
        );
        return;
      } catch (err) {
        if (!isConflict(err)) throw new Error(`Failed to record run ${runId} on Lease ${name}`, { cause: err });
      }
    }
    throw new Error(`Failed to record run ${runId} on Lease ${name}: it kept changing (${MAX_ATTEMPTS} conflicts)`);
  }

  /**
   * runCompleted: whether runId was completed — recorded on the Lease (a direct GET: a quorum
   * read, so a holder granted after the completion always sees it) or in the lock's
   * status.completedRuns (the controller's history, which outlives the Lease's newest 32 and a
   * re-created Lease). A lock or Lease that does not exist records nothing.
   */
  async runCompleted(runId: string, bound?: RequestBound): Promise<boolean> {
    const { namespace, lock, clock } = this.#o;
    const lease = await this.#leases.get(
      namespace,
      leaseName(lock),
      bound?.signal !== undefined ? { signal: bound.signal } : undefined,
    );
    if (lease !== undefined && leaseHasCompletedRun(lease, runId, clock.now())) return true;
    const obj = await getCustomObject<DistributedLock>(
      this.#o.api,
      { group: GROUP, version: VERSION, plural: PLURAL },
      namespace,
      lock,
      bound?.signal !== undefined ? { signal: bound.signal } : undefined,
    );
    return obj !== undefined && hasCompletedRun(obj, runId);
  }
}
