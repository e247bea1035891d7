package io.fencepost;

import java.util.regex.Pattern;

/**
 * The Redis keys and the release channel of one store lock (clients/conformance/store.json
 * "keys"; the TypeScript reference: src/stores/redis/keys.ts). The counter is the controller's own
 * fencing counter, so a lock's tokens continue when it moves between the controller and a store;
 * the holder and epoch keys carry the counter key as a Redis Cluster hash tag, so the three are in
 * one slot. None of them is under the guards' reserved prefix {@code fencepost:guard:}.
 *
 * @param counter {@code fencepost:fence:NS/NAME}: the token counter (never deleted, never given a TTL)
 * @param holder {@code fencepost:lock:{fencepost:fence:NS/NAME}}: the owner id, with the TTL
 * @param epoch {@code fencepost:epoch:{fencepost:fence:NS/NAME}}: the replication ID (INFO
 *     replication master_replid) of the Redis master that last issued a token for the lock, new
 *     whenever a node becomes a master; when another one issues the next token (a failover, a
 *     failback, a restart), the counter jumps by 1,000 and the token is floored at the server's
 *     clock (fence-next.lua fence_epoch; {@link StoreLock#clockFloored()})
 * @param channel {@code fencepost:released:NS/NAME}: where a release is published
 */
public record StoreKeys(String counter, String holder, String epoch, String channel) {
  /** The namespace of a store lock when none is given. */
  public static final String DEFAULT_NAMESPACE = Protocol.DEFAULT_NAMESPACE;

  private static final Pattern DNS_LABEL = Pattern.compile("[a-z0-9]([-a-z0-9]*[a-z0-9])?");

  /**
   * The keys of lock {@code name} in {@code namespace}, both checked first.
   *
   * @throws IllegalArgumentException when either is not a DNS label (the message names it)
   */
  public static StoreKeys of(String namespace, String name) {
    check("namespace", namespace);
    check("lock name", name);
    String counter = Protocol.COUNTER_KEY_PREFIX + namespace + "/" + name;
    return new StoreKeys(counter, Protocol.HOLDER_KEY_PREFIX + "{" + counter + "}",
        Protocol.EPOCH_KEY_PREFIX + "{" + counter + "}", Protocol.CHANNEL_PREFIX + namespace + "/" + name);
  }

  /** Whether {@code s} is a DNS label (RFC 1123: a-z, 0-9 and inner dashes; 1 to 63 characters). */
  public static boolean isDnsLabel(String s) {
    return s != null && s.length() <= 63 && DNS_LABEL.matcher(s).matches();
  }

  private static void check(String what, String s) {
    if (!isDnsLabel(s)) {
      throw new IllegalArgumentException("fencepost: " + what + " must be a DNS label (a-z, 0-9, -; at most 63), got "
          + (s == null ? "null" : Json.quote(s)));
    }
  }
}
