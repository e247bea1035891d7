package io.fencepost;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;

/**
 * A fake agent on loopback (the JDK's HttpServer) for one lock: it answers acquire with {@link
 * #acquire} (default: granted), reads with the current state, release by letting go, and keeps
 * event streams open, sending what {@link #push} queues. It records every request.
 */
final class FakeAgent implements AutoCloseable {
  /** One answer: status, content type, body. */
  record Answer(int status, String type, String body) {}

  final String lock;
  volatile String token = "9223372036854775807";
  volatile boolean held = true;
  volatile double expiresInMs = 6000;
  /** Answers an acquire; gets the request's query. */
  volatile Function<String, Answer> acquire = q -> snapshot();
  /** Answers complete (null: the state). */
  volatile Answer complete;

  final List<String> requests = new CopyOnWriteArrayList<>();
  private final BlockingQueue<String> events = new LinkedBlockingQueue<>();
  private final HttpServer server;
  private final ExecutorService pool = Executors.newCachedThreadPool(r -> {
    Thread t = new Thread(r, "fake-agent");
    t.setDaemon(true);
    return t;
  });
  private volatile boolean closed;
  /** Whether the event stream sends a comment every 100 ms (a real agent pings far less often). */
  volatile boolean pings = true;

  FakeAgent(String lock) throws IOException {
    this.lock = lock;
    server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
    server.setExecutor(pool);
    server.createContext("/v1/locks/", this::serve);
    server.start();
  }

  String url() {
    return "http://127.0.0.1:" + server.getAddress().getPort();
  }

  Answer snapshot() {
    String body =
        "{\"lock\":\"" + lock + "\",\"held\":" + held + (token == null ? "" : ",\"token\":\"" + token + "\"")
            + (held ? ",\"expiresInMs\":" + expiresInMs : "") + ",\"state\":\"" + (held ? "held" : "lost") + "\"}";
    return new Answer(200, "application/json", body);
  }

  static Answer problem(int status, String name, String detail) {
    return new Answer(
        status,
        "application/problem+json",
        "{\"type\":\"https://fencepost.io/problems/" + name + "\",\"title\":\"t\",\"status\":" + status + ",\"detail\":\"" + detail + "\"}");
  }

  /** Queues an SSE message (the whole text, e.g. "event: lost\ndata: {...}\n\n") for the stream. */
  void push(String message) {
    events.add(message);
  }

  long count(String prefix) {
    return requests.stream().filter(r -> r.startsWith(prefix)).count();
  }

  private void serve(HttpExchange x) throws IOException {
    String path = x.getRequestURI().getRawPath();
    String query = x.getRequestURI().getRawQuery();
    String suffix = path.substring(("/v1/locks/" + lock).length());
    requests.add(x.getRequestMethod() + " " + suffix + (query == null ? "" : "?" + query));
    Answer a;
    // As the real agent: a POST without Content-Type: application/json and the body {} is 415.
    boolean json =
        !x.getRequestMethod().equals("POST")
            || ("application/json".equals(x.getRequestHeaders().getFirst("Content-Type"))
                && new String(x.getRequestBody().readAllBytes(), StandardCharsets.UTF_8).equals("{}"));
    switch (json ? x.getRequestMethod() + " " + suffix : "415") {
      case "415" -> a = problem(415, "json-body-required", "not JSON");
      case "POST /acquire" -> a = acquire.apply(query == null ? "" : query);
      case "GET " -> a = snapshot();
      case "POST /release" -> {
        held = false;
        a = snapshot();
      }
      case "POST /complete" -> a = complete == null ? snapshot() : complete;
      case "GET /events" -> {
        stream(x);
        return;
      }
      default -> a = problem(404, "unknown-lock", "no");
    }
    byte[] b = a.body().getBytes(StandardCharsets.UTF_8);
    x.getResponseHeaders().set("Content-Type", a.type());
    x.sendResponseHeaders(a.status(), b.length);
    try (OutputStream o = x.getResponseBody()) {
      o.write(b);
    }
  }

  private void stream(HttpExchange x) throws IOException {
    x.getResponseHeaders().set("Content-Type", "text/event-stream");
    x.sendResponseHeaders(200, 0);
    try (OutputStream o = x.getResponseBody()) {
      o.write(": hello\n\n".getBytes(StandardCharsets.UTF_8));
      o.flush();
      // Bounded: at most 10 minutes of 100 ms polls; ends when the fake closes or the client goes.
      for (int i = 0; i < 6000 && !closed; i++) {
        String m = events.poll(100, TimeUnit.MILLISECONDS);
        if (m == null && !pings) continue;
        o.write((m == null ? ": ping\n\n" : m).getBytes(StandardCharsets.UTF_8));
        o.flush();
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (IOException e) {
      // the client went away
    }
  }

  @Override
  public void close() {
    closed = true;
    server.stop(0);
    pool.shutdownNow();
  }
}
