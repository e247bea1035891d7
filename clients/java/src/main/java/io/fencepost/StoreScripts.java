package io.fencepost;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import redis.clients.jedis.UnifiedJedis;
import redis.clients.jedis.exceptions.JedisNoScriptException;

/**
 * The Lua scripts of the Redis and Redlock stores, each the concatenation of the shared files of
 * clients/conformance that store.json "scripts" lists for it, byte for byte, so that the very
 * same script (and SHA) runs whichever language sent it. The files are packaged in the jar under
 * {@code io/fencepost/store/}; StoreScriptsTest compares them and the composition with the shared
 * ones. Keys, arguments and answers: each .lua file's header.
 */
final class StoreScripts {
  /** One script: its text and SHA1, run with EVALSHA (EVAL after NOSCRIPT). */
  static final class Script {
    final String name;
    final String text;
    final String sha1;

    Script(String name, List<String> files) {
      this.name = name;
      ByteArrayOutputStream b = new ByteArrayOutputStream();
      for (String f : files) b.writeBytes(load(f));
      this.text = b.toString(StandardCharsets.UTF_8);
      this.sha1 = sha1(text);
    }

    /** Runs the script on {@code redis}; Redis errors are Jedis's exceptions. */
    Object run(UnifiedJedis redis, List<String> keys, List<String> args) {
      try {
        return redis.evalsha(sha1, keys, args);
      } catch (JedisNoScriptException e) {
        return redis.eval(text, keys, args);
      }
    }
  }

  /** store.json "scripts": which files make each script, in order. */
  static final Map<String, List<String>> FILES = Map.of(
      "acquire", List.of("fence-next.lua", "store-acquire.lua"),
      "renew", List.of("store-renew.lua"),
      "release", List.of("store-release.lua"),
      "redlockAcquire", List.of("fence-next.lua", "redlock-acquire.lua"),
      "redlockRaise", List.of("fence-next.lua", "redlock-raise.lua"),
      "fenceNext", List.of("fence-next.lua"));

  static final Script ACQUIRE = new Script("acquire", FILES.get("acquire"));
  static final Script RENEW = new Script("renew", FILES.get("renew"));
  static final Script RELEASE = new Script("release", FILES.get("release"));
  static final Script REDLOCK_ACQUIRE = new Script("redlockAcquire", FILES.get("redlockAcquire"));
  static final Script REDLOCK_RAISE = new Script("redlockRaise", FILES.get("redlockRaise"));

  private StoreScripts() {}

  /** The bytes of the packaged copy of clients/conformance/{@code file}. */
  static byte[] load(String file) {
    try (InputStream in = StoreScripts.class.getResourceAsStream("store/" + file)) {
      if (in == null) throw new IllegalStateException("fencepost: store/" + file + " is not in the jar");
      return in.readAllBytes();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static String sha1(String s) {
    try {
      return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-1").digest(s.getBytes(StandardCharsets.UTF_8)));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }
}
