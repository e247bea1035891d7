package io.fencepost;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Consumer;

/**
 * One lock over N independent Redlock masters, with fencing tokens that stay monotonic across
 * majorities (clients/conformance/store.json "tokens.redlock"; the TypeScript reference:
 * src/stores/redlock/quorum.ts, which also argues why tokens only grow):
 *
 * <ol>
 *   <li>note the time BEFORE sending; on every master in parallel, each bounded by {@link
 *       Protocol#MASTER_TIMEOUT_MS}, SET the holder key NX PX and advance the master's counter above the
 *       floor (redlock-acquire.lua), which answers the counter's new value;
 *   <li>held if a quorum (floor(N/2)+1) granted and the validity (sent + ttl − drift) has not
 *       passed;
 *   <li>token = the largest value the quorum answered (floor + 1 if none);
 *   <li>if a quorum answered exactly the token, the grant counts (one round trip, the usual case);
 *       otherwise the token is written with redlock-raise.lua to the masters that granted, and the
 *       grant counts only if a quorum acknowledged it within the validity.
 * </ol>
 *
 * Any failure releases on every master.
 */
final class RedlockBackend implements StoreBackend {
  /** How long one master may take to answer before it counts as failed. */

  private final List<RedisMaster> masters;
  private final StoreKeys keys;
  private final StoreClock clock;
  private final ExecutorService executor;
  private final int n;
  private final int q;

  RedlockBackend(List<RedisMaster> masters, StoreKeys keys, StoreClock clock, ExecutorService executor) {
    this.masters = masters;
    this.keys = keys;
    this.clock = clock;
    this.executor = executor;
    this.n = masters.size();
    this.q = quorum(n);
  }

  /** The majority of {@code n} masters. */
  static int quorum(int n) {
    return n / 2 + 1;
  }

  /** One master's answer: a value, or why there is none. */
  private record Settled<T>(T value, String error) {
    boolean ok() {
      return error == null;
    }
  }

