package io.fencepost;

import java.util.Map;

/**
 * An RFC 9457 problem the agent answered with (application/problem+json).
 *
 * @param status the HTTP status
 * @param type the problem type URI, https://fencepost.io/problems/NAME
 * @param title the problem's title
 * @param detail what happened
 * @param body the whole body, with extension members such as lock, holder, runId and snapshot
 */
public record Problem(int status, String type, String title, String detail, Map<String, Object> body) {
  /** The prefix of every problem type of the agent's API. */
  public static final String BASE = "https://fencepost.io/problems/";

  /** The problem type without its base URI: "not-granted", "held", "already-done", ... */
  public String name() {
    return type.startsWith(BASE) ? type.substring(BASE.length()) : type;
  }

  /**
   * Reads problem details; null when the body is not a problem (no string "type").
   *
   * @param status the HTTP status, used when the body has none
   */
  static Problem fromJson(int status, Object json) {
    if (!(json instanceof Map<?, ?> m) || !(m.get("type") instanceof String type)) return null;
    int st = m.get("status") instanceof java.math.BigDecimal d ? d.intValue() : status;
    @SuppressWarnings("unchecked")
    Map<String, Object> body = (Map<String, Object>) m;
    return new Problem(st, type, str(m.get("title")), str(m.get("detail")), body);
  }

  private static String str(Object o) {
    return o instanceof String s ? s : "";
  }
}
