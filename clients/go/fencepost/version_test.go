package fencepost

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// The client is versioned with the project: Version is package.json's version.
func TestVersionIsTheProjectVersion(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct{ Version string }
	if err := json.Unmarshal(b, &pkg); err != nil {
		t.Fatal(err)
	}
	if Version != pkg.Version {
		t.Fatalf("Version = %s, package.json says %s", Version, pkg.Version)
	}
}
