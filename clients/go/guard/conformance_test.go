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
