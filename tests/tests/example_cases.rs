//! The podset example passes the same test cases (`examples/podset/cases`) in every language:
//! `kubewasm test` runs each port's component, built from source, on the same files.

use std::process::Command;

use anyhow::{Result, ensure};
use kubewasm_tests::{Language, example_wasm, host_binary, repo_root};

fn passes_the_podset_cases(language: Language) -> Result<()> {
    let wasm = example_wasm("podset", language);
    let cases = repo_root().join("examples/podset/cases");
    let output = Command::new(host_binary())
        .arg("test")
        .arg(&wasm)
        .arg(&cases)
        .output()?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    ensure!(
        output.status.success(),
        "{language:?}: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    ensure!(
        stdout.contains(" passed, 0 updated, 0 failed") && !stdout.starts_with("0 passed"),
        "{language:?}: {stdout}"
    );
    Ok(())
}

#[test]
fn the_rust_podset_passes_the_podset_cases() -> Result<()> {
    passes_the_podset_cases(Language::Rust)
}

#[test]
fn the_javascript_podset_passes_the_podset_cases() -> Result<()> {
    passes_the_podset_cases(Language::JavaScript)
}

#[test]
fn the_python_podset_passes_the_podset_cases() -> Result<()> {
    passes_the_podset_cases(Language::Python)
}

#[test]
fn the_go_podset_passes_the_podset_cases() -> Result<()> {
    passes_the_podset_cases(Language::Go)
}
