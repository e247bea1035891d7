package io.fencepost.guard;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

class ScriptTest {
  @Test
  void the_packaged_lua_script_is_the_shared_one_byte_for_byte() throws Exception {
    byte[] shared = Files.readAllBytes(Path.of("..", "conformance", "redis-fenced-write.lua"));
    byte[] packaged;
    try (InputStream in = RedisGuard.class.getResourceAsStream("redis-fenced-write.lua")) {
      assertNotNull(in, "redis-fenced-write.lua is not on the class path");
      packaged = in.readAllBytes();
    }
    assertArrayEquals(shared, packaged, "src/main/resources/io/fencepost/guard/redis-fenced-write.lua differs from clients/conformance/redis-fenced-write.lua: copy it again");
    assertArrayEquals(shared, RedisGuard.SCRIPT.getBytes(java.nio.charset.StandardCharsets.UTF_8));
  }
}
