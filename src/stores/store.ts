/**
 * The interface between a lock store's I/O (one Redis, N Redlock masters) and the holding logic
 * every store shares (stores/hold.ts: the waiter loop, the watchdog, release). A backend speaks
 * for one lock and knows nothing of timers; the hold knows nothing of Redis.
 */

/**
 * Grant is an attempt that took the lock. Its validity is the hold's to reckon (stores/hold.ts),
 * from when it sent the request, on its own clock.
 */
export interface Grant {
  readonly granted: true;
  readonly token: bigint;
  /**
   * counterMissing: the fencing counter did not exist before this grant (on Redlock: on none of
   * the majority), so the token restarted from the floor. A new lock's first grant, or Redis lost
   * its data; the store cannot tell which without a high-water mark elsewhere (docs/stores.md).
   */
  readonly counterMissing: boolean;
  /**
   * clockFloored: the token was floored at the Redis server's clock in microseconds, because the
   * process issuing it is not the one that issued the last (a new or lost counter, a failover, a
   * restart, a moved slot: fence-next.lua fence_epoch; on Redlock, on any master of the majority).
   */
  readonly clockFloored: boolean;
}

/** Refusal is an attempt that did not take the lock. */
export interface Refusal {
  readonly granted: false;
  /** held: another owner holds the lock (false: too few masters answered, Redis down, validity spent). */
  readonly held: boolean;
  /** heldForMs: how long the holder's key has left, when Redis said. */
  readonly heldForMs?: number;
  readonly reason: string;
}

export type Attempt = Grant | Refusal;

/** RenewAnswer: renewed, or the key is not this owner's any more. A failure to get an answer throws. */
export type RenewAnswer = 'renewed' | 'notOwner';

/** LockBackend is one lock in one store. Every method may throw on I/O failure. */
export interface LockBackend {
  /** tryAcquire takes the lock for `owner` with a TTL, issuing a token above `floor` with the grant. */
  tryAcquire(owner: string, ttlMs: number, floor: bigint): Promise<Attempt>;
  renew(owner: string, ttlMs: number): Promise<RenewAnswer>;
  /** release gives the lock up if `owner` still holds it, and tells waiters. */
  release(owner: string): Promise<void>;
  /**
   * subscribe calls `onRelease` with the releasing owner id when the lock is released (on Redlock:
   * once a majority of masters published that owner's release); resolves once listening; returns
   * the unsubscribe.
   */
  subscribe(onRelease: (owner: string) => void): Promise<() => void>;
}

/** LockStore opens backends for locks; one store shares its connections between them. */
export interface LockStore {
  readonly kind: 'redis' | 'redlock';
  /** display: the store's URL with the password redacted. */
  readonly display: string;
  lock(namespace: string, name: string): LockBackend;
  close(): Promise<void>;
}

/** Script is a Lua script bound to a client: EVALSHA, re-sent with EVAL after NOSCRIPT; rejects on I/O failure. */
export type Script = (keys: readonly string[], args: readonly string[]) => Promise<unknown>;
