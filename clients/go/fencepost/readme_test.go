package fencepost

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The README's examples are example programs, which go vet and go test build and the
// integration tests run: the README's first ```go block is examples/worker/main.go
// (test/integration/clients/go.test.ts), its second examples/store/main.go (stores.test.ts).
func TestReadmeExamplesAreTheExamplePrograms(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	rest := string(readme)
	for _, file := range []string{"examples/worker/main.go", "examples/store/main.go"} {
		example, err := os.ReadFile(filepath.Join("..", file))
		if err != nil {
			t.Fatal(err)
		}
		_, after, ok := strings.Cut(rest, "\n```go\n")
		block, next, closed := strings.Cut(after, "```\n")
		if !ok || !closed {
			t.Fatalf("README.md has no ```go block for %s", file)
		}
		if block != string(example) {
			t.Fatalf("README.md's example differs from %s", file)
		}
		rest = next
	}
}
