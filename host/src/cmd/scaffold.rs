//! `kubewasm new`: a new Rust guest crate made from the template guest
//! (`guests/rust/template`, compiled into the binary), renamed, depending on the Rust guest SDK
//! and test kit of a kubewasm checkout. Only Rust guests can be created so far.
//!
//! The crate is a workspace of its own, so it builds wherever it is created, and it builds and
//! passes its tests as created.

use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;

use crate::cluster::selector::is_dns1123_label;
use crate::cmd::fail;

const MANIFEST: &str = include_str!("../../../guests/rust/template/Cargo.toml");
const LIB: &str = include_str!("../../../guests/rust/template/src/lib.rs");
const TEST: &str = include_str!("../../../guests/rust/template/tests/reconcile.rs");

/// Why a crate could not be created.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    /// The name cannot be both a controller name and a crate name.
    #[error(
        "{0:?} is not a valid name: use lowercase letters, digits and '-', at most 63, starting \
         with a letter and ending with a letter or digit"
    )]
    Name(String),
    /// The folder exists and is not empty.
    #[error("{} already exists and is not empty", .0.display())]
    Exists(PathBuf),
    /// The SDK folder does not hold the Rust guest SDK.
    #[error(
        "no Rust guest SDK at {}; pass --sdk with the guests/rust folder of a kubewasm checkout",
        .0.display()
    )]
    Sdk(PathBuf),
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

/// `kubewasm new`: creates the guest crate `name` in `dir` (default: `./name`) against the SDK
/// `sdk` (default: [`default_sdk`]), and prints the files written and what to run next.
pub fn command(name: &str, dir: Option<PathBuf>, sdk: Option<PathBuf>) -> ExitCode {
    let dir = dir.unwrap_or_else(|| PathBuf::from(name));
    let sdk = sdk.unwrap_or_else(default_sdk);
    let files = match create(name, &dir, &sdk) {
        Ok(files) => files,
        Err(error) => return fail(error),
    };
    println!("created the Rust guest crate {name} in {}:", dir.display());
    for file in files {
        println!("  {}", file.display());
    }
    println!(
        "next: cd {} && cargo test && cargo build --release --target wasm32-wasip2",
        dir.display()
    );
    ExitCode::SUCCESS
}

/// The Rust guest SDK of the checkout this binary was built from.
pub fn default_sdk() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../guests/rust")
}

/// Creates the guest crate `name` in `dir` (which must not exist or be empty), depending on the
/// SDK in `sdk` and its test kit in `sdk/testkit`, and returns the files written. The
/// controller, its package and its label are named `name`, its type in CamelCase.
pub fn create(name: &str, dir: &Path, sdk: &Path) -> Result<Vec<PathBuf>, ScaffoldError> {
    if !is_dns1123_label(name) || !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        return Err(ScaffoldError::Name(name.to_owned()));
    }
    let sdk = sdk
        .canonicalize()
        .ok()
        .filter(|sdk| sdk.join("testkit/Cargo.toml").is_file())
        .ok_or_else(|| ScaffoldError::Sdk(sdk.to_owned()))?;
    let write_error = |path: &Path| {
        let path = path.to_owned();
        move |source| ScaffoldError::Write { path, source }
    };
    if std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some()) {
        return Err(ScaffoldError::Exists(dir.to_owned()));
    }
    std::fs::create_dir_all(dir).map_err(write_error(dir))?;
    let dir_path = dir.canonicalize().map_err(write_error(dir))?;
    let sdk_path = relative(&dir_path, &sdk);
    let files = [
        ("Cargo.toml", manifest(name, &sdk_path)),
        ("src/lib.rs", rename(LIB, name)),
        ("tests/reconcile.rs", rename(TEST, name)),
        ("README.md", readme(name)),
        (".gitignore", "/target\n".to_owned()),
    ];
    let mut written = Vec::new();
    for (file, text) in files {
        let path = dir.join(file);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(write_error(parent))?;
        }
        std::fs::write(&path, text).map_err(write_error(&path))?;
        written.push(path);
    }
    Ok(written)
}

