package io.fencepost;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;

/**
 * The waiter loop ({@link StoreLock#hold}) against a scripted backend, no Redis: the order of its
 * first attempt and its subscription, and which release messages wake it (store.json
 * "timing.waiting"; src/stores/hold.ts and test/unit/stores/hold.test.ts are the reference).
 */
class StoreHoldTest {
  /** One lock, free or held by another owner; records the calls; lets the test publish a release. */
  static final class Scripted implements StoreBackend {
    volatile boolean free;
    final List<String> calls = Collections.synchronizedList(new ArrayList<>());
    volatile Consumer<String> notify;
    volatile Consumer<String> onAttempt = owner -> {};
    final StoreClock clock;
    long next;

    Scripted(boolean free, StoreClock clock) {
      this.free = free;
      this.clock = clock;
    }

    long acquires() {
      synchronized (calls) {
        return calls.stream().filter("acquire"::equals).count();
      }
    }

    @Override
    public Attempt tryAcquire(String owner, long ttlMs, long floor) {
      calls.add("acquire");
      onAttempt.accept(owner);
      if (free) {
        free = false;
        return Attempt.grant(++next, clock.nowMs() + ttlMs - 12, false, false);
      }
      return Attempt.refusal(true, 60_000, "held by another owner");
    }

    @Override
    public boolean renew(String owner, long ttlMs) {
      return true;
    }

    @Override
    public void release(String owner) {
      free = true;
    }

    @Override
    public Runnable subscribe(Consumer<String> onRelease, long waitMs) {
      calls.add("subscribe");
      notify = onRelease;
      return () -> calls.add("unsubscribe");
    }
  }

  /** Options whose backoff alone retries after 50, 100, 200, 400, 800 ms... */
  static StoreLock.Options options(Duration wait) {
    StoreLock.Options o = StoreLock.options().ttl(Duration.ofSeconds(1)).waitFor(wait);
    o.random = () -> 0.999;
    return o;
  }

  static void until(java.util.function.BooleanSupplier check) throws InterruptedException {
    long deadline = System.nanoTime() + 5_000_000_000L;
    while (!check.getAsBoolean()) {
      assertTrue(System.nanoTime() < deadline, "condition not met in time");
      Thread.sleep(2);
    }
  }

  @Test
  void a_free_lock_costs_one_attempt_and_no_subscription() throws Exception {
    try (LockStore store = LockStore.open("redis://127.0.0.1:1")) { // connects nothing
      Scripted b = new Scripted(true, store.clock);
      try (StoreLock l = StoreLock.hold(store, b, "l", options(Duration.ofSeconds(5)), 1000, false)) {
        assertEquals(1, l.token());
      }
      assertEquals(List.of("acquire"), b.calls);
    }
  }

  @Test
  void the_first_refusal_subscribes_then_tries_again_at_once_and_a_release_wakes_it() throws Exception {
    ExecutorService pool = Executors.newSingleThreadExecutor();
    try (LockStore store = LockStore.open("redis://127.0.0.1:1")) {
      Scripted b = new Scripted(false, store.clock);
      Future<StoreLock> waiter = pool.submit(() -> StoreLock.hold(store, b, "l", options(Duration.ofSeconds(5)), 1000, false));
      until(() -> b.calls.size() >= 3);
      // Refused: it subscribes, then tries again at once (a release before the subscription is not missed).
      assertEquals(List.of("acquire", "subscribe", "acquire"), List.copyOf(b.calls.subList(0, 3)));
      until(() -> b.acquires() == 5); // after 50, 100, 200 ms; the next is 400 ms away
      b.free = true;
      long wokenAt = System.nanoTime();
      assertNotNull(b.notify);
      b.notify.accept("another-owner");
      try (StoreLock l = waiter.get(5, TimeUnit.SECONDS)) {
        long ms = (System.nanoTime() - wokenAt) / 1_000_000;
        assertTrue(ms < 100, "granted " + ms + " ms after the release");
        assertEquals(1, l.token());
      }
      List<String> want = new ArrayList<>(List.of("acquire", "subscribe"));
      want.addAll(Collections.nCopies(5, "acquire"));
      want.add("unsubscribe");
      assertEquals(want, b.calls);
    } finally {
      pool.shutdownNow();
    }
  }

  /**
   * Every attempt's give-back publishes the attempt's own owner id, as a failed Redlock attempt's
   * does: heard as a release, it made the waiter retry at once, again and again (without the rule:
   * 856,018 attempts in the 500 ms against this backend).
   */
  @Test
  void a_release_naming_the_waiter_s_own_attempt_does_not_wake_it() throws Exception {
    try (LockStore store = LockStore.open("redis://127.0.0.1:1")) {
      Scripted b = new Scripted(false, store.clock);
      b.onAttempt = owner -> {
        Consumer<String> n = b.notify;
        if (n != null) n.accept(owner);
      };
      long t0 = System.nanoTime();
      NotAcquiredException e = assertThrows(NotAcquiredException.class,
          () -> StoreLock.hold(store, b, "l", options(Duration.ofMillis(500)), 1000, false));
      assertTrue(e.getMessage().contains("not granted within"), e.getMessage());
      assertTrue(System.nanoTime() - t0 < 1_500_000_000L);
      // The first, one after subscribing, three on the backoff (50, 100, 200 ms) and the last at the deadline.
      assertTrue(b.acquires() <= 8, b.acquires() + " attempts in 500 ms");
      assertFalse(b.free);
    }
  }
}
