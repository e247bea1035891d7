package guard

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"

	fencepost "github.com/fencepost/fencepost/clients/go/fencepost"
)

// DefaultFenceTable is the table that holds one mark per lock.
const DefaultFenceTable = "fencepost_fences"

// FenceTableSpec names the fence table (default "fencepost_fences", unqualified).
type FenceTableSpec struct {
	FenceTable  string
	FenceSchema string
}

// SQLSpec names the data table and columns of a lock-scoped fenced write, the lock, and the
// fence table. The data table needs no fence column.
type SQLSpec struct {
	// Table is the data table (unqualified); Schema qualifies it when set.
	Table  string
	Schema string
	// IDColumn identifies the row (for Upsert: a primary key or unique column).
	IDColumn string
	// SetColumns are the columns a write sets, in the order of its values (at least one).
	SetColumns []string
	// Lock names the lock whose tokens the writes carry (one row of the fence table). Tables
	// written under one lock share its mark.
	Lock string
	FenceTableSpec
}

// IdentifierError says which name was refused: names are never escaped, only refused.
type IdentifierError struct{ msg string }

func (e *IdentifierError) Error() string { return "guard: " + e.msg }

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// maxIdentifier: PostgreSQL silently truncates longer names (NAMEDATALEN − 1).
const maxIdentifier = 63

// quoteIdentifier double-quotes name after checking it is [A-Za-z_][A-Za-z0-9_]*, at most 63
// characters.
func quoteIdentifier(name, what string) (string, error) {
	if !identifier.MatchString(name) {
		return "", &IdentifierError{fmt.Sprintf("%s %q is not an identifier of the form [A-Za-z_][A-Za-z0-9_]*", what, name)}
	}
	if len(name) > maxIdentifier {
		return "", &IdentifierError{fmt.Sprintf("%s %q is longer than %d characters", what, name, maxIdentifier)}
	}
	return `"` + name + `"`, nil
}

func qualified(schema, name, schemaWhat, nameWhat string) (string, error) {
	q, err := quoteIdentifier(name, nameWhat)
	if err != nil || schema == "" {
		return q, err
	}
	s, err := quoteIdentifier(schema, schemaWhat)
	return s + "." + q, err
}

func (f FenceTableSpec) quoted() (string, error) {
	name := f.FenceTable
	if name == "" {
		name = DefaultFenceTable
	}
	return qualified(f.FenceSchema, name, "FenceSchema", "FenceTable")
}

// FenceTableSQL is `CREATE TABLE IF NOT EXISTS "fencepost_fences" (...)`: run it once, as a
// migration, before the first write. Never delete its rows: a lost mark lets every stale holder in
// again once.
func FenceTableSQL(f FenceTableSpec) (string, error) {
	t, err := f.quoted()
	if err != nil {
		return "", err
	}
	return `CREATE TABLE IF NOT EXISTS ` + t + ` ("lock" text PRIMARY KEY, "token" bigint NOT NULL CHECK ("token" >= 0))`, nil
}

// Statements are the guard's statements for one spec (PostgreSQL). Parameters: Update and Upsert
// $1..$n the values, $n+1 the token, $n+2 the id, $n+3 the lock; Delete $1 token, $2 id, $3 lock;
// Advance $1 token, $2 lock. Each returns one row per step done: none (stale), 'fenced' (the mark
// was raised), then 'written' (the data was changed).
type Statements struct {
	Update, Upsert, Delete, Advance string
}

const steps = `SELECT 'fenced' AS step FROM fence UNION ALL SELECT 'written' FROM w`

func fenceStep(fence, token, lock string) string {
	return `WITH fence AS (INSERT INTO ` + fence + ` ("lock", "token") VALUES (` + lock + `, ` + token + `) ON CONFLICT ("lock") DO UPDATE SET "token" = EXCLUDED."token" WHERE ` + fence + `."token" <= EXCLUDED."token" RETURNING 1)`
}

