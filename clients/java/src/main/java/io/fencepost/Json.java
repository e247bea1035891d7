package io.fencepost;

import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A small strict JSON reader (RFC 8259) for the agent's few answer shapes and the conformance
 * vectors: objects become {@code Map<String, Object>} (insertion ordered), arrays {@code
 * List<Object>}, strings {@code String}, numbers {@link BigDecimal} (exact: a number is never
 * mistaken for a token, which is a string), booleans {@code Boolean}, null {@link #NULL}.
 * Hand-written so that the lock needs nothing beyond the JDK. Internal: not part of the API.
 */
public final class Json {
  /** JSON null (a {@code null} reference means "absent" to callers of {@code Map.get}). */
  public static final Object NULL =
      new Object() {
        @Override
        public String toString() {
          return "null";
        }
      };

  private final String s;
  private int i;

  private Json(String s) {
    this.s = s;
  }

  /**
   * Parses one JSON value, the whole of {@code text}.
   *
   * @throws IllegalArgumentException when {@code text} is not JSON
   */
  public static Object parse(String text) {
    Json p = new Json(text);
    p.ws();
    Object v = p.value(0);
    p.ws();
    if (p.i != text.length()) throw p.error("trailing characters");
    return v;
  }

  private IllegalArgumentException error(String what) {
    return new IllegalArgumentException("JSON: " + what + " at offset " + i);
  }

  private void ws() {
    while (i < s.length()) {
      char c = s.charAt(i);
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return;
      i++;
    }
  }

  private Object value(int depth) {
    if (depth > 64) throw error("nesting too deep");
    if (i >= s.length()) throw error("unexpected end");
    char c = s.charAt(i);
    switch (c) {
      case '{':
        return object(depth);
      case '[':
        return array(depth);
      case '"':
        return string();
      case 't':
        return literal("true", Boolean.TRUE);
      case 'f':
        return literal("false", Boolean.FALSE);
      case 'n':
        return literal("null", NULL);
      default:
        if (c == '-' || (c >= '0' && c <= '9')) return number();
        throw error("unexpected character");
    }
  }

  private Object literal(String word, Object v) {
    if (!s.startsWith(word, i)) throw error("bad literal");
    i += word.length();
    return v;
  }

  private Map<String, Object> object(int depth) {
    Map<String, Object> m = new LinkedHashMap<>();
    i++;
    ws();
    if (i < s.length() && s.charAt(i) == '}') {
      i++;
      return Collections.unmodifiableMap(m);
    }
    for (; ; ) {
      ws();
      if (i >= s.length() || s.charAt(i) != '"') throw error("expected a member name");
      String k = string();
      ws();
      expect(':');
      ws();
      m.put(k, value(depth + 1));
      ws();
      if (i < s.length() && s.charAt(i) == ',') {
        i++;
        continue;
      }
      expect('}');
      return Collections.unmodifiableMap(m);
    }
  }

  private List<Object> array(int depth) {
    List<Object> l = new ArrayList<>();
    i++;
    ws();
    if (i < s.length() && s.charAt(i) == ']') {
      i++;
      return Collections.unmodifiableList(l);
    }
    for (; ; ) {
      ws();
      l.add(value(depth + 1));
      ws();
      if (i < s.length() && s.charAt(i) == ',') {
        i++;
        continue;
      }
      expect(']');
      return Collections.unmodifiableList(l);
    }
  }

  private void expect(char c) {
    if (i >= s.length() || s.charAt(i) != c) throw error("expected '" + c + "'");
    i++;
  }

  private String string() {
    i++;
    StringBuilder b = new StringBuilder();
    for (; ; ) {
      if (i >= s.length()) throw error("unterminated string");
      char c = s.charAt(i++);
      if (c == '"') return b.toString();
      if (c < 0x20) throw error("control character in a string");
      if (c != '\\') {
        b.append(c);
        continue;
      }
      if (i >= s.length()) throw error("unterminated escape");
      char e = s.charAt(i++);
      switch (e) {
        case '"', '\\', '/' -> b.append(e);
        case 'b' -> b.append('\b');
        case 'f' -> b.append('\f');
        case 'n' -> b.append('\n');
        case 'r' -> b.append('\r');
        case 't' -> b.append('\t');
        case 'u' -> {
          if (i + 4 > s.length()) throw error("short \\u escape");
          try {
            b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
          } catch (NumberFormatException x) {
            throw error("bad \\u escape");
          }
          i += 4;
        }
        default -> throw error("bad escape");
      }
    }
  }

  private BigDecimal number() {
    int start = i;
    if (s.charAt(i) == '-') i++;
    while (i < s.length() && "0123456789.eE+-".indexOf(s.charAt(i)) >= 0) i++;
    String t = s.substring(start, i);
    if (!t.matches("-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?")) throw error("bad number");
    return new BigDecimal(t);
  }

  /** Quotes {@code v} as a JSON string. */
  public static String quote(String v) {
    StringBuilder b = new StringBuilder("\"");
    for (char c : v.toCharArray()) {
      switch (c) {
        case '"' -> b.append("\\\"");
        case '\\' -> b.append("\\\\");
        case '\n' -> b.append("\\n");
        case '\r' -> b.append("\\r");
        case '\t' -> b.append("\\t");
        default -> {
          if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
          else b.append(c);
        }
      }
    }
    return b.append('"').toString();
  }
}
