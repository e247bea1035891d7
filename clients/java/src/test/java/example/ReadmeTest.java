package example;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The README's complete examples are the compiled programs of src/test/java/example (Worker.java,
 * StoreExample.java), which the integration tests run: every ```java block of README.md that is a
 * whole program (starts with "package example;") must equal its file.
 */
class ReadmeTest {
  @Test
  void the_readme_examples_are_the_compiled_programs() throws Exception {
    String readme = Files.readString(Path.of("README.md"));
    Matcher block = Pattern.compile("\n```java\n(.*?)```\n", Pattern.DOTALL).matcher(readme);
    Pattern cls = Pattern.compile("public final class (\\w+)");
    Set<String> seen = new HashSet<>();
    while (block.find()) {
      String code = block.group(1);
      if (!code.startsWith("package example;")) continue;
      Matcher m = cls.matcher(code);
      assertTrue(m.find(), "a README example without a public final class");
      Path file = Path.of("src", "test", "java", "example", m.group(1) + ".java");
      assertEquals(Files.readString(file), code, "README.md's example differs from " + file);
      seen.add(m.group(1));
    }
    assertEquals(Set.of("Worker", "StoreExample"), seen, "README.md's complete examples");
  }
}
