package io.fencepost;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(30)
class LockTest {
  FakeAgent agent;

  @BeforeEach
  void start() throws Exception {
    agent = new FakeAgent("billing");
  }

  @AfterEach
  void stop() {
    agent.close();
  }

  Lock.Options opts() {
    return Lock.options().baseUrl(agent.url()).waitFor(Duration.ofSeconds(5));
  }

  @Test
  void acquire_gives_the_exact_largest_token_as_a_long_and_try_with_resources_releases() throws Exception {
    try (Lock lock = Lock.acquire("billing", opts())) {
      assertEquals(Long.MAX_VALUE, lock.token());
      assertTrue(lock.held());
      assertEquals("billing", lock.name());
      assertTrue(lock.permit().isEmpty());
    }
    assertEquals(1, agent.count("POST /release"));
    assertTrue(agent.requests.get(0).startsWith("POST /acquire?wait="), agent.requests.toString());
  }

  @Test
  void release_and_close_are_idempotent() throws Exception {
    Lock lock = Lock.acquire("billing", opts());
    lock.release();
    lock.release();
    lock.close();
    assertEquals(1, agent.count("POST /release"));
    assertFalse(lock.held());
    assertEquals("fencepost: lock released", lock.error().getMessage());
  }

  @Test
  void release_does_not_wait_for_the_silent_event_streams_next_message() throws Exception {
    agent.pings = false;
    Lock lock = Lock.acquire("billing", opts());
    Thread.sleep(300); // the stream is open and silent
    long t0 = System.nanoTime();
    lock.release();
    long ms = (System.nanoTime() - t0) / 1_000_000;
    assertTrue(ms < 1000, "release took " + ms + " ms");
  }

  @Test
  void a_zero_wait_asks_once() {
    agent.acquire = q -> FakeAgent.problem(423, "not-granted", "not granted within the wait");
    assertThrows(NotAcquiredException.class, () -> Lock.acquire("billing", opts().waitFor(Duration.ZERO)));
    assertEquals(1, agent.count("POST /acquire"));
    assertEquals(1, agent.count("POST /release"));
  }

  @Test
  void held_lapses_when_the_time_runs_out_without_a_fresh_read() throws Exception {
    agent.expiresInMs = 400;
    try (Lock lock = Lock.acquire("billing", opts())) {
      assertTrue(lock.held());
      // The agent stops answering reads: no fresh read extends the term.
      agent.close();
      Thread.sleep(600);
      assertFalse(lock.held());
      assertInstanceOf(LockLostException.class, lock.error());
    } catch (FencepostException e) {
      // the release cannot reach the closed agent
    }
  }

  @Test
  void the_clock_rule_counts_the_larger_advance_of_the_monotonic_and_the_wall_clock() {
    long s = 1_000_000_000L;
    assertEquals(4 * s, Lock.remaining(6 * s, 2 * s, 1 * s)); // wall behind: monotonic counts
    assertEquals(1 * s, Lock.remaining(6 * s, 2 * s, 5 * s)); // a VM pause: the wall clock counts
    assertEquals(4 * s, Lock.remaining(6 * s, 2 * s, -30 * s)); // wall stepped back: ignored
    assertTrue(Lock.remaining(6 * s, 7 * s, 0) < 0);
  }

  @Test
  void an_sse_lost_event_of_this_term_ends_it_as_lost_and_listeners_see_it() throws Exception {
    agent.token = "42";
    List<Event> seen = new CopyOnWriteArrayList<>();
    try (Lock lock = Lock.acquire("billing", opts())) {
      lock.addListener(seen::add);
      agent.push("id: 7\nevent: lost\ndata: {\"type\":\"lost\",\"lock\":\"billing\",\"token\":\"42\",\"reason\":\"renew deadline passed\"}\n\n");
      assertTrue(lock.awaitEnd(Duration.ofSeconds(10)));
      assertFalse(lock.held());
      LockLostException e = assertInstanceOf(LockLostException.class, lock.error());
      assertTrue(e.getMessage().contains("renew deadline passed"), e.getMessage());
      assertEquals(1, seen.size());
      assertEquals("lost", seen.get(0).type());
      assertEquals(42, seen.get(0).token());
    }
  }

  @Test
  void a_lost_term_is_logged_at_warning_through_system_logger() throws Exception {
    // No LoggerFinder installed: System.Logger goes to java.util.logging, where a handler sees it.
    java.util.logging.Logger jul = java.util.logging.Logger.getLogger("io.fencepost.Lock");
    List<java.util.logging.LogRecord> records = new CopyOnWriteArrayList<>();
    java.util.logging.Handler handler = new java.util.logging.Handler() {
      @Override
      public void publish(java.util.logging.LogRecord r) {
        records.add(r);
      }

      @Override
      public void flush() {}

      @Override
      public void close() {}
    };
    jul.addHandler(handler);
    try {
      agent.token = "42";
      try (Lock lock = Lock.acquire("billing", opts())) {
        agent.push("id: 7\nevent: lost\ndata: {\"type\":\"lost\",\"lock\":\"billing\",\"token\":\"42\",\"reason\":\"renew deadline passed\"}\n\n");
        assertTrue(lock.awaitEnd(Duration.ofSeconds(10)));
      }
      java.util.logging.LogRecord r = records.stream().filter(x -> x.getLevel() == java.util.logging.Level.WARNING).findFirst().orElseThrow();
      String text = java.text.MessageFormat.format(r.getMessage(), r.getParameters());
      assertTrue(text.startsWith("lock billing token 42: fencepost: lock lost: lost: renew deadline passed"), text);
    } finally {
      jul.removeHandler(handler);
    }
  }

