/**
 * StoreLockSession — the agent's session for a lock with spec.store Redis or Redlock: the agent
 * takes, renews and releases it in the store itself (stores/hold.ts: SET NX PX with the token, the
 * watchdog every ttl/3 while held, compare-and-delete on release, pub/sub wake-ups for waiters),
 * and the controller only observes it (docs/stores.md, "In a cluster"). To the app it is the same
 * as a Lease lock: the HTTP API, the event stream and the state file (AgentSession).
 *
 * When it contends: in Election mode from the start, for ever (every candidate pod's agent is a
 * waiter; the first to take the key holds it) — again after a loss at once, and after a release by
 * the app only after a third of the TTL, so that a waiter woken by the release takes it first. In
 * Mutex mode only between a request (POST …/acquire) and its withdrawal or a release.
 *
 * Owner ids name this pod (stores/owner.ts), which is how the controller shows it as the holder.
 * What a store lock has not: run ids and completions (recorded on a Lease), planned handovers,
 * and knowing which other pod holds the lock (`otherHolder` is always undefined).
 */
import type { Logger } from '../observability/logger.ts';
import type { HolderRef } from '../protocol/holder.ts';
import type { TimerClock } from '../runtime/clock.ts';
import type { holdLock, StoreHold } from '../stores/hold.ts';
import type { LockStore } from '../stores/store.ts';
import type { AgentSession } from './agent-session.ts';
import type { RequestBound } from './mutex-requests.ts';
import { NotRunHolderError } from './run-completions.ts';
import type { HandoverNotice, LockEvent, LockSnapshot, LockState } from './session.ts';

/** StoreLockSessionOptions configures a session. */
export interface StoreLockSessionOptions {
  readonly lock: string;
  readonly namespace: string;
  readonly self: HolderRef;
  readonly mode: 'Election' | 'Mutex';
  readonly ttlMs: number;
  readonly store: LockStore;
  /** stores: holdLock of the entry's stores (client/store-loader.ts: ioredis on Node, Bun's client in the compiled agent). */
  readonly stores: { readonly holdLock: typeof holdLock };
  readonly clock: TimerClock;
  readonly log: Logger;
}

/** RUN_IDS_NEED_A_LEASE: why a run id is refused on a store lock. */
const RUN_IDS_NEED_A_LEASE = 'run ids are recorded on a Kubernetes Lease: not with spec.store Redis or Redlock';

export class StoreLockSession implements AgentSession {
  readonly #o: StoreLockSessionOptions;
  readonly #listeners = new Set<(e: LockEvent) => void>();
  #hold: StoreHold | undefined;
  #state: LockState = 'waiting';
  /** #wanted: the session should contend (Election: always; Mutex: while a request stands). */
  #wanted: boolean;
  /** #waiting: the contend loop in flight, and how to stop it. */
  #waiting: { readonly abort: AbortController; readonly done: Promise<void> } | undefined;
  #stopped = false;
  #retry: { cancel(): void } | undefined;

  constructor(o: StoreLockSessionOptions) {
    this.#o = o;
    this.#wanted = o.mode === 'Election';
  }

