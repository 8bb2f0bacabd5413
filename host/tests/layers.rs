//! The host's layering, as `src/lib.rs` documents it: a numbered list of its top-level modules,
//! bottom layer first. A file may use only its own top-level module and those listed before it.
//! No files may import each other in a circle, and nothing below the WebAssembly layer may name
//! wasmtime.
//!
//! Imports are read as text: every `crate::` path (including `use crate::{a, b}` groups) and
//! every `super::` path outside comments, test modules included.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// A module path inside the crate, such as `["cluster", "cache"]`.
type ModulePath = Vec<String>;

/// The layer of the WebAssembly runtime: the layers below it must not know wasmtime.
const WASM_LAYER: &str = "wasm";

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The top-level modules, bottom layer first, as the numbered list of the crate documentation
/// gives them; it must name every declared module once.
fn layers(lib: &str) -> Vec<String> {
    let mut declared: Vec<String> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod "))
        .map(|l| l.trim_end_matches(';').to_owned())
        .collect();
    let documented: Vec<String> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("//! "))
        .filter_map(|l| {
            let (number, rest) = l.split_once(". [`")?;
            number.parse::<u32>().ok()?;
            Some(rest.split_once('`')?.0.to_owned())
        })
        .collect();
    let mut listed = documented.clone();
    listed.sort();
    declared.sort();
    assert_eq!(
        listed, declared,
        "the layers listed in lib.rs's documentation must be its modules, each once"
    );
    documented
}

/// Every source file of the library (not the binary's `main.rs`) with its module path.
fn files(dir: &Path, src: &Path, out: &mut BTreeMap<ModulePath, PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, src, out);
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let relative = path.strip_prefix(src).unwrap().with_extension("");
        let mut module: ModulePath = relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        match module.last().map(String::as_str) {
            Some("main") if module.len() == 1 => continue,
            Some("lib" | "mod") => {
                module.pop();
            }
            _ => {}
        }
        out.insert(module, path);
    }
}

/// The source without comments, so that paths in documentation do not count as imports.
fn code(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn identifier(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// The module paths a file's code names: `crate::a::b...` (as far as the segments are module
/// names, which are lowercase), with `{...}` groups at any depth, and `super::...` resolved
/// against the file's own module.
fn imports(module: &ModulePath, code: &str) -> Vec<ModulePath> {
    let mut found = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        if code[..at].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        expand(&Vec::new(), &code[at + "crate::".len()..], &mut found);
    }
    let tests = code.find("mod tests {");
    for (at, _) in code.match_indices("super::") {
        if code[..at].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        // Inside a file's `mod tests`, the first `super` is the file itself.
        let in_tests = tests.is_some_and(|tests| at > tests);
        let mut base = module.clone();
        let mut rest = &code[at..];
        let mut first = true;
        while let Some(next) = rest.strip_prefix("super::") {
            if !(first && in_tests) {
                assert!(
                    base.pop().is_some(),
                    "{}: super:: beyond the crate root",
                    name(module)
                );
            }
            first = false;
            rest = next;
        }
        expand(&base, rest, &mut found);
    }
    found
}

/// The module paths `text` names below `base`: `a::b`, a group `{a, b::{c, d}}`, or nothing
/// more than `base` itself (`*`, `self`, a type).
fn expand(base: &ModulePath, text: &str, found: &mut Vec<ModulePath>) {
    let text = text.trim_start();
    if let Some(group) = text.strip_prefix('{') {
        let (mut depth, mut start) = (0, 0);
        for (at, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    expand(base, &group[start..at], found);
                    return;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(base, &group[start..at], found);
                    start = at + 1;
                }
                _ => {}
            }
        }
        return;
    }
    let segment = identifier(text);
    if segment.is_empty() || !segment.starts_with(|c: char| c.is_ascii_lowercase()) {
        found.push(base.clone());
        return;
    }
    let mut path = base.clone();
    path.push(segment.to_owned());
    match text[segment.len()..].strip_prefix("::") {
        Some(rest) => expand(&path, rest, found),
        None => found.push(path),
    }
}

/// The file a module path lands in: the longest prefix that is a file.
fn file_of<'a>(
    path: &ModulePath,
    files: &'a BTreeMap<ModulePath, PathBuf>,
) -> Option<&'a ModulePath> {
    (1..=path.len())
        .rev()
        .find_map(|n| files.get_key_value(&path[..n]).map(|(k, _)| k))
}

struct Crate {
    layers: Vec<String>,
    files: BTreeMap<ModulePath, PathBuf>,
    edges: BTreeMap<ModulePath, BTreeSet<ModulePath>>,
    code: BTreeMap<ModulePath, String>,
}

fn read(src: &Path) -> Crate {
    let layers = layers(&fs::read_to_string(src.join("lib.rs")).unwrap());
    let mut files_map = BTreeMap::new();
    files(src, src, &mut files_map);
    let mut edges = BTreeMap::new();
    let mut sources = BTreeMap::new();
    for (module, path) in &files_map {
        let text = code(&fs::read_to_string(path).unwrap());
        let targets: BTreeSet<ModulePath> = imports(module, &text)
            .iter()
            .filter_map(|p| file_of(p, &files_map))
            .filter(|target| *target != module && !target.is_empty())
            .cloned()
            .collect();
        edges.insert(module.clone(), targets);
        sources.insert(module.clone(), text);
    }
    Crate {
        layers,
        files: files_map,
        edges,
        code: sources,
    }
}

fn layer_of(layers: &[String], module: &ModulePath) -> usize {
    let top = &module[0];
    layers
        .iter()
        .position(|l| l == top)
        .unwrap_or_else(|| panic!("{top} is not declared in lib.rs"))
}

