//! A guest project made by `kubewasm new` in every language passes its own native tests (which
//! build the component and run `kubewasm test` on its first case), builds from source into its
//! own folder, loads as the host loads it, and reconciles a matching ConfigMap.

use std::path::Path;
use std::process::Command;

use anyhow::{Result, ensure};
use kubewasm_tests::{Language, built_by, host_binary};
use serde_json::json;

/// Runs `kubewasm ARGS` and returns its stdout, failing with its stderr if it fails.
fn kubewasm(args: &[&std::ffi::OsStr]) -> Result<String> {
    let output = Command::new(host_binary()).args(args).output()?;
    ensure!(
        output.status.success(),
        "kubewasm {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(String::from_utf8(output.stdout)?)
}

/// Runs `program ARGS` in `dir`, with this build's `kubewasm` as `$KUBEWASM`, failing with its
/// output if it fails.
fn run_in(dir: &Path, program: &str, args: &[&str]) -> Result<()> {
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(dir)
        .env("KUBEWASM", host_binary());
    let output = command.output()?;
    ensure!(
        output.status.success(),
        "{program} {args:?} failed in {}: {}{}",
        dir.display(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}

/// Makes the `greeter` project of `language` in a new folder, runs its native tests and builds
/// it; returns the folder and the component's path.
fn new_project(language: Language) -> Result<(tempfile::TempDir, std::path::PathBuf)> {
    let dir = tempfile::tempdir()?;
    let project = dir.path().join("greeter");
    let mut args: Vec<&std::ffi::OsStr> = ["new", "greeter", "--lang", language.dir(), "--dir"]
        .map(AsRef::as_ref)
        .to_vec();
    args.push(project.as_os_str());
    kubewasm(&args)?;
    let quiet = ["--no-audit", "--no-fund", "--loglevel=error"];
    match language {
        Language::JavaScript => run_in(&project, "npm", &[&["install-test"][..], &quiet].concat())?,
        Language::Python => run_in(
            &project,
            "python3",
            &["-m", "pytest", "-q", "-p", "no:cacheprovider"],
        )?,
        Language::Go => run_in(&project, "go", &["test", "./..."])?,
        Language::Rust => anyhow::bail!("a Rust crate is tested by the host's command tests"),
    }
    let wasm = built_by(project.join("build").to_str().unwrap_or_default(), &[]);
    ensure!(
        wasm.starts_with(project.join("dist")),
        "{language:?}: built {} outside the project's dist/",
        wasm.display()
    );
    Ok((dir, wasm))
}

fn check_template(language: Language) -> Result<()> {
    let (_project, wasm) = new_project(language)?;
    let declared = kubewasm(&["check".as_ref(), wasm.as_os_str()])?;
    for line in [
        "name        greeter",
        "primary     v1 ConfigMap in all namespaces labelled kubewasm.dev/greeter=true",
    ] {
        ensure!(
            declared.lines().any(|l| l.trim_end() == line),
            "{language:?}: `check` does not print {line:?}:\n{declared}"
        );
    }

    let dir = tempfile::tempdir()?;
    let object = dir.path().join("greeting.json");
    std::fs::write(
        &object,
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "hello", "namespace": "default", "uid": "u1",
                         "labels": {"kubewasm.dev/greeter": "true"}},
            "data": {"greeting": "hi"},
        })
        .to_string(),
    )?;
    let rendered = kubewasm(&[
        "render".as_ref(),
        wasm.as_os_str(),
        "--object".as_ref(),
        object.as_os_str(),
    ])?;
    let rendered: serde_yaml::Value = serde_yaml::from_str(&rendered)?;
    ensure!(
        rendered["result"]["outcome"] == "done",
        "{language:?}: the template does not finish its reconcile: {rendered:?}"
    );
    let logs = rendered["logs"].as_sequence().map_or(0, Vec::len);
    ensure!(
        logs > 0,
        "{language:?}: the template logs nothing: {rendered:?}"
    );
    Ok(())
}

#[test]
fn a_new_go_guest_tests_builds_loads_and_reconciles() -> Result<()> {
    check_template(Language::Go)
}

#[test]
fn a_new_python_guest_tests_builds_loads_and_reconciles() -> Result<()> {
    check_template(Language::Python)
}

#[test]
fn a_new_javascript_guest_tests_builds_loads_and_reconciles() -> Result<()> {
    check_template(Language::JavaScript)
}
