package io.fencepost;

import java.math.BigDecimal;
import java.util.Map;
import java.util.OptionalInt;
import java.util.OptionalLong;

/**
 * The agent's state of one lock (GET /v1/locks/NAME, and the answer of acquire).
 *
 * @param lock the lock's name
 * @param held true while this pod validly holds the lock, checked by the agent at this read
 * @param token the token of this pod's current or last term; empty when it never held the lock
 * @param holder the pod the lock's Lease names, whoever it is; empty when nobody holds it
 * @param expiresInMs for a held lock, the time left before the agent stops trusting it; else 0
 * @param state waiting, confirming, held, lost, released or stopped
 * @param draining true during a planned handover: finish what is in flight, take no new work
 * @param permit the Semaphore permit this pod holds; empty otherwise
 */
public record Snapshot(
    String lock,
    boolean held,
    OptionalLong token,
    String holder,
    double expiresInMs,
    String state,
    boolean draining,
    OptionalInt permit) {

  /**
   * Reads a snapshot from parsed JSON, checking the required fields (lock, held, state) and their
   * types; a token must be a canonical decimal string.
   *
   * @throws IllegalArgumentException (a {@link MalformedTokenException} for the token) when the
   *     body is not a valid snapshot
   */
  public static Snapshot fromJson(Object json) {
    if (!(json instanceof Map<?, ?> m)) throw new IllegalArgumentException("lock snapshot: not an object");
    if (!(m.get("lock") instanceof String lock)
        || !(m.get("held") instanceof Boolean held)
        || !(m.get("state") instanceof String state)) {
      throw new IllegalArgumentException("lock snapshot: lock (string), held (boolean) and state (string) are required");
    }
    Object t = m.get("token");
    OptionalLong token = t == null ? OptionalLong.empty() : OptionalLong.of(Token.fromJson(t));
    String holder = m.get("holder") instanceof String h ? h : "";
    double expires = m.get("expiresInMs") instanceof BigDecimal d ? d.doubleValue() : 0;
    OptionalInt permit = OptionalInt.empty();
    if (m.get("permit") instanceof BigDecimal p) {
      try {
        permit = OptionalInt.of(p.intValueExact());
      } catch (ArithmeticException e) {
        throw new IllegalArgumentException("lock snapshot: permit must be an integer, got " + p, e);
      }
    }
    return new Snapshot(lock, held, token, holder, expires, state, m.get("draining") instanceof Map, permit);
  }
}
