package io.fencepost.guard;

import io.fencepost.Token;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Makes PostgreSQL refuse the writes of a holder whose term is over, with the lock-scoped default
 * of the TS guard (src/guards/sql-guard.ts): one statement raises the lock's row in the fence
 * table to the token — only if it is not above it — and writes only if that happened, atomically.
 * The statements are byte for byte those of clients/conformance/sql-statements.json (with {@code
 * $n} parameters); for JDBC each {@code $n} becomes a {@code ?} bound in order. The token is bound
 * as a {@code bigint} ({@code setLong}), never a float. Names are checked, never escaped.
 */
public final class SqlGuard {
  /** The fence table's default name. */
  public static final String DEFAULT_FENCE_TABLE = "fencepost_fences";

  private static final Pattern IDENTIFIER = Pattern.compile("[A-Za-z_][A-Za-z0-9_]*");
  private static final int MAX_IDENTIFIER = 63;
  private static final Pattern PARAM = Pattern.compile("\\$(\\d+)");
  private static final String STEPS = "SELECT 'fenced' AS step FROM fence UNION ALL SELECT 'written' FROM w";

  /**
   * What a guard writes.
   *
   * @param schema the table's schema, or null
   * @param table the guarded table
   * @param idColumn its primary key (the conflict target of upsert)
   * @param setColumns the columns update and upsert set, in the order of their values
   * @param lock the lock whose fence row guards the table
   * @param fenceTable the fence table (null: {@link #DEFAULT_FENCE_TABLE})
   * @param fenceSchema the fence table's schema, or null
   */
  public record Spec(
      String schema,
      String table,
      String idColumn,
      List<String> setColumns,
      String lock,
      String fenceTable,
      String fenceSchema) {
    /** A spec in the default schema with the default fence table. */
    public Spec(String table, String idColumn, List<String> setColumns, String lock) {
      this(null, table, idColumn, setColumns, lock, null, null);
    }
  }

  /** The four statements of a spec, with {@code $n} parameters. */
  public record Statements(String update, String upsert, String delete, String advance) {}

  private final Connection db;
  private final String lock;
  private final int n;
  private final Statements statements;

  /**
   * A guard writing through {@code db} (autocommit, or commit yourself: the fence and the write
   * are one statement).
   *
   * @throws IllegalArgumentException for a spec with a name that is not an identifier
   */
  public SqlGuard(Connection db, Spec spec) {
    this.db = Objects.requireNonNull(db);
    this.statements = build(spec);
    this.lock = spec.lock();
    this.n = spec.setColumns().size();
  }

  /** The guard's statements. */
  public Statements statements() {
    return statements;
  }

  private static String quote(String name, String what) {
    if (name == null || !IDENTIFIER.matcher(name).matches()) {
      throw new IllegalArgumentException("guard: " + what + " " + name + " is not an identifier of the form [A-Za-z_][A-Za-z0-9_]*");
    }
    if (name.length() > MAX_IDENTIFIER) {
      throw new IllegalArgumentException("guard: " + what + " " + name + " is longer than " + MAX_IDENTIFIER + " characters");
    }
    return "\"" + name + "\"";
  }

  private static String qualified(String schema, String name, String schemaWhat, String nameWhat) {
    String q = quote(name, nameWhat);
    return schema == null || schema.isEmpty() ? q : quote(schema, schemaWhat) + "." + q;
  }

  private static String fence(String fenceSchema, String fenceTable) {
    return qualified(fenceSchema, fenceTable == null || fenceTable.isEmpty() ? DEFAULT_FENCE_TABLE : fenceTable, "fenceSchema", "fenceTable");
  }

  /** CREATE TABLE IF NOT EXISTS for the fence table (a migration: run it once). */
  public static String fenceTableSql(String fenceSchema, String fenceTable) {
    return "CREATE TABLE IF NOT EXISTS " + fence(fenceSchema, fenceTable)
        + " (\"lock\" text PRIMARY KEY, \"token\" bigint NOT NULL CHECK (\"token\" >= 0))";
  }

  /** The default fence table's CREATE TABLE IF NOT EXISTS. */
  public static String fenceTableSql() {
    return fenceTableSql(null, null);
  }

  private static String fenceStep(String fence, String token, String lock) {
    return "WITH fence AS (INSERT INTO " + fence + " (\"lock\", \"token\") VALUES (" + lock + ", " + token
        + ") ON CONFLICT (\"lock\") DO UPDATE SET \"token\" = EXCLUDED.\"token\" WHERE " + fence
        + ".\"token\" <= EXCLUDED.\"token\" RETURNING 1)";
  }

