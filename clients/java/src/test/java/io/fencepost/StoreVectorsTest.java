package io.fencepost;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/** clients/conformance/store.json through the Java store: keys, invalid names, scripts, owner ids, timing. */
class StoreVectorsTest {
  static Map<String, Object> store() throws Exception {
    return Vectors.load("store.json");
  }

  static long num(Object v) {
    return ((BigDecimal) v).longValueExact();
  }

  @TestFactory
  Stream<DynamicTest> the_keys_of_a_lock_are_the_vectors() throws Exception {
    return Vectors.list(Vectors.obj(store(), "keys"), "vectors").stream()
        .map(v -> DynamicTest.dynamicTest(v.get("namespace") + "/" + v.get("name"), () -> {
          StoreKeys k = StoreKeys.of((String) v.get("namespace"), (String) v.get("name"));
          assertEquals(v.get("counter"), k.counter());
          assertEquals(v.get("holder"), k.holder());
          assertEquals(v.get("epoch"), k.epoch());
          assertEquals(v.get("channel"), k.channel());
          assertFalse(k.counter().startsWith("fencepost:guard:"));
        }));
  }

  @TestFactory
  @SuppressWarnings("unchecked")
  Stream<DynamicTest> invalid_names_are_refused_as_names_and_as_namespaces() throws Exception {
    List<Object> invalid = (List<Object>) Vectors.obj(store(), "keys").get("invalid");
    return invalid.stream().map(o -> (String) o).map(bad -> DynamicTest.dynamicTest(Json.quote(bad), () -> {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> StoreKeys.of("default", bad));
      assertTrue(e.getMessage().contains("lock name") && e.getMessage().contains(Json.quote(bad)), e.getMessage());
      e = assertThrows(IllegalArgumentException.class, () -> StoreKeys.of(bad, "billing"));
      assertTrue(e.getMessage().contains("namespace"), e.getMessage());
    }));
  }

  @Test
  void a_63_character_name_is_a_dns_label_and_64_is_not() {
    assertTrue(StoreKeys.isDnsLabel("a".repeat(63)));
    assertFalse(StoreKeys.isDnsLabel("a".repeat(64)));
  }

  @Test
  @SuppressWarnings("unchecked")
  void each_script_is_its_files_from_store_json_in_order() throws Exception {
    Map<String, Object> scripts = Vectors.obj(store(), "scripts");
    Map<String, StoreScripts.Script> built = Map.of(
        "acquire", StoreScripts.ACQUIRE,
        "renew", StoreScripts.RENEW,
        "release", StoreScripts.RELEASE,
        "redlockAcquire", StoreScripts.REDLOCK_ACQUIRE,
        "redlockRaise", StoreScripts.REDLOCK_RAISE);
    for (Map.Entry<String, StoreScripts.Script> e : built.entrySet()) {
      ByteArrayOutputStream shared = new ByteArrayOutputStream();
      for (Object f : (List<Object>) scripts.get(e.getKey())) shared.writeBytes(Files.readAllBytes(Vectors.DIR.resolve((String) f)));
      assertArrayEquals(shared.toByteArray(), e.getValue().text.getBytes(StandardCharsets.UTF_8), "script " + e.getKey());
    }
  }

  @Test
  void owner_ids_are_128_random_bits_new_every_time() {
    Set<String> seen = new HashSet<>();
    for (int i = 0; i < 1000; i++) {
      String id = StoreLock.newOwnerId(null);
      assertTrue(id.matches("[0-9a-f]{32}"), id);
      assertTrue(seen.add(id), "owner id repeated: " + id);
    }
  }

  @Test
  void an_owner_id_names_the_holder_pod_after_its_random_part_when_the_pod_is_valid() {
    StoreLock.HolderPod pod = new StoreLock.HolderPod("web-7d9f-x2k4q", "4f6c1d2e-8b3a-4e5f-9a7b-0c1d2e3f4a5b");
    String id = StoreLock.newOwnerId(pod);
    assertTrue(id.matches("[0-9a-f]{32}/web-7d9f-x2k4q/4f6c1d2e-8b3a-4e5f-9a7b-0c1d2e3f4a5b"), id);
    assertEquals(pod, StoreLock.podOfOwner(id));
    String bad = StoreLock.newOwnerId(new StoreLock.HolderPod("Web", "uid"));
    assertTrue(bad.matches("[0-9a-f]{32}"), "an invalid pod is not named: " + bad);
    assertTrue(StoreLock.newOwnerId(new StoreLock.HolderPod("w", "u".repeat(65))).matches("[0-9a-f]{32}"));
    assertTrue(bad.length() <= 200);
  }

  @TestFactory
  Stream<DynamicTest> the_pod_an_owner_id_names_is_store_json_s() throws Exception {
    return Vectors.list(store(), "ownerVectors").stream()
        .map(v -> DynamicTest.dynamicTest((String) v.get("owner"), () -> {
          StoreLock.HolderPod got = StoreLock.podOfOwner((String) v.get("owner"));
          if (v.get("pod") == Json.NULL) {
            assertEquals(null, got);
          } else {
            Map<String, Object> pod = Vectors.obj(v, "pod");
            assertEquals(new StoreLock.HolderPod((String) pod.get("name"), (String) pod.get("uid")), got);
          }
        }));
  }

  @TestFactory
  Stream<DynamicTest> timing_vectors() throws Exception {
    Map<String, Object> timing = Vectors.obj(store(), "timing");
    return Vectors.list(timing, "vectors").stream()
        .map(v -> DynamicTest.dynamicTest("ttl " + v.get("ttlMs") + " ms", () -> {
          long ttl = num(v.get("ttlMs"));
          assertEquals(num(v.get("driftMs")), StoreTiming.driftMs(ttl), "drift");
          assertEquals(num(v.get("renewEveryMs")), StoreTiming.renewEveryMs(ttl), "renew every");
          assertEquals(1000 + ttl - num(v.get("driftMs")), StoreTiming.validUntil(1000, ttl), "valid until, counted from the send time");
          assertEquals(ttl, StoreTiming.checkTtl(ttl, "ttl"));
        }));
  }

  @Test
  void ttl_bounds_and_default_are_store_json_s() throws Exception {
    Map<String, Object> ttl = Vectors.obj(Vectors.obj(store(), "timing"), "ttlMs");
    assertEquals(num(ttl.get("min")), Protocol.MIN_TTL_MS);
    assertEquals(num(ttl.get("max")), Protocol.MAX_TTL_MS);
    assertEquals(num(ttl.get("default")), Protocol.DEFAULT_TTL_MS);
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> StoreTiming.checkTtl(299, "ttl"));
    assertTrue(e.getMessage().contains("299"), e.getMessage());
    assertThrows(IllegalArgumentException.class, () -> StoreTiming.checkTtl(86_400_001, "ttl"));
  }

  @Test
  void a_redlock_quorum_is_a_majority() {
    assertEquals(2, RedlockBackend.quorum(3));
    assertEquals(3, RedlockBackend.quorum(4));
    assertEquals(3, RedlockBackend.quorum(5));
    assertEquals(500, Protocol.MASTER_TIMEOUT_MS);
  }

  // ---- the watchdog's and the waiter's decisions

  @Test
  void a_renew_that_answers_0_ends_the_lock_at_once() {
    StoreTiming.RenewDecision d = StoreTiming.afterRenew(StoreTiming.RenewOutcome.NOT_OWNER, "", 0, 10, 1000, 1000);
    assertEquals(StoreTiming.RenewDecision.Kind.LOST, d.kind());
  }

  @Test
  void a_renew_extends_the_trust_from_its_send_time_never_backwards() {
    StoreTiming.RenewDecision d = StoreTiming.afterRenew(StoreTiming.RenewOutcome.RENEWED, "", 300, 350, 988, 1000);
    assertEquals(StoreTiming.RenewDecision.Kind.RENEWED, d.kind());
    assertEquals(300 + 1000 - 12, d.at());
    assertEquals(333, d.inMs());
    d = StoreTiming.afterRenew(StoreTiming.RenewOutcome.RENEWED, "", -100, 0, 988, 1000);
    assertEquals(988, d.at(), "a renew sent earlier than the grant does not move the trust back");
  }

  @Test
  void a_renew_answered_after_its_own_validity_is_worth_nothing() {
    StoreTiming.RenewDecision d = StoreTiming.afterRenew(StoreTiming.RenewOutcome.RENEWED, "", 0, 2000, 988, 1000);
    assertEquals(StoreTiming.RenewDecision.Kind.LOST, d.kind());
  }

  @Test
  void a_renew_with_no_answer_is_retried_every_100_ms_until_the_validity_passes() {
    StoreTiming.RenewDecision d = StoreTiming.afterRenew(StoreTiming.RenewOutcome.FAILED, "down", 333, 400, 988, 1000);
    assertEquals(StoreTiming.RenewDecision.Kind.RETRY, d.kind());
    assertEquals(100, d.inMs());
    d = StoreTiming.afterRenew(StoreTiming.RenewOutcome.FAILED, "down", 900, 950, 988, 1000);
    assertEquals(38, d.inMs(), "less when the validity ends sooner");
    d = StoreTiming.afterRenew(StoreTiming.RenewOutcome.FAILED, "down", 900, 988, 988, 1000);
    assertEquals(StoreTiming.RenewDecision.Kind.LOST, d.kind());
    assertTrue(d.reason().contains("down"), d.reason());
  }

  @Test
  void the_backoff_is_full_jitter_50_ms_doubling_to_2_s() {
    assertEquals(0, StoreTiming.backoffMs(0, 50, 2000, () -> 0));
    assertEquals(49, StoreTiming.backoffMs(0, 50, 2000, () -> 0.999));
    assertEquals(99, StoreTiming.backoffMs(1, 50, 2000, () -> 0.999));
    assertEquals(1998, StoreTiming.backoffMs(6, 50, 2000, () -> 0.999));
    assertEquals(1998, StoreTiming.backoffMs(1000, 50, 2000, () -> 0.999));
  }

  @Test
  void a_waiter_sleeps_no_longer_than_the_holder_key_has_left_nor_its_wait() {
    assertEquals(1998, StoreTiming.retryDelayMs(9, 50, 2000, () -> 0.999, -1, Long.MAX_VALUE));
    assertEquals(31, StoreTiming.retryDelayMs(9, 50, 2000, () -> 0.999, 30, Long.MAX_VALUE));
    assertEquals(7, StoreTiming.retryDelayMs(9, 50, 2000, () -> 0.999, 30, 7));
  }

  // ---- store URLs

  @Test
  void a_redis_url_is_one_host_with_a_default_port_a_database_and_credentials() {
    StoreUrl u = StoreUrl.parse("redis://user:s%40cret@cache.internal/3");
    assertEquals(StoreUrl.Kind.REDIS, u.kind());
    assertEquals(List.of(new StoreUrl.Endpoint("cache.internal", 6379)), u.endpoints());
    assertEquals(3, u.db());
    assertEquals("user", u.username());
    assertEquals("s@cret", u.password());
    assertFalse(u.tls());
    assertEquals("redis://user:***@cache.internal/3", u.display());
    assertTrue(StoreUrl.parse("rediss://:pw@[::1]:6380").tls());
    assertEquals(new StoreUrl.Endpoint("::1", 6380), StoreUrl.parse("rediss://:pw@[::1]:6380").endpoints().get(0));
    assertEquals(null, StoreUrl.parse("rediss://:pw@h").username());
  }

  @Test
  void a_redlock_url_is_three_or_more_distinct_masters() {
    StoreUrl u = StoreUrl.parse("redlock://r1:7001,r2,r3:7003,r4:7004,r5:7005");
    assertEquals(StoreUrl.Kind.REDLOCK, u.kind());
    assertEquals(5, u.endpoints().size());
    assertEquals(new StoreUrl.Endpoint("r2", 6379), u.endpoints().get(1));
  }

  @TestFactory
  Stream<DynamicTest> bad_urls_are_refused_naming_the_option_and_the_redacted_value() {
    Map<String, String> cases = Map.ofEntries(
        Map.entry("127.0.0.1:6379", "must be a URL"),
        Map.entry("http://h:1", "is not a store"),
        Map.entry("redis://h1,h2", "takes one host"),
        Map.entry("redis://h:0", "not in 1..65535"),
        Map.entry("redis://h:70000", "not in 1..65535"),
        Map.entry("redis://h/x", "database must be a number"),
        Map.entry("redis://h/1/2", "the path is the database number only"),
        Map.entry("redis://h?db=1", "takes no query"),
        Map.entry("redis://u:hunter2@h_/0", "is not a host name"),
        Map.entry("redis://", "a host is missing"),
        Map.entry("redlock://a,b", "at least 3"),
        Map.entry("redlock://a,b,A:6379", "named twice"),
        Map.entry("redis+sentinel://s1,s2/mymaster", "not supported by the Java client"),
        Map.entry("redis+cluster://n1,n2", "not supported by the Java client"));
    return cases.entrySet().stream().map(c -> DynamicTest.dynamicTest(c.getKey(), () -> {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> StoreUrl.parse(c.getKey(), "--store"));
      assertTrue(e.getMessage().startsWith("--store: "), e.getMessage());
      assertTrue(e.getMessage().contains(c.getValue()), e.getMessage());
      assertTrue(e.getMessage().contains(Json.quote(StoreUrl.redact(c.getKey()))), e.getMessage());
      assertFalse(e.getMessage().contains("hunter2"), e.getMessage());
    }));
  }

  @Test
  void redact_hides_the_password_only() {
    assertEquals("redlock://u:***@a,b,c", StoreUrl.redact("redlock://u:pw@a,b,c"));
    assertEquals("redis://h:6379", StoreUrl.redact("redis://h:6379"));
    assertEquals("redis://user@h", StoreUrl.redact("redis://user@h"));
    assertEquals("redis://:***@h", StoreUrl.redact("redis://:secret@h"));
  }
}
