package io.fencepost;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BiConsumer;
import java.util.function.Function;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.condition.EnabledIf;
import redis.clients.jedis.RedisClient;
import redis.clients.jedis.params.SetParams;

/**
 * The Redis and Redlock stores on real redis-servers that this class starts (one single, five
 * Redlock masters; a test that stops servers starts its own): grants, renewals, mutual
 * exclusion with tokens strictly increasing across many acquisitions, loss when the key is deleted
 * or taken, waiters woken by a release, release notifications after a restart, and Redlock's
 * quorum and token raise. Skipped, saying so, without a redis-server (REDIS_SERVER, else PATH).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@EnabledIf(value = "io.fencepost.RedisServers#available", disabledReason = "no redis-server on PATH (nor REDIS_SERVER): the store tests start real ones")
class StoreRedisTest {
  RedisServers single;
  RedisServers masters;
  final AtomicInteger locks = new AtomicInteger();

  @BeforeAll
  void start() throws Exception {
    single = RedisServers.start(1);
    masters = RedisServers.start(5);
  }

  @AfterAll
  void stop() throws Exception {
    if (single != null) single.close();
    if (masters != null) masters.close();
  }

  String lockName() {
    return "java-store-" + ProcessHandle.current().pid() + "-" + locks.incrementAndGet();
  }

  String singleUrl() {
    return single.servers.get(0).url();
  }

  /** Above the clock in microseconds (what a new lock's token starts from) until the year 5138. */
  static final long HIGH = 100_000_000_000_000_000L;

  /** This host's clock in microseconds: what a redis-server on loopback floors tokens at. */
  static long nowMicros() {
    java.time.Instant now = java.time.Instant.now();
    return now.getEpochSecond() * 1_000_000 + now.getNano() / 1_000;
  }

  /**
   * The server's INFO replication master_replid: what the acquire scripts record in a lock's epoch
   * key.
   */
  static String replId(RedisClient c) {
    for (String line : c.info("replication").split("\r?\n")) {
      if (line.startsWith("master_replid:")) return line.substring("master_replid:".length()).trim();
    }
    throw new IllegalStateException("no master_replid in INFO replication");
  }

  /**
   * Sets the lock's counter on {@code c}'s server to {@code value} as if that Redis master had
   * issued token {@code value}: the epoch key holds its replication ID, so the next grant there is
   * value + 1, not floored at the clock.
   */
  static void seedCounter(RedisClient c, StoreKeys keys, long value) {
    c.set(keys.counter(), Long.toString(value));
    c.set(keys.epoch(), replId(c));
  }

  /** Runs {@code f} on a client of every server of {@code s}. */
  static <T> List<T> onEach(RedisServers s, Function<RedisClient, T> f) {
    List<T> out = new ArrayList<>();
    for (RedisServers.Server srv : s.servers) {
      try (RedisClient c = srv.client()) {
        out.add(f.apply(c));
      }
    }
    return out;
  }

  @Test
  void single_redis_grants_a_token_renews_past_the_ttl_and_releases() throws Exception {
    String name = lockName();
    StoreKeys keys = StoreKeys.of("default", name);
    List<Event> events = new CopyOnWriteArrayList<>();
    try (LockStore store = LockStore.open(singleUrl()); RedisClient r = single.servers.get(0).client()) {
      long first;
      long before = nowMicros();
      try (StoreLock lock = store.acquire(name, StoreLock.options().ttl(Duration.ofMillis(600)))) {
        lock.addListener(events::add);
        first = lock.token();
        // A new lock: its first token is the Redis server's clock in µs (this host's, on loopback).
        assertTrue(first > before && first <= nowMicros() + 1, first + " is not the clock in µs (" + before + " before)");
        assertTrue(lock.counterMissing(), "a new lock's first grant finds no counter");
        assertTrue(lock.clockFloored(), "a new lock's first token is floored at the clock");
        assertEquals(Long.toString(first), r.get(keys.counter()));
        assertEquals("fencepost:epoch:{" + keys.counter() + "}", keys.epoch());
        assertEquals(replId(r), r.get(keys.epoch()), "the epoch key names the Redis master that issued it");
        assertNotNull(r.get(keys.holder()));
        assertEquals(-1, r.pttl(keys.counter()), "the counter never expires");
        Thread.sleep(1500); // 2.5 TTLs: only renews keep it
        assertTrue(lock.held());
        assertNull(lock.error());
        assertTrue(r.pttl(keys.holder()) > 0);
      }
      assertNull(r.get(keys.holder()), "released: the key is deleted");
      assertTrue(events.stream().anyMatch(e -> e.type().equals("renewed")), events.toString());
      assertEquals("released", events.get(events.size() - 1).type());
      try (StoreLock again = store.acquire(name, StoreLock.options().waitFor(Duration.ZERO))) {
        assertEquals(first + 1, again.token());
        assertFalse(again.counterMissing());
        assertFalse(again.clockFloored());
      }
    }
  }

  /** A grant of {@code name} in {@code store}, released at once. */
  static StoreLock grant(LockStore store, String name) throws FencepostException {
    try (StoreLock lock = store.acquire(name, StoreLock.options().ttl(Duration.ofSeconds(2)))) {
      return lock;
    }
  }

  void lostCounterOrAnotherProcess(String url, RedisServers servers) throws Exception {
    String name = lockName();
    StoreKeys keys = StoreKeys.of("default", name);
    try (LockStore store = LockStore.open(url)) {
      StoreLock first = grant(store, name);
      assertTrue(first.counterMissing() && first.clockFloored());
      // Redlock too: the first grant raised the majority to one token, so they agree again.
      StoreLock second = grant(store, name);
      assertEquals(first.token() + 1, second.token());
      assertFalse(second.counterMissing() || second.clockFloored());
      // The store lost its data: without the floor, the token would start again from 1.
      onEach(servers, RedisClient::flushAll);
      StoreLock flushed = grant(store, name);
      assertTrue(flushed.token() > second.token(), flushed.token() + " after " + second.token());
      assertTrue(flushed.counterMissing() && flushed.clockFloored());
      // Another Redis process issued the last token (a failover, a restart): the counter is there,
      // but may be behind; floored at the clock again.
      onEach(servers, c -> c.set(keys.epoch(), "another-process"));
      StoreLock moved = grant(store, name);
      assertTrue(moved.token() > flushed.token(), moved.token() + " after " + flushed.token());
      assertFalse(moved.counterMissing());
      assertTrue(moved.clockFloored());
      StoreLock after = grant(store, name);
      assertEquals(moved.token() + 1, after.token());
      assertFalse(after.clockFloored());
    }
  }

  @Test
  void single_redis_floors_the_next_token_at_the_clock_after_flushall_or_another_process_s_epoch() throws Exception {
    lostCounterOrAnotherProcess(singleUrl(), single);
  }

  @Test
  void redlock_floors_the_next_token_at_the_clock_after_flushall_or_another_process_s_epoch() throws Exception {
    lostCounterOrAnotherProcess(masters.redlockUrl(), masters);
  }

  @Test
  void release_is_idempotent_and_a_released_lock_is_not_held() throws Exception {
    try (LockStore store = LockStore.open(singleUrl())) {
      StoreLock lock = store.acquire(lockName());
      lock.release();
      lock.release();
      lock.close();
      assertFalse(lock.held());
      assertFalse(lock.error() instanceof LockLostException);
      assertNotNull(lock.error());
    }
  }

  @Test
  void tokens_continue_from_the_controller_s_counter_and_above_the_floor() throws Exception {
    String name = lockName();
    try (LockStore store = LockStore.open(singleUrl()); RedisClient r = single.servers.get(0).client()) {
      r.set(StoreKeys.of("default", name).counter(), "41"); // the controller's last token
      long store1;
      try (StoreLock lock = store.acquire(name)) {
        // The store's first grant here: the counter exists, but no store process issued from it yet,
        // so its token is floored at the clock, still above the controller's.
        store1 = lock.token();
        assertTrue(store1 > 41);
        assertFalse(lock.counterMissing());
        assertTrue(lock.clockFloored());
      }
      try (StoreLock lock = store.acquire(name)) {
        assertEquals(store1 + 1, lock.token());
      }
      try (StoreLock lock = store.acquire(name, StoreLock.options().floor(() -> HIGH))) {
        assertEquals(HIGH + 1, lock.token());
      }
    }
  }

  @Test
  void a_held_lock_is_refused_at_once_with_if_held_fail_or_a_zero_wait() throws Exception {
    String name = lockName();
    try (LockStore store = LockStore.open(singleUrl()); StoreLock held = store.acquire(name)) {
      long t0 = System.nanoTime();
      NotAcquiredException e = assertThrows(NotAcquiredException.class,
          () -> store.acquire(name, StoreLock.options().ifHeld(Lock.IfHeld.FAIL)));
      assertTrue(e.getMessage().contains("held by another owner"), e.getMessage());
      e = assertThrows(NotAcquiredException.class, () -> store.acquire(name, StoreLock.options().waitFor(Duration.ZERO)));
      assertTrue(e.getMessage().contains("not granted within"), e.getMessage());
      e = assertThrows(NotAcquiredException.class, () -> store.acquire(name, StoreLock.options().waitFor(Duration.ofMillis(300))));
      assertTrue(System.nanoTime() - t0 < 2_000_000_000L);
      assertTrue(held.held());
    }
  }

  @Test
  void a_redis_that_is_down_is_not_granted_within_the_wait_and_says_why() {
    try (LockStore store = LockStore.open("redis://127.0.0.1:1")) {
      NotAcquiredException e = assertThrows(NotAcquiredException.class,
          () -> store.acquire(lockName(), StoreLock.options().waitFor(Duration.ofMillis(300))));
      assertTrue(e.getMessage().contains("127.0.0.1:1"), e.getMessage());
    }
  }

  /** threads × rounds acquisitions of one lock, each thread with a store of its own (as separate processes). */
  void contend(String url, int threads, int rounds) throws Exception {
    String name = lockName();
    AtomicInteger inside = new AtomicInteger();
    AtomicInteger overlaps = new AtomicInteger();
    List<Long> tokens = Collections.synchronizedList(new ArrayList<>());
    ExecutorService pool = Executors.newFixedThreadPool(threads);
    try {
      List<Future<?>> done = new ArrayList<>();
      for (int t = 0; t < threads; t++) {
        done.add(pool.submit(() -> {
          try (LockStore store = LockStore.open(url)) {
            for (int i = 0; i < rounds; i++) {
              try (StoreLock lock = store.acquire(name, StoreLock.options().ttl(Duration.ofSeconds(2)).waitFor(Duration.ofSeconds(20)))) {
                if (inside.incrementAndGet() != 1) overlaps.incrementAndGet();
                tokens.add(lock.token());
                Thread.sleep(1);
                inside.decrementAndGet();
              }
            }
          }
          return null;
        }));
      }
      for (Future<?> f : done) f.get();
    } finally {
      pool.shutdownNow();
    }
    assertEquals(0, overlaps.get(), "two holders at once");
    assertEquals(threads * rounds, tokens.size());
    for (int i = 1; i < tokens.size(); i++) {
      assertTrue(tokens.get(i) > tokens.get(i - 1), "tokens not strictly increasing at " + i + ": " + tokens);
    }
  }

  @Test
  void single_redis_four_contenders_100_acquisitions_one_holder_at_a_time_tokens_strictly_increasing() throws Exception {
    contend(singleUrl(), 4, 25);
  }

  @Test
  void redlock_five_masters_four_contenders_100_acquisitions_one_holder_at_a_time_tokens_strictly_increasing() throws Exception {
    contend(masters.redlockUrl(), 4, 25);
  }

  /** Holds a lock with a 900 ms TTL (renew every 300 ms), does {@code meddle} to its key, and expects it lost in time. */
  void lostWhen(String url, RedisServers servers, String how, BiConsumer<RedisClient, StoreKeys> meddle) throws Exception {
    String name = lockName();
    StoreKeys keys = StoreKeys.of("default", name);
    List<Event> events = new CopyOnWriteArrayList<>();
    try (LockStore store = LockStore.open(url)) {
      StoreLock lock = store.acquire(name, StoreLock.options().ttl(Duration.ofMillis(900)));
      lock.addListener(events::add);
      assertTrue(lock.held());
      onEach(servers, c -> {
        meddle.accept(c, keys);
        return null;
      });
      long t0 = System.nanoTime();
      assertTrue(lock.awaitEnd(Duration.ofSeconds(2)), "not lost after the key was " + how);
      long ms = (System.nanoTime() - t0) / 1_000_000;
      assertTrue(ms < 700, "lost " + ms + " ms after the key was " + how + ": the next renew (every 300 ms) should find it");
      assertFalse(lock.held());
      assertInstanceOf(LockLostException.class, lock.error());
      assertTrue(lock.error().getMessage().contains("gone or held by another owner"), lock.error().getMessage());
      // The listeners hear of it on the watchdog's thread, right after the lock ended.
      long until = System.nanoTime() + 1_000_000_000L;
      while (events.stream().noneMatch(e -> e.type().equals("lost")) && System.nanoTime() < until) Thread.sleep(5);
      assertTrue(events.stream().anyMatch(e -> e.type().equals("lost")), events.toString());
      lock.release(); // idempotent after a loss; does not delete another owner's key
      onEach(servers, c -> {
        String v = c.get(keys.holder());
        if (how.equals("taken")) assertEquals("someone-else", v);
        return null;
      });
    }
  }

  @Test
  void single_redis_lock_is_lost_when_its_key_is_deleted() throws Exception {
    lostWhen(singleUrl(), single, "deleted", (c, k) -> c.del(k.holder()));
  }

  @Test
  void single_redis_lock_is_lost_when_its_key_is_taken() throws Exception {
    lostWhen(singleUrl(), single, "taken", (c, k) -> c.set(k.holder(), "someone-else"));
  }

  @Test
  void redlock_lock_is_lost_when_its_keys_are_deleted() throws Exception {
    lostWhen(masters.redlockUrl(), masters, "deleted", (c, k) -> c.del(k.holder()));
  }

  @Test
  void redlock_lock_is_lost_when_its_keys_are_taken() throws Exception {
    lostWhen(masters.redlockUrl(), masters, "taken", (c, k) -> c.set(k.holder(), "someone-else"));
  }

  /**
   * A waiter whose fallback backoff would sleep for the holder's whole TTL (20 s) gets the lock
   * within a second of the release: only the release notification can have woken it.
   */
  void wokenByRelease(String url) throws Exception {
    String name = lockName();
    try (LockStore store = LockStore.open(url)) {
      StoreLock holder = store.acquire(name, StoreLock.options().ttl(Duration.ofSeconds(20)));
      AtomicLong grantedAt = new AtomicLong();
      StoreLock.Options slow = StoreLock.options().waitFor(Duration.ofSeconds(15));
      slow.backoffBaseMs = 60_000;
      slow.backoffCapMs = 60_000;
      slow.random = () -> 0.999;
      ExecutorService pool = Executors.newSingleThreadExecutor();
      try {
        Future<StoreLock> waiter = pool.submit(() -> {
          StoreLock l = store.acquire(name, slow);
          grantedAt.set(System.nanoTime());
          return l;
        });
        Thread.sleep(700); // refused, subscribed, tried again, now asleep for ~20 s
        assertFalse(waiter.isDone());
        long releasedAt = System.nanoTime();
        holder.release();
        try (StoreLock next = waiter.get()) {
          long ms = (grantedAt.get() - releasedAt) / 1_000_000;
          assertTrue(ms < 1000, "granted " + ms + " ms after the release");
          assertTrue(next.token() > holder.token());
        }
      } finally {
        pool.shutdownNow();
      }
    }
  }

  @Test
  void single_redis_waiter_is_woken_by_the_release() throws Exception {
    wokenByRelease(singleUrl());
  }

  @Test
  void redlock_waiter_is_woken_by_the_release() throws Exception {
    wokenByRelease(masters.redlockUrl());
  }

  /**
   * Another owner holds the key on masters 0-2 (a majority of 5). Two waiters take turns at masters
   * 3 and 4: each failed attempt gives them back with a release that publishes its own owner id on
   * those two masters — its own, and not a majority's, so it wakes neither waiter (store.json
   * "timing.waiting"). Only the holder's release, published on its three masters, does, at once.
   */
  @Test
  void redlock_waiters_are_not_woken_by_give_backs_only_by_the_holder_s_release() throws Exception {
    String name = lockName();
    StoreKeys keys = StoreKeys.of("default", name);
    List<RedisServers.Server> ms = masters.servers;
    onEach(masters, c -> {
      seedCounter(c, keys, 0); // masters 3 and 4's counters then count the attempts
      return null;
    });
    for (RedisServers.Server m : ms.subList(0, 3)) {
      try (RedisClient c = m.client()) {
        c.set(keys.holder(), "someone-else", SetParams.setParams().px(20_000));
      }
    }
    try (LockStore store = LockStore.open(masters.redlockUrl())) {
      StoreLock.Options o = StoreLock.options().ttl(Duration.ofSeconds(5)).waitFor(Duration.ofSeconds(10));
      o.random = () -> 0.999; // the backoff alone: 50, 100, 200, 400, 800, 1600 ms
      List<Long> got = new CopyOnWriteArrayList<>();
      ExecutorService pool = Executors.newFixedThreadPool(2);
      try {
        List<Future<Long>> waiters = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
          waiters.add(pool.submit(() -> {
            try (StoreLock l = store.acquire(name, o)) {
              got.add(System.nanoTime());
              return l.token();
            }
          }));
        }
        Thread.sleep(2000);
        assertTrue(got.isEmpty());
        // Every attempt that took master 3 (or 4) advanced its counter there: the attempts, nearly.
        long taken = 0;
        for (RedisServers.Server m : ms.subList(3, 5)) {
          try (RedisClient c = m.client()) {
            String v = c.get(keys.counter());
            taken += v == null ? 0 : Long.parseLong(v);
          }
        }
        long releasedAt = System.nanoTime();
        for (RedisServers.Server m : ms.subList(0, 3)) { // the holder's release: compare-and-DEL and publish
          try (RedisClient c = m.client()) {
            assertEquals(1L, StoreScripts.RELEASE.run(c, List.of(keys.holder()), List.of("someone-else", keys.channel())));
          }
        }
        for (Future<Long> w : waiters) w.get(10, TimeUnit.SECONDS);
        // About 7 attempts each: the first, one after subscribing, five on the backoff.
        assertTrue(taken <= 40, taken + " grants on masters 3 and 4 in 2 s against a held lock: the waiters woke each other");
        long ms0 = (Collections.min(got) - releasedAt) / 1_000_000;
        // The backoff's next retry was 1.15 s away or more: only the release can have woken it.
        assertTrue(ms0 < 800, "granted " + ms0 + " ms after the holder's release");
      } finally {
        pool.shutdownNow();
      }
    }
  }

  @Test
  void redlock_raises_the_token_to_the_largest_counter_of_the_majority_on_every_master_that_granted() throws Exception {
    String name = lockName();
    StoreKeys keys = StoreKeys.of("default", name);
    // Master 0 far ahead: the others floor the new counter at their clocks (so on a new lock the
    // masters disagree by microseconds anyway), master 0 answers HIGH + 1.
    try (RedisClient m0 = masters.servers.get(0).client()) {
      seedCounter(m0, keys, HIGH);
    }
    try (LockStore store = LockStore.open(masters.redlockUrl())) {
      try (StoreLock lock = store.acquire(name)) {
        assertEquals(HIGH + 1, lock.token());
        assertFalse(lock.counterMissing(), "one master of the majority had the counter");
        assertTrue(lock.clockFloored(), "the others floored theirs at the clock");
        String t = Long.toString(HIGH + 1);
        assertEquals(List.of(t, t, t, t, t), onEach(masters, c -> c.get(keys.counter())));
      }
      try (StoreLock lock = store.acquire(name)) {
        assertEquals(HIGH + 2, lock.token());
        assertFalse(lock.clockFloored());
      }
    }
  }

  @Test
  void redlock_grants_with_two_of_five_masters_down_and_loses_at_the_validity_end_when_a_majority_stops_answering() throws Exception {
    try (RedisServers five = RedisServers.start(5); LockStore store = LockStore.open(five.redlockUrl())) {
      String name = lockName();
      five.kill(five.servers.get(3));
      five.kill(five.servers.get(4));
      StoreLock lock = store.acquire(name, StoreLock.options().ttl(Duration.ofMillis(1000)).waitFor(Duration.ofSeconds(5)));
      assertTrue(lock.counterMissing() && lock.clockFloored(), "a new lock, on the three masters that answer");
      Thread.sleep(800); // renewed by the three that answer
      assertTrue(lock.held());
      long t0 = System.nanoTime();
      five.kill(five.servers.get(2));
      assertTrue(lock.awaitEnd(Duration.ofSeconds(3)));
      long ms = (System.nanoTime() - t0) / 1_000_000;
      assertTrue(ms < 1100, "lost " + ms + " ms after the majority was gone (TTL 1000 ms)");
      // The renews retried every 100 ms failed; the validity's end (or the last retry) ended it.
      assertTrue(lock.error().getMessage().contains("validity passed"), lock.error().getMessage());
      NotAcquiredException e = assertThrows(NotAcquiredException.class,
          () -> store.acquire(lockName(), StoreLock.options().waitFor(Duration.ofMillis(300))));
      assertTrue(e.getMessage().contains("2 of 5 masters granted, 3 needed"), e.getMessage());
      lock.release();
    }
  }

  @Test
  void release_notifications_resume_after_the_redis_restarts() throws Exception {
    try (RedisServers one = RedisServers.start(1); LockStore store = LockStore.open(one.servers.get(0).url())) {
      String name = lockName();
      StoreKeys keys = StoreKeys.of("default", name);
      RedisMaster m = new RedisMaster(store.url(), store.url().endpoints().get(0), 2000);
      try (ReleaseChannels channels = m.channels) {
        CountDownLatch listening = new CountDownLatch(1);
        Semaphore heard = new Semaphore(0);
        Runnable off = channels.listen(keys.channel(), message -> heard.release(), listening::countDown);
        assertTrue(listening.await(2, TimeUnit.SECONDS));
        try (RedisClient c = one.servers.get(0).client()) {
          c.publish(keys.channel(), "released");
        }
        assertTrue(heard.tryAcquire(2, TimeUnit.SECONDS), "not heard before the restart");
        one.kill(one.servers.get(0));
        assertTrue(one.launch(one.servers.get(0)), "restarted on its port");
        long deadline = System.nanoTime() + 5_000_000_000L;
        boolean again = false;
        while (!again && System.nanoTime() < deadline) {
          try (RedisClient c = one.servers.get(0).client()) {
            c.publish(keys.channel(), "released");
          }
          again = heard.tryAcquire(100, TimeUnit.MILLISECONDS);
        }
        assertTrue(again, "not heard within 5 s after the restart: the subscriber did not reconnect");
        off.run();
      } finally {
        m.redis.close();
      }
    }
  }

  /**
   * store.json's epochVectors: the acquire script's token after an epoch change (the counter's
   * jump, the clock floor, the 2^63-1 bound), on a real Redis.
   */
  @Test
  void the_epoch_vectors_on_a_real_redis() throws Exception {
    List<Map<String, Object>> vectors = Vectors.list(StoreVectorsTest.store(), "epochVectors");
    assertFalse(vectors.isEmpty(), "store.json has no epoch vectors");
    StoreKeys keys = StoreKeys.of("default", "vector");
    try (RedisClient r = single.servers.get(0).client()) {
      for (Map<String, Object> v : vectors) {
        String name = (String) v.get("name");
        r.del(keys.holder(), keys.counter(), keys.epoch());
        String id = replId(r);
        if (v.get("counter") instanceof String counter) r.set(keys.counter(), counter);
        if (v.get("epoch") instanceof String epoch)
          r.set(keys.epoch(), ("same".equals(epoch) ? id : "another-replication-id") + at(v.get("recordedFailover")));
        long clock = Long.parseLong(String.valueOf(r.eval("local t = redis.call('TIME') return t[1] .. string.format('%06d', tonumber(t[2]))")));
        List<String> ks = List.of(keys.holder(), keys.counter(), keys.epoch());
        List<String> args = new java.util.ArrayList<>(List.of("o", "1000", (String) v.get("floor")));
        if (v.get("failover") instanceof String failover) args.add(failover);
        if (Boolean.TRUE.equals(v.get("error"))) {
          Exception e = assertThrows(Exception.class, () -> StoreScripts.ACQUIRE.run(r, ks, args), name);
          assertTrue(String.valueOf(e.getMessage()).contains("overflow"), name + ": " + e.getMessage());
          assertFalse(r.exists(keys.holder()), name + ": no holder key");
          continue;
        }
        List<?> answer = (List<?>) StoreScripts.ACQUIRE.run(r, ks, args);
        String token = answer.get(1) instanceof byte[] b ? new String(b, java.nio.charset.StandardCharsets.UTF_8) : String.valueOf(answer.get(1));
        if ("clock".equals(v.get("token"))) assertTrue(Long.parseLong(token) > clock, name + ": " + token + " not above the clock " + clock);
        else assertEquals(v.get("token"), token, name);
        assertEquals(((Number) v.get("epochChanged")).longValue(), ((Number) answer.get(5)).longValue(), name);
        assertEquals(id + at(v.get("failover")), r.get(keys.epoch()), name);
      }
    }
  }

  /** What a failover count (Sentinel's config-epoch) adds to the recorded epoch: "@" and it, or nothing. */
  private static String at(Object failover) {
    return failover instanceof String f && !f.isEmpty() ? "@" + f : "";
  }
}
