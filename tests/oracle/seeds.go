package main

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
)

// seedFiles are apimachinery's tests of the parsers the host reimplements.
var seedFiles = []string{
	"pkg/labels/selector_test.go",
	"pkg/api/resource/quantity_test.go",
	"pkg/util/validation/validation_test.go",
}

// seed is one line of `oracle seeds`: a string literal and the test file it is from.
type seed struct {
	File  string `json:"file"`
	Value string `json:"value"`
}

// printSeeds writes every distinct string literal of seedFiles, in the apimachinery module
// this program is built with (located by `go list` in the working directory's module).
func printSeeds(w io.Writer) error {
	listed, err := exec.Command("go", "list", "-m", "-json", "k8s.io/apimachinery").Output()
	if err != nil {
		return fmt.Errorf("go list -m k8s.io/apimachinery: %w", err)
	}
	var module struct{ Dir string }
	if err := json.Unmarshal(listed, &module); err != nil || module.Dir == "" {
		return fmt.Errorf("go list -m k8s.io/apimachinery gave no module folder: %s", listed)
	}
	encoder := json.NewEncoder(w)
	encoder.SetEscapeHTML(false)
	for _, name := range seedFiles {
		file, err := parser.ParseFile(token.NewFileSet(), filepath.Join(module.Dir, name), nil, 0)
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		var failed error
		ast.Inspect(file, func(node ast.Node) bool {
			literal, ok := node.(*ast.BasicLit)
			if !ok || literal.Kind != token.STRING || failed != nil {
				return failed == nil
			}
			value, err := strconv.Unquote(literal.Value)
			if err != nil {
				failed = err
			} else if !seen[value] {
				seen[value] = true
				failed = encoder.Encode(seed{File: name, Value: value})
			}
			return false
		})
		if failed != nil {
			return failed
		}
	}
	return nil
}
