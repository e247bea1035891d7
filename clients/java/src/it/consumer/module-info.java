// A modular application that uses the built jar as users do: from the module path, by the jar's
// Automatic-Module-Name (hack/test-clients.sh compiles and runs it against target/*.jar). An
// automatic module declares no requires of its own, so the application names java.net.http (the
// client's HTTP stack) itself, as clients/java/README.md says; the guards add java.sql and Jedis.
module consumer {
  requires io.fencepost;
  requires java.net.http;
}
