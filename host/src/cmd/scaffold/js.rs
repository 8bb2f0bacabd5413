//! The JavaScript guest package: the template's sources renamed, the SDK as a `file:`
//! dependency, tests run by `node --test`.

use std::path::Path;

use serde_json::json;

use super::{Language, build_script, readme, rename};

const INDEX: &str = include_str!("../../../../guests/js/template/src/index.js");
const SUMMARY: &str = include_str!("../../../../guests/js/template/src/summary.js");
const TEST: &str = include_str!("../../../../guests/js/template/test/summary.test.js");

/// The package's files for the controller `name`, with the SDK at `sdk`.
pub(super) fn files(name: &str, sdk: &Path) -> Vec<(&'static str, String)> {
    let package = json!({
        "name": name,
        "version": "0.1.0",
        "private": true,
        "type": "module",
        "scripts": { "build": "./build", "test": "node --test" },
        "dependencies": { "@kubewasm/guest": format!("file:{}", sdk.display()) },
    });
    let package = serde_json::to_string_pretty(&package).expect("a manifest serializes") + "\n";
    let commands = format!(
        "npm install                        # links the SDK\n\
         npm test                           # the pure functions, natively\n\
         ./build                            # dist/{name}.wasm\n\
         kubewasm check dist/{name}.wasm\n\
         kubewasm render dist/{name}.wasm --object object.yaml --cache cluster/ --diff\n"
    );
    vec![
        ("package.json", package),
        ("src/index.js", rename(INDEX, "greeter", name)),
        ("src/summary.js", SUMMARY.to_owned()),
        ("test/summary.test.js", TEST.to_owned()),
        (
            "build",
            build_script(
                sdk,
                "build-guest",
                &format!("\"$here/src/index.js\" {name}"),
            ),
        ),
        ("README.md", readme(name, Language::Js, &commands)),
        (".gitignore", "node_modules\n/dist\n".to_owned()),
    ]
}
