package guard

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// conformanceDir holds the vectors and the Lua script every client shares (clients/conformance).
var conformanceDir = filepath.Join("..", "..", "conformance")

func readVectors(t *testing.T, file string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(conformanceDir, file))
	if err != nil {
		t.Fatalf("read vectors: %v", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// TestEmbeddedScriptIsTheSharedOne: go:embed cannot reach outside the module, so the guard embeds
// a copy; it must be the shared file byte for byte (`go generate ./guard` copies it again).
func TestEmbeddedScriptIsTheSharedOne(t *testing.T) {
	shared, err := os.ReadFile(filepath.Join(conformanceDir, "redis-fenced-write.lua"))
	if err != nil {
		t.Fatal(err)
	}
	if fencedWriteLua != string(shared) {
		t.Fatal("guard/redis-fenced-write.lua differs from clients/conformance/redis-fenced-write.lua: run go generate ./guard")
	}
}
