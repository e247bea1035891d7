package guard

import (
	"errors"
	"testing"
)

type sqlStatementVectors struct {
	Valid []struct {
		Name       string  `json:"name"`
		Spec       sqlSpec `json:"spec"`
		FenceTable string  `json:"fenceTable"`
		Update     string  `json:"update"`
		Upsert     string  `json:"upsert"`
		Delete     string  `json:"delete"`
		Advance    string  `json:"advance"`
	} `json:"valid"`
	Invalid []struct {
		Name string  `json:"name"`
		Spec sqlSpec `json:"spec"`
	} `json:"invalid"`
}

type sqlSpec struct {
	Table       string   `json:"table"`
	Schema      string   `json:"schema"`
	IDColumn    string   `json:"idColumn"`
	SetColumns  []string `json:"setColumns"`
	Lock        string   `json:"lock"`
	FenceTable  string   `json:"fenceTable"`
	FenceSchema string   `json:"fenceSchema"`
}

func (s sqlSpec) spec() SQLSpec {
	return SQLSpec{
		Table: s.Table, Schema: s.Schema, IDColumn: s.IDColumn, SetColumns: s.SetColumns, Lock: s.Lock,
		FenceTableSpec: FenceTableSpec{FenceTable: s.FenceTable, FenceSchema: s.FenceSchema},
	}
}

func TestSQLStatementVectors(t *testing.T) {
	var v sqlStatementVectors
	readVectors(t, "sql-statements.json", &v)
	for _, c := range v.Valid {
		t.Run(c.Name, func(t *testing.T) {
			spec := c.Spec.spec()
			got, err := BuildStatements(spec)
			if err != nil {
				t.Fatal(err)
			}
			want := Statements{Update: c.Update, Upsert: c.Upsert, Delete: c.Delete, Advance: c.Advance}
			if got != want {
				t.Fatalf("statements differ from the TypeScript guard's:\n got %+v\nwant %+v", got, want)
			}
			table, err := FenceTableSQL(spec.FenceTableSpec)
			if err != nil || table != c.FenceTable {
				t.Fatalf("FenceTableSQL = %q, %v; want %q", table, err, c.FenceTable)
			}
		})
	}
	for _, c := range v.Invalid {
		t.Run("refuses "+c.Name, func(t *testing.T) {
			_, err := NewSQL(nil, c.Spec.spec())
			var idErr *IdentifierError
			if err == nil || (c.Spec.Lock != "" && !errors.As(err, &idErr)) {
				t.Fatalf("NewSQL = %v, want an *IdentifierError", err)
			}
		})
	}
}
