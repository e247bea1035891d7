package io.fencepost.guard;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

class ScriptTest {
  @Test
  void the_guard_runs_the_shared_lua_script_byte_for_byte() throws Exception {
    byte[] shared = Files.readAllBytes(Path.of("..", "conformance", "redis-fenced-write.lua"));
    assertArrayEquals(shared, RedisGuard.SCRIPT.getBytes(StandardCharsets.UTF_8));
  }
}
