package io.fencepost;

import java.io.BufferedReader;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;

/** Server-Sent Events: a reader of messages (id, event, data). */
final class Sse {
  /** One message; event is "message" when the stream named none. */
  record Message(String id, String event, String data) {}

  private Sse() {}

  /**
   * Reads messages from {@code r} and calls {@code emit} for each until the stream ends. Comments
   * (": ping") and retry fields are ignored; the last id carries over to later messages.
   */
  static void read(BufferedReader r, Consumer<Message> emit) throws IOException {
    String id = "";
    String event = "";
    List<String> data = new ArrayList<>();
    for (String line; (line = r.readLine()) != null; ) {
      if (line.isEmpty()) {
        if (!data.isEmpty() || !event.isEmpty()) {
          emit.accept(new Message(id, event.isEmpty() ? "message" : event, String.join("\n", data)));
        }
        event = "";
        data.clear();
        continue;
      }
      if (line.startsWith(":")) continue;
      int colon = line.indexOf(':');
      String field = colon < 0 ? line : line.substring(0, colon);
      String value = colon < 0 ? "" : line.substring(colon + 1);
      if (value.startsWith(" ")) value = value.substring(1);
      switch (field) {
        case "event" -> event = value;
        case "data" -> data.add(value);
        case "id" -> id = value;
        default -> {}
      }
    }
  }
}
