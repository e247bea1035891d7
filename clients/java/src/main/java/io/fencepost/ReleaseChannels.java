package io.fencepost;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Consumer;
import java.util.function.Supplier;
import redis.clients.jedis.Connection;
import redis.clients.jedis.JedisPubSub;

/**
 * Release notifications of one Redis for every lock of a store: one subscriber connection and one
 * daemon thread, started on first use, subscribed to the channels someone listens to (plus {@link
 * #IDLE_CHANNEL}, so that the connection stays subscribed while no lock is waited for). After a
 * broken connection it reconnects (50 ms doubling to 1 s) and subscribes again; a release
 * published meanwhile is missed, and the waiter's backoff finds it.
 */
final class ReleaseChannels implements AutoCloseable {
  /** A channel no lock publishes on (a lock's channel names a DNS label, which cannot be "-"). */
  static final String IDLE_CHANNEL = Protocol.CHANNEL_PREFIX + "-";

  /** One listener: its callbacks, and whether it has been told the channel is listened to. */
  private static final class Listener {
    final Consumer<String> onMessage;
    final Runnable onListening;
    boolean told;

    Listener(Consumer<String> onMessage, Runnable onListening) {
      this.onMessage = onMessage;
      this.onListening = onListening;
    }
  }

  private final Supplier<Connection> connect;
  private final String name;

  // Guarded by this.
  private final Map<String, List<Listener>> listeners = new HashMap<>();
  private Sub current; // the subscription of the live connection, once it answered its first SUBSCRIBE
  private Connection connection;
  private Thread thread;
  private boolean closed;

  ReleaseChannels(String name, Supplier<Connection> connect) {
    this.name = name;
    this.connect = connect;
  }

  /** The subscription of one connection; its callbacks run on the subscriber thread. */
  private final class Sub extends JedisPubSub {
    final Set<String> sent = new HashSet<>();
    final Set<String> confirmed = new HashSet<>();

    @Override
    public void onSubscribe(String channel, int count) {
      List<Runnable> tell = new ArrayList<>();
      synchronized (ReleaseChannels.this) {
        confirmed.add(channel);
        if (current != this && !closed) {
          current = this;
          // Channels listened to while the connection was being made.
          List<String> missing = new ArrayList<>();
          for (String c : listeners.keySet()) if (sent.add(c)) missing.add(c);
          if (!missing.isEmpty()) subscribe(missing.toArray(new String[0]));
        }
        for (Listener l : listeners.getOrDefault(channel, List.of())) {
          if (!l.told) {
            l.told = true;
            tell.add(l.onListening);
          }
        }
      }
      tell.forEach(Runnable::run);
    }

    @Override
    public void onMessage(String channel, String message) {
      List<Consumer<String>> call = new ArrayList<>();
      synchronized (ReleaseChannels.this) {
        for (Listener l : listeners.getOrDefault(channel, List.of())) call.add(l.onMessage);
      }
      for (Consumer<String> c : call) c.accept(message);
    }
  }

  /**
   * Calls {@code onMessage} with every message published on {@code channel} (a release publishes
   * the released owner id), from the subscriber thread, and {@code onListening} once, when the
   * channel is subscribed (at once if it already is). Returns the unsubscribe; it is idempotent.
   */
  Runnable listen(String channel, Consumer<String> onMessage, Runnable onListening) {
    Listener l = new Listener(onMessage, onListening);
    boolean tell = false;
    synchronized (this) {
      if (closed) return () -> {};
      List<Listener> ls = listeners.computeIfAbsent(channel, c -> new ArrayList<>());
      ls.add(l);
      if (current != null) {
        if (current.confirmed.contains(channel)) {
          l.told = true;
          tell = true;
        } else if (current.sent.add(channel)) {
          subscribeQuietly(current, channel);
        }
      }
      if (thread == null) {
        thread = new Thread(this::run, "fencepost-release-channels-" + name);
        thread.setDaemon(true);
        thread.start();
      }
    }
    if (tell) onListening.run();
    return () -> {
      synchronized (this) {
        List<Listener> ls = listeners.get(channel);
        if (ls == null || !ls.remove(l) || !ls.isEmpty()) return;
        listeners.remove(channel);
        if (current != null && current.sent.remove(channel)) {
          current.confirmed.remove(channel);
          try {
            current.unsubscribe(channel);
          } catch (RuntimeException e) {
            // the connection is broken: the subscriber thread reconnects without this channel
          }
        }
      }
    };
  }

  private static void subscribeQuietly(Sub s, String channel) {
    try {
      s.subscribe(channel);
    } catch (RuntimeException e) {
      // the connection is broken: the subscriber thread reconnects and subscribes again
    }
  }

  private void run() {
    long backoff = 50;
    for (; ; ) {
      Sub s = new Sub();
      String[] channels;
      Connection c;
      synchronized (this) {
        if (closed) return;
        s.sent.add(IDLE_CHANNEL);
        s.sent.addAll(listeners.keySet());
        channels = s.sent.toArray(new String[0]);
      }
      try {
        c = connect.get();
      } catch (RuntimeException e) {
        c = null;
      }
      if (c != null) {
        synchronized (this) {
          if (closed) {
            c.close();
            return;
          }
          connection = c;
        }
        try {
          s.proceed(c, channels);
          backoff = 50;
        } catch (RuntimeException e) {
          // broken connection: reconnect below
        } finally {
          synchronized (this) {
            if (current == s) current = null;
            connection = null;
          }
          c.close();
        }
      }
      synchronized (this) {
        if (closed) return;
        try {
          wait(backoff);
        } catch (InterruptedException e) {
          return;
        }
      }
      backoff = Math.min(backoff * 2, 1000);
    }
  }

  /** Stops the subscriber thread and closes its connection. */
  @Override
  public void close() {
    Connection c;
    Thread t;
    synchronized (this) {
      if (closed) return;
      closed = true;
      listeners.clear();
      current = null;
      c = connection;
      t = thread;
      notifyAll();
    }
    if (c != null) {
      try {
        c.disconnect();
      } catch (RuntimeException e) {
        // closing anyway
      }
    }
    if (t != null) {
      try {
        t.join(1000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }
}
