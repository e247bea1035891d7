package example;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/** The README's example is Worker.java, which the build compiles and the integration test runs. */
class ReadmeTest {
  @Test
  void the_readme_example_is_the_compiled_worker() throws Exception {
    String readme = Files.readString(Path.of("README.md"));
    String example = Files.readString(Path.of("src", "test", "java", "example", "Worker.java"));
    int start = readme.indexOf("\n```java\n");
    assertTrue(start >= 0, "README.md has no ```java block");
    start += "\n```java\n".length();
    int end = readme.indexOf("```\n", start);
    assertTrue(end >= 0, "README.md's ```java block is not closed");
    assertEquals(example, readme.substring(start, end), "README.md's example differs from src/test/java/example/Worker.java");
  }
}
