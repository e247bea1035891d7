/**
 * LockEvent is one change of a held term, in order: what the agent's API streams (SSE `granted`,
 * `renewed`, `lost`, `released`), what `acquire()` reports, and what a Redis or Redlock store's
 * hold reports — one shape wherever the term is held, so that an application switching from a
 * Lease to a store (or reading the agent's stream) handles the same four events.
 */
export interface LockEvent {
  readonly type: 'granted' | 'renewed' | 'lost' | 'released';
  readonly lock: string;
  /** token: the term's fencing token (decimal string: it may exceed 2^53). */
  readonly token: string;
  readonly reason?: string;
  /** expiresInMs: for granted/renewed, the new time left. */
  readonly expiresInMs?: number;
}
