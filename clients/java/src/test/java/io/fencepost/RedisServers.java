package io.fencepost;

import java.io.File;
import java.io.IOException;
import java.net.ServerSocket;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Stream;
import redis.clients.jedis.RedisClient;

/**
 * Real redis-servers for the store tests, each on a free loopback port in a temporary folder,
 * without persistence: REDIS_SERVER, else the first redis-server on PATH. Stops only what it
 * started.
 */
final class RedisServers implements AutoCloseable {
  /** One running redis-server. */
  static final class Server {
    final int port;
    final Path dir;
    Process process;

    Server(int port, Path dir) {
      this.port = port;
      this.dir = dir;
    }

    String url() {
      return "redis://127.0.0.1:" + port;
    }

    String hostPort() {
      return "127.0.0.1:" + port;
    }

    RedisClient client() {
      return RedisClient.create(URI.create(url()));
    }
  }

  final List<Server> servers = new ArrayList<>();

  /** The redis-server binary, or null when there is none. */
  static String binary() {
    String env = System.getenv("REDIS_SERVER");
    if (env != null && !env.isEmpty()) return env;
    for (String dir : System.getenv().getOrDefault("PATH", "").split(File.pathSeparator)) {
      File f = new File(dir.isEmpty() ? "." : dir, "redis-server");
      if (f.canExecute()) return f.getPath();
    }
    return null;
  }

  /** Whether a redis-server can be started (JUnit's @EnabledIf). */
  static boolean available() {
    return binary() != null;
  }

  /** Starts {@code n} servers. */
  static RedisServers start(int n) throws Exception {
    RedisServers s = new RedisServers();
    try {
      for (int i = 0; i < n; i++) {
        // A port another process takes between the probe and the server's bind is answered by
        // that process, not ours (launch sees it): try another.
        for (int attempt = 1; ; attempt++) {
          int port;
          try (ServerSocket probe = new ServerSocket(0)) {
            port = probe.getLocalPort();
          }
          Server srv = new Server(port, Files.createTempDirectory("fencepost-java-redis-"));
          s.servers.add(srv); // before launch, so that close() stops it if launch throws
          if (s.launch(srv)) break;
          s.servers.remove(srv);
          s.discard(srv);
          if (attempt == 5) throw new IllegalStateException("redis-server: every port tried was taken by another process");
        }
      }
    } catch (Exception e) {
      s.close();
      throw e;
    }
    return s;
  }

  /**
   * Starts {@code srv}'s redis-server and waits until it answers: true once our process answers
   * (INFO's process_id), false when another process has the port (it answers instead, or ours
   * could not bind it; ours is stopped).
   */
  boolean launch(Server srv) throws Exception {
    srv.process = new ProcessBuilder(binary(), "--port", Integer.toString(srv.port), "--bind", "127.0.0.1", "--save", "",
        "--appendonly", "no", "--dir", srv.dir.toString(), "--loglevel", "warning")
        .redirectErrorStream(true)
        .redirectOutput(srv.dir.resolve("redis.log").toFile())
        .start();
    long deadline = System.nanoTime() + 15_000_000_000L;
    for (; ; ) {
      if (!srv.process.isAlive()) {
        String log = Files.readString(srv.dir.resolve("redis.log"));
        if (log.contains("Address already in use")) return false;
        throw new IllegalStateException("redis-server exited at start: " + log);
      }
      try (RedisClient c = srv.client()) {
        boolean ours = c.info("server").contains("process_id:" + srv.process.pid() + "\r\n");
        if (!ours) kill(srv);
        return ours;
      } catch (RuntimeException e) {
        if (System.nanoTime() > deadline) throw new IllegalStateException("redis-server not ready on " + srv.url(), e);
      }
      Thread.sleep(20);
    }
  }

  /** Stops {@code srv} (SIGKILL: its data is gone). */
  void kill(Server srv) {
    if (srv.process != null && srv.process.isAlive()) {
      srv.process.destroyForcibly();
      try {
        srv.process.waitFor();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /** A redlock:// URL of every server. */
  String redlockUrl() {
    return "redlock://" + String.join(",", servers.stream().map(Server::hostPort).toList());
  }

  @Override
  public void close() {
    for (Server srv : servers) discard(srv);
  }

  /** Stops {@code srv} and deletes its folder. */
  private void discard(Server srv) {
    kill(srv);
    try (Stream<Path> files = Files.walk(srv.dir)) {
      files.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    } catch (IOException e) {
      // a temporary folder left behind
    }
  }
}
