package example;

import io.fencepost.FencepostException;
import io.fencepost.Json;
import io.fencepost.Lock;
import io.fencepost.guard.Outcome;
import io.fencepost.guard.RedisGuard;
import io.fencepost.guard.SqlGuard;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.time.Duration;
import java.util.List;
import redis.clients.jedis.RedisClient;

/**
 * A Java worker that test/integration/clients/java.test.ts drives line by line on stdin, so that
 * it can be paused (SIGSTOP) between its lock check and its write: it acquires FENCEPOST_LOCK
 * through the agent at FENCEPOST_AGENT_URL, then answers each command with one JSON line. Commands:
 * "check" (held() now), "write VALUE" (write VALUE under the token through the Redis guard, key
 * scenario:value, and the SQL guard, table scenario row 1, without checking held() first),
 * "status" (held() and why the term ended), "release".
 */
public final class ScenarioWorker {
  private static void say(String... kv) {
    StringBuilder b = new StringBuilder("{");
    for (int i = 0; i < kv.length; i += 2) {
      if (i > 0) b.append(',');
      String v = kv[i + 1];
      boolean raw = v.equals("true") || v.equals("false");
      b.append(Json.quote(kv[i])).append(':').append(raw ? v : Json.quote(v));
    }
    System.out.println(b.append('}'));
    System.out.flush();
  }

  private static String cause(Lock l) {
    FencepostException e = l.error();
    return e == null ? "" : e.getMessage();
  }

  public static void main(String[] args) {
    try {
      run();
    } catch (Exception e) {
      say("event", "error", "error", String.valueOf(e));
      System.exit(1);
    }
  }

  private static void run() throws Exception {
    String name = System.getenv("FENCEPOST_LOCK");
    try (RedisClient redis = RedisClient.create(URI.create(System.getenv("REDIS_URL")));
        Connection db = DriverManager.getConnection(System.getenv("JDBC_URL"));
        Lock lock = Lock.acquire(name, Lock.options().waitFor(Duration.ofSeconds(60)))) {
      RedisGuard cache = new RedisGuard(redis, name);
      SqlGuard table = new SqlGuard(db, new SqlGuard.Spec("scenario", "id", List.of("v"), name));
      say("event", "acquired", "token", Long.toString(lock.token()));
      BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
      for (String line; (line = in.readLine()) != null; ) {
        String[] cmd = line.split(" ", 2);
        switch (cmd[0]) {
          case "check" -> say("event", "checked", "held", Boolean.toString(lock.held()), "token", Long.toString(lock.token()));
          case "write" -> {
            // Deliberately no held() check here: the check came before the pause.
            RedisGuard.Result r = cache.write("scenario:value", lock.token(), cmd[1]);
            Outcome o = table.upsert(1L, lock.token(), cmd[1]);
            say("event", "wrote", "token", Long.toString(lock.token()), "redis", r.outcome().wire(),
                "redisMark", r.mark().isPresent() ? Long.toString(r.mark().getAsLong()) : "",
                "sql", o.wire(), "held", Boolean.toString(lock.held()), "cause", cause(lock));
          }
          case "status" -> say("event", "status", "held", Boolean.toString(lock.held()), "cause", cause(lock));
          case "release" -> {
            String err = "";
            try {
              lock.release();
            } catch (FencepostException e) {
              err = e.getMessage();
            }
            say("event", "released", "error", err);
          }
          default -> say("event", "unknown", "line", line);
        }
      }
    }
  }
}
