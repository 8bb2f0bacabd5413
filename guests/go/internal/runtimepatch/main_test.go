package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The patch applies to the Go that runs the tests, the one that builds the guests.
func TestPatchesTheInstalledRuntime(t *testing.T) {
	dir := t.TempDir()
	if err := patch(runtime.GOROOT(), dir); err != nil {
		t.Fatal(err)
	}
	var overlay struct{ Replace map[string]string }
	text, err := os.ReadFile(filepath.Join(dir, "overlay.json"))
	if err != nil || json.Unmarshal(text, &overlay) != nil {
		t.Fatalf("overlay: %s %v", text, err)
	}
	calls := 0
	for original, replacement := range overlay.Replace {
		if filepath.Dir(original) != filepath.Join(runtime.GOROOT(), "src", "runtime") {
			t.Errorf("%s is not in package runtime", original)
		}
		source, err := os.ReadFile(replacement)
		if err != nil {
			t.Fatal(err)
		}
		calls += strings.Count(string(source), "\tskipForeignPages()\n")
	}
	if len(overlay.Replace) != 3 || calls != 3 {
		t.Fatalf("%d files with %d calls: %v", len(overlay.Replace), calls, overlay.Replace)
	}
}

func TestRefusesAnUnknownRuntime(t *testing.T) {
	goroot := t.TempDir()
	if err := os.MkdirAll(filepath.Join(goroot, "src", "runtime"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"mem_wasm.go", "mem_sbrk.go"} {
		if err := os.WriteFile(filepath.Join(goroot, "src", "runtime", file), []byte("package runtime\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := patch(goroot, t.TempDir()); err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Fatalf("got %v", err)
	}
}