  @Test
  void a_grant_of_another_token_ends_this_term() throws Exception {
    agent.token = "42";
    try (Lock lock = Lock.acquire("billing", opts())) {
      agent.push("event: granted\ndata: {\"type\":\"granted\",\"lock\":\"billing\",\"token\":\"43\",\"expiresInMs\":6000}\n\n");
      assertTrue(lock.awaitEnd(Duration.ofSeconds(10)));
      assertInstanceOf(LockLostException.class, lock.error());
    }
  }

  @Test
  void a_read_showing_the_term_over_ends_it() throws Exception {
    try (Lock lock = Lock.acquire("billing", opts())) {
      agent.held = false;
      agent.push("event: state\ndata: {}\n\n"); // asks for a fresh read
      assertTrue(lock.awaitEnd(Duration.ofSeconds(10)));
      assertInstanceOf(LockLostException.class, lock.error());
    }
  }

  @Test
  void a_timed_out_wait_throws_not_acquired_and_withdraws_the_request() {
    agent.acquire = q -> FakeAgent.problem(423, "not-granted", "not granted within the wait");
    long t0 = System.nanoTime();
    NotAcquiredException e =
        assertThrows(NotAcquiredException.class, () -> Lock.acquire("billing", opts().waitFor(Duration.ofMillis(300))));
    assertTrue(System.nanoTime() - t0 >= 300_000_000L);
    assertTrue(agent.count("POST /acquire") >= 1);
    assertEquals(1, agent.count("POST /release"), agent.requests.toString());
    assertTrue(e.getMessage().contains("not granted"), e.getMessage());
  }

  @Test
  void held_elsewhere_with_if_held_fail_throws_not_acquired_and_withdraws_nothing() {
    agent.acquire = q -> q.contains("ifHeld=fail") ? FakeAgent.problem(423, "held", "held by billing-1") : agent.snapshot();
    NotAcquiredException e =
        assertThrows(NotAcquiredException.class, () -> Lock.acquire("billing", opts().ifHeld(Lock.IfHeld.FAIL)));
    assertEquals("held", e.problem().name());
    assertEquals(0, agent.count("POST /release"));
  }

  @Test
  void a_completed_run_id_throws_already_done_and_complete_reports_the_run() throws Exception {
    agent.acquire = q -> q.contains("runId=2026-01-01T02%3A30") ? FakeAgent.problem(409, "already-done", "done") : agent.snapshot();
    assertThrows(AlreadyDoneException.class, () -> Lock.acquire("billing", opts().runId("2026-01-01T02:30")));
    assertEquals(0, agent.count("POST /release"));
    agent.token = "7";
    try (Lock lock = Lock.acquire("billing", opts().runId("2026-01-02T02:30"))) {
      lock.complete();
    }
    assertEquals(1, agent.count("POST /complete?runId=2026-01-02T02%3A30&token=7"), agent.requests.toString());
  }

  @Test
  void complete_after_a_loss_throws_lost() throws Exception {
    try (Lock lock = Lock.acquire("billing", opts().runId("r1"))) {
      agent.complete = FakeAgent.problem(409, "not-held", "this pod does not hold lock billing");
      LockLostException e = assertThrows(LockLostException.class, lock::complete);
      assertEquals("not-held", e.problem().name());
    }
  }

  @Test
  void complete_without_a_run_id_is_refused() throws Exception {
    try (Lock lock = Lock.acquire("billing", opts())) {
      assertThrows(IllegalStateException.class, lock::complete);
    }
  }

  @Test
  void an_acquire_answered_not_held_is_lost_and_withdrawn() {
    agent.acquire = q -> {
      agent.held = false;
      return agent.snapshot();
    };
    assertThrows(LockLostException.class, () -> Lock.acquire("billing", opts()));
    assertEquals(1, agent.count("POST /release"));
  }

  @Test
  void an_interrupted_wait_throws_not_acquired_keeps_the_interrupt_and_withdraws() throws Exception {
    agent.acquire = q -> {
      try {
        Thread.sleep(5000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      return FakeAgent.problem(423, "not-granted", "x");
    };
    Throwable[] got = new Throwable[1];
    boolean[] interrupted = new boolean[1];
    Thread t = new Thread(() -> {
      try {
        Lock.acquire("billing", Lock.options().baseUrl(agent.url()));
      } catch (Throwable e) {
        got[0] = e;
        interrupted[0] = Thread.currentThread().isInterrupted();
      }
    });
    t.start();
    Thread.sleep(300);
    t.interrupt();
    t.join(10_000);
    assertInstanceOf(NotAcquiredException.class, got[0]);
    assertTrue(interrupted[0]);
    assertEquals(1, agent.count("POST /release"));
  }

  @Test
  void the_sse_reader_joins_data_lines_keeps_ids_and_skips_comments() throws Exception {
    List<Sse.Message> got = new CopyOnWriteArrayList<>();
    String text = ": ping\n\nid: 1\nevent: renewed\ndata: a\ndata: b\n\ndata:c\n\nretry: 5\n\n";
    Sse.read(new java.io.BufferedReader(new java.io.StringReader(text)), got::add);
    assertEquals(List.of(new Sse.Message("1", "renewed", "a\nb"), new Sse.Message("1", "message", "c")), got);
  }

  @Test
  void an_empty_lock_name_is_refused() {
    assertThrows(IllegalArgumentException.class, () -> Lock.acquire("", opts()));
  }
}
