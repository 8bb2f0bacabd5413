// Command runtimepatch writes a `go build -overlay` file that makes Go's wasm runtime share its
// linear memory with a component's WASI adapter.
//
//	go run kubewasm.dev/guest/internal/runtimepatch GOROOT DIR   # writes DIR/overlay.json
//
// Go's wasm runtime assumes that it alone grows memory: it keeps the end of memory in blocMax
// and takes every page past it as its own. In a component, the WASI preview1 adapter allocates
// its state by growing the same memory (on the first WASI call, while Go's runtime
// initialises), and Go's next heap growth would then overwrite it. The overlay makes the
// runtime skip pages grown by someone else before it extends its heap. It fails, rather than
// build a broken module, when the runtime sources do not have the expected shape.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// skipForeignPages is added to package runtime.
const skipForeignPages = `package runtime

import "unsafe"

// skipForeignPages moves bloc and blocMax past the end of memory when another module sharing
// it (a component's WASI adapter) has grown it: the pages past blocMax are then that module's.
// What lay between bloc and blocMax goes to the free list.
//
// memlock must be held, on the system stack.
func skipForeignPages() {
	size := uintptr(currentMemory()) * physPageSize
	if size <= blocMax {
		return
	}
	if blocMax > bloc {
		memFree(unsafe.Pointer(bloc), blocMax-bloc)
	}
	bloc, blocMax = size, size
}
`

// edit inserts a skipForeignPages call before the line anchor, which must occur once in file.
type edit struct {
	file, anchor string
}

// The three places that read bloc to extend the heap: sbrk, and sysReserveOS and
// sysReserveAlignedSbrk, which compute the address sbrk will return.
var edits = []edit{
	{"mem_wasm.go", "\tbl := bloc\n"},
	{"mem_sbrk.go", "\t\tif uintptr(v) == bloc {\n"},
	{"mem_sbrk.go", "\t\tp = alignUp(bloc, align)\n"},
}

func patch(goroot, dir string) error {
	runtime := filepath.Join(goroot, "src", "runtime")
	patched := map[string]string{}
	for _, e := range edits {
		text, ok := patched[e.file]
		if !ok {
			source, err := os.ReadFile(filepath.Join(runtime, e.file))
			if err != nil {
				return err
			}
			text = string(source)
		}
		if n := strings.Count(text, e.anchor); n != 1 {
			return fmt.Errorf("%s: %q occurs %d times, not once: this Go version is not supported", e.file, e.anchor, n)
		}
		indent := e.anchor[:len(e.anchor)-len(strings.TrimLeft(e.anchor, "\t"))]
		patched[e.file] = strings.Replace(text, e.anchor, indent+"skipForeignPages()\n"+e.anchor, 1)
	}
	patched["mem_wasm_foreign.go"] = skipForeignPages
	replace := map[string]string{}
	for file, text := range patched {
		replace[filepath.Join(runtime, file)] = filepath.Join(dir, file)
		if err := os.WriteFile(filepath.Join(dir, file), []byte(text), 0o644); err != nil {
			return err
		}
	}
	overlay, err := json.MarshalIndent(map[string]any{"Replace": replace}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "overlay.json"), overlay, 0o644)
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: runtimepatch GOROOT DIR")
		os.Exit(2)
	}
	if err := patch(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "runtimepatch:", err)
		os.Exit(1)
	}
}
