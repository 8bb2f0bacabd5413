// Package vectors reads the apimachinery vectors in guests/vectors for the SDK's tests.
package vectors

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// Load returns the vectors of guests/vectors/name, read from a package two folders below the
// SDK's root; the test fails when the file cannot be read or holds none.
func Load[V any](t *testing.T, name string) []V {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("..", "..", "vectors", name))
	if err != nil {
		t.Fatal(err)
	}
	var file struct{ Vectors []V }
	if err := json.Unmarshal(text, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Vectors) == 0 {
		t.Fatal("no vectors in " + name)
	}
	return file.Vectors
}
