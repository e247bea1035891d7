package io.fencepost;

import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.HexFormat;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadLocalRandom;
import java.util.function.Consumer;
import java.util.function.DoubleSupplier;
import java.util.function.LongSupplier;
import java.util.regex.Pattern;

/**
 * A lock held in a Redis or Redlock {@link LockStore}: the Redis stores of docs/stores.md, the
 * same keys, scripts and token rules as the TypeScript, Go and Python clients. Get one with {@link
 * LockStore#acquire(String, Options)} (or {@link #acquire(String, String, Options)} with a URL),
 * pass {@link #token()} with every write to a guarded resource, and release it — {@code try
 * (StoreLock lock = store.acquire(...)) { ... }}. Its methods are safe for concurrent use.
 *
 * <p>How it is held (clients/conformance/store.json "timing"; the TypeScript reference:
 * src/stores/hold.ts):
 *
 * <ul>
 *   <li><b>Acquire</b>: a new 128-bit owner id from the CSPRNG for every attempt (followed by the
 *       holder's pod, when it runs in one: {@link Options#pod}); the grant is
 *       trusted until the time the request was SENT + ttl − drift (1 % of the TTL + 2 ms).
 *   <li><b>Waiting</b>: the first attempt goes out at once (a free lock costs one round trip);
 *       after the first refusal it subscribes to the lock's release channel and tries again at
 *       once (a release between the refusal and the subscription is not missed), then retries the
 *       moment a release is published by another owner than its own recent attempts (a failed
 *       attempt's give-back publishes too) — on Redlock, once a majority of the masters published
 *       the same owner id; otherwise after a backoff with full jitter (50 ms doubling to 2 s, never
 *       longer than the holder's key has left nor the wait).
 *   <li><b>Watchdog</b> (a daemon thread): every third of the TTL a compare-and-PEXPIRE; a success
 *       extends the trust to its send time + ttl − drift. A renew with no answer is retried every
 *       100 ms until the trust runs out; one that finds the key gone or another owner's ends the
 *       lock at once; the end of the trust ends it whatever is still in flight.
 *   <li><b>Release</b>: compare-and-DEL, then PUBLISH on the lock's channel, in one script;
 *       idempotent.
 * </ul>
 *
 * Time is read from the monotonic and the wall clock, whichever ran further (a VM pause stops the
 * monotonic clock). {@link #held()} is a belief: a process paused right after it returned true
 * still writes with this token; the guard at the resource is what refuses that write.
 */
public final class StoreLock implements AutoCloseable {
  /** How long an attempt waits for the release subscription before it goes on without it. */
  static final long SUBSCRIBE_WAIT_MS = 250;

  private static final SecureRandom RANDOM = new SecureRandom();

  /** How to acquire. The defaults: namespace "default", TTL 15 s, wait forever, floor 0. */
  public static final class Options {
    private String namespace = Protocol.DEFAULT_NAMESPACE;
    private long ttlMs = Protocol.DEFAULT_TTL_MS;
    private Duration wait;
    private Lock.IfHeld ifHeld = Lock.IfHeld.WAIT;
    private LongSupplier floor = () -> 0;
    private HolderPod pod = HolderPod.fromEnvironment();
    // The waiter's fallback backoff (StoreTiming); tests change it to tell a notification from a retry.
    long backoffBaseMs = Protocol.BACKOFF_BASE_MS;
    long backoffCapMs = Protocol.BACKOFF_CAP_MS;
    DoubleSupplier random = () -> ThreadLocalRandom.current().nextDouble();

    /** The lock's namespace, a DNS label (default "default"): part of its keys. */
    public Options namespace(String namespace) {
      this.namespace = Objects.requireNonNull(namespace);
      return this;
    }

    /** The key's TTL: 300 ms to 24 h, whole milliseconds (default 15 s). */
    public Options ttl(Duration ttl) {
      this.ttlMs = ttl.toMillis();
      return this;
    }

    /**
     * Bounds the wait for the grant (default: forever; interrupting the thread ends it too); zero
     * asks once.
     */
    public Options waitFor(Duration wait) {
      this.wait = Objects.requireNonNull(wait);
      return this;
    }

    /** {@link Lock.IfHeld#WAIT} (default), or {@link Lock.IfHeld#FAIL}: give up at the first refusal by another owner. */
    public Options ifHeld(Lock.IfHeld ifHeld) {
      this.ifHeld = Objects.requireNonNull(ifHeld);
      return this;
    }

