//! `kubewasm new`: a new guest project made from the template guest of its language
//! (`guests/<language>/template`, compiled into the binary), renamed, building against the guest
//! SDK of a kubewasm checkout and writing its component into its own folder.
//!
//! A project builds wherever it is created and passes its tests as created: a Rust crate is a
//! workspace of its own; a JavaScript, Python or Go project has a `build` script that writes
//! `dist/<name>.wasm` and the native tests of its language.

mod go;
mod js;
mod python;
mod rust;

use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;

use clap::ValueEnum;

use crate::cluster::selector::is_dns1123_label;
use crate::cmd::{fail, out};

/// The languages a guest project can be created in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Language {
    /// A Rust crate (cargo).
    Rust,
    /// A JavaScript package (node).
    Js,
    /// A Python application (pytest).
    Python,
    /// A Go module.
    Go,
}

impl Language {
    fn name(self) -> &'static str {
        match self {
            Language::Rust => "Rust",
            Language::Js => "JavaScript",
            Language::Python => "Python",
            Language::Go => "Go",
        }
    }

    /// The SDK's folder in a kubewasm checkout.
    fn sdk_dir(self) -> &'static str {
        match self {
            Language::Rust => "guests/rust",
            Language::Js => "guests/js",
            Language::Python => "guests/python",
            Language::Go => "guests/go",
        }
    }

    /// Whether `sdk` holds this language's SDK.
    fn is_sdk(self, sdk: &Path) -> bool {
        let file = match self {
            Language::Rust => "testkit/Cargo.toml",
            Language::Js => "build-guest",
            Language::Python => "kubewasm/__init__.py",
            Language::Go => "componentize",
        };
        sdk.join(file).is_file()
    }

    /// The project's files for the controller `name`, with the SDK at `sdk` (relative to the
    /// project, or absolute).
    fn files(self, name: &str, sdk: &Path) -> Vec<(&'static str, String)> {
        match self {
            Language::Rust => rust::files(name, sdk),
            Language::Js => js::files(name, sdk),
            Language::Python => python::files(name, sdk),
            Language::Go => go::files(name, sdk),
        }
    }

    /// What to run in the project next.
    fn next(self) -> &'static str {
        match self {
            Language::Rust => "cargo test && cargo build --release --target wasm32-wasip2",
            Language::Js => "npm install && npm test && ./build",
            Language::Python => "python3 -m pytest && ./build",
            Language::Go => "go test ./... && ./build",
        }
    }
}

/// Why a project could not be created.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    /// The name cannot be both a controller name and a package name.
    #[error(
        "{0:?} is not a valid name: use lowercase letters, digits and '-', at most 63, starting \
         with a letter and ending with a letter or digit"
    )]
    Name(String),
    /// The folder exists and is not empty.
    #[error("{} already exists and is not empty", .0.display())]
    Exists(PathBuf),
    /// The SDK folder does not hold the language's guest SDK.
    #[error(
        "no {language} guest SDK at {}; pass --sdk with the {folder} folder of a kubewasm \
         checkout",
        .path.display()
    )]
    Sdk {
        /// The language's name.
        language: &'static str,
        /// Its SDK's folder in a checkout.
        folder: &'static str,
        /// The folder given.
        path: PathBuf,
    },
    /// A file or folder could not be written.
    #[error("writing {}: {source}", path.display())]
    Write {
        /// The file or folder.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// `kubewasm new`: creates the `language` guest project `name` in `dir` (default: `./name`)
/// against the SDK `sdk` (default: [`default_sdk`]), and prints the files written and what to
/// run next.
pub fn command(
    name: &str,
    language: Language,
    dir: Option<PathBuf>,
    sdk: Option<PathBuf>,
) -> ExitCode {
    let dir = dir.unwrap_or_else(|| PathBuf::from(name));
    let sdk = sdk.unwrap_or_else(|| default_sdk(language));
    let files = match create(name, language, &dir, &sdk) {
        Ok(files) => files,
        Err(error) => return fail(error),
    };
    out(format_args!(
        "created the {} guest {name} in {}:\n",
        language.name(),
        dir.display()
    ));
    for file in files {
        out(format_args!("  {}\n", file.display()));
    }
    out(format_args!(
        "next: cd {} && {}\n",
        dir.display(),
        language.next()
    ));
    ExitCode::SUCCESS
}

/// The `language` guest SDK of the checkout this binary was built from.
pub fn default_sdk(language: Language) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(language.sdk_dir())
}

