//! `kubewasm test`: test cases as files, each one reconcile (or finalize) of an object among
//! the objects the host's cache holds around it, run against the built component through the
//! host's own call path (as `render` runs it) and compared with what the case expects.
//!
//! A case is a YAML file:
//!
//! ```yaml
//! object: {apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: default}}
//! cache: []            # the objects the cache holds around it; default none
//! finalize: false      # calls finalize instead of reconcile; default false
//! expect:              # any of what `render` prints: writes, logs, result
//!   writes: []
//!   result: {outcome: done}
//! ```
//!
//! Each part `expect` names must equal, as YAML values, what the call renders; the parts it
//! leaves out are not checked. `--update` writes what the call renders into `expect` (its
//! writes and result, and its logs when `expect` names logs), rewriting the file.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use serde_json::Value;
use serde_yaml::Mapping;

use crate::cmd::render::{self, RenderError};
use crate::cmd::source::ModuleSource;
use crate::cmd::{fail, out};
use crate::wasm::dispatch::Entry;
use crate::wasm::module::Module;
use crate::wasm::oci::RegistrySettings;
use crate::wasm::offline::OfflineBackend;
use crate::wasm::runtime::Runtime;

/// Why a case could not be run.
#[derive(Debug, thiserror::Error)]
pub enum CaseError {
    /// The file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a case.
    #[error("{}: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The call could not be made.
    #[error(transparent)]
    Render(#[from] RenderError),
}

/// One case as read.
#[derive(Debug)]
struct Case {
    /// The file, as YAML.
    file: Mapping,
    object: Value,
    cache: Vec<Value>,
    entry: Entry,
}

/// How a case ended.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    /// What was rendered is what the case expects.
    Passed,
    /// It is not: each differing part, as a line diff of expected (`-`) and rendered (`+`).
    Failed(String),
    /// The case's `expect` was rewritten with what was rendered.
    Updated,
}