    /**
     * The lowest token a grant may be issued above, asked before every attempt (default 0): the
     * highest token the guarded resource has seen, so that tokens continue above it after Redis
     * lost the counter (docs/stores.md, "Tokens when Redis loses its data").
     */
    public Options floor(LongSupplier floor) {
      this.floor = Objects.requireNonNull(floor);
      return this;
    }

    /**
     * The pod this holder runs in, named in its owner ids so that the controller can show the
     * holder (default: $POD_NAME and $POD_UID when both are set; null names none). A store lock
     * needs no pod: outside Kubernetes the owner id is random only.
     */
    public Options pod(HolderPod pod) {
      this.pod = pod;
      return this;
    }
  }

  /** New default options. */
  public static Options options() {
    return new Options();
  }

  private enum State {
    HELD,
    LOST,
    RELEASED
  }

  private final LockStore store;
  private final boolean ownsStore;
  private final StoreBackend backend;
  private final String name;
  private final String namespace;
  private final String owner;
  private final long token;
  private final boolean counterMissing;
  private final boolean clockFloored;
  private final long ttlMs;
  private final List<Consumer<Event>> listeners = new CopyOnWriteArrayList<>();
  private final Object mu = new Object();
  private final Object events = new Object(); // orders the listeners' calls
  private boolean eventsEnded; // guarded by events
  private Thread watchdog;

  // Guarded by mu.
  private State state = State.HELD;
  private long validUntilMs;
  private long nextRenewAtMs;
  private boolean renewing;
  private FencepostException ended;
  private boolean releaseCalled;
  private FencepostException releaseError;

  private StoreLock(LockStore store, boolean ownsStore, StoreBackend backend, String name, String namespace, String owner,
      StoreBackend.Attempt grant, long ttlMs) {
    this.store = store;
    this.ownsStore = ownsStore;
    this.backend = backend;
    this.name = name;
    this.namespace = namespace;
    this.owner = owner;
    this.token = grant.token();
    this.counterMissing = grant.counterMissing();
    this.clockFloored = grant.clockFloored();
    this.ttlMs = ttlMs;
    this.validUntilMs = grant.validUntilMs();
    this.nextRenewAtMs = store.clock.nowMs() + StoreTiming.renewEveryMs(ttlMs);
  }

  /**
   * Opens the store at {@code url} for this one lock, waits for the lock, and returns it held; its
   * release closes the store. An app that takes locks again and again should open a {@link
   * LockStore} once instead.
   *
   * @throws IllegalArgumentException a bad URL, name, namespace or TTL (the message names it)
   * @throws NotAcquiredException not granted within the wait, the wait interrupted (the thread's
   *     interrupt flag is set again), or held by another owner with {@link Lock.IfHeld#FAIL}
   */
  public static StoreLock acquire(String url, String name, Options o) throws FencepostException {
    LockStore store = LockStore.open(url);
    try {
      return hold(store, name, o, true);
    } catch (FencepostException | RuntimeException e) {
      store.close();
      throw e;
    }
  }

  private static final Pattern POD_NAME = Pattern.compile("[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?");
  private static final Pattern POD_UID = Pattern.compile("[A-Za-z0-9-]{1,64}");

  /**
   * The pod a holder runs in, named in its owner ids (clients/conformance/store.json "ownerId") so
   * that the controller, which observes store locks without granting them, can show who holds one.
   * Public information: it adds no secrecy, and the controller trusts it no further than a name.
   *
   * @param name the pod's name
   * @param uid the pod's uid
   */
  public record HolderPod(String name, String uid) {
    /** Whether both parts can be named in an owner id (a DNS subdomain name; a uid of letters, digits and dashes). */
    boolean valid() {
      return name != null && uid != null && POD_NAME.matcher(name).matches() && POD_UID.matcher(uid).matches();
    }

    /** $POD_NAME and $POD_UID (the Downward API) when both are set, else null. */
    static HolderPod fromEnvironment() {
      String name = System.getenv("POD_NAME");
      String uid = System.getenv("POD_UID");
      return name != null && !name.isEmpty() && uid != null && !uid.isEmpty() ? new HolderPod(name, uid) : null;
    }
  }

  /**
   * A new owner id: 128 bits from the CSPRNG as lowercase hex, new for every attempt, followed by
   * {@code /<pod name>/<pod uid>} when {@code pod} is given and valid. The random part is what a
   * renew and a release prove ownership with: never reused, never derived from a name.
   */
  static String newOwnerId(HolderPod pod) {
    byte[] b = new byte[16];
    RANDOM.nextBytes(b);
    String id = HexFormat.of().formatHex(b);
    return pod != null && pod.valid() ? id + "/" + pod.name() + "/" + pod.uid() : id;
  }

