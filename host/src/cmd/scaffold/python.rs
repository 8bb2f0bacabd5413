//! The Python guest application: the template's `app.py` renamed, a native test run by pytest,
//! and a `conftest.py` that puts the SDK on the tests' path.

use std::path::Path;

use super::{Language, build_script, camel_case, first_case, readme, rename};

const APP: &str = include_str!("../../../../guests/python/template/app.py");

/// A test that builds the component and runs `kubewasm test` on the cases.
const CASES_TEST: &str = r#""""The component itself on the cases in cases/: built by ./build, run by `kubewasm test`
(the binary named by $KUBEWASM, else `kubewasm` on the path)."""

import os
import subprocess
from pathlib import Path

PROJECT = Path(__file__).parent


def test_the_component_passes_its_cases():
    build = subprocess.run([PROJECT / "build"], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    wasm = build.stdout.strip().splitlines()[-1]
    kubewasm = os.environ.get("KUBEWASM", "kubewasm")
    run = subprocess.run([kubewasm, "test", wasm, PROJECT / "cases"], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
"#;

/// The application's files for the controller `name`, with the SDK at `sdk`.
pub(super) fn files(name: &str, sdk: &Path) -> Vec<(&'static str, String)> {
    let conftest = format!(
        "\"\"\"Makes the kubewasm SDK importable by the native tests.\"\"\"\n\
         \n\
         import sys\n\
         from pathlib import Path\n\
         \n\
         sys.path.insert(0, str((Path(__file__).parent / {}).resolve()))\n",
        // A JSON string is a Python string literal, whatever characters it holds.
        serde_json::to_string(&sdk.display().to_string()).expect("a string serializes")
    );
    let test = format!(
        "\"\"\"Native tests of the controller: what it declares. Keep decisions in pure functions\n\
         and test them here.\"\"\"\n\
         \n\
         import app\n\
         \n\
         \n\
         def test_declares_its_name_and_primary_kind():\n\
         \x20   metadata = app.{}().metadata()\n\
         \x20   assert metadata.name == \"{name}\"\n\
         \x20   assert metadata.primary.kind.kind == \"ConfigMap\"\n",
        camel_case(name)
    );
    let tests =
        "python3 -m pytest                  # the native tests, then the cases on the component\n";
    vec![
        ("app.py", rename(APP, "greeter", name)),
        ("test_app.py", test),
        ("conftest.py", conftest),
        ("test_cases.py", CASES_TEST.to_owned()),
        ("cases/labelled.yaml", first_case(name)),
        (
            "build",
            build_script(sdk, "componentize", &format!("\"$here\" {name}")),
        ),
        ("README.md", readme(name, Language::Python, tests)),
        (".gitignore", "/dist\n__pycache__/\n".to_owned()),
    ]
}
