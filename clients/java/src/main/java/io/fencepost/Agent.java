package io.fencepost;

import java.io.IOException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.StringJoiner;

/** The HTTP side of one lock: requests to the agent's lock API and their answers. */
final class Agent {
  /** Shared by every lock without a client of its own; HTTP/1.1 (the agent speaks nothing else). */
  static final HttpClient DEFAULT_HTTP =
      HttpClient.newBuilder()
          .version(HttpClient.Version.HTTP_1_1)
          .connectTimeout(Duration.ofSeconds(5))
          .build();

  final String base;
  final String lock;
  final HttpClient http;

  Agent(String base, String lock, HttpClient http) {
    this.base = base.endsWith("/") ? base.substring(0, base.length() - 1) : base;
    this.lock = lock;
    this.http = http;
  }

  /** The lock's endpoint with a suffix ("", "/acquire", ...) and a query (may be empty). */
  URI uri(String suffix, Map<String, String> query) {
    StringBuilder u = new StringBuilder(base).append("/v1/locks/").append(enc(lock).replace("+", "%20")).append(suffix);
    if (!query.isEmpty()) {
      StringJoiner q = new StringJoiner("&", "?", "");
      query.forEach((k, v) -> q.add(enc(k) + "=" + enc(v)));
      u.append(q);
    }
    return URI.create(u.toString());
  }

  private static String enc(String s) {
    return URLEncoder.encode(s, StandardCharsets.UTF_8);
  }

  /**
   * Sends a request bounded by {@code timeout} and reads a 200 answer as a snapshot; any other
   * answer is the exception of its problem details, or a plain {@link FencepostException}.
   */
  Snapshot send(String method, URI uri, Duration timeout) throws FencepostException, InterruptedException {
    // A POST carries Content-Type: application/json and the body {}: the agent refuses any other
    // POST (415), so that a web page cannot send one across sites.
    HttpRequest.Builder b = HttpRequest.newBuilder(uri).timeout(timeout);
    HttpRequest req =
        method.equals("POST")
            ? b.header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString("{}")).build()
            : b.method(method, HttpRequest.BodyPublishers.noBody()).build();
    HttpResponse<String> res;
    try {
      res = http.send(req, HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
    } catch (IOException e) {
      throw new FencepostException("fencepost agent: " + method + " " + uri + ": " + e, null, e);
    }
    return read(res.statusCode(), res.headers().firstValue("content-type").orElse(""), res.body());
  }

  /** Reads an answer: a snapshot for 200, else the matching exception, thrown. */
  static Snapshot read(int status, String contentType, String body) throws FencepostException {
    if (status != 200) throw problem(status, contentType, body);
    try {
      return Snapshot.fromJson(Json.parse(body));
    } catch (IllegalArgumentException e) {
      throw new FencepostException("fencepost agent: bad lock snapshot: " + e.getMessage(), null, e);
    }
  }

  /** The exception for an error answer (problem details, or a plain error for any other body). */
  static FencepostException problem(int status, String contentType, String body) {
    String mt = contentType.split(";", 2)[0].trim().toLowerCase(java.util.Locale.ROOT);
    if (mt.equals("application/problem+json")) {
      try {
        Problem p = Problem.fromJson(status, Json.parse(body));
        if (p != null) return FencepostException.of(p);
      } catch (IllegalArgumentException e) {
        // not JSON: a plain error below
      }
    }
    String shown = body.length() > 200 ? body.substring(0, 200) : body;
    return new FencepostException("fencepost agent: HTTP " + status + ": " + shown);
  }

  /**
   * Releases, best effort and bounded by 5 s, what an abandoned acquire may have left: a queued
   * request or a term granted while the answer was lost.
   */
  void withdraw() {
    try {
      send("POST", uri("/release", Map.of()), Duration.ofSeconds(5));
    } catch (FencepostException e) {
      // best effort: the agent's session ends the request anyway when the pod goes
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
