package io.fencepost;

import java.util.regex.Pattern;

/**
 * Fencing tokens: integers in [0, {@link #MAX}], strictly larger for every new grant of a lock,
 * held as a Java {@code long} (exact; never a double, which is exact only up to 2^53). On the
 * wire a token is a canonical decimal string: ASCII digits, no sign, no leading zero, no space —
 * one spelling per token (src/protocol/token.ts is the reference). Compare tokens with {@code <},
 * {@code ==} and {@code >}: every valid token is non-negative.
 */
public final class Token {
  /** The largest token, 2^63−1: the controller's Redis counter is a signed 64-bit integer. */
  public static final long MAX = Protocol.MAX_TOKEN;

  private static final Pattern CANONICAL = Pattern.compile("0|[1-9][0-9]{0,18}");

  private Token() {}

  /**
   * Parses a canonical decimal token.
   *
   * @throws MalformedTokenException when {@code s} is not canonical or exceeds {@link #MAX}
   */
  public static long parse(String s) {
    if (s == null || !CANONICAL.matcher(s).matches()) {
      String shown = s == null ? "null" : s.length() > 40 ? s.substring(0, 40) : s;
      throw new MalformedTokenException(
          "must be a canonical non-negative decimal integer, got " + Json.quote(shown));
    }
    try {
      return Long.parseLong(s);
    } catch (NumberFormatException e) {
      throw new MalformedTokenException(s + " exceeds the maximum " + MAX);
    }
  }

  /**
   * Reads a token from a parsed JSON value: a string only (a JSON number may have passed through
   * a double on its way).
   *
   * @throws MalformedTokenException for anything else
   */
  public static long fromJson(Object v) {
    if (!(v instanceof String)) {
      throw new MalformedTokenException("must be a JSON string, got " + v);
    }
    return parse((String) v);
  }

  /**
   * Checks a token given as a {@code long}: it must be in [0, MAX].
   *
   * @throws MalformedTokenException when it is negative
   */
  public static long check(long token) {
    if (token < 0) throw new MalformedTokenException("must not be negative, got " + token);
    return token;
  }

  /** The canonical decimal spelling of a valid token. */
  public static String format(long token) {
    return Long.toString(check(token));
  }
}
