package io.fencepost.guard;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.fencepost.Vectors;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

class SqlStatementsTest {
  @SuppressWarnings("unchecked")
  static SqlGuard.Spec spec(Map<String, Object> s) {
    return new SqlGuard.Spec(
        (String) s.get("schema"),
        (String) s.get("table"),
        (String) s.get("idColumn"),
        (List<String>) s.get("setColumns"),
        (String) s.get("lock"),
        (String) s.get("fenceTable"),
        (String) s.get("fenceSchema"));
  }

  @TestFactory
  Stream<DynamicTest> the_shared_sql_statement_vectors_byte_for_byte() throws Exception {
    return Vectors.list(Vectors.load("sql-statements.json"), "valid").stream()
        .map(c -> DynamicTest.dynamicTest((String) c.get("name"), () -> {
          Map<String, Object> s = Vectors.obj(c, "spec");
          SqlGuard.Statements st = SqlGuard.build(spec(s));
          assertEquals(c.get("update"), st.update());
          assertEquals(c.get("upsert"), st.upsert());
          assertEquals(c.get("delete"), st.delete());
          assertEquals(c.get("advance"), st.advance());
          assertEquals(c.get("fenceTable"), SqlGuard.fenceTableSql((String) s.get("fenceSchema"), (String) s.get("fenceTable")));
        }));
  }

  @TestFactory
  Stream<DynamicTest> the_shared_invalid_specs_are_refused() throws Exception {
    return Vectors.list(Vectors.load("sql-statements.json"), "invalid").stream()
        .map(c -> DynamicTest.dynamicTest((String) c.get("name"), () ->
            assertThrows(IllegalArgumentException.class, () -> SqlGuard.build(spec(Vectors.obj(c, "spec"))))));
  }

  @Test
  void for_jdbc_each_dollar_parameter_becomes_a_question_mark_bound_in_order() {
    SqlGuard.Statements st = SqlGuard.build(new SqlGuard.Spec("items", "id", List.of("v"), "billing"));
    List<Integer> order = new ArrayList<>();
    String jdbc = SqlGuard.jdbc(st.upsert(), order);
    assertFalse(jdbc.contains("$"));
    assertEquals(List.of(4, 2, 1, 3), order);
    assertEquals(order.size(), jdbc.chars().filter(ch -> ch == '?').count());
  }
}
