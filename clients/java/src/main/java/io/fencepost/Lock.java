package io.fencepost;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.OptionalInt;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Consumer;

/**
 * A term of a lock held through the fencepost agent beside the process. Get one with {@link
 * #acquire(String, Options)}, pass {@link #token()} with every write to a guarded resource, and
 * release it — {@code try (Lock lock = Lock.acquire(...)) { ... }}. Its methods are safe for
 * concurrent use.
 *
 * <p>The term ends when it is released, or lost: the agent says so (its event stream or a read),
 * or the time the agent last gave for it runs out (see {@link #held()}). Three daemon threads
 * follow it until then: the event stream, a refresher (a fresh read at least every third of the
 * term) and a watchdog.
 *
 * <p>Logging goes through {@link System.Logger} under the name {@code io.fencepost.Lock}: a lost
 * term at WARNING, a release, a failed read and a reconnect of the event stream at DEBUG, a
 * listener's exception at WARNING. With no configuration the JDK sends it to java.util.logging;
 * an application on SLF4J routes it there with the {@code slf4j-jdk-platform-logging} binding
 * (Log4j 2: {@code log4j-jpl}). This library depends on no logging API.
 */
public final class Lock implements AutoCloseable {
  private static final System.Logger LOG = System.getLogger("io.fencepost.Lock");

  /** Where the agent serves its lock API by default ({@code --listen 127.0.0.1:7370}). */
  public static final String DEFAULT_BASE_URL = "http://127.0.0.1:7370";

  /** The environment variable that overrides {@link #DEFAULT_BASE_URL}. */
  public static final String BASE_URL_ENV = "FENCEPOST_AGENT_URL";

  /** One acquire request waits at most this long; a longer wait asks again (Mutex keeps the place). */
  static final Duration MAX_WAIT_PER_REQUEST = Duration.ofSeconds(30);

  /** What acquire does when another pod holds the lock. */
  public enum IfHeld {
    /** Wait for the lock (the default; in Mutex mode: join the queue). */
    WAIT,
    /** Throw {@link NotAcquiredException} at once, leaving no request queued. */
    FAIL
  }

  /**
   * How to acquire. The defaults wait forever, for the agent at $FENCEPOST_AGENT_URL, else {@link
   * #DEFAULT_BASE_URL}.
   */
  public static final class Options {
    private String baseUrl;
    private Duration wait;
    private String runId = "";
    private IfHeld ifHeld = IfHeld.WAIT;
    private HttpClient httpClient = Agent.DEFAULT_HTTP;

    /** The agent's lock API (default $FENCEPOST_AGENT_URL, else {@link #DEFAULT_BASE_URL}). */
    public Options baseUrl(String baseUrl) {
      this.baseUrl = baseUrl;
      return this;
    }

    /**
     * Bounds the wait for the grant (default: forever; interrupting the thread ends it too); zero
     * asks once.
     */
    public Options waitFor(Duration wait) {
      this.wait = wait;
      return this;
    }

    /**
     * Asks for a Mutex run once per id: {@link AlreadyDoneException} when some holder completed it;
     * {@link Lock#complete()} reports it done.
     */
    public Options runId(String runId) {
      this.runId = Objects.requireNonNull(runId);
      return this;
    }

    /** {@link IfHeld#WAIT} (default) or {@link IfHeld#FAIL}. */
    public Options ifHeld(IfHeld ifHeld) {
      this.ifHeld = Objects.requireNonNull(ifHeld);
      return this;
    }

    /** Sends the requests (default: a shared HTTP/1.1 client); every request has its own timeout. */
    public Options httpClient(HttpClient httpClient) {
      this.httpClient = Objects.requireNonNull(httpClient);
      return this;
    }
  }

  /** New default options. */
  public static Options options() {
    return new Options();
  }

  private final Agent agent;
  private final String runId;
  private final long token;
  private final OptionalInt permit;
  private final List<Consumer<Event>> listeners = new CopyOnWriteArrayList<>();
  private final Object mu = new Object();
  private final Thread[] threads = new Thread[3];

  // Guarded by mu.
  private long validFromNanos; // System.nanoTime() when the read that gave validForNanos was sent
  private long validFromWallMillis; // System.currentTimeMillis() then
  private long validForNanos;
  private FencepostException ended;
  private boolean kicked;
  private InputStream stream;
  private boolean released;
  private FencepostException releaseError;

  private Lock(Agent agent, String runId, long token, OptionalInt permit) {
    this.agent = agent;
    this.runId = runId;
    this.token = token;
    this.permit = permit;
  }