/// The template's manifest for crate `name`, with the SDK at `sdk` (relative to the crate).
fn manifest(name: &str, sdk: &Path) -> String {
    let sdk = sdk
        .to_string_lossy()
        .replace('\\', "\\\\")
        .replace('"', "\\\"");
    let manifest = MANIFEST
        .replace(
            "name = \"guest-template\"",
            &format!("name = \"{name}\""),
        )
        .replace(
            "description = \"Minimal kubewasm controller guest: copy this crate to start a new controller\"",
            &format!("description = \"The {name} kubewasm controller\""),
        )
        .replace(
            "# When copied out of this repository, point `path` at guests/rust of a kubewasm checkout.",
            "# The Rust guest SDK of a kubewasm checkout, with its typed helpers for built-in kinds\n\
             # (`Gvk::of::<Deployment>()`, `cache::get_resource`).",
        )
        .replace(
            "kubewasm-guest = { path = \"..\" }",
            &format!("kubewasm-guest = {{ path = \"{sdk}\", features = [\"k8s-openapi\"] }}"),
        )
        .replace(
            "kubewasm-testkit = { path = \"../testkit\" }",
            &format!("kubewasm-testkit = {{ path = \"{sdk}/testkit\" }}"),
        );
    format!("{manifest}\n# A workspace of its own, wherever the crate is.\n[workspace]\n")
}

/// Source of the template with the controller renamed to `name`.
fn rename(source: &str, name: &str) -> String {
    source
        .replace("Template", &camel_case(name))
        .replace("\"template\"", &format!("\"{name}\""))
        .replace("kubewasm.dev/template", &format!("kubewasm.dev/{name}"))
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

fn readme(name: &str) -> String {
    let wasm = format!(
        "target/wasm32-wasip2/release/{}.wasm",
        name.replace('-', "_")
    );
    format!(
        "# {name}\n\
         \n\
         A kubewasm controller, created by `kubewasm new` from the Rust guest template. It\n\
         reconciles ConfigMaps labelled `kubewasm.dev/{name}=true` and logs what it sees: edit\n\
         `metadata()` and `reconcile()` in `src/lib.rs`.\n\
         \n\
         ```sh\n\
         cargo test                                     # the component on fixture objects\n\
         cargo build --release --target wasm32-wasip2   # the component\n\
         kubewasm check {wasm}\n\
         kubewasm render {wasm} --object object.yaml --cache cluster/\n\
         ```\n\
         \n\
         `guests/README.md` in the kubewasm checkout walks through writing, testing and running a\n\
         guest; `guests/rust/README.md` describes the SDK.\n"
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
    fn renames_everything_the_template_names() {
        let manifest = manifest("hello-world", Path::new("../kubewasm/guests/rust"));
        assert!(manifest.contains("name = \"hello-world\"\n"));
        assert!(manifest.contains("description = \"The hello-world kubewasm controller\"\n"));
        assert!(manifest.contains(
            "kubewasm-guest = { path = \"../kubewasm/guests/rust\", features = [\"k8s-openapi\"] }\n"
        ));
        assert!(
            manifest.contains("kubewasm-testkit = { path = \"../kubewasm/guests/rust/testkit\" }")
        );
        assert!(manifest.ends_with("[workspace]\n"));
        let lib = rename(LIB, "hello-world");
        assert!(lib.contains("pub struct HelloWorld;"));
        assert!(lib.contains("impl Controller for HelloWorld {"));
        assert!(lib.contains("\"hello-world\","));
        assert!(lib.contains("export_controller!(HelloWorld);"));
        assert!(lib.contains("kubewasm.dev/hello-world=true"));
        let test = rename(TEST, "hello-world");
        assert!(test.contains("\"kubewasm.dev/hello-world\": \"true\""));
        for text in [&manifest, &lib, &test] {
            assert!(!text.to_lowercase().contains("template"), "{text}");
        }
    }

    #[test]
    fn names_must_suit_a_controller_and_a_crate() {
        let sdk = default_sdk();
        let dir = std::env::temp_dir().join(format!("kubewasm-scaffold-{}", std::process::id()));
        for name in ["", "Hello", "1st", "a_b", "trailing-", &"x".repeat(64)] {
            assert!(matches!(
                create(name, &dir, &sdk),
                Err(ScaffoldError::Name(_))
            ));
        }
        assert!(matches!(
            create("ok", &dir, &dir),
            Err(ScaffoldError::Sdk(_))
        ));
        assert!(!dir.exists());
    }

    #[test]
    fn paths_are_relative_to_the_crate() {
        let relative = |from: &str, to: &str| relative(Path::new(from), Path::new(to));
        assert_eq!(relative("/a/b/c", "/a/d"), Path::new("../../d"));
        assert_eq!(relative("/a/b", "/c/d"), Path::new("/c/d"));
        assert_eq!(relative("/a", "/a/d/e"), Path::new("d/e"));
        assert_eq!(relative("/a", "/a"), Path::new("."));
        assert_eq!(camel_case("a-b2-cd"), "AB2Cd");
    }
}
