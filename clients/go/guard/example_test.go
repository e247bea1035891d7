package guard_test

import (
	"fmt"

	"github.com/fencepost/fencepost/clients/go/guard"
)

// FenceTableSQL is the migration to run once before the SQL guard's first write: one row per lock
// holds the highest token written so far.
func ExampleFenceTableSQL() {
	ddl, err := guard.FenceTableSQL(guard.FenceTableSpec{})
	fmt.Println(ddl, err)
	// Output: CREATE TABLE IF NOT EXISTS "fencepost_fences" ("lock" text PRIMARY KEY, "token" bigint NOT NULL CHECK ("token" >= 0)) <nil>
}

// BuildStatements refuses a name it would have to escape, naming the field.
func ExampleBuildStatements() {
	_, err := guard.BuildStatements(guard.SQLSpec{Table: `orders"; DROP TABLE x`, IDColumn: "id", SetColumns: []string{"total"}, Lock: "billing"})
	fmt.Println(err != nil)
	// Output: true
}
