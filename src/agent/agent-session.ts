/**
 * AgentSession — what the agent's HTTP API, the run-once logic and the `fencepost agent` command
 * need of one lock's session, whatever holds the lock: a LockSession (session.ts, a Lease granted
 * by the controller) or a StoreLockSession (store-session.ts, spec.store Redis or Redlock, held
 * in the store by this agent itself). The app sees the same API, events and state file for both.
 */
import type { HolderRef } from '../protocol/holder.ts';
import type { RequestBound } from './mutex-requests.ts';
import type { HandoverNotice, LockEvent, LockSnapshot } from './session.ts';

export interface AgentSession {
  /** start begins watching (Lease) or contending (a store lock in Election mode); resolves once ready. */
  start(): Promise<void>;
  /** stop ends the session without releasing (a Lease expires on the server, a store key by its TTL). */
  stop(): Promise<void>;
  snapshot(): LockSnapshot;
  heldToken(): bigint | undefined;
  /** otherHolder: another pod that holds the lock, when known. */
  otherHolder(): HolderRef | undefined;
  /** otherPermitHolders: for a Semaphore of `permits` permits, the other pods its permit Leases name. */
  otherPermitHolders(permits: number): HolderRef[];
  onEvent(listener: (e: LockEvent) => void): () => void;
  onHandover(listener: (e: HandoverNotice) => void): () => void;
  onHolderChange(listener: (holder: HolderRef | undefined) => void): () => void;
  /** request asks for the lock (Mutex mode), with a run id or none. */
  request(runId?: string): Promise<void>;
  withdraw(bound?: RequestBound): Promise<void>;
  release(bound?: RequestBound): Promise<void>;
  runCompleted(runId: string): Promise<boolean>;
  complete(runId: string, bound?: RequestBound, token?: bigint): Promise<void>;
  drained(bound?: RequestBound): Promise<boolean>;
}
