//! The Go guest module: the template's package renamed, the SDK through a `replace` directive,
//! tests run by `go test`.

use std::path::Path;

use super::{Language, build_script, first_case, readme, rename};

const MAIN: &str = include_str!("../../../../guests/go/template/main.go");
const TEST: &str = include_str!("../../../../guests/go/template/main_test.go");

/// A test that builds the component and runs `kubewasm test` on the cases.
const CASES_TEST: &str = r#"package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestTheComponentPassesItsCases runs the component itself on the cases in cases/: built by
// ./build, run by `kubewasm test` (the binary named by $KUBEWASM, else `kubewasm` on the path).
func TestTheComponentPassesItsCases(t *testing.T) {
	built, err := exec.Command("./build").Output()
	if err != nil {
		t.Fatalf("./build: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(built)), "\n")
	kubewasm := os.Getenv("KUBEWASM")
	if kubewasm == "" {
		kubewasm = "kubewasm"
	}
	out, err := exec.Command(kubewasm, "test", lines[len(lines)-1], "cases").CombinedOutput()
	if err != nil {
		t.Fatalf("kubewasm test: %v\n%s", err, out)
	}
}
"#;

/// The module's files for the controller `name`, with the SDK at `sdk`.
pub(super) fn files(name: &str, sdk: &Path) -> Vec<(&'static str, String)> {
    let path = if sdk.is_absolute() {
        sdk.display().to_string()
    } else {
        format!("./{}", sdk.display())
    };
    // Quoted: go.mod reads a path with spaces only as a string literal.
    let replace = serde_json::to_string(&path).expect("a string serializes");
    let module = format!(
        "module {name}\n\
         \n\
         go 1.26\n\
         \n\
         require kubewasm.dev/guest v0.0.0\n\
         \n\
         // The Go guest SDK of a kubewasm checkout.\n\
         replace kubewasm.dev/guest => {replace}\n"
    );
    let tests =
        "go test ./...                      # the native tests, then the cases on the component\n";
    vec![
        ("go.mod", module),
        ("main.go", rename(MAIN, "greeter", name)),
        ("main_test.go", rename(TEST, "greeter", name)),
        ("cases_test.go", CASES_TEST.to_owned()),
        ("cases/labelled.yaml", first_case(name)),
        (
            "build",
            build_script(sdk, "componentize", &format!("\"$here\" {name}")),
        ),
        ("README.md", readme(name, Language::Go, tests)),
        (".gitignore", "/dist\n".to_owned()),
    ]
}
