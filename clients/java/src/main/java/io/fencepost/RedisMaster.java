package io.fencepost;

import java.time.Duration;
import java.util.List;
import redis.clients.jedis.Connection;
import redis.clients.jedis.ConnectionPoolConfig;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.JedisClientConfig;
import redis.clients.jedis.RedisClient;
import redis.clients.jedis.RedisProtocol;
import redis.clients.jedis.SslOptions;
import redis.clients.jedis.SslVerifyMode;
import redis.clients.jedis.exceptions.JedisException;

/**
 * One Redis of a store (the single Redis, or one Redlock master): a Jedis connection pool for the
 * scripts, and {@link ReleaseChannels} for the release notifications. Chosen for a lock, where a
 * late answer is worth less than none: connect and read timeouts ({@code timeoutMs}), a bounded
 * wait for a pooled connection, no retries. Nothing connects until the first command: a Redis
 * that is down is retried by the attempts and the watchdog.
 */
final class RedisMaster implements AutoCloseable {
  /** {@code host:port}, for errors. */
  final String name;

  final RedisClient redis;
  final ReleaseChannels channels;

  RedisMaster(StoreUrl url, StoreUrl.Endpoint at, int timeoutMs) {
    this.name = at.toString();
    DefaultJedisClientConfig.Builder b = DefaultJedisClientConfig.builder()
        .protocol(RedisProtocol.RESP2)
        .connectionTimeoutMillis(timeoutMs)
        .socketTimeoutMillis(timeoutMs)
        .database(url.db());
    if (url.tls()) b.sslOptions(SslOptions.builder().sslVerifyMode(SslVerifyMode.FULL).build());
    if (url.username() != null) b.user(url.username());
    if (url.password() != null) b.password(url.password());
    JedisClientConfig config = b.build();
    HostAndPort hp = new HostAndPort(at.host(), at.port());
    ConnectionPoolConfig pool = new ConnectionPoolConfig();
    pool.setMaxTotal(64);
    pool.setMaxIdle(64);
    pool.setMinIdle(0);
    pool.setMaxWait(Duration.ofMillis(timeoutMs));
    pool.setJmxEnabled(false);
    this.redis = RedisClient.builder().hostAndPort(hp).clientConfig(config).poolConfig(pool).build();
    this.channels = new ReleaseChannels(name, () -> new Connection(hp, config));
  }

  /** Runs {@code script}; a failure is an IllegalStateException naming this Redis and why. */
  Object run(StoreScripts.Script script, List<String> keys, List<String> args) {
    try {
      return script.run(redis, keys, args);
    } catch (JedisException e) {
      throw new IllegalStateException(name + ": " + describe(e), e);
    }
  }

  /** A Jedis error's message and its cause's (a connection error says only "Failed to connect"). */
  static String describe(Throwable e) {
    String m = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
    Throwable c = e.getCause();
    if (c != null && c.getMessage() != null && !m.contains(c.getMessage())) m += ": " + c.getMessage();
    return m;
  }

  @Override
  public void close() {
    channels.close();
    redis.close();
  }
}
