package io.fencepost.guard;

import io.fencepost.Token;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.HexFormat;
import java.util.List;
import java.util.Objects;
import java.util.OptionalLong;
import redis.clients.jedis.commands.JedisCommands;
import redis.clients.jedis.exceptions.JedisNoScriptException;

/**
 * Makes Redis refuse the writes of a holder whose term is over: every write runs the shared Lua
 * script ({@code clients/conformance/redis-fenced-write.lua}, packaged byte for byte) through Jedis,
 * which writes only when the token is at least the lock's mark and raises the mark to it, in one
 * atomic step. By default there is one mark per lock (a stale holder cannot write a key the newer
 * holder never touched); the marks live under the reserved prefix {@code fencepost:guard:}, which
 * data keys may not use.
 */
public final class RedisGuard {
  /** The prefix of the guard's own keys. */
  public static final String RESERVED_KEY_PREFIX = "fencepost:guard:";

  /** The lock whose mark a guard without a lock uses. */
  public static final String DEFAULT_LOCK = "default";

  /** How long a write id is remembered by default. */
  public static final Duration DEFAULT_WRITE_ID_TTL = Duration.ofHours(24);

  /** The shared script, from the jar's resources. */
  public static final String SCRIPT = Protocol.FENCED_WRITE_LUA;

  private static final String SHA1 = sha1(SCRIPT);

  /** Where the marks are kept. */
  public enum Scope {
    /** One mark per lock (the default). */
    LOCK,
    /** One mark per data key (weaker: a stale holder may write keys the newer one never touched). */
    KEY
  }

  /**
   * The outcome of a write and the lock's mark after it (empty only for a duplicate before any
   * mark).
   *
   * @param outcome applied, duplicate or stale
   * @param mark the mark after the write
   */
  public record Result(Outcome outcome, OptionalLong mark) {
    /** Whether the write was not refused. */
    public boolean accepted() {
      return outcome.accepted();
    }
  }

  private final JedisCommands redis;
  private final Scope scope;
  private final String lock;
  private final long ttlMillis;

  /** A guard with one mark per lock {@code lock}; write ids remembered 24 h. */
  public RedisGuard(JedisCommands redis, String lock) {
    this(redis, Scope.LOCK, lock, DEFAULT_WRITE_ID_TTL);
  }

  /**
   * A guard.
   *
   * @param redis a Jedis, JedisPooled or UnifiedJedis
   * @param scope where the marks are kept
   * @param lock the lock, with {@link Scope#LOCK} (null or empty: {@link #DEFAULT_LOCK}); null with
   *     {@link Scope#KEY}
   * @param writeIdTtl how long write ids are remembered (at least 1 ms)
   */
  public RedisGuard(JedisCommands redis, Scope scope, String lock, Duration writeIdTtl) {
    this.redis = Objects.requireNonNull(redis);
    this.scope = Objects.requireNonNull(scope);
    if (scope == Scope.KEY && lock != null && !lock.isEmpty()) {
      throw new IllegalArgumentException("guard: a lock goes with Scope.LOCK");
    }
    if (writeIdTtl.toMillis() < 1) throw new IllegalArgumentException("guard: writeIdTtl must be at least 1ms");
    this.lock = scope == Scope.LOCK && (lock == null || lock.isEmpty()) ? DEFAULT_LOCK : lock;
    this.ttlMillis = writeIdTtl.toMillis();
  }

  /** The key of the mark that guards {@code key}. */
  public String markKey(String key) {
    return scope == Scope.LOCK ? RESERVED_KEY_PREFIX + "lock:" + lock : RESERVED_KEY_PREFIX + "key:" + key;
  }

  private String writesKey(String key) {
    return scope == Scope.LOCK
        ? RESERVED_KEY_PREFIX + "writes:lock:" + lock
        : RESERVED_KEY_PREFIX + "writes:key:" + key;
  }

  /** SET key value, when token is current. */
  public Result write(String key, long token, String value) {
    return call("set", key, token, value, "");
  }

  /** SET key value once per write id (a retry answers duplicate), when token is current. */
  public Result writeOnce(String key, long token, String value, String writeId) {
    if (writeId == null || writeId.isEmpty()) throw new IllegalArgumentException("guard: writeId must not be empty");
    return call("set", key, token, value, writeId);
  }

  /** DEL key, when token is current. */
  public Result delete(String key, long token) {
    return call("del", key, token, "", "");
  }

  /** Raises the lock's mark to token without writing: fences out older tokens at once. */
  public Result advance(long token) {
    if (scope != Scope.LOCK) throw new IllegalStateException("guard: advance needs one mark per lock (Scope.LOCK)");
    return call("fence", "", token, "", "");
  }

  /** The mark that guards key, empty when none was set. */
  public OptionalLong highWater(String key) {
    String v = redis.get(markKey(key));
    return v == null ? OptionalLong.empty() : OptionalLong.of(Token.parse(v));
  }

  private Result call(String op, String key, long token, String value, String writeId) {
    String t = Token.format(token); // refuses a negative token before anything is sent
    String data = key;
    if (op.equals("fence")) {
      data = markKey("");
    } else if (key.startsWith("fencepost:")) {
      throw new IllegalArgumentException("guard: data key " + key + " is in the reserved fencepost: namespace");
    }
    List<String> keys = List.of(data, markKey(key), writesKey(key));
    List<String> args = List.of(t, value, writeId, Long.toString(ttlMillis), op);
    Object res;
    try {
      res = redis.evalsha(SHA1, keys, args);
    } catch (JedisNoScriptException e) {
      res = redis.eval(SCRIPT, keys, args);
    }
    if (!(res instanceof List<?> l) || l.size() != 2 || !(l.get(0) instanceof String o) || !(l.get(1) instanceof String mark)) {
      throw new IllegalStateException("guard: fenced " + op + " of " + data + ": unexpected script result " + res);
    }
    Outcome outcome =
        switch (o) {
          case "applied" -> Outcome.APPLIED;
          case "duplicate" -> Outcome.DUPLICATE;
          case "stale" -> Outcome.STALE;
          default -> throw new IllegalStateException("guard: unexpected outcome " + o);
        };
    return new Result(outcome, mark.isEmpty() ? OptionalLong.empty() : OptionalLong.of(Token.parse(mark)));
  }


  private static String sha1(String s) {
    try {
      return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-1").digest(s.getBytes(StandardCharsets.UTF_8)));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }
}
