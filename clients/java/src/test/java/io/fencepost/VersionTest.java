package io.fencepost;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/** The client is versioned with the project: package.json's version, in pom.xml and Version. */
class VersionTest {
  @Test
  void the_version_is_package_jsons_in_the_pom_and_the_class() throws Exception {
    @SuppressWarnings("unchecked")
    Map<String, Object> pkg = (Map<String, Object>) Json.parse(Files.readString(Path.of("..", "..", "package.json")));
    String version = (String) pkg.get("version");
    assertEquals(version, Version.VERSION);
    // The project's own version: the first <version> after </modelVersion>, before <dependencies>.
    String pom = Files.readString(Path.of("pom.xml"));
    Matcher m = Pattern.compile("<artifactId>fencepost-client</artifactId>\\s*<version>([^<]+)</version>").matcher(pom);
    assertTrue(m.find(), "pom.xml: no version after the artifactId");
    assertEquals(version, m.group(1));
  }
}
