package io.fencepost;

import java.util.function.Consumer;

/**
 * One lock in one store (single Redis, or N Redlock masters): the I/O, knowing nothing of timers.
 * The holding logic (the waiter loop, the watchdog, release) is {@link StoreLock}'s, the same for
 * both (the TypeScript reference: src/stores/store.ts). Every method may throw a RuntimeException
 * on I/O failure (Jedis's, or {@link IllegalStateException} for an answer that makes no sense).
 */
interface StoreBackend {
  /**
   * One attempt: granted (token, validity on the store's clock in ms, whether the counter was
   * missing, whether the token was floored at the Redis server's clock), or refused (held by
   * another owner or not; how long the holder's key has left when Redis said, else -1; why).
   */
  record Attempt(boolean granted, long token, long validUntilMs, boolean counterMissing, boolean clockFloored, boolean held,
      long heldForMs, String reason) {
    static Attempt grant(long token, long validUntilMs, boolean counterMissing, boolean clockFloored) {
      return new Attempt(true, token, validUntilMs, counterMissing, clockFloored, false, -1, "");
    }

    static Attempt refusal(boolean held, long heldForMs, String reason) {
      return new Attempt(false, 0, 0, false, false, held, heldForMs, reason);
    }
  }

  /** Takes the lock for {@code owner} with a TTL, issuing a token above {@code floor} with the grant. */
  Attempt tryAcquire(String owner, long ttlMs, long floor);

  /** Renews; false when the key is not {@code owner}'s any more. No answer throws. */
  boolean renew(String owner, long ttlMs);

  /** Gives the lock up if {@code owner} still holds it, and tells waiters. */
  void release(String owner);

  /**
   * Calls {@code onRelease} with the releasing owner id when the lock is released (on Redlock: once
   * a majority of the masters published that owner's release); waits at most {@code waitMs} for
   * the subscription to be listening; returns the unsubscribe.
   */
  Runnable subscribe(Consumer<String> onRelease, long waitMs) throws InterruptedException;
}