  /** Acquires {@code name} with the default options: waits until granted. */
  public static Lock acquire(String name) throws FencepostException {
    return acquire(name, options());
  }

  /**
   * Asks the agent for the lock and waits until it is granted or the wait has passed. The lock
   * lives on after the wait, until released or lost.
   *
   * @return the held lock: release it (try-with-resources)
   * @throws NotAcquiredException not granted in time, or the wait interrupted (the thread's
   *     interrupt flag is set again), or held elsewhere with {@link IfHeld#FAIL}; a queued request
   *     is withdrawn
   * @throws AlreadyDoneException the run id was already completed
   * @throws LockLostException lost before acquire returned
   * @throws FencepostException the agent's or the network's error
   */
  public static Lock acquire(String name, Options o) throws FencepostException {
    Objects.requireNonNull(o);
    if (name == null || name.isEmpty()) throw new IllegalArgumentException("fencepost: lock name is empty");
    String base = o.baseUrl;
    if (base == null || base.isEmpty()) base = System.getenv(BASE_URL_ENV);
    if (base == null || base.isEmpty()) base = DEFAULT_BASE_URL;
    Agent agent = new Agent(base, name, o.httpClient);
    Snapshot snap;
    try {
      snap = ask(agent, o);
    } catch (InterruptedException e) {
      agent.withdraw();
      Thread.currentThread().interrupt();
      throw new NotAcquiredException("fencepost: lock " + name + ": the wait was interrupted", null, e);
    }
    if (!snap.held() || snap.token().isEmpty()) {
      agent.withdraw();
      throw new LockLostException("fencepost: the agent answered the acquire with state " + snap.state());
    }
    Lock l = new Lock(agent, o.runId, snap.token().getAsLong(), snap.permit());
    // The acquire may have waited long: its answer's time left is counted from a fresh read.
    try {
      FencepostException lost = l.refresh();
      if (lost != null) l.end(lost);
    } catch (FencepostException e) {
      l.end(new LockLostException("fencepost: lock " + name + " granted, but its state could not be read: " + e.getMessage(), null, e));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      l.end(new NotAcquiredException("fencepost: lock " + name + ": interrupted after the grant", null, e));
    }
    FencepostException end = l.error();
    if (end != null) {
      agent.withdraw();
      throw end;
    }
    l.start();
    return l;
  }

  /** Asks until granted or refused; withdraws what it may have left queued when it gives up. */
  private static Snapshot ask(Agent agent, Options o) throws FencepostException, InterruptedException {
    long deadline = o.wait == null ? Long.MAX_VALUE : System.nanoTime() + o.wait.toNanos();
    boolean asked = false;
    for (; ; ) {
      long left = o.wait == null ? Long.MAX_VALUE : deadline - System.nanoTime();
      if (left <= 0 && asked) {
        if (asked) agent.withdraw();
        throw new NotAcquiredException("fencepost: lock " + agent.lock + " not granted within " + o.wait, null, null);
      }
      Duration wait = Duration.ofNanos(Math.max(0, Math.min(left, MAX_WAIT_PER_REQUEST.toNanos())));
      Map<String, String> q = new LinkedHashMap<>();
      q.put("wait", Math.max(1, wait.toMillis()) + "ms");
      if (!o.runId.isEmpty()) q.put("runId", o.runId);
      q.put("ifHeld", o.ifHeld == IfHeld.FAIL ? "fail" : "wait");
      asked = true;
      try {
        // The agent answers when the wait ends: the request's own timeout leaves it 10 s more.
        return agent.send("POST", agent.uri("/acquire", q), wait.plusSeconds(10));
      } catch (FencepostException e) {
        String p = e.problem() == null ? "" : e.problem().name();
        if (p.equals("not-granted")) continue; // ask again while the wait allows
        // Withdraw only what this call may have left queued: not after held or already-done (the
        // agent left nothing).
        if (!p.equals("held") && !p.equals("already-done")) agent.withdraw();
        throw e;
      }
    }
  }

  /** The lock's name. */
  public String name() {
    return agent.lock;
  }

  /** This term's fencing token: pass it with every write to a guarded resource. */
  public long token() {
    return token;
  }

  /** The Semaphore permit this term holds; empty for Election and Mutex locks. */
  public OptionalInt permit() {
    return permit;
  }

  /**
   * Null while the term lasts, then why it ended: a {@link LockLostException}, or a plain
   * FencepostException saying it was released by this process.
   */
  public FencepostException error() {
    synchronized (mu) {
      return ended;
    }
  }