/// Creates the `language` guest project `name` in `dir` (which must not exist or be empty),
/// building against the SDK in `sdk`, and returns the files written. The controller, its
/// package and its label are named `name`, its type in CamelCase; a `build` script is made
/// executable.
pub fn create(
    name: &str,
    language: Language,
    dir: &Path,
    sdk: &Path,
) -> Result<Vec<PathBuf>, ScaffoldError> {
    if !is_dns1123_label(name) || !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        return Err(ScaffoldError::Name(name.to_owned()));
    }
    let sdk = (sdk.canonicalize().ok())
        .filter(|sdk| language.is_sdk(sdk))
        .ok_or_else(|| ScaffoldError::Sdk {
            language: language.name(),
            folder: language.sdk_dir(),
            path: sdk.to_owned(),
        })?;
    let write_error = |path: &Path| {
        let path = path.to_owned();
        move |source| ScaffoldError::Write { path, source }
    };
    if std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some()) {
        return Err(ScaffoldError::Exists(dir.to_owned()));
    }
    std::fs::create_dir_all(dir).map_err(write_error(dir))?;
    let dir_path = dir.canonicalize().map_err(write_error(dir))?;
    let mut written = Vec::new();
    for (file, text) in language.files(name, &relative(&dir_path, &sdk)) {
        let path = dir.join(file);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(write_error(parent))?;
        }
        std::fs::write(&path, text).map_err(write_error(&path))?;
        if file == "build" {
            let executable = std::fs::Permissions::from_mode(0o755);
            std::fs::set_permissions(&path, executable).map_err(write_error(&path))?;
        }
        written.push(path);
    }
    Ok(written)
}

/// Source of a template with its controller renamed from `template` to `name`: the type
/// (`Template` in CamelCase), the quoted name and the label `kubewasm.dev/<template>`.
fn rename(source: &str, template: &str, name: &str) -> String {
    source
        .replace(&camel_case(template), &camel_case(name))
        .replace(&format!("\"{template}\""), &format!("\"{name}\""))
        .replace(
            &format!("kubewasm.dev/{template}"),
            &format!("kubewasm.dev/{name}"),
        )
}

/// `my-controller` → `MyController`.
fn camel_case(name: &str) -> String {
    name.split('-')
        .flat_map(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .map(|first| first.to_ascii_uppercase())
                .into_iter()
                .chain(chars)
        })
        .collect()
}

/// A `build` script that runs the SDK's `tool` (relative to the SDK `sdk`) with `args`, writing
/// into the project's `dist/`.
fn build_script(sdk: &Path, tool: &str, args: &str) -> String {
    format!(
        "#!/usr/bin/env bash\n\
         # Builds this guest into dist/ and prints the component's absolute path as the last line\n\
         # of stdout.\n\
         set -euo pipefail\n\
         here=$(cd \"$(dirname \"${{BASH_SOURCE[0]}}\")\" && pwd)\n\
         KUBEWASM_OUT_DIR=$here/dist exec {} {args}\n",
        shell_path(&sdk.join(tool))
    )
}

/// `path` quoted for bash, under the script's folder `$here` when relative.
fn shell_path(path: &Path) -> String {
    let quoted = format!("'{}'", path.to_string_lossy().replace('\'', r"'\''"));
    if path.is_absolute() {
        quoted
    } else {
        format!("\"$here\"/{quoted}")
    }
}

/// The project's first test case, for `kubewasm test`: a ConfigMap labelled for `name`,
/// reconciled without a write.
fn first_case(name: &str) -> String {
    format!(
        "# A ConfigMap labelled for {name}: reconciled without a write. Add cases as files here;\n\
         # `kubewasm test dist/{name}.wasm cases/ --update` records what the component does.\n\
         object:\n\
         \x20 apiVersion: v1\n\
         \x20 kind: ConfigMap\n\
         \x20 metadata:\n\
         \x20   name: greeting\n\
         \x20   namespace: default\n\
         \x20   labels:\n\
         \x20     kubewasm.dev/{name}: \"true\"\n\
         \x20 data:\n\
         \x20   text: hello\n\
         cache: []\n\
         expect:\n\
         \x20 writes: []\n\
         \x20 result:\n\
         \x20   outcome: done\n"
    )
}

/// The README of a project: what it is, and the commands that test it (`tests`, one per line),
/// build, check and render it.
fn readme(name: &str, language: Language, tests: &str) -> String {
    let commands = format!(
        "{tests}\
         ./build                            # dist/{name}.wasm\n\
         kubewasm check dist/{name}.wasm\n\
         kubewasm render dist/{name}.wasm --object object.yaml --cache cluster/ --diff\n"
    );
    format!(
        "# {name}\n\
         \n\
         A kubewasm controller, created by `kubewasm new --lang {}` from the {} guest template.\n\
         It reconciles ConfigMaps labelled `kubewasm.dev/{name}=true` and logs what it sees.\n\
         \n\
         ```sh\n{commands}```\n\
         \n\
         `guests/README.md` in the kubewasm checkout walks through writing, testing and running a\n\
         guest; `{}/README.md` describes the SDK.\n",
        format!("{language:?}").to_lowercase(),
        language.name(),
        language.sdk_dir(),
    )
}

