package io.fencepost;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.math.BigDecimal;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

class TokenTest {
  @TestFactory
  Stream<DynamicTest> the_shared_token_parse_vectors() throws Exception {
    List<Map<String, Object>> cases = Vectors.list(Vectors.load("tokens.json"), "parse");
    return cases.stream()
        .map(c -> DynamicTest.dynamicTest((String) c.get("name"), () -> {
          Object input = c.get("input");
          if ((Boolean) c.get("valid")) {
            assertEquals(Long.parseLong((String) c.get("value")), Token.fromJson(input));
            assertEquals(c.get("value"), Token.format(Token.fromJson(input)));
          } else {
            assertThrows(MalformedTokenException.class, () -> Token.fromJson(input));
          }
        }));
  }

  @TestFactory
  Stream<DynamicTest> the_shared_token_compare_vectors_as_longs() throws Exception {
    return Vectors.list(Vectors.load("tokens.json"), "compare").stream()
        .map(c -> DynamicTest.dynamicTest(c.get("a") + " vs " + c.get("b"), () -> {
          long a = Token.parse((String) c.get("a"));
          long b = Token.parse((String) c.get("b"));
          assertEquals(((BigDecimal) c.get("order")).intValueExact(), Long.signum(Long.compare(a, b)));
        }));
  }

  @Test
  void the_maximum_is_2_to_the_63_minus_1_as_in_the_vectors() throws Exception {
    assertEquals(Vectors.load("tokens.json").get("maxToken"), Long.toString(Token.MAX));
    assertEquals(Long.MAX_VALUE, Token.parse("9223372036854775807"));
  }

  @Test
  void a_negative_long_is_not_a_token() {
    assertThrows(MalformedTokenException.class, () -> Token.format(-1));
    assertThrows(MalformedTokenException.class, () -> Token.check(Long.MIN_VALUE));
  }

  @Test
  void a_null_is_not_a_token() {
    assertThrows(MalformedTokenException.class, () -> Token.parse(null));
  }
}
