package io.fencepost;

import java.math.BigDecimal;
import java.util.Map;

/**
 * One event of a lock's stream (GET /v1/locks/NAME/events): granted, renewed, lost, released —
 * and, passed through as they come, stopping, draining and handoverCancelled.
 *
 * @param type the event's type
 * @param lock the lock's name
 * @param token the token of the term it is about
 * @param reason why, for lost and released (else "")
 * @param expiresInMs the new time left, for granted and renewed (else 0)
 * @param to the successor pod of a planned handover, for draining (else "")
 */
public record Event(String type, String lock, long token, String reason, double expiresInMs, String to) {
  /**
   * Reads an event from parsed JSON, checking the required fields (type, lock, token).
   *
   * @throws IllegalArgumentException when the body is not a valid event
   */
  public static Event fromJson(Object json) {
    if (!(json instanceof Map<?, ?> m)) throw new IllegalArgumentException("lock event: not an object");
    if (!(m.get("type") instanceof String type) || !(m.get("lock") instanceof String lock) || m.get("token") == null) {
      throw new IllegalArgumentException("lock event: type, lock and token are required");
    }
    long token = Token.fromJson(m.get("token"));
    return new Event(
        type,
        lock,
        token,
        m.get("reason") instanceof String r ? r : "",
        m.get("expiresInMs") instanceof BigDecimal d ? d.doubleValue() : 0,
        m.get("to") instanceof String to ? to : "");
  }
}