/// `to` relative to the folder `from` when they share more than the root, else `to`; both
/// absolute and canonical.
fn relative(from: &Path, to: &Path) -> PathBuf {
    let from: Vec<Component> = from.components().collect();
    let to: Vec<Component> = to.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    if common <= 1 {
        return to.iter().collect();
    }
    let mut path: PathBuf = from[common..]
        .iter()
        .map(|_| Component::ParentDir)
        .collect();
    path.extend(&to[common..]);
    if path.as_os_str().is_empty() {
        path.push(".");
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renames_everything_the_rust_template_names() {
        let files = rust::files("hello-world", Path::new("../kubewasm/guests/rust"));
        let file = |name: &str| &files.iter().find(|(f, _)| *f == name).unwrap().1;
        let manifest = file("Cargo.toml");
        assert!(manifest.contains("name = \"hello-world\"\n"));
        assert!(manifest.contains("description = \"The hello-world kubewasm controller\"\n"));
        assert!(manifest.contains(
            "kubewasm-guest = { path = \"../kubewasm/guests/rust\", features = [\"k8s-openapi\"] }\n"
        ));
        assert!(
            manifest.contains("kubewasm-testkit = { path = \"../kubewasm/guests/rust/testkit\" }")
        );
        assert!(manifest.ends_with("[workspace]\n"));
        let lib = file("src/lib.rs");
        assert!(lib.contains("pub struct HelloWorld;"));
        assert!(lib.contains("impl Controller for HelloWorld {"));
        assert!(lib.contains("\"hello-world\","));
        assert!(lib.contains("export_controller!(HelloWorld);"));
        assert!(lib.contains("kubewasm.dev/hello-world=true"));
        let test = file("tests/reconcile.rs");
        assert!(test.contains("\"kubewasm.dev/hello-world\": \"true\""));
        for text in [manifest, lib, test] {
            assert!(!text.to_lowercase().contains("template"), "{text}");
        }
    }

    #[test]
    fn every_language_renames_its_template_and_builds_into_dist() {
        for language in [Language::Js, Language::Python, Language::Go] {
            let files = language.files("hello-world", Path::new("../sdk dir"));
            let text: String = files.iter().map(|(_, text)| text.as_str()).collect();
            assert!(text.contains("kubewasm.dev/hello-world"), "{language:?}");
            assert!(
                !text.contains("greeter") && !text.contains("Greeter"),
                "{language:?}: {text}"
            );
            let build = &files.iter().find(|(f, _)| *f == "build").unwrap().1;
            assert!(build.contains("KUBEWASM_OUT_DIR=$here/dist exec \"$here\"/'../sdk dir/"));
            assert!(build.ends_with(" hello-world\n"), "{build}");
        }
        let file = |language: Language, sdk: &str, name: &str| {
            let files = language.files("hello-world", Path::new(sdk));
            (files.into_iter().find(|(f, _)| *f == name).unwrap().1).clone()
        };
        let module = file(Language::Go, "/opt/sdk", "go.mod");
        assert!(module.contains("replace kubewasm.dev/guest => \"/opt/sdk\"\n"));
        assert!(file(Language::Go, "/opt/sdk", "README.md").contains("go test ./..."));
        let module = file(Language::Go, "../sdk dir", "go.mod");
        assert!(module.contains("replace kubewasm.dev/guest => \"./../sdk dir\"\n"));
        let conftest = file(Language::Python, "../e\u{301}\u{a0}", "conftest.py");
        assert!(conftest.contains("Path(__file__).parent / \"../e\u{301}\u{a0}\")"));
        for language in [Language::Js, Language::Python, Language::Go] {
            let case = file(language, "/opt/sdk", "cases/labelled.yaml");
            assert!(
                case.contains("      kubewasm.dev/hello-world: \"true\"\n"),
                "{case}"
            );
        }
    }

    #[test]
    fn names_must_suit_a_controller_and_a_package() {
        let sdk = default_sdk(Language::Rust);
        let dir = std::env::temp_dir().join(format!("kubewasm-scaffold-{}", std::process::id()));
        for name in ["", "Hello", "1st", "a_b", "trailing-", &"x".repeat(64)] {
            assert!(matches!(
                create(name, Language::Rust, &dir, &sdk),
                Err(ScaffoldError::Name(_))
            ));
        }
        for language in [Language::Rust, Language::Js, Language::Python, Language::Go] {
            let refused = create("ok", language, &dir, &dir).unwrap_err();
            assert!(matches!(refused, ScaffoldError::Sdk { .. }), "{language:?}");
            assert!(
                refused.to_string().contains(language.sdk_dir()),
                "{refused}"
            );
            assert!(language.is_sdk(&default_sdk(language)), "{language:?}");
        }
        assert!(!dir.exists());
    }

    #[test]
    fn paths_are_relative_to_the_project() {
        let relative = |from: &str, to: &str| relative(Path::new(from), Path::new(to));
        assert_eq!(relative("/a/b/c", "/a/d"), Path::new("../../d"));
        assert_eq!(relative("/a/b", "/c/d"), Path::new("/c/d"));
        assert_eq!(relative("/a", "/a/d/e"), Path::new("d/e"));
        assert_eq!(relative("/a", "/a"), Path::new("."));
        assert_eq!(camel_case("a-b2-cd"), "AB2Cd");
        assert_eq!(shell_path(Path::new("/it's")), r"'/it'\''s'");
    }
}
