// Command vectors writes the test vectors that every guest SDK checks its label-selector and
// status-condition helpers against, as computed by Kubernetes' own k8s.io/apimachinery (the
// release in go.mod):
//
//	go run .         # writes selectors.json and conditions.json in the current folder
//	go run . -check  # exits with 1, naming the stale files, unless they hold what it would write
//
// The vectors are hand-picked edge cases followed by ones from a seeded generator, so the same
// release always writes the same bytes.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
)

// apimachinery is the module that computes the vectors, as built ("k8s.io/apimachinery
// v0.36.3"), recorded in each file.
func apimachinery() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, module := range info.Deps {
			if module.Path == "k8s.io/apimachinery" {
				return module.Path + " " + module.Version
			}
		}
	}
	fatal(fmt.Errorf("no k8s.io/apimachinery in the build information"))
	return ""
}

func main() {
	check := flag.Bool("check", false, "compare the files with what would be written, writing nothing")
	flag.Parse()
	outputs := map[string][]byte{
		"selectors.json":  encode(selectorsAbout, selectorVectors()),
		"conditions.json": encode(conditionsAbout, conditionVectors()),
	}
	stale := false
	for name, want := range outputs {
		if !*check {
			if err := os.WriteFile(name, want, 0o644); err != nil {
				fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(name)
		if err != nil {
			fatal(err)
		}
		if !bytes.Equal(got, want) {
			fmt.Fprintf(os.Stderr, "guests/vectors/%s is not what apimachinery gives: run go run . in guests/vectors\n", name)
			stale = true
		}
	}
	if stale {
		os.Exit(1)
	}
}

// encode is a vector file: {"about", "apimachinery", "vectors"}, one vector a line, so that a
// change shows as a readable diff.
func encode[V any](about string, vectors []V) []byte {
	var out bytes.Buffer
	fmt.Fprintf(&out, "{\n  \"about\": %s,\n  \"apimachinery\": %s,\n  \"vectors\": [\n", marshal(about), marshal(apimachinery()))
	for i, v := range vectors {
		out.WriteString("    ")
		out.Write(marshal(v))
		if i < len(vectors)-1 {
			out.WriteByte(',')
		}
		out.WriteByte('\n')
	}
	out.WriteString("  ]\n}\n")
	return out.Bytes()
}

func marshal(v any) []byte {
	var out bytes.Buffer
	encoder := json.NewEncoder(&out)
	encoder.SetEscapeHTML(false)
	if err := encoder.Encode(v); err != nil {
		fatal(err)
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n"))
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(2)
}
