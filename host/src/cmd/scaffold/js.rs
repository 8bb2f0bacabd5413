//! The JavaScript guest package: the template's sources renamed, the SDK as a `file:`
//! dependency, tests run by `node --test`.

use std::path::Path;

use serde_json::json;

use super::{Language, build_script, first_case, readme, rename};

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
    let tests = "npm install                        # links the SDK\n\
                 npm test                           # the pure functions, then the cases on the component\n";
    vec![
        ("package.json", package),
        ("src/index.js", rename(INDEX, "greeter", name)),
        ("src/summary.js", SUMMARY.to_owned()),
        ("test/summary.test.js", TEST.to_owned()),
        ("test/cases.test.js", cases_test(name)),
        ("cases/labelled.yaml", first_case(name)),
        (
            "build",
            build_script(
                sdk,
                "build-guest",
                &format!("\"$here/src/index.js\" {name}"),
            ),
        ),
        ("README.md", readme(name, Language::Js, tests)),
        (".gitignore", "node_modules\n/dist\n".to_owned()),
    ]
}

/// A test that builds the component and runs `kubewasm test` on the cases (the binary from
/// `$KUBEWASM`, else the path).
fn cases_test(name: &str) -> String {
    format!(
        "// The component itself on the cases in cases/: built by ./build, run by `kubewasm test`\n\
         // (the binary named by $KUBEWASM, else `kubewasm` on the path).\n\
         \n\
         import assert from \"node:assert/strict\";\n\
         import {{ spawnSync }} from \"node:child_process\";\n\
         import {{ test }} from \"node:test\";\n\
         \n\
         const project = new URL(\"..\", import.meta.url).pathname;\n\
         \n\
         test(\"the component passes its cases\", () => {{\n\
         \x20 const build = spawnSync(`${{project}}build`, {{ encoding: \"utf8\" }});\n\
         \x20 assert.equal(build.status, 0, build.stderr);\n\
         \x20 const wasm = build.stdout.trim().split(\"\\n\").pop();\n\
         \x20 const kubewasm = process.env.KUBEWASM ?? \"kubewasm\";\n\
         \x20 const run = spawnSync(kubewasm, [\"test\", wasm, `${{project}}cases`], {{ encoding: \"utf8\" }});\n\
         \x20 assert.equal(run.status, 0, `${{run.stdout}}${{run.stderr}}${{run.error ?? \"\"}}`);\n\
         }});\n\
         \n\
         // {name}: add cases as files in cases/.\n"
    )
}