  start(): Promise<void> {
    if (this.#wanted) this.#contend();
    return Promise.resolve();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#retry?.cancel();
    this.#waiting?.abort.abort(new Error('stopped'));
    await this.#waiting?.done;
    this.#state = 'stopped';
  }

  snapshot(): LockSnapshot {
    const held = this.heldToken();
    return {
      lock: this.#o.lock,
      held: held !== undefined,
      token: held?.toString(),
      holder: held !== undefined ? this.#o.self.name : undefined,
      expiresInMs: held !== undefined ? this.#hold?.validForMs() : undefined,
      state: held === undefined && this.#state === 'held' ? 'lost' : this.#state,
    };
  }

  heldToken(): bigint | undefined {
    const h = this.#hold;
    return h !== undefined && h.isHeld() ? h.token : undefined;
  }

  otherHolder(): HolderRef | undefined {
    return undefined;
  }
  /** otherPermitHolders: a store lock is never a Semaphore (the CRD refuses one), so none. */
  otherPermitHolders(): HolderRef[] {
    return [];
  }

  onEvent(listener: (e: LockEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }

  onHandover(_listener: (e: HandoverNotice) => void): () => void {
    return () => undefined; // no planned handovers for store locks
  }

  onHolderChange(_listener: (holder: HolderRef | undefined) => void): () => void {
    return () => undefined; // the store tells no one but the holder who holds it
  }

  request(runId?: string): Promise<void> {
    if (runId !== undefined) return Promise.reject(new Error(`lock ${this.#o.lock}: ${RUN_IDS_NEED_A_LEASE}`));
    this.#wanted = true;
    if (this.heldToken() === undefined) this.#contend();
    return Promise.resolve();
  }

  async withdraw(_bound?: RequestBound): Promise<void> {
    if (this.#o.mode !== 'Mutex') return;
    this.#wanted = false;
    this.#waiting?.abort.abort(new Error('withdrawn'));
    await this.#waiting?.done;
  }

  async release(_bound?: RequestBound): Promise<void> {
    if (this.#o.mode === 'Mutex') this.#wanted = false;
    const h = this.#hold;
    if (h === undefined) return;
    await h.release();
    // Election: a candidate still, but after a third of the TTL, so that a waiter woken by the
    // release takes the lock before this pod's own retry.
    if (this.#wanted && !this.#stopped) this.#contendLater(Math.floor(this.#o.ttlMs / 3));
  }

  runCompleted(_runId: string): Promise<boolean> {
    return Promise.resolve(false);
  }

  complete(_runId: string): Promise<void> {
    return Promise.reject(new NotRunHolderError(`lock ${this.#o.lock}: ${RUN_IDS_NEED_A_LEASE}`));
  }

  drained(): Promise<boolean> {
    return Promise.resolve(false);
  }

  #emit(e: LockEvent): void {
    for (const l of [...this.#listeners]) l(e);
  }

  #contendLater(ms: number): void {
    this.#retry?.cancel();
    const t = this.#o.clock.setTimeout(() => {
      this.#retry = undefined;
      if (this.#wanted && !this.#stopped) this.#contend();
    }, ms);
    this.#retry = t;
  }

  /** #contend starts the waiter loop unless one runs or the lock is held. */
  #contend(): void {
    if (this.#waiting !== undefined || this.#stopped || this.heldToken() !== undefined) return;
    const abort = new AbortController();
    this.#state = 'waiting';
    const done = (async () => {
      const r = await this.#o.stores.holdLock(this.#o.store.lock(this.#o.namespace, this.#o.lock), {
        lock: this.#o.lock,
        ttlMs: this.#o.ttlMs,
        clock: this.#o.clock,
        log: this.#o.log,
        signal: abort.signal,
        ifHeld: 'wait',
        floor: () => 0n,
        holderPod: this.#o.self,
      });
      this.#waiting = undefined;
      if (r.kind !== 'held') return;
      const hold = r.hold;
      if (!this.#wanted || this.#stopped) {
        await hold.release(); // withdrawn or stopped while the grant was in flight: hand it back
        return;
      }
      this.#hold = hold;
      this.#state = 'held';
      hold.onEvent((e) => {
        if (e.type === 'lost') this.#state = 'lost';
        if (e.type === 'released') this.#state = 'released';
        this.#emit({ ...e, lock: this.#o.lock });
        // A loss in Election mode: a candidate again at once (the key is gone or another's).
        if (e.type === 'lost' && this.#wanted && !this.#stopped) this.#contendLater(0);
      });
      // The validity the hold has left, counted from when its acquire was sent (not a whole TTL
      // from now: the reply took time to come).
      this.#emit({ type: 'granted', lock: this.#o.lock, token: hold.token.toString(), expiresInMs: hold.validForMs() });
    })().catch((err: unknown) => {
      this.#waiting = undefined;
      this.#o.log.warn({ lock: this.#o.lock, err }, 'Store lock contention failed; trying again');
      if (this.#wanted && !this.#stopped) this.#contendLater(1000);
    });
    this.#waiting = { abort, done };
  }
}