/// `kubewasm test`: runs every case of `paths` (files, or folders of `.yaml` and `.yml` files)
/// against `module`, prints one line per case and the diff of each failure, and fails unless
/// every case passed. With `update`, rewrites each case's `expect` instead; with `backtrace`, a
/// trap's message keeps the wasm backtrace.
pub async fn command(
    module: &str,
    paths: &[PathBuf],
    (update, backtrace): (bool, bool),
    loading: (RegistrySettings, Option<PathBuf>),
) -> ExitCode {
    let source = ModuleSource::parse(module);
    let (runtime, module) = match render::load(&source, loading).await {
        Ok(loaded) => loaded,
        Err(error) => return fail(error),
    };
    let files = match case_files(paths) {
        Ok(files) if !files.is_empty() => files,
        Ok(_) => return fail("no case files (.yaml or .yml) in the paths given"),
        Err(error) => return fail(error),
    };
    let (mut failed, mut updated) = (0, 0);
    for file in &files {
        match run(&runtime, &module, file, (update, backtrace)).await {
            Ok(Verdict::Passed) => out(format_args!("ok      {}\n", file.display())),
            Ok(Verdict::Updated) => {
                updated += 1;
                out(format_args!("updated {}\n", file.display()));
            }
            Ok(Verdict::Failed(diff)) => {
                failed += 1;
                out(format_args!("FAILED  {}\n{diff}\n", file.display()));
            }
            Err(error) => {
                failed += 1;
                out(format_args!("FAILED  {}\n  {error}\n", file.display()));
            }
        }
    }
    let passed = files.len() - failed - updated;
    out(format_args!(
        "{passed} passed, {updated} updated, {failed} failed\n"
    ));
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The case files of `paths`: each file as given, and the `.yaml` and `.yml` files of each
/// folder (not its subfolders), by name.
pub fn case_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, CaseError> {
    let mut files = Vec::new();
    for path in paths {
        if !path.is_dir() {
            files.push(path.clone());
            continue;
        }
        let io = |source| CaseError::Io {
            path: path.clone(),
            source,
        };
        let mut found = Vec::new();
        for entry in std::fs::read_dir(path).map_err(io)? {
            let file = entry.map_err(io)?.path();
            let yaml = (file.extension()).is_some_and(|ext| ext == "yaml" || ext == "yml");
            if yaml && file.is_file() {
                found.push(file);
            }
        }
        found.sort();
        files.extend(found);
    }
    Ok(files)
}

/// Runs the case in `file` against `module` and compares what it renders with what it
/// expects, or, with `update`, rewrites its `expect`; with `backtrace`, a trap's message keeps
/// the wasm backtrace.
pub async fn run(
    runtime: &Runtime,
    module: &Module,
    file: &Path,
    (update, backtrace): (bool, bool),
) -> Result<Verdict, CaseError> {
    let mut case = read(file)?;
    let backend = Arc::new(OfflineBackend::new(case.cache.clone()));
    let limits = render::call_limits(backtrace);
    let object = case.object.clone();
    let rendered = render::call(runtime, module, &backend, &limits, case.entry, object).await?;
    let rendered: Mapping = serde_yaml::from_str(&rendered.to_yaml()).expect("rendered YAML");
    let expect = (case
        .file
        .get("expect")
        .and_then(serde_yaml::Value::as_mapping))
    .cloned();
    if update {
        let logs = expect.as_ref().is_some_and(|e| e.contains_key("logs"));
        let mut updated = Mapping::new();
        for part in ["writes", "logs", "result"] {
            if (part != "logs" || logs)
                && let Some(value) = rendered.get(part)
            {
                updated.insert(part.into(), value.clone());
            }
        }
        case.file.insert("expect".into(), updated.into());
        let text = serde_yaml::to_string(&case.file).expect("a case serializes");
        std::fs::write(file, text).map_err(|source| CaseError::Io {
            path: file.to_owned(),
            source,
        })?;
        return Ok(Verdict::Updated);
    }
    let Some(expect) = expect else {
        return Err(invalid(
            file,
            "no `expect`: run with --update to record one",
        ));
    };
    Ok(compare(&expect, &rendered))
}

/// Reads the case in `file`.
fn read(file: &Path) -> Result<Case, CaseError> {
    let text = std::fs::read_to_string(file).map_err(|source| CaseError::Io {
        path: file.to_owned(),
        source,
    })?;
    let mapping: Mapping =
        serde_yaml::from_str(&text).map_err(|error| invalid(file, &error.to_string()))?;
    let known = ["object", "cache", "finalize", "expect"];
    if let Some(key) = (mapping.keys()).find(|k| !k.as_str().is_some_and(|k| known.contains(&k))) {
        return Err(invalid(
            file,
            &format!("unknown key {key:?}; a case has {known:?}"),
        ));
    }
    let json = |value: &serde_yaml::Value| {
        serde_json::to_value(value).map_err(|error| invalid(file, &error.to_string()))
    };
    let at = |part: &str| format!("{}, {part}", file.display());
    let object = mapping
        .get("object")
        .ok_or_else(|| invalid(file, "no `object`"))?;
    let object = render::fixture(json(object)?, &at("object"))?;
    let mut cache = Vec::new();
    if let Some(listed) = mapping.get("cache") {
        let Value::Array(listed) = json(listed)? else {
            return Err(invalid(file, "`cache` is not a list"));
        };
        for (index, item) in listed.into_iter().enumerate() {
            cache.push(render::fixture(item, &at(&format!("cache[{index}]")))?);
        }
    }
    let entry = match mapping.get("finalize") {
        None | Some(serde_yaml::Value::Bool(false)) => Entry::Reconcile,
        Some(serde_yaml::Value::Bool(true)) => Entry::Finalize,
        Some(_) => return Err(invalid(file, "`finalize` is not true or false")),
    };
    Ok(Case {
        file: mapping,
        object,
        cache,
        entry,
    })
}

fn invalid(file: &Path, message: &str) -> CaseError {
    CaseError::Invalid {
        path: file.to_owned(),
        message: message.to_owned(),
    }
}

/// [`Verdict::Passed`] if every part of `expect` equals that part of `rendered`; else each
/// differing part's diff.
pub fn compare(expect: &Mapping, rendered: &Mapping) -> Verdict {
    let mut diffs = String::new();
    for (part, expected) in expect {
        let actual = rendered.get(part).unwrap_or(&serde_yaml::Value::Null);
        if actual != expected {
            let yaml = |value| serde_yaml::to_string(value).expect("YAML serializes");
            let name = part.as_str().unwrap_or_default();
            diffs += &format!("  {name}:\n{}", line_diff(&yaml(expected), &yaml(actual)));
        }
    }
    if diffs.is_empty() {
        Verdict::Passed
    } else {
        Verdict::Failed(diffs)
    }
}

/// The lines of `expected` and `actual`, each marked `-` (only expected), `+` (only actual) or
/// ` ` (both), in order: a longest common subsequence of lines.
pub fn line_diff(expected: &str, actual: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), actual.lines().collect());
    // common[i][j]: the longest common subsequence of a[i..] and b[j..].
    let mut common = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            common[i][j] = if a[i] == b[j] {
                common[i + 1][j + 1] + 1
            } else {
                common[i + 1][j].max(common[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            out += &format!("      {}\n", a[i]);
            (i, j) = (i + 1, j + 1);
        } else if j == b.len() || (i < a.len() && common[i + 1][j] >= common[i][j + 1]) {
            out += &format!("    - {}\n", a[i]);
            i += 1;
        } else {
            out += &format!("    + {}\n", b[j]);
            j += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_diff_marks_what_only_one_side_has() {
        let expected = "a\nb\nc\nd\n";
        let actual = "a\nc\nx\nd\n";
        assert_eq!(
            line_diff(expected, actual),
            "      a\n    - b\n      c\n    + x\n      d\n"
        );
        assert_eq!(line_diff("", "a\n"), "    + a\n");
    }

    #[test]
    fn only_the_parts_expected_are_compared() {
        let mapping = |yaml: &str| serde_yaml::from_str::<Mapping>(yaml).unwrap();
        let rendered = mapping("writes: []\nlogs: [{level: info}]\nresult: {outcome: done}\n");
        assert_eq!(
            compare(&mapping("result: {outcome: done}"), &rendered),
            Verdict::Passed
        );
        let Verdict::Failed(diff) = compare(&mapping("writes: [a]\nresult: {}"), &rendered) else {
            panic!("writes differ");
        };
        assert!(
            diff.starts_with("  writes:\n    - - a\n    + []\n"),
            "{diff}"
        );
        assert!(
            diff.contains("  result:\n    - {}\n    + outcome: done\n"),
            "{diff}"
        );
    }

    #[test]
    fn a_case_names_its_parts() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let object = "object: {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n";
        let case = read(&write("ok.yaml", &format!("{object}finalize: true\n"))).unwrap();
        assert_eq!(case.entry, Entry::Finalize);
        assert!(
            case.object["metadata"]["uid"].is_string(),
            "as the cache holds it"
        );
        for (text, error) in [
            ("cache: []\n", "no `object`"),
            (&format!("{object}expected: {{}}\n"), "unknown key"),
            (&format!("{object}cache: {{}}\n"), "`cache` is not a list"),
            (&format!("{object}cache: [{{kind: Pod}}]\n"), "cache[0]"),
            (&format!("{object}finalize: yes please\n"), "`finalize`"),
        ] {
            let refused = read(&write("bad.yaml", text)).unwrap_err().to_string();
            assert!(refused.contains(error), "{text}: {refused}");
        }
        write("notes.txt", "");
        let files = case_files(&[dir.path().to_owned()]).unwrap();
        let names: Vec<_> = files.iter().map(|f| f.file_name().unwrap()).collect();
        assert_eq!(names, ["bad.yaml", "ok.yaml"]);
    }
}