  /** The holder pod an owner id names, or null when it names none (or not validly). */
  static HolderPod podOfOwner(String owner) {
    String[] parts = owner.split("/", -1);
    if (parts.length != 3 || parts[0].isEmpty()) return null;
    HolderPod pod = new HolderPod(parts[1], parts[2]);
    return pod.valid() ? pod : null;
  }

  /** How many of a waiter's latest owner ids it recognises in release messages (older attempts' give-backs have long arrived). */
  static final int OWN_OWNERS = 8;

  /**
   * Wakes a waiter when a release is published by another owner than its own recent attempts; a
   * release while an attempt is out is kept.
   *
   * <p>An attempt that failed gives back what it took, and that release publishes its owner id
   * too: heard as a release, it would make the waiter retry at once, every time (on Redlock the
   * backend's majority rule keeps out a minority's give-back; this keeps out the rest, such as a
   * grant answered too late and given back).
   */
  private static final class Waker {
    private boolean notified;
    private final ArrayDeque<String> mine = new ArrayDeque<>(OWN_OWNERS);

    /** Notes the owner id of the attempt about to go out, before it is sent. */
    synchronized void attempting(String owner) {
      if (mine.size() == OWN_OWNERS) mine.removeFirst();
      mine.addLast(owner);
    }

    synchronized void fire(String owner) {
      if (mine.contains(owner)) return;
      notified = true;
      notifyAll();
    }

    /** Whether a release came since the last take; clears it. */
    synchronized boolean take() {
      boolean n = notified;
      notified = false;
      return n;
    }

    /** Waits up to {@code ms} or until a release; clears it. */
    synchronized void await(long ms) throws InterruptedException {
      long deadline = System.nanoTime() + ms * 1_000_000L;
      while (!notified) {
        long left = deadline - System.nanoTime();
        if (left <= 0) break;
        wait(Math.max(1, left / 1_000_000L));
      }
      notified = false;
    }
  }

  /** The waiter loop (see the class comment). */
  static StoreLock hold(LockStore store, String name, Options o, boolean ownsStore) throws FencepostException {
    Objects.requireNonNull(o);
    StoreKeys keys = StoreKeys.of(o.namespace, name);
    long ttlMs = StoreTiming.checkTtl(o.ttlMs, "ttl");
    return hold(store, store.backend(keys), name, o, ttlMs, ownsStore);
  }

