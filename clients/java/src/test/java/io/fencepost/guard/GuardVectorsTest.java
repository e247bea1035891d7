package io.fencepost.guard;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.fencepost.MalformedTokenException;
import io.fencepost.Token;
import io.fencepost.Vectors;
import java.net.URI;
import java.security.SecureRandom;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.condition.EnabledIfEnvironmentVariable;
import redis.clients.jedis.RedisClient;

/**
 * The shared guard outcome vectors (clients/conformance/guard-outcomes.json) through the Java
 * guards on real servers: FENCEPOST_TEST_REDIS_URL (redis://...) and FENCEPOST_TEST_POSTGRES_URL
 * (jdbc:postgresql://...). Without them these are skipped, saying so;
 * test/integration/clients/java.test.ts runs them on the shared redis-server and a PostgreSQL.
 */
class GuardVectorsTest {
  static final SecureRandom RANDOM = new SecureRandom();

  static String fresh() {
    byte[] b = new byte[4];
    RANDOM.nextBytes(b);
    return HexFormat.of().formatHex(b);
  }

  static String env(String name) {
    return System.getenv(name);
  }

  @TestFactory
  @EnabledIfEnvironmentVariable(named = "FENCEPOST_TEST_REDIS_URL", matches = ".+", disabledReason = "FENCEPOST_TEST_REDIS_URL is not set: the guard vectors need a real redis-server (java.test.ts sets it)")
  Stream<DynamicTest> redis_guard_vectors() throws Exception {
    String url = env("FENCEPOST_TEST_REDIS_URL");
    RedisClient redis = RedisClient.create(URI.create(url));
    return Vectors.list(Vectors.load("guard-outcomes.json"), "redis").stream()
        .map(c -> DynamicTest.dynamicTest((String) c.get("name"), () -> {
          String id = fresh();
          RedisGuard g = new RedisGuard(redis, "java-vectors-" + id);
          String prefix = "java-vectors:" + id + ":";
          for (Map<String, Object> s : Vectors.list(c, "steps")) {
            String op = (String) s.get("op");
            String key = prefix + s.get("key");
            if (op.equals("get")) {
              Object want = s.get("value");
              assertEquals(want instanceof String ? want : null, redis.get(key), "get " + s.get("key"));
              continue;
            }
            String expect = (String) s.get("expect");
            if (expect.equals("token-error")) {
              assertThrows(MalformedTokenException.class, () -> Token.parse((String) s.get("token")));
              continue;
            }
            long token = Token.parse((String) s.get("token"));
            RedisGuard.Result r =
                switch (op) {
                  case "write" -> s.get("writeId") instanceof String w
                      ? g.writeOnce(key, token, (String) s.get("value"), w)
                      : g.write(key, token, (String) s.get("value"));
                  case "delete" -> g.delete(key, token);
                  case "advance" -> g.advance(token);
                  default -> throw new IllegalArgumentException("unknown op " + op);
                };
            assertEquals(expect, r.outcome().wire(), op + " " + s.get("token"));
            if (s.get("mark") instanceof String m) assertEquals(Long.parseLong(m), r.mark().getAsLong(), "mark");
          }
        }));
  }

  @TestFactory
  @EnabledIfEnvironmentVariable(named = "FENCEPOST_TEST_POSTGRES_URL", matches = ".+", disabledReason = "FENCEPOST_TEST_POSTGRES_URL is not set: the guard vectors need a real PostgreSQL (java.test.ts sets it)")
  Stream<DynamicTest> sql_guard_vectors() throws Exception {
    String url = env("FENCEPOST_TEST_POSTGRES_URL");
    Connection db = DriverManager.getConnection(url);
    try (Statement st = db.createStatement()) {
      st.execute(SqlGuard.fenceTableSql());
    }
    return Vectors.list(Vectors.load("guard-outcomes.json"), "sql").stream()
        .map(c -> DynamicTest.dynamicTest((String) c.get("name"), () -> {
          String id = fresh();
          String table = "java_vectors_" + id;
          try (Statement st = db.createStatement()) {
            st.execute("CREATE TABLE " + table + " (id bigint PRIMARY KEY, v text)");
          }
          SqlGuard g = new SqlGuard(db, new SqlGuard.Spec(table, "id", List.of("v"), "java-vectors-" + id));
          for (Map<String, Object> s : Vectors.list(c, "steps")) {
            String op = (String) s.get("op");
            long rowId = s.get("id") == null ? 0 : ((java.math.BigDecimal) s.get("id")).longValueExact();
            if (op.equals("read")) {
              List<String> got = null;
              try (PreparedStatement ps = db.prepareStatement("SELECT v FROM " + table + " WHERE id = ?")) {
                ps.setLong(1, rowId);
                try (ResultSet rs = ps.executeQuery()) {
                  if (rs.next()) got = List.of(rs.getString(1));
                }
              }
              Object want = s.get("values");
              assertEquals(want instanceof List<?> l ? new ArrayList<>(l) : null, got, "read " + rowId);
              continue;
            }
            String expect = (String) s.get("expect");
            if (expect.equals("token-error")) {
              assertThrows(MalformedTokenException.class, () -> Token.parse((String) s.get("token")));
              continue;
            }
            long token = Token.parse((String) s.get("token"));
            Object[] values = s.get("values") instanceof List<?> l ? l.toArray() : new Object[0];
            Outcome o =
                switch (op) {
                  case "upsert" -> g.upsert(rowId, token, values);
                  case "write" -> g.update(rowId, token, values);
                  case "delete" -> g.delete(rowId, token);
                  case "advance" -> g.advance(token);
                  default -> throw new IllegalArgumentException("unknown op " + op);
                };
            String want = expect.equals("accepted") ? "applied" : expect;
            assertEquals(want, o.wire(), op + " " + s.get("token"));
          }
        }));
  }
}
