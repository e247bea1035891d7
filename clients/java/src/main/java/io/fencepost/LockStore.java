package io.fencepost;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A Redis or Redlock lock store, opened once for many {@link StoreLock}s: locks held in Redis
 * directly, with no Kubernetes, no agent and no controller — for apps outside a cluster. The keys,
 * the Lua scripts and the token rules are those of every fencepost client
 * (clients/conformance/store.json), so a Java worker and a Node, Go or Python worker contend for
 * the same lock and get tokens from the same counter (docs/stores.md).
 *
 * <pre>{@code
 * try (LockStore store = LockStore.open("redis://127.0.0.1:6379");
 *     StoreLock lock = store.acquire("billing", StoreLock.options().waitFor(Duration.ofSeconds(30)))) {
 *   guard.write("invoice:42", lock.token(), body); // fence every write
 * }
 * }</pre>
 *
 * Opening connects nothing: the first attempt does, and a Redis that is down is retried by the
 * attempts until the wait ends. Connections (a pool per Redis, and one subscriber connection per
 * Redis once a lock is waited for) are shared by every lock of the store. Safe for concurrent use.
 * Closing the store ends the locks still held by it (lost) and closes its connections.
 */
public final class LockStore implements AutoCloseable {
  /** How long one command to the single Redis may take (connect, or answer) before it has failed. */

  private static final AtomicInteger STORES = new AtomicInteger();

  private final StoreUrl url;
  private final List<RedisMaster> masters;
  final StoreClock clock = new StoreClock();
  final ExecutorService executor;
  private final Set<StoreLock> held = ConcurrentHashMap.newKeySet();
  private volatile boolean closed;

  private LockStore(StoreUrl url) {
    this.url = url;
    int timeout = url.kind() == StoreUrl.Kind.REDLOCK ? Protocol.MASTER_TIMEOUT_MS : Protocol.COMMAND_TIMEOUT_MS;
    List<RedisMaster> ms = new ArrayList<>();
    for (StoreUrl.Endpoint e : url.endpoints()) ms.add(new RedisMaster(url, e, timeout));
    this.masters = List.copyOf(ms);
    String prefix = "fencepost-store-" + STORES.incrementAndGet() + "-";
    AtomicInteger threads = new AtomicInteger();
    this.executor = Executors.newCachedThreadPool(r -> {
      Thread t = new Thread(r, prefix + threads.incrementAndGet());
      t.setDaemon(true);
      return t;
    });
  }

  /**
   * Opens the store at {@code url} ({@link StoreUrl}: {@code redis://}, {@code rediss://}, {@code
   * redlock://}); connects nothing yet.
   *
   * @throws IllegalArgumentException the URL is not a store's (the message names it, password
   *     redacted)
   */
  public static LockStore open(String url) {
    return new LockStore(StoreUrl.parse(url, "store"));
  }

  /** The parsed URL (its {@code toString()} redacts the password). */
  public StoreUrl url() {
    return url;
  }

  /** Acquires {@code name} in the default namespace with the default options: waits until granted. */
  public StoreLock acquire(String name) throws FencepostException {
    return acquire(name, StoreLock.options());
  }

  /**
   * Waits for the lock {@code name} and returns it held. See {@link StoreLock#acquire(String,
   * String, StoreLock.Options)} for the exceptions.
   */
  public StoreLock acquire(String name, StoreLock.Options o) throws FencepostException {
    return StoreLock.hold(this, name, o, false);
  }

  /** The backend of one lock (checks the names). */
  StoreBackend backend(StoreKeys keys) {
    if (closed) throw new IllegalStateException("fencepost: store " + url + " is closed");
    return url.kind() == StoreUrl.Kind.REDIS
        ? new SingleRedisBackend(masters.get(0), keys, clock)
        : new RedlockBackend(masters, keys, clock, executor);
  }

  void track(StoreLock l) {
    held.add(l);
    if (closed) l.lose("the store was closed");
  }

  void untrack(StoreLock l) {
    held.remove(l);
  }

  /** Ends the locks it still holds (lost: their keys expire with their TTL) and closes the connections. Idempotent. */
  @Override
  public void close() {
    if (closed) return;
    closed = true;
    for (StoreLock l : held) l.lose("the store was closed");
    for (RedisMaster m : masters) m.close();
    executor.shutdownNow();
  }

  @Override
  public String toString() {
    return "LockStore[" + url + "]";
  }
}