fn name(module: &ModulePath) -> String {
    module.join("::")
}

/// Files that import from a layer above their own.
fn upward_imports(krate: &Crate) -> Vec<String> {
    let mut found = Vec::new();
    for (module, targets) in &krate.edges {
        if module.is_empty() {
            continue;
        }
        let own = layer_of(&krate.layers, module);
        for target in targets {
            if layer_of(&krate.layers, target) > own {
                found.push(format!(
                    "{} ({}) imports {} ({})",
                    name(module),
                    module[0],
                    name(target),
                    target[0]
                ));
            }
        }
    }
    found
}

/// The strongly connected components of more than one file (Tarjan's algorithm).
fn cycles(edges: &BTreeMap<ModulePath, BTreeSet<ModulePath>>) -> Vec<Vec<String>> {
    struct State<'a> {
        edges: &'a BTreeMap<ModulePath, BTreeSet<ModulePath>>,
        index: BTreeMap<&'a ModulePath, usize>,
        low: BTreeMap<&'a ModulePath, usize>,
        stack: Vec<&'a ModulePath>,
        on_stack: BTreeSet<&'a ModulePath>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(state: &mut State<'a>, node: &'a ModulePath) {
        let next = state.index.len();
        state.index.insert(node, next);
        state.low.insert(node, next);
        state.stack.push(node);
        state.on_stack.insert(node);
        for target in state.edges.get(node).into_iter().flatten() {
            if !state.index.contains_key(target) {
                visit(state, target);
                let low = state.low[node].min(state.low[target]);
                state.low.insert(node, low);
            } else if state.on_stack.contains(target) {
                let low = state.low[node].min(state.index[target]);
                state.low.insert(node, low);
            }
        }
        if state.low[node] == state.index[node] {
            let mut component = Vec::new();
            loop {
                let member = state.stack.pop().unwrap();
                state.on_stack.remove(member);
                component.push(name(member));
                if member == node {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                state.found.push(component);
            }
        }
    }
    let mut state = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in edges.keys() {
        if !state.index.contains_key(node) {
            visit(&mut state, node);
        }
    }
    state.found
}

#[test]
fn no_file_imports_from_a_layer_above_its_own() {
    let krate = read(&src());
    assert!(krate.files.len() > 20, "the sources were found");
    let upward = upward_imports(&krate);
    assert!(
        upward.is_empty(),
        "upward imports (layers bottom first: {}):\n{}",
        krate.layers.join(", "),
        upward.join("\n")
    );
}

#[test]
fn no_files_import_each_other_in_a_circle() {
    let krate = read(&src());
    let cycles = cycles(&krate.edges);
    assert!(cycles.is_empty(), "import cycles: {cycles:?}");
}

#[test]
fn nothing_below_the_wasm_layer_names_wasmtime() {
    let krate = read(&src());
    let wasm = krate.layers.iter().position(|l| l == WASM_LAYER).unwrap();
    let knowing: Vec<String> = krate
        .code
        .iter()
        .filter(|(module, _)| !module.is_empty() && layer_of(&krate.layers, module) < wasm)
        .filter(|(_, code)| code.contains("wasmtime"))
        .map(|(module, _)| name(module))
        .collect();
    assert!(knowing.is_empty(), "below {WASM_LAYER}: {knowing:?}");
}

#[test]
fn the_checks_see_upward_imports_cycles_and_super_paths() {
    let module = |path: &str| -> ModulePath { path.split('/').map(str::to_owned).collect() };
    let mut files = BTreeMap::new();
    for path in [
        "histogram",
        "cluster",
        "cluster/cache",
        "cluster/selector",
        "cluster/watch",
        "wasm",
        "wasm/runtime",
    ] {
        files.insert(module(path), PathBuf::from(path));
    }
    let mut edges = BTreeMap::new();
    let sources = [
        (
            "cluster/cache",
            "use crate::{cluster::{selector, watch::Informer}, wasm::{self, runtime::Limits}};",
        ),
        (
            "cluster/watch",
            "fn f() { super::cache::Store::new() }\nmod tests { use super::*; }",
        ),
        ("wasm/runtime", "// crate::cluster::cache is only a comment"),
        (
            "cluster/selector",
            "use super::super::{histogram, wasm::runtime::Limits};",
        ),
    ];
    let mut code_of = BTreeMap::new();
    for (path, text) in sources {
        let m = module(path);
        let text = code(text);
        let targets = imports(&m, &text)
            .iter()
            .filter_map(|p| file_of(p, &files))
            .filter(|t| **t != m)
            .cloned()
            .collect::<BTreeSet<_>>();
        edges.insert(m.clone(), targets);
        code_of.insert(m, text);
    }
    let krate = Crate {
        layers: vec!["histogram".into(), "cluster".into(), "wasm".into()],
        files,
        edges,
        code: code_of,
    };
    assert_eq!(
        upward_imports(&krate),
        [
            "cluster::cache (cluster) imports wasm (wasm)",
            "cluster::cache (cluster) imports wasm::runtime (wasm)",
            "cluster::selector (cluster) imports wasm::runtime (wasm)",
        ]
    );
    assert_eq!(
        cycles(&krate.edges),
        [vec![
            "cluster::cache".to_owned(),
            "cluster::watch".to_owned()
        ]]
    );
    assert!(krate.edges[&module("wasm/runtime")].is_empty());
    assert_eq!(
        krate.edges[&module("cluster/watch")],
        BTreeSet::from([module("cluster/cache")])
    );
}