// BuildStatements checks every name of spec (an *IdentifierError for a bad one) and builds the
// statements — the same text as the TypeScript guard's lockFenced*Sql.
func BuildStatements(spec SQLSpec) (Statements, error) {
	table, err := qualified(spec.Schema, spec.Table, "Schema", "Table")
	if err != nil {
		return Statements{}, err
	}
	id, err := quoteIdentifier(spec.IDColumn, "IDColumn")
	if err != nil {
		return Statements{}, err
	}
	if len(spec.SetColumns) == 0 {
		return Statements{}, &IdentifierError{"SetColumns must name at least one column"}
	}
	set := make([]string, len(spec.SetColumns))
	seen := map[string]bool{spec.IDColumn: true}
	for i, c := range spec.SetColumns {
		if set[i], err = quoteIdentifier(c, fmt.Sprintf("SetColumns[%d]", i)); err != nil {
			return Statements{}, err
		}
		if seen[c] {
			return Statements{}, &IdentifierError{fmt.Sprintf("column %q appears twice among IDColumn and SetColumns", c)}
		}
		seen[c] = true
	}
	if spec.Lock == "" {
		return Statements{}, errors.New("guard: Lock must not be empty")
	}
	fence, err := spec.FenceTableSpec.quoted()
	if err != nil {
		return Statements{}, err
	}
	n := len(set)
	p := func(i int) string { return fmt.Sprintf("$%d", i) }
	assign := make([]string, n)
	values := make([]string, n)
	updates := make([]string, n)
	for i, c := range set {
		assign[i] = c + " = " + p(i+1)
		values[i] = p(i + 1)
		updates[i] = c + " = EXCLUDED." + c
	}
	columns := append(append([]string{}, set...), id)
	values = append(values, p(n+2))
	head := fenceStep(fence, p(n+1), p(n+3))
	return Statements{
		Update:  head + `, w AS (UPDATE ` + table + ` SET ` + strings.Join(assign, ", ") + ` WHERE ` + id + ` = ` + p(n+2) + ` AND EXISTS (SELECT 1 FROM fence) RETURNING 1) ` + steps,
		Upsert:  head + `, w AS (INSERT INTO ` + table + ` (` + strings.Join(columns, ", ") + `) SELECT ` + strings.Join(values, ", ") + ` WHERE EXISTS (SELECT 1 FROM fence) ON CONFLICT (` + id + `) DO UPDATE SET ` + strings.Join(updates, ", ") + ` RETURNING 1) ` + steps,
		Delete:  fenceStep(fence, "$1", "$3") + `, w AS (DELETE FROM ` + table + ` WHERE ` + id + ` = $2 AND EXISTS (SELECT 1 FROM fence) RETURNING 1) ` + steps,
		Advance: fenceStep(fence, "$1", "$2") + ` SELECT 'fenced' AS step FROM fence`,
	}, nil
}

// Querier runs a statement that returns rows: a *sql.DB, *sql.Conn or *sql.Tx.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// SQL runs fenced writes against one table under one lock's mark (PostgreSQL).
type SQL struct {
	db    Querier
	lock  string
	n     int
	stmts Statements
}

// NewSQL builds the statements once (a bad name is an *IdentifierError here). Create the fence
// table first (FenceTableSQL).
func NewSQL(db Querier, spec SQLSpec) (*SQL, error) {
	s, err := BuildStatements(spec)
	if err != nil {
		return nil, err
	}
	return &SQL{db: db, lock: spec.Lock, n: len(spec.SetColumns), stmts: s}, nil
}

// Statements are the statements the guard runs.
func (g *SQL) Statements() Statements { return g.stmts }

// Update sets the row id's columns to values (in SetColumns order) if token is not below the
// lock's mark, raising the mark: Applied, Stale (nothing changed), or NotFound (no such row;
// the mark was raised). The token is bound as a bigint (exact: every valid token fits).
func (g *SQL) Update(ctx context.Context, id any, token fencepost.Token, values ...any) (Outcome, error) {
	rows, err := g.run(ctx, g.stmts.Update, id, token, values)
	return outcome(rows, NotFound), err
}

// Upsert is Update that inserts the row when it does not exist (a stale token inserts nothing).
func (g *SQL) Upsert(ctx context.Context, id any, token fencepost.Token, values ...any) (Outcome, error) {
	rows, err := g.run(ctx, g.stmts.Upsert, id, token, values)
	return outcome(rows, NotFound), err
}

// Delete removes the row id under the same rule; deleting a missing row with a current token is
// Applied. The mark stays, so a stale holder cannot bring the row back.
func (g *SQL) Delete(ctx context.Context, id any, token fencepost.Token) (Outcome, error) {
	t, err := token.Int64()
	if err != nil {
		return "", err
	}
	rows, err := count(ctx, g.db, g.stmts.Delete, t, id, g.lock)
	return outcome(rows, Applied), err
}

// Advance raises the lock's mark to token without writing data: a new holder that calls it first
// fences out every older token at once.
func (g *SQL) Advance(ctx context.Context, token fencepost.Token) (Outcome, error) {
	t, err := token.Int64()
	if err != nil {
		return "", err
	}
	rows, err := count(ctx, g.db, g.stmts.Advance, t, g.lock)
	if rows > 0 {
		return Applied, err
	}
	return Stale, err
}

func (g *SQL) run(ctx context.Context, stmt string, id any, token fencepost.Token, values []any) (int, error) {
	if len(values) != g.n {
		return 0, fmt.Errorf("guard: %d values for %d SetColumns", len(values), g.n)
	}
	t, err := token.Int64()
	if err != nil {
		return 0, err
	}
	return count(ctx, g.db, stmt, append(append([]any{}, values...), t, id, g.lock)...)
}

// outcome reads the steps: 0 rows stale, 1 fenced only (missing), 2 fenced and written.
func outcome(rows int, missing Outcome) Outcome {
	switch rows {
	case 0:
		return Stale
	case 1:
		return missing
	}
	return Applied
}

func count(ctx context.Context, db Querier, stmt string, args ...any) (int, error) {
	rows, err := db.QueryContext(ctx, stmt, args...)
	if err != nil {
		return 0, fmt.Errorf("guard: fenced statement: %w", err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("guard: fenced statement: %w", err)
	}
	return n, nil
}
