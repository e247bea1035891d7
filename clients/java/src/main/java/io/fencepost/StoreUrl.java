package io.fencepost;

import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A parsed store URL (the TypeScript reference: src/stores/url.ts), checked before anything
 * connects:
 *
 * <pre>
 *   redis://[[user]:password@]host[:port][/db]            one Redis (rediss:// for TLS)
 *   redlock://[[user]:password@]h1:p1,h2:p2,h3:p3[/db]    Redlock over N independent masters (N &ge; 3)
 * </pre>
 *
 * The default port is 6379. {@code redis+sentinel://} and {@code redis+cluster://}, which the
 * TypeScript library also takes, are refused by the Java client (not built yet). Errors are
 * {@link IllegalArgumentException}s whose message names the option and the URL, with its password
 * replaced by {@code ***}: an error message ends up in logs.
 */
public final class StoreUrl {
  /** The kind of store a URL names. */
  public enum Kind {
    /** One Redis: {@code redis://}, {@code rediss://}. */
    REDIS,
    /** N independent masters: {@code redlock://}. */
    REDLOCK
  }

  /**
   * One host and port.
   *
   * @param host a host name or an address (an IPv6 address without its brackets)
   * @param port 1..65535
   */
  public record Endpoint(String host, int port) {
    @Override
    public String toString() {
      return (host.contains(":") ? "[" + host + "]" : host) + ":" + port;
    }
  }

  /** With fewer than three masters, one master's failure stops every grant; use five. */
  public static final int MIN_REDLOCK_MASTERS = Protocol.MIN_REDLOCK_MASTERS;

  private static final Pattern SHAPE =
      Pattern.compile("^([a-zA-Z][a-zA-Z0-9+.-]*)://(?:([^@/?#]*)@)?([^/?#]*)(/[^?#]*)?([?#].*)?$");
  private static final Pattern HOST =
      Pattern.compile("^(\\[[0-9a-fA-F:.]+\\]|[a-zA-Z0-9]([-a-zA-Z0-9.]*[a-zA-Z0-9])?)$");
  private static final Pattern PORTED = Pattern.compile("^(.*?)(?::([0-9]+))?$");
  private static final Pattern DB = Pattern.compile("^(0|[1-9][0-9]{0,3})$");
  private static final Pattern REDACT = Pattern.compile("^([a-zA-Z][a-zA-Z0-9+.-]*://[^:@/?#]*:)[^@/?#]*@");

  private final Kind kind;
  private final List<Endpoint> endpoints;
  private final int db;
  private final boolean tls;
  private final String username;
  private final String password;
  private final String display;

  private StoreUrl(Kind kind, List<Endpoint> endpoints, int db, boolean tls, String username, String password, String display) {
    this.kind = kind;
    this.endpoints = List.copyOf(endpoints);
    this.db = db;
    this.tls = tls;
    this.username = username;
    this.password = password;
    this.display = display;
  }

  /** REDIS or REDLOCK. */
  public Kind kind() {
    return kind;
  }

  /** The one Redis, or the Redlock masters in the URL's order. */
  public List<Endpoint> endpoints() {
    return endpoints;
  }

  /** The database number (0 when the URL has none). */
  public int db() {
    return db;
  }

  /** Whether the connection uses TLS ({@code rediss://}). */
  public boolean tls() {
    return tls;
  }

  /** The user of the URL's user info, or null. */
  public String username() {
    return username;
  }

  /** The password of the URL's user info, or null. */
  public String password() {
    return password;
  }

  /** The URL with its password replaced by {@code ***}. */
  public String display() {
    return display;
  }

  @Override
  public String toString() {
    return display;
  }

  /** Parses {@code url}; errors name the option {@code "store"}. */
  public static StoreUrl parse(String url) {
    return parse(url, "store");
  }

  /**
   * Parses {@code url}.
   *
   * @param what names the option in errors ({@code --store}, {@code options.store})
   * @throws IllegalArgumentException naming {@code what}, the problem and the redacted URL
   */
  public static StoreUrl parse(String url, String what) {
    if (url == null) throw new IllegalArgumentException(what + ": a store URL is required, got null");
    String display = redact(url);
    Matcher m = SHAPE.matcher(url);
    if (!m.matches()) {
      throw fail(what, display, "must be a URL such as redis://127.0.0.1:6379 or redlock://h1:6379,h2:6379,h3:6379");
    }
    String scheme = m.group(1).toLowerCase(Locale.ROOT);
    switch (scheme) {
      case "redis", "rediss", "redlock" -> {}
      case "redis+sentinel", "redis+cluster" -> throw fail(what, display,
          scheme + ":// is not supported by the Java client yet; use redis://, rediss:// or redlock://");
      default -> throw fail(what, display, "scheme " + scheme + ":// is not a store; use redis://, rediss:// or redlock://");
    }
    String info = m.group(2);
    String path = m.group(4) == null ? "" : m.group(4).substring(1);
    if (m.group(5) != null) throw fail(what, display, "takes no query or fragment");
    String user = null;
    String pass = null;
    if (info != null && !info.isEmpty()) {
      int colon = info.indexOf(':');
      user = decode(colon < 0 ? info : info.substring(0, colon), what, display);
      pass = colon < 0 ? null : decode(info.substring(colon + 1), what, display);
      if (user.isEmpty()) user = null;
    }
    List<Endpoint> endpoints = new ArrayList<>();
    for (String h : m.group(3).split(",", -1)) endpoints.add(endpoint(h, what, display));
    if (path.contains("/")) throw fail(what, display, "the path is the database number only");
    int db = 0;
    if (!path.isEmpty()) {
      if (!DB.matcher(path).matches()) {
        throw fail(what, display, "database must be a number from 0 to 9999, not " + Json.quote(path));
      }
      db = Integer.parseInt(path);
    }
    switch (scheme) {
      case "redis", "rediss" -> {
        if (endpoints.size() != 1) {
          throw fail(what, display, scheme + ":// takes one host; for several masters use redlock://");
        }
        return new StoreUrl(Kind.REDIS, endpoints, db, scheme.equals("rediss"), user, pass, display);
      }
      case "redlock" -> {
        if (endpoints.size() < MIN_REDLOCK_MASTERS) {
          throw fail(what, display, "redlock:// needs at least " + MIN_REDLOCK_MASTERS
              + " independent masters (5 is usual), not " + endpoints.size());
        }
        Set<String> seen = new HashSet<>();
        for (Endpoint e : endpoints) {
          String key = e.host().toLowerCase(Locale.ROOT) + ":" + e.port();
          if (!seen.add(key)) {
            throw fail(what, display, "master " + key + " is named twice; Redlock's majority needs distinct masters");
          }
        }
        return new StoreUrl(Kind.REDLOCK, endpoints, db, false, user, pass, display);
      }
      default -> throw new IllegalStateException("unreachable: " + scheme);
    }
  }

  /** Replaces the password of a URL's user info with {@code ***}. */
  public static String redact(String url) {
    return REDACT.matcher(url).replaceFirst("$1***@");
  }

  private static IllegalArgumentException fail(String what, String display, String problem) {
    return new IllegalArgumentException(what + ": " + problem + ", got " + Json.quote(display));
  }

  private static String decode(String s, String what, String display) {
    try {
      return URLDecoder.decode(s.replace("+", "%2B"), StandardCharsets.UTF_8);
    } catch (IllegalArgumentException e) {
      throw fail(what, display, "the user info is not valid percent-encoding");
    }
  }

  private static Endpoint endpoint(String text, String what, String display) {
    if (text.isEmpty()) throw fail(what, display, "a host is missing");
    Matcher m = PORTED.matcher(text);
    if (!m.matches()) throw fail(what, display, Json.quote(text) + " is not a host name or address");
    String host = m.group(1);
    if (!HOST.matcher(host).matches()) throw fail(what, display, Json.quote(host) + " is not a host name or address");
    int port = 6379;
    if (m.group(2) != null) {
      String p = m.group(2);
      port = p.length() > 5 ? 0 : Integer.parseInt(p);
      if (port < 1 || port > 65535) throw fail(what, display, "port " + p + " is not in 1..65535");
    }
    return new Endpoint(host.startsWith("[") ? host.substring(1, host.length() - 1) : host, port);
  }
}
