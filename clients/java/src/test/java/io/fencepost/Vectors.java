package io.fencepost;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

/** The shared conformance vectors of clients/conformance, read with the client's own JSON reader. */
public final class Vectors {
  /** clients/conformance (Maven runs the tests in clients/java). */
  public static final Path DIR = Path.of("..", "conformance");

  private Vectors() {}

  /** The parsed top-level object of clients/conformance/NAME. */
  @SuppressWarnings("unchecked")
  public static Map<String, Object> load(String name) throws IOException {
    return (Map<String, Object>) Json.parse(Files.readString(DIR.resolve(name), StandardCharsets.UTF_8));
  }

  /** The member {@code key} of {@code o}, a list of objects. */
  @SuppressWarnings("unchecked")
  public static List<Map<String, Object>> list(Map<String, Object> o, String key) {
    return (List<Map<String, Object>>) o.get(key);
  }

  /** The member {@code key} of {@code o}, an object. */
  @SuppressWarnings("unchecked")
  public static Map<String, Object> obj(Map<String, Object> o, String key) {
    return (Map<String, Object>) o.get(key);
  }

  /** A JSON value written back as JSON (for a body the fake agent sends). */
  public static String toJson(Object v) {
    if (v == Json.NULL) return "null";
    if (v instanceof String s) return Json.quote(s);
    if (v instanceof Map<?, ?> m) {
      StringBuilder b = new StringBuilder("{");
      m.forEach((k, x) -> b.append(b.length() > 1 ? "," : "").append(Json.quote((String) k)).append(':').append(toJson(x)));
      return b.append('}').toString();
    }
    if (v instanceof List<?> l) {
      StringBuilder b = new StringBuilder("[");
      for (Object x : l) b.append(b.length() > 1 ? "," : "").append(toJson(x));
      return b.append(']').toString();
    }
    return String.valueOf(v); // numbers and booleans
  }
}