  /**
   * Whether the term is still valid now: not lost or released, and the time the agent last gave
   * for it has not run out since that read was sent — on the monotonic clock and on the wall clock
   * (a VM pause stops the monotonic clock; a wall clock stepped back is ignored). It is a belief: a
   * process paused after held() returned true still writes with this token, and the guard at the
   * resource is what refuses that write.
   */
  public boolean held() {
    long left;
    synchronized (mu) {
      if (ended != null) return false;
      left = remainingLocked();
    }
    if (left <= 0) {
      end(new LockLostException("fencepost: lock lost: the term's time ran out"));
      return false;
    }
    return true;
  }

  /**
   * Waits until the term ends or the timeout passes.
   *
   * @return true when the term has ended
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
   * Adds a listener for the lock's events (granted, renewed, lost, released, draining, ...), called
   * on the event stream's thread as they come; a listener that throws is ignored.
   */
  public void addListener(Consumer<Event> listener) {
    listeners.add(Objects.requireNonNull(listener));
  }

  /**
   * Stops believing in the term, then asks the agent to release the lock (and withdraw a Mutex
   * request), bounded by 10 s. Idempotent: later calls repeat the first one's outcome.
   *
   * @throws FencepostException the agent's or the network's error of the first release
   */
  public void release() throws FencepostException {
    synchronized (mu) {
      if (released) {
        if (releaseError != null) throw releaseError;
        return;
      }
      released = true;
    }
    end(new FencepostException("fencepost: lock released"));
    FencepostException err = null;
    try {
      agent.send("POST", agent.uri("/release", Map.of()), Duration.ofSeconds(10));
    } catch (FencepostException e) {
      err = e;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      err = new FencepostException("fencepost: release interrupted", null, e);
    }
    for (Thread t : threads) {
      if (t == null || t == Thread.currentThread()) continue;
      try {
        t.join(2000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        break;
      }
    }
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

  /**
   * Reports the run id of the acquire completed (only the holder of the run's term can; after a
   * loss it throws {@link LockLostException} and reports nothing). Release afterwards.
   */
  public Snapshot complete() throws FencepostException, InterruptedException {
    if (runId.isEmpty()) throw new IllegalStateException("fencepost: complete() needs Options.runId");
    Map<String, String> q = new LinkedHashMap<>();
    q.put("runId", runId);
    q.put("token", Long.toString(token));
    return agent.send("POST", agent.uri("/complete", q), Duration.ofSeconds(10));
  }

  @Override
  public String toString() {
    return "Lock[" + agent.lock + ", token " + token + (error() == null ? ", held]" : ", ended]");
  }

  // ---- the term's bookkeeping

  /**
   * The time left of a term valid for {@code validFor} after the monotonic and the wall clock
   * advanced by {@code mono} and {@code wall} (all nanoseconds): the larger advance counts (a VM
   * pause stops the monotonic clock; a wall clock stepped back, a negative wall, changes nothing).
   */
  static long remaining(long validFor, long mono, long wall) {
    return validFor - Math.max(mono, wall);
  }

  private long remainingLocked() {
    long mono = System.nanoTime() - validFromNanos;
    long wall = (System.currentTimeMillis() - validFromWallMillis) * 1_000_000L;
    return remaining(validForNanos, mono, wall);
  }

  /** Ends the term with cause {@code err} (only the first end counts). */
  private void end(FencepostException err) {
    InputStream s;
    synchronized (mu) {
      if (ended != null) return;
      ended = err;
      s = stream;
      stream = null;
      mu.notifyAll();
    }
    if (err instanceof LockLostException) {
      LOG.log(System.Logger.Level.WARNING, "lock {0} token {1}: {2}", agent.lock, Long.toString(token), err.getMessage());
    } else {
      LOG.log(System.Logger.Level.DEBUG, "lock {0} token {1}: {2}", agent.lock, Long.toString(token), err.getMessage());
    }
    if (s != null) {
      try {
        s.close();
      } catch (IOException e) {
        // the stream is being abandoned
      }
    }
  }

  /**
   * Reads the agent's state and counts the term's time left from when the read was sent. Returns
   * the loss when the read shows the term over; throws when the read failed — that changes
   * nothing (the time runs out unless a later read succeeds).
   */
  private FencepostException refresh() throws FencepostException, InterruptedException {
    long sentNanos = System.nanoTime();
    long sentWall = System.currentTimeMillis();
    Snapshot s = agent.send("GET", agent.uri("", Map.of()), Duration.ofSeconds(5));
    if (!s.held() || s.token().isEmpty() || s.token().getAsLong() != token) {
      return new LockLostException("fencepost: lock lost: the agent says " + s.state());
    }
    synchronized (mu) {
      if (ended == null) {
        validFromNanos = sentNanos;
        validFromWallMillis = sentWall;
        validForNanos = (long) (s.expiresInMs() * 1_000_000);
      }
    }
    return null;
  }

  private void start() {
    threads[0] = daemon("events", this::follow);
    threads[1] = daemon("refresher", this::refresher);
    threads[2] = daemon("watchdog", this::watchdog);
  }

  private Thread daemon(String what, Runnable r) {
    Thread t = new Thread(r, "fencepost-" + agent.lock + "-" + what);
    t.setDaemon(true);
    t.start();
    return t;
  }

  private void refreshSoon() {
    synchronized (mu) {
      kicked = true;
      mu.notifyAll();
    }
  }

  /** Re-reads the state when an event asks for it, and at least every third of the term. */
  private void refresher() {
    try {
      for (; ; ) {
        synchronized (mu) {
          long every = Math.max(validForNanos / 3, 200_000_000L);
          long deadline = System.nanoTime() + every;
          while (ended == null && !kicked) {
            long left = deadline - System.nanoTime();
            if (left <= 0) break;
            mu.wait(Math.max(1, left / 1_000_000));
          }
          if (ended != null) return;
          kicked = false;
        }
        try {
          FencepostException lost = refresh();
          if (lost != null) end(lost);
        } catch (FencepostException e) {
          // a failed read changes nothing: the watchdog ends the term when its time runs out
          LOG.log(System.Logger.Level.DEBUG, "lock {0}: reading its state failed: {1}", agent.lock, e.getMessage());
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** Ends the term when its time runs out, re-reading the clocks at least every 250 ms. */
  private void watchdog() {
    try {
      synchronized (mu) {
        for (; ; ) {
          if (ended != null) return;
          long left = remainingLocked();
          if (left <= 0) break;
          mu.wait(Math.max(1, Math.min(left / 1_000_000, 250)));
        }
      }
      end(new LockLostException("fencepost: lock lost: the term's time ran out"));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** Follows the lock's events (SSE), reconnecting with Last-Event-ID until the term ends. */
  private void follow() {
    String[] lastId = {""};
    while (error() == null) {
      HttpRequest.Builder b = HttpRequest.newBuilder(agent.uri("/events", Map.of())).header("Accept", "text/event-stream").GET();
      if (!lastId[0].isEmpty()) b.header("Last-Event-ID", lastId[0]);
      try {
        HttpResponse<InputStream> res = agent.http.send(b.build(), HttpResponse.BodyHandlers.ofInputStream());
        InputStream in = res.body();
        synchronized (mu) {
          if (ended != null) {
            in.close();
            return;
          }
          stream = in;
        }
        try (BufferedReader r = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))) {
          if (res.statusCode() == 200) {
            Sse.read(r, m -> {
              if (!m.id().isEmpty()) lastId[0] = m.id();
              handle(m);
            });
          }
        }
      } catch (IOException e) {
        // reconnect below
        LOG.log(System.Logger.Level.DEBUG, "lock {0}: event stream ended ({1}), reconnecting", agent.lock, e.toString());
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
      synchronized (mu) {
        stream = null;
        long deadline = System.nanoTime() + 1_000_000_000L;
        try {
          while (ended == null) {
            long left = deadline - System.nanoTime();
            if (left <= 0) break;
            mu.wait(Math.max(1, left / 1_000_000));
          }
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          return;
        }
      }
    }
  }

  /**
   * Acts on one event: a state or a renewal asks for a fresh read; lost or released of this term
   * ends it; everything is passed on to the listeners.
   */
  private void handle(Sse.Message m) {
    if (m.event().equals("state")) {
      refreshSoon();
      return;
    }
    Event e;
    try {
      e = Event.fromJson(Json.parse(m.data()));
    } catch (IllegalArgumentException x) {
      return;
    }
    for (Consumer<Event> l : listeners) {
      try {
        l.accept(e);
      } catch (RuntimeException x) {
        // a listener's failure is its own: reported, and the other listeners still run
        LOG.log(System.Logger.Level.WARNING, "lock " + agent.lock + ": an event listener threw", x);
      }
    }
    boolean ours = e.token() == token;
    switch (e.type()) {
      case "lost", "released" -> {
        if (ours) end(new LockLostException("fencepost: lock lost: " + e.type() + ": " + e.reason()));
      }
      case "granted", "renewed" -> {
        if (!ours) end(new LockLostException("fencepost: lock lost: a term with token " + e.token() + " began"));
        else refreshSoon();
      }
      default -> {}
    }
  }

}