  /** The waiter loop on {@code backend} (StoreHoldTest gives it a scripted one). */
  static StoreLock hold(LockStore store, StoreBackend backend, String name, Options o, long ttlMs, boolean ownsStore)
      throws FencepostException {
    StoreClock clock = store.clock;
    long deadline = o.wait == null ? Long.MAX_VALUE : clock.nowMs() + o.wait.toMillis();
    Waker waker = new Waker();
    Runnable unsubscribe = null;
    String lastReason = "not tried";
    try {
      for (int waits = 0; ; ) {
        if (Thread.currentThread().isInterrupted()) {
          throw new NotAcquiredException("fencepost: lock " + name + ": the wait was interrupted (" + lastReason + ")", null, null);
        }
        long floor = o.floor.getAsLong();
        if (floor < 0 || floor >= Token.MAX) {
          throw new IllegalArgumentException("floor: must be in [0, " + (Token.MAX - 1) + "], got " + floor);
        }
        String owner = newOwnerId(o.pod);
        waker.attempting(owner);
        StoreBackend.Attempt a;
        try {
          a = backend.tryAcquire(owner, ttlMs, floor);
        } catch (RuntimeException e) {
          a = StoreBackend.Attempt.refusal(false, -1, e.getMessage() == null ? e.toString() : e.getMessage());
        }
        // A grant answered after its own validity (a slow reply, a pause) is worth nothing: given back.
        if (a.granted() && clock.nowMs() >= a.validUntilMs()) {
          try {
            backend.release(owner);
          } catch (RuntimeException e) {
            // its key expires anyway
          }
          a = StoreBackend.Attempt.refusal(false, -1, "granted token " + a.token() + " too late: its validity had passed");
        }
        if (a.granted()) {
          StoreLock l = new StoreLock(store, ownsStore, backend, name, o.namespace, owner, a, ttlMs);
          l.start();
          return l;
        }
        lastReason = a.reason();
        if (a.held() && o.ifHeld == Lock.IfHeld.FAIL) {
          throw new NotAcquiredException("fencepost: lock " + name + ": " + a.reason(), null, null);
        }
        long left = deadline == Long.MAX_VALUE ? Long.MAX_VALUE : deadline - clock.nowMs();
        if (left <= 0) {
          throw new NotAcquiredException(
              "fencepost: lock " + name + " not granted within " + o.wait + " (" + lastReason + ")", null, null);
        }
        if (unsubscribe == null) {
          // Listening before waiting; then try again at once: the release may have come before.
          unsubscribe = backend.subscribe(waker::fire, SUBSCRIBE_WAIT_MS);
          continue;
        }
        if (waker.take()) continue;
        waker.await(StoreTiming.retryDelayMs(waits++, o.backoffBaseMs, o.backoffCapMs, o.random, a.heldForMs(), left));
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new NotAcquiredException("fencepost: lock " + name + ": the wait was interrupted (" + lastReason + ")", null, e);
    } finally {
      if (unsubscribe != null) unsubscribe.run();
    }
  }

  /** The lock's name. */
  public String name() {
    return name;
  }

  /** The lock's namespace. */
  public String namespace() {
    return namespace;
  }

  /** This grant's fencing token: pass it with every write to a guarded resource. */
  public long token() {
    return token;
  }

  /**
   * Whether the fencing counter did not exist before this grant (on Redlock: on none of the
   * majority): a new lock's first grant, or Redis lost its data — the store cannot tell which
   * (docs/stores.md). The token then starts from the Redis server's clock ({@link #clockFloored()}).
   */
  public boolean counterMissing() {
    return counterMissing;
  }

  /**
   * Whether this grant's token was floored at the Redis server's clock in microseconds (about
   * 1.8e15 today), because the Redis process issuing it is not the one that issued the lock's last
   * token: a new or lost counter, a failover, a restart, a moved slot (fence-next.lua fence_epoch;
   * on Redlock, on any master of the majority). The token is still above every earlier one as long
   * as that server's clock is not behind the previous issuer's by more than the time since
   * (docs/stores.md). Without {@link #counterMissing()}: the lock's tokens now come from another
   * Redis process.
   */
  public boolean clockFloored() {
    return clockFloored;
  }

  /** The key's TTL. */
  public Duration ttl() {
    return Duration.ofMillis(ttlMs);
  }

  /**
   * Whether the lock is still trusted now: not lost or released, and its validity (the last
   * successful grant or renew's send time + ttl − drift) has not passed. Ends the lock when it has.
   */
  public boolean held() {
    synchronized (mu) {
      if (state != State.HELD) return false;
      if (store.clock.nowMs() < validUntilMs) return true;
    }
    lose("the validity passed without a renew");
    return false;
  }

  /**
   * Null while held, then why it ended: a {@link LockLostException}, or a plain FencepostException
   * saying it was released by this process.
   */
  public FencepostException error() {
    synchronized (mu) {
      return ended;
    }
  }

  /**
   * Waits until the lock ends (lost or released) or the timeout passes.
   *
   * @return true when it has ended
   */
  public boolean awaitEnd(Duration timeout) throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    synchronized (mu) {
      for (; ; ) {
        if (ended != null) return true;
        long left = deadline - System.nanoTime();
        if (left <= 0) return false;
        mu.wait(Math.max(1, left / 1_000_000));
      }
    }
  }

  /**
   * Adds a listener for the lock's events — {@code renewed} (with the time left), {@code lost}
   * (with why), {@code released} — called on the watchdog's or the releasing thread; a listener
   * that throws is ignored. The loss signal: {@code lost} comes once, the moment the lock is lost.
   */
  public void addListener(Consumer<Event> listener) {
    listeners.add(Objects.requireNonNull(listener));
  }

