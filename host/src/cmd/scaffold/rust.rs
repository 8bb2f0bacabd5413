//! The Rust guest crate: the template crate renamed, depending on the SDK and its test kit by
//! path, a workspace of its own.

use std::path::Path;

use super::rename;

const MANIFEST: &str = include_str!("../../../../guests/rust/template/Cargo.toml");
const LIB: &str = include_str!("../../../../guests/rust/template/src/lib.rs");
const TEST: &str = include_str!("../../../../guests/rust/template/tests/reconcile.rs");

/// The crate's files for the controller `name`, with the SDK at `sdk`.
pub(super) fn files(name: &str, sdk: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("Cargo.toml", manifest(name, sdk)),
        ("src/lib.rs", rename(LIB, "template", name)),
        ("tests/reconcile.rs", rename(TEST, "template", name)),
        ("README.md", readme(name)),
        (".gitignore", "/target\n".to_owned()),
    ]
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

/// The crate's README.
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
