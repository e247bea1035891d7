package example;

import io.fencepost.Lock;
import io.fencepost.NotAcquiredException;
import io.fencepost.guard.Outcome;
import io.fencepost.guard.RedisGuard;
import io.fencepost.guard.SqlGuard;
import java.net.URI;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import redis.clients.jedis.RedisClient;

/**
 * Worker holds a lock through the fencepost agent beside it and writes a report under the lock's
 * fencing token, to Redis and to PostgreSQL, through the guards: a worker that was paused past
 * its lease and replaced finds its late writes refused.
 *
 * <p>Environment: FENCEPOST_LOCK (the DistributedLock), FENCEPOST_AGENT_URL (default
 * http://127.0.0.1:7370), REDIS_URL (redis://...), JDBC_URL (jdbc:postgresql://...).
 */
public final class Worker {
  public static void main(String[] args) throws Exception {
    Lock lock;
    try {
      lock = Lock.acquire(System.getenv("FENCEPOST_LOCK"), Lock.options().waitFor(Duration.ofSeconds(30)));
    } catch (NotAcquiredException e) {
      System.err.println("worker: not granted within 30 s: " + e.getMessage());
      System.exit(1);
      return;
    }
    try (lock; // released at the end; lock.error() says why it ended if it is lost first
        RedisClient redis = RedisClient.create(URI.create(System.getenv("REDIS_URL")));
        Connection db = DriverManager.getConnection(System.getenv("JDBC_URL"))) {
      RedisGuard cache = new RedisGuard(redis, lock.name()); // one mark per lock
      try (Statement st = db.createStatement()) {
        st.execute(SqlGuard.fenceTableSql()); // a migration: once
        st.execute("CREATE TABLE IF NOT EXISTS reports (id bigint PRIMARY KEY, body text)");
      }
      SqlGuard reports = new SqlGuard(db, new SqlGuard.Spec("reports", "id", List.of("body"), lock.name()));

      String body = "report written under token " + lock.token();
      RedisGuard.Result cached = cache.write("report:latest", lock.token(), body);
      if (!cached.accepted()) {
        throw new IllegalStateException("redis refused the write: a newer holder wrote token " + cached.mark());
      }
      Outcome stored = reports.upsert(1L, lock.token(), body);
      if (!stored.accepted()) throw new IllegalStateException("postgres refused the write: a newer holder wrote");
      System.out.printf("wrote \"%s\" to redis (%s) and postgres (%s)%n", body, cached.outcome(), stored);
    }
  }
}
