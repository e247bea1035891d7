package example;

import io.fencepost.Json;
import io.fencepost.LockStore;
import io.fencepost.StoreLock;
import io.fencepost.guard.RedisGuard;
import java.io.BufferedReader;
import java.io.EOFException;
import java.io.InputStreamReader;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import redis.clients.jedis.RedisClient;

/**
 * The Java side of the cross-language store contention (test/support/store-contention.ts: workers
 * of two languages' clients contend for one Redis-store lock and must agree on keys, scripts and
 * tokens), speaking the protocol every language's worker speaks:
 *
 * <pre>
 *   java -cp ... example.StoreContentionWorker --store URL --lock NAME --namespace NS --ttl-ms N
 *       --guard REDIS_URL --rounds N --hold-ms N
 * </pre>
 *
 * Once connected it says {@code ready} and waits for a line on stdin: the harness starts both
 * workers' rounds together, so that they contend from the first round however long each took to
 * start. Each round: acquire the store lock (waiting up to 20 s) → {@code acquired}; INCR {@code
 * <lock>:inside} on the guard Redis ({@code overlap} unless it answers 1); a fenced write of {@code
 * <lock>:data} = the token through the Java Redis guard (the lock-scoped mark of {@code <lock>}) →
 * {@code write}; sleep; DECR; release → {@code released}. Then {@code done} and exit 0; on an
 * error {@code error} and exit 1. One JSON object per line on stdout, flushed.
 */
public final class StoreContentionWorker {
  private static void say(String... kv) {
    StringBuilder b = new StringBuilder("{\"worker\":\"java\"");
    for (int i = 0; i < kv.length; i += 2) b.append(',').append(Json.quote(kv[i])).append(':').append(Json.quote(kv[i + 1]));
    System.out.println(b.append('}'));
    System.out.flush();
  }

  public static void main(String[] args) {
    try {
      run(args);
      say("event", "done");
      System.exit(0);
    } catch (Exception e) {
      say("event", "error", "message", String.valueOf(e.getMessage() == null ? e : e.getMessage()));
      System.exit(1);
    }
  }

  private static void run(String[] args) throws Exception {
    Map<String, String> a = new HashMap<>(Map.of("namespace", "default", "ttl-ms", "2000", "rounds", "5", "hold-ms", "20"));
    for (int i = 0; i < args.length; i++) {
      if (!args[i].startsWith("--") || i + 1 >= args.length) throw new IllegalArgumentException("usage: --flag value ..., got " + args[i]);
      a.put(args[i].substring(2), args[++i]);
    }
    for (String required : new String[] {"store", "lock", "guard"}) {
      if (!a.containsKey(required)) throw new IllegalArgumentException("--" + required + " is required");
    }
    String lock = a.get("lock");
    int rounds = Integer.parseInt(a.get("rounds"));
    long holdMs = Long.parseLong(a.get("hold-ms"));
    StoreLock.Options options = StoreLock.options()
        .namespace(a.get("namespace"))
        .ttl(Duration.ofMillis(Long.parseLong(a.get("ttl-ms"))))
        .waitFor(Duration.ofSeconds(20));
    try (LockStore store = LockStore.open(a.get("store"));
        RedisClient data = RedisClient.create(URI.create(a.get("guard")))) {
      RedisGuard guard = new RedisGuard(data, lock);
      data.ping();
      say("event", "ready");
      if (new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine() == null) {
        throw new EOFException("stdin closed before the start line");
      }
      for (int r = 0; r < rounds; r++) {
        try (StoreLock held = store.acquire(lock, options)) {
          String token = Long.toString(held.token());
          say("event", "acquired", "token", token);
          if (data.incr(lock + ":inside") != 1) say("event", "overlap", "token", token);
          RedisGuard.Result w = guard.write(lock + ":data", held.token(), token);
          say("event", "write", "token", token, "outcome", w.outcome().wire());
          Thread.sleep(holdMs);
          data.decr(lock + ":inside");
          held.release();
          say("event", "released", "token", token);
        }
      }
    }
  }
}
