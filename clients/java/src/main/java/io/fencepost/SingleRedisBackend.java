package io.fencepost;

import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * One lock on the single Redis: a grant is one script (SET NX PX and the token together:
 * store-acquire.lua after fence-next.lua), a renew a compare-and-PEXPIRE, a release a
 * compare-and-DEL that publishes on the lock's channel (the TypeScript reference:
 * src/stores/redis/backend.ts).
 */
final class SingleRedisBackend implements StoreBackend {
  private final RedisMaster redis;
  private final StoreKeys keys;
  private final StoreClock clock;

  SingleRedisBackend(RedisMaster redis, StoreKeys keys, StoreClock clock) {
    this.redis = redis;
    this.keys = keys;
    this.clock = clock;
  }

  @Override
  public Attempt tryAcquire(String owner, long ttlMs, long floor) {
    // Before the request: the key's TTL starts no earlier than this.
    long sentAt = clock.nowMs();
    Object reply = redis.run(StoreScripts.ACQUIRE, List.of(keys.holder(), keys.counter(), keys.epoch()),
        List.of(owner, Long.toString(ttlMs), Long.toString(floor)));
    if (!(reply instanceof List<?> l) || l.size() < 2) {
      throw new IllegalStateException(redis.name + ": unexpected reply to the acquire script: " + reply);
    }
    if (!Long.valueOf(1).equals(l.get(0))) {
      long pttl = l.get(1) instanceof Long p && p >= 0 ? p : -1;
      return Attempt.refusal(true, pttl, "held by another owner in " + redis.name);
    }
    // {1, token, refloored, hadTtl, existed, epochChanged} (store-acquire.lua).
    if (l.size() < 6 || !(l.get(1) instanceof String t)) {
      throw new IllegalStateException(redis.name + ": unexpected reply to the acquire script: " + reply);
    }
    long token = Token.parse(t);
    if (token <= floor) {
      throw new IllegalStateException(
          redis.name + ": Redis issued token " + token + " not above floor " + floor + " for " + keys.counter());
    }
    return Attempt.grant(token, StoreTiming.validUntil(sentAt, ttlMs), !Long.valueOf(1).equals(l.get(4)),
        Long.valueOf(1).equals(l.get(5)));
  }

  @Override
  public boolean renew(String owner, long ttlMs) {
    return Long.valueOf(1).equals(redis.run(StoreScripts.RENEW, List.of(keys.holder()), List.of(owner, Long.toString(ttlMs))));
  }

  @Override
  public void release(String owner) {
    redis.run(StoreScripts.RELEASE, List.of(keys.holder()), List.of(owner, keys.channel()));
  }

  @Override
  public Runnable subscribe(Consumer<String> onRelease, long waitMs) throws InterruptedException {
    CountDownLatch listening = new CountDownLatch(1);
    Runnable off = redis.channels.listen(keys.channel(), onRelease, listening::countDown);
    listening.await(waitMs, TimeUnit.MILLISECONDS);
    return off;
  }
}
