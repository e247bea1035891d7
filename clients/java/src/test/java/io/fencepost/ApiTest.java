package io.fencepost;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigDecimal;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

class ApiTest {
  @TestFactory
  Stream<DynamicTest> the_shared_snapshot_vectors() throws Exception {
    return Vectors.list(Vectors.load("api-responses.json"), "snapshots").stream()
        .map(c -> DynamicTest.dynamicTest((String) c.get("name"), () -> {
          String body = Vectors.toJson(c.get("body"));
          if (!(Boolean) c.get("valid")) {
            assertThrows(FencepostException.class, () -> Agent.read(200, "application/json", body));
            return;
          }
          Snapshot s = Agent.read(200, "application/json", body);
          assertEquals(c.get("held"), s.held());
          if (c.get("token") == null) assertTrue(s.token().isEmpty());
          else assertEquals(Long.parseLong((String) c.get("token")), s.token().getAsLong());
        }));
  }

  @TestFactory
  Stream<DynamicTest> the_shared_event_vectors() throws Exception {
    return Vectors.list(Vectors.load("api-responses.json"), "events").stream()
        .map(c -> DynamicTest.dynamicTest((String) c.get("name"), () -> {
          Object body = Json.parse(Vectors.toJson(c.get("body")));
          if (!(Boolean) c.get("valid")) {
            assertThrows(IllegalArgumentException.class, () -> Event.fromJson(body));
            return;
          }
          Event e = Event.fromJson(body);
          assertEquals(c.get("event"), e.type());
          assertEquals(Long.parseLong((String) c.get("token")), e.token());
        }));
  }

  @TestFactory
  Stream<DynamicTest> the_shared_problem_vectors_raise_the_typed_exceptions() throws Exception {
    Map<String, Class<? extends FencepostException>> types =
        Map.of(
            "not-acquired", NotAcquiredException.class,
            "already-done", AlreadyDoneException.class,
            "lost", LockLostException.class,
            "other", FencepostException.class);
    return Vectors.list(Vectors.load("api-responses.json"), "problems").stream()
        .map(c -> DynamicTest.dynamicTest((String) c.get("name"), () -> {
          int status = ((BigDecimal) c.get("status")).intValueExact();
          FencepostException e =
              assertThrows(
                  FencepostException.class,
                  () -> Agent.read(status, "application/problem+json; charset=utf-8", Vectors.toJson(c.get("body"))));
          assertEquals(types.get((String) c.get("error")), e.getClass());
          assertEquals(status, e.problem().status());
          assertEquals(Vectors.obj(c, "body").get("type"), e.problem().type());
        }));
  }

  @Test
  void an_error_answer_that_is_not_problem_details_is_a_plain_error() {
    FencepostException e = Agent.problem(502, "text/html", "<html>bad gateway</html>");
    assertEquals(FencepostException.class, e.getClass());
    assertEquals(null, e.problem());
    assertTrue(e.getMessage().contains("HTTP 502"));
  }

  @Test
  void json_numbers_stay_exact_and_are_not_strings() {
    Object v = Json.parse("{\"a\": 9007199254740993, \"b\": \"9007199254740993\", \"c\": [true, null, -1.5e2]}");
    Map<?, ?> m = assertInstanceOf(Map.class, v);
    assertEquals(new BigDecimal("9007199254740993"), m.get("a"));
    assertEquals("9007199254740993", m.get("b"));
    assertEquals(java.util.List.of(true, Json.NULL, new BigDecimal("-1.5e2")), m.get("c"));
  }

  @Test
  void malformed_json_is_refused() {
    for (String bad : new String[] {"", "{", "{\"a\" 1}", "[1,]", "01", "\"\\x\"", "{} x", "tru"}) {
      assertThrows(IllegalArgumentException.class, () -> Json.parse(bad), bad);
    }
    assertFalse(Json.quote("a\"b\n").contains("\n"));
  }
}