  /** Runs {@code calls} in parallel, each bounded by Protocol.MASTER_TIMEOUT_MS; never throws (an interrupt is kept). */
  private <T> List<Settled<T>> ask(List<Callable<T>> calls) {
    List<Future<T>> futures = new ArrayList<>();
    for (Callable<T> c : calls) futures.add(executor.submit(c));
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(Protocol.MASTER_TIMEOUT_MS);
    List<Settled<T>> out = new ArrayList<>();
    boolean interrupted = false;
    for (Future<T> f : futures) {
      try {
        out.add(new Settled<>(f.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS), null));
      } catch (TimeoutException e) {
        f.cancel(true);
        out.add(new Settled<>(null, "no answer within " + Protocol.MASTER_TIMEOUT_MS + " ms"));
      } catch (ExecutionException e) {
        Throwable c = e.getCause();
        out.add(new Settled<>(null, c == null || c.getMessage() == null ? String.valueOf(c) : c.getMessage()));
      } catch (InterruptedException e) {
        interrupted = true;
        f.cancel(true);
        out.add(new Settled<>(null, "interrupted"));
      }
    }
    if (interrupted) Thread.currentThread().interrupt();
    return out;
  }

  private void releaseAll(String owner) {
    List<Callable<Object>> calls = new ArrayList<>();
    for (RedisMaster m : masters) {
      calls.add(() -> m.run(StoreScripts.RELEASE, List.of(keys.holder()), List.of(owner, keys.channel())));
    }
    ask(calls);
  }

  /**
   * One master's part of a grant: took (its counter's new value, whether the counter existed,
   * whether its epoch changed) or held (the key's PTTL).
   */
  private record Took(boolean ok, long counter, boolean existed, boolean epochChanged, long heldForMs) {}

  @Override
  public Attempt tryAcquire(String owner, long ttlMs, long floor) {
    // 1. The time before anything is sent: every key's TTL starts after it.
    long validity = StoreTiming.validUntil(clock.nowMs(), ttlMs);
    List<Callable<Took>> calls = new ArrayList<>();
    for (RedisMaster m : masters) {
      calls.add(() -> {
        Object reply = m.run(StoreScripts.REDLOCK_ACQUIRE, List.of(keys.holder(), keys.counter(), keys.epoch()),
            List.of(owner, Long.toString(ttlMs), Long.toString(floor)));
        if (!(reply instanceof List<?> l) || l.size() < 2) {
          throw new IllegalStateException(m.name + ": unexpected reply " + reply);
        }
        if (!Long.valueOf(1).equals(l.get(0))) {
          return new Took(false, 0, false, false, l.get(1) instanceof Long p ? p : -1);
        }
        // {1, v, existed, epochChanged} (redlock-acquire.lua).
        if (l.size() < 4 || !(l.get(1) instanceof String v)) throw new IllegalStateException(m.name + ": unexpected reply " + reply);
        return new Took(true, Token.parse(v), Long.valueOf(1).equals(l.get(2)), Long.valueOf(1).equals(l.get(3)), -1);
      });
    }
    List<Settled<Took>> answers = ask(calls);
    List<Integer> took = new ArrayList<>();
    int held = 0;
    long heldForMs = -1;
    for (int i = 0; i < n; i++) {
      Settled<Took> a = answers.get(i);
      if (!a.ok()) continue;
      if (a.value().ok()) {
        took.add(i);
      } else {
        held++;
        long p = a.value().heldForMs();
        if (p >= 0) heldForMs = heldForMs < 0 ? p : Math.min(heldForMs, p);
      }
    }
    // 2. A quorum, within the validity.
    if (took.size() < q) {
      releaseAll(owner);
      return Attempt.refusal(held > n - q, heldForMs, took.size() + " of " + n + " masters granted, " + q + " needed ("
          + held + " held by another owner, " + (n - took.size() - held) + " did not answer" + firstError(answers) + ")");
    }
    if (clock.nowMs() >= validity) {
      releaseAll(owner);
      return Attempt.refusal(false, -1, "the validity was spent acquiring a majority");
    }
    // 3. The token: the largest counter the quorum advanced to (each is above the floor).
    long token = floor + 1;
    boolean counterMissing = true;
    boolean clockFloored = false;
    for (int i : took) {
      token = Math.max(token, answers.get(i).value().counter());
      counterMissing &= !answers.get(i).value().existed();
      clockFloored |= answers.get(i).value().epochChanged();
    }
    // 4. Already at the token on a quorum: counted. Else raised on the masters that granted, and
    // counted only when a quorum acknowledged it in time.
    int at = 0;
    for (int i : took) if (answers.get(i).value().counter() == token) at++;
    if (at >= q) return Attempt.grant(token, validity, counterMissing, clockFloored);
    String t = Long.toString(token);
    List<Callable<Object>> raises = new ArrayList<>();
    for (int i : took) {
      RedisMaster m = masters.get(i);
      raises.add(() -> m.run(StoreScripts.REDLOCK_RAISE, List.of(keys.holder(), keys.counter()), List.of(owner, t)));
    }
    int acked = 0;
    for (Settled<Object> a : ask(raises)) if (a.ok() && Long.valueOf(1).equals(a.value())) acked++;
    if (acked < q || clock.nowMs() >= validity) {
      releaseAll(owner);
      return Attempt.refusal(false, -1, acked < q
          ? acked + " of " + n + " masters acknowledged token " + token + ", " + q + " needed"
          : "the validity was spent writing the token");
    }
    return Attempt.grant(token, validity, counterMissing, clockFloored);
  }

  private static <T> String firstError(List<Settled<T>> answers) {
    for (Settled<T> a : answers) if (!a.ok()) return "; first error: " + a.error();
    return "";
  }

  @Override
  public boolean renew(String owner, long ttlMs) {
    List<Callable<Object>> calls = new ArrayList<>();
    for (RedisMaster m : masters) {
      calls.add(() -> m.run(StoreScripts.RENEW, List.of(keys.holder()), List.of(owner, Long.toString(ttlMs))));
    }
    int yes = 0;
    int no = 0;
    List<Settled<Object>> answers = ask(calls);
    for (Settled<Object> a : answers) {
      if (!a.ok()) continue;
      if (Long.valueOf(1).equals(a.value())) yes++;
      else no++;
    }
    if (yes >= q) return true;
    // So many masters say "not yours" that a majority is out of reach: lost, no need to wait.
    if (no > n - q) return false;
    throw new IllegalStateException(yes + " of " + n + " masters renewed, " + q + " needed (" + no + " said not the owner"
        + firstError(answers) + ")");
  }

  @Override
  public void release(String owner) {
    releaseAll(owner);
  }

  /** How many owner ids' per-master release messages a waiter counts (the oldest is forgotten first). */
  static final int HEARD_OWNERS = 64;

  /**
   * Listens on every master; returns as soon as one listens (a master down must not hold up a
   * waiter), or after waitMs.
   *
   * <p>The waiter is told of a release only once a majority of the masters published the same
   * owner id, and once: a holder's release publishes on every master it held (a majority), while a
   * failed attempt that gives back the minority it took publishes on fewer. Woken by those
   * give-backs, waiters retried at once for as long as the holder held (two waiters on a lock held
   * on 3 of 5 masters: 3,260-3,616 grants on the other two in 2 s). A release heard on fewer
   * masters (keys that expired there, a master down) is found by the backoff.
   */
  @Override
  public Runnable subscribe(Consumer<String> onRelease, long waitMs) throws InterruptedException {
    CountDownLatch listening = new CountDownLatch(1);
    Map<String, Integer> heard = new LinkedHashMap<>(); // owner id → masters that published it, oldest first
    Consumer<String> count = owner -> {
      int c;
      synchronized (heard) {
        Integer before = heard.remove(owner); // put back last
        c = before == null ? 1 : before + 1;
        if (heard.size() >= HEARD_OWNERS) heard.remove(heard.keySet().iterator().next());
        heard.put(owner, c);
      }
      if (c == q) onRelease.accept(owner);
    };
    List<Runnable> offs = new ArrayList<>();
    for (RedisMaster m : masters) offs.add(m.channels.listen(keys.channel(), count, listening::countDown));
    listening.await(waitMs, TimeUnit.MILLISECONDS);
    return () -> offs.forEach(Runnable::run);
  }
}