  /**
   * Builds the statements of a spec.
   *
   * @throws IllegalArgumentException for a name that is not an identifier, no or repeated
   *     columns, or an empty lock
   */
  public static Statements build(Spec spec) {
    String table = qualified(spec.schema(), spec.table(), "schema", "table");
    String id = quote(spec.idColumn(), "idColumn");
    List<String> cols = spec.setColumns();
    if (cols == null || cols.isEmpty()) throw new IllegalArgumentException("guard: setColumns must name at least one column");
    Set<String> seen = new HashSet<>(List.of(spec.idColumn()));
    List<String> set = new ArrayList<>();
    for (int i = 0; i < cols.size(); i++) {
      set.add(quote(cols.get(i), "setColumns[" + i + "]"));
      if (!seen.add(cols.get(i))) {
        throw new IllegalArgumentException("guard: column " + cols.get(i) + " appears twice among idColumn and setColumns");
      }
    }
    if (spec.lock() == null || spec.lock().isEmpty()) throw new IllegalArgumentException("guard: lock must not be empty");
    String fence = fence(spec.fenceSchema(), spec.fenceTable());
    int n = set.size();
    List<String> assign = new ArrayList<>();
    List<String> values = new ArrayList<>();
    List<String> updates = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      assign.add(set.get(i) + " = $" + (i + 1));
      values.add("$" + (i + 1));
      updates.add(set.get(i) + " = EXCLUDED." + set.get(i));
    }
    List<String> columns = new ArrayList<>(set);
    columns.add(id);
    values.add("$" + (n + 2));
    String head = fenceStep(fence, "$" + (n + 1), "$" + (n + 3));
    return new Statements(
        head + ", w AS (UPDATE " + table + " SET " + String.join(", ", assign) + " WHERE " + id + " = $" + (n + 2)
            + " AND EXISTS (SELECT 1 FROM fence) RETURNING 1) " + STEPS,
        head + ", w AS (INSERT INTO " + table + " (" + String.join(", ", columns) + ") SELECT " + String.join(", ", values)
            + " WHERE EXISTS (SELECT 1 FROM fence) ON CONFLICT (" + id + ") DO UPDATE SET " + String.join(", ", updates)
            + " RETURNING 1) " + STEPS,
        fenceStep(fence, "$1", "$3") + ", w AS (DELETE FROM " + table + " WHERE " + id
            + " = $2 AND EXISTS (SELECT 1 FROM fence) RETURNING 1) " + STEPS,
        fenceStep(fence, "$1", "$2") + " SELECT 'fenced' AS step FROM fence");
  }

  /** UPDATE the row {@code id} to {@code values} when token is current: applied, not-found or stale. */
  public Outcome update(Object id, long token, Object... values) throws SQLException {
    return outcome(run(statements.update(), withTokenIdLock(values, token, id)), Outcome.NOT_FOUND);
  }

  /** INSERT or UPDATE the row {@code id} with {@code values} when token is current: applied or stale. */
  public Outcome upsert(Object id, long token, Object... values) throws SQLException {
    return outcome(run(statements.upsert(), withTokenIdLock(values, token, id)), Outcome.NOT_FOUND);
  }

  /** DELETE the row {@code id} when token is current: applied (also when there was no row) or stale. */
  public Outcome delete(Object id, long token) throws SQLException {
    return outcome(run(statements.delete(), new Object[] {Token.check(token), id, lock}), Outcome.APPLIED);
  }

  /** Raises the lock's fence to token without writing: applied, or stale when it is above. */
  public Outcome advance(long token) throws SQLException {
    return run(statements.advance(), new Object[] {Token.check(token), lock}) > 0 ? Outcome.APPLIED : Outcome.STALE;
  }

  private Object[] withTokenIdLock(Object[] values, long token, Object id) {
    if (values.length != n) throw new IllegalArgumentException("guard: " + values.length + " values for " + n + " setColumns");
    Object[] p = new Object[n + 3];
    System.arraycopy(values, 0, p, 0, n);
    p[n] = Token.check(token);
    p[n + 1] = id;
    p[n + 2] = lock;
    return p;
  }

  private static Outcome outcome(int rows, Outcome missing) {
    return switch (rows) {
      case 0 -> Outcome.STALE;
      case 1 -> missing;
      default -> Outcome.APPLIED;
    };
  }

  /** The statement with each {@code $n} replaced by {@code ?} for JDBC, and the order of the n. */
  static String jdbc(String stmt, List<Integer> order) {
    Matcher m = PARAM.matcher(stmt);
    StringBuilder b = new StringBuilder();
    while (m.find()) {
      order.add(Integer.parseInt(m.group(1)));
      m.appendReplacement(b, "?");
    }
    m.appendTail(b);
    return b.toString();
  }

  private int run(String stmt, Object[] params) throws SQLException {
    List<Integer> order = new ArrayList<>();
    String text = jdbc(stmt, order);
    try (PreparedStatement ps = db.prepareStatement(text)) {
      for (int i = 0; i < order.size(); i++) {
        Object v = params[order.get(i) - 1];
        if (v instanceof Long l) ps.setLong(i + 1, l);
        else ps.setObject(i + 1, v);
      }
      int rows = 0;
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) rows++;
      }
      return rows;
    }
  }
}
