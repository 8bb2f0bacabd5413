//! The template guest of every language builds from source, loads as the host loads it, and
//! reconciles a matching ConfigMap.

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

fn check_template(language: Language) -> Result<()> {
    let wasm = built_by(&format!("guests/{}/template/build", language.dir()), &[]);
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
fn go_template_builds_loads_and_reconciles() -> Result<()> {
    check_template(Language::Go)
}

#[test]
fn python_template_builds_loads_and_reconciles() -> Result<()> {
    check_template(Language::Python)
}

#[test]
fn js_template_builds_loads_and_reconciles() -> Result<()> {
    check_template(Language::JavaScript)
}
