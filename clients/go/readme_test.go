package fencepost

import (
	"os"
	"strings"
	"testing"
)

// The README's example is examples/worker/main.go, which go vet and go test build and the
// integration test runs: the two must not drift.
func TestReadmeExampleIsTheExampleProgram(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("examples/worker/main.go")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), "\n```go\n")
	block, _, closed := strings.Cut(after, "```\n")
	if !ok || !closed {
		t.Fatal("README.md has no ```go block")
	}
	if block != string(example) {
		t.Fatal("README.md's example differs from examples/worker/main.go")
	}
}
