package example;

import io.fencepost.LockStore;
import io.fencepost.StoreLock;
import io.fencepost.guard.RedisGuard;
import java.net.URI;
import java.time.Duration;
import redis.clients.jedis.RedisClient;

/**
 * StoreExample holds a lock in Redis itself (no Kubernetes, no agent) three times in a row, and
 * each time writes a report under the lock's fencing token through the Redis guard. Node, Go and
 * Python programs using the same store URL and lock name contend for the very same lock.
 *
 * <p>Environment: FENCEPOST_STORE (redis://host:6379, or redlock://h1:6379,h2:6379,h3:6379),
 * FENCEPOST_LOCK (a DNS label), REDIS_URL (where the guarded data lives: redis://...).
 */
public final class StoreExample {
  public static void main(String[] args) throws Exception {
    String name = System.getenv("FENCEPOST_LOCK");
    try (LockStore store = LockStore.open(System.getenv("FENCEPOST_STORE")); // once per process
        RedisClient data = RedisClient.create(URI.create(System.getenv("REDIS_URL")))) {
      RedisGuard guard = new RedisGuard(data, name); // one mark per lock
      for (int run = 1; run <= 3; run++) {
        StoreLock.Options options = StoreLock.options().ttl(Duration.ofSeconds(10)).waitFor(Duration.ofSeconds(30));
        try (StoreLock lock = store.acquire(name, options)) { // released at the end of the block
          lock.addListener(e -> {
            if (e.type().equals("lost")) System.err.println("store-example: lock lost: " + e.reason());
          });
          String body = "report " + run + " written under token " + lock.token();
          RedisGuard.Result r = guard.write("report:latest", lock.token(), body);
          if (!r.accepted()) throw new IllegalStateException("refused: a newer holder wrote token " + r.mark());
          System.out.printf("run %d: token %d, write %s%n", run, lock.token(), r.outcome());
        }
      }
    }
  }
}