  /**
   * Stops believing first, then gives the lock up (compare-and-DEL and a release notification)
   * and, if it opened its own store, closes it. Idempotent: later calls repeat the first one's
   * outcome. Also after a loss: if the key is still this owner's after all, waiters need not wait
   * out its TTL.
   *
   * @throws FencepostException Redis's or the network's error (the key then expires with its TTL)
   */
  public void release() throws FencepostException {
    boolean wasHeld;
    synchronized (mu) {
      if (releaseCalled) {
        if (releaseError != null) throw releaseError;
        return;
      }
      releaseCalled = true;
      wasHeld = state == State.HELD;
      state = State.RELEASED;
      if (ended == null) ended = new FencepostException("fencepost: lock " + name + " released");
      mu.notifyAll();
    }
    FencepostException err = null;
    try {
      backend.release(owner);
    } catch (RuntimeException e) {
      err = new FencepostException("fencepost: release of lock " + name + ": " + e.getMessage(), null, e);
    }
    if (wasHeld) emit(new Event("released", name, token, "", 0, ""));
    Thread w = watchdog;
    if (w != null && w != Thread.currentThread()) {
      try {
        w.join(1000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    store.untrack(this);
    if (ownsStore) store.close();
    synchronized (mu) {
      releaseError = err;
    }
    if (err != null) throw err;
  }

  /** {@link #release()}, for try-with-resources. */
  @Override
  public void close() throws FencepostException {
    release();
  }

  @Override
  public String toString() {
    return "StoreLock[" + namespace + "/" + name + ", token " + token + (error() == null ? ", held]" : ", ended]");
  }

  // ---- the watchdog

  private void start() {
    store.track(this);
    Thread t = new Thread(this::watch, "fencepost-store-lock-" + name);
    t.setDaemon(true);
    watchdog = t;
    t.start();
  }

  /** Ends the lock as lost (only the first end counts). */
  void lose(String reason) {
    synchronized (mu) {
      if (state != State.HELD) return;
      state = State.LOST;
      ended = new LockLostException("fencepost: lock " + name + " lost: " + reason);
      mu.notifyAll();
    }
    emit(new Event("lost", name, token, reason, 0, ""));
  }

  /**
   * Calls the listeners with {@code e}, in order: nothing after the last event (lost or released),
   * so that a renew answered just before the end is not reported after it.
   */
  private void emit(Event e) {
    synchronized (events) {
      if (eventsEnded) return;
      eventsEnded = e.type().equals("lost") || e.type().equals("released");
      for (Consumer<Event> l : listeners) {
        try {
          l.accept(e);
        } catch (RuntimeException x) {
          // a listener's failure is its own
        }
      }
    }
  }

  /**
   * Sends a renew when one is due (on the store's executor: a renew still out does not stop the
   * validity from ending) and ends the lock when its validity passes. Re-reads the clock at least
   * every 250 ms, so that a pause the monotonic clock missed is noticed.
   */
  private void watch() {
    try {
      for (; ; ) {
        long sentAt = -1;
        synchronized (mu) {
          if (state != State.HELD) return;
          long now = store.clock.nowMs();
          if (now >= validUntilMs) break;
          if (!renewing && now >= nextRenewAtMs) {
            renewing = true;
            sentAt = now;
          } else {
            long until = renewing ? validUntilMs : Math.min(validUntilMs, nextRenewAtMs);
            mu.wait(Math.max(1, Math.min(until - now, 250)));
          }
        }
        if (sentAt >= 0) {
          long s = sentAt;
          try {
            store.executor.execute(() -> renew(s));
          } catch (RejectedExecutionException e) {
            lose("the store was closed");
            return;
          }
        }
      }
      lose("the validity passed without a renew");
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private void renew(long sentAt) {
    StoreTiming.RenewOutcome outcome;
    String error = "";
    try {
      outcome = backend.renew(owner, ttlMs) ? StoreTiming.RenewOutcome.RENEWED : StoreTiming.RenewOutcome.NOT_OWNER;
    } catch (RuntimeException e) {
      outcome = StoreTiming.RenewOutcome.FAILED;
      error = e.getMessage() == null ? e.toString() : e.getMessage();
    }
    StoreTiming.RenewDecision d;
    long left;
    synchronized (mu) {
      renewing = false;
      if (state != State.HELD) return;
      long now = store.clock.nowMs();
      d = StoreTiming.afterRenew(outcome, error, sentAt, now, validUntilMs, ttlMs);
      switch (d.kind()) {
        case RENEWED -> {
          validUntilMs = d.at();
          nextRenewAtMs = now + d.inMs();
        }
        case RETRY -> nextRenewAtMs = now + d.inMs();
        case LOST -> {}
      }
      left = validUntilMs - now;
      mu.notifyAll();
    }
    if (d.kind() == StoreTiming.RenewDecision.Kind.LOST) lose(d.reason());
    else if (d.kind() == StoreTiming.RenewDecision.Kind.RENEWED) emit(new Event("renewed", name, token, "", left, ""));
  }
}
