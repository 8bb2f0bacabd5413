//! The guest author's commands, run as the `kubewasm` binary without a cluster: `check` and
//! `render` on valid and broken modules, and `new`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kubewasm_testkit::build;
use tempfile::TempDir;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the host crate is inside the workspace")
        .to_owned()
}

fn podset() -> PathBuf {
    build(workspace().join("examples/podset/rust"))
}

fn website() -> PathBuf {
    build(workspace().join("examples/website/rust"))
}

/// A fresh, empty folder for one test, removed when dropped.
fn scratch(test: &str) -> TempDir {
    tempfile::Builder::new()
        .prefix(&format!("kubewasm-commands-{test}-"))
        .tempdir()
        .unwrap()
}

fn write(dir: &Path, file: &str, contents: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, contents).unwrap();
    path
}

/// What `kubewasm ARGS` printed: exit success, stdout, stderr.
struct Run {
    ok: bool,
    stdout: String,
    stderr: String,
}

fn kubewasm<I, S>(args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    run_command(Command::new(env!("CARGO_BIN_EXE_kubewasm")).args(args))
}

fn run_command(command: &mut Command) -> Run {
    let Output {
        status,
        stdout,
        stderr,
    } = command
        .env_remove("RUST_LOG")
        .output()
        .expect("running kubewasm");
    Run {
        ok: status.success(),
        stdout: String::from_utf8(stdout).unwrap(),
        stderr: String::from_utf8(stderr).unwrap(),
    }
}

fn assert_contains(text: &str, expected: &[&str]) {
    for line in expected {
        assert!(text.contains(line), "{line:?} not in:\n{text}");
    }
}

/// `kubewasm check MODULE` fails with an error naming what is wrong, and prints nothing else.
fn assert_refused(module: &Path, expected: &[&str]) {
    let run = kubewasm([Path::new("check"), module]);
    assert!(!run.ok, "{} passed:\n{}", module.display(), run.stdout);
    assert_eq!(run.stdout, "");
    assert!(run.stderr.starts_with("error: "), "{}", run.stderr);
    assert_contains(&run.stderr, expected);
}

#[test]
fn check_prints_what_a_module_declares_and_needs() {
    let run = kubewasm([Path::new("check"), &podset()]);
    assert!(run.ok, "{}", run.stderr);
    assert_contains(
        &run.stdout,
        &[
            "contract    kubewasm:controller/guest@0.2.1\n",
            "name        podset\n",
            "primary     kubewasm.dev/v1alpha1 PodSet in all namespaces\n",
            "owns        v1 Pod\n",
            "watches     v1 Pod in all namespaces, mapped by the guest's map-keys\n",
            "finalizer   none\n",
            "concurrency 4\n",
            "resync      none\n",
            "needs       get,list,watch podsets (kubewasm.dev) in all namespaces\n\
             \x20           get,list,watch pods (core) in all namespaces\n",
            "writes      what the grants of its entry allow (give --config to list them)\n",
        ],
    );
    assert!(!run.stdout.contains("granted") && !run.stdout.contains("missing"));

    let run = kubewasm([Path::new("check"), &website()]);
    assert!(run.ok, "{}", run.stderr);
    assert_contains(
        &run.stdout,
        &[
            "owns        apps/v1 Deployment\n            v1 ConfigMap\n            v1 Service\n",
            "watches     none\n",
            "finalizer   kubewasm.dev/website-index\n",
            "needs       get,list,watch,patch websites (kubewasm.dev) in all namespaces\n",
        ],
    );
}

#[test]
fn a_reader_gone_ends_a_command_as_sigpipe_would_without_a_panic() {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let output = Command::new(env!("CARGO_BIN_EXE_kubewasm"))
        .args(["check".as_ref(), podset().as_os_str()])
        .stdout(writer)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(141));
    assert_eq!(String::from_utf8_lossy(&output.stderr), "");
}

#[test]
fn check_refuses_what_the_host_would_not_load() {
    let tmp = scratch("check-refuses");
    let dir = tmp.path();
    assert_refused(&dir.join("missing.wasm"), &["reading", "missing.wasm"]);
    let text = write(dir, "text.wasm", "not a component\n");
    assert_refused(&text, &["is not a valid WebAssembly component"]);
    let core = write(dir, "core.wasm", b"\0asm\x01\0\0\0");
    assert_refused(
        &core,
        &["is not a valid WebAssembly component", "a wasm module"],
    );
    let bytes = std::fs::read(podset()).unwrap();
    let truncated = write(dir, "truncated.wasm", &bytes[..bytes.len() / 2]);
    assert_refused(
        &truncated,
        &["truncated.wasm is not a valid WebAssembly component"],
    );
    let empty = write(dir, "empty.wasm", b"\0asm\x0d\0\x01\0");
    assert_refused(
        &empty,
        &[
            "does not match the `kubewasm:controller` world",
            "kubewasm:controller/guest@0.2.1",
            "the component exports nothing",
        ],
    );
    let other_world = build(workspace().join("host/tests/guests/other-world"));
    assert_refused(
        &other_world,
        &[
            "does not match the `kubewasm:controller` world",
            "the component exports kubewasm:controller/guest@1.0.0",
        ],
    );
}

#[test]
fn check_compares_the_grants_of_the_module_entry() {
    let tmp = scratch("check-grants");
    let dir = tmp.path();
    let podset = podset();
    let check =
        |config: &Path| kubewasm([Path::new("check"), &podset, "--config".as_ref(), config]);

    let narrow = write(
        dir,
        "narrow.yaml",
        format!(
            "modules:
  - path: {}
    namespaces: [team-a]
    grants:
      - apiGroups: [kubewasm.dev]
        resources: [podsets]
        verbs: ['*']
    cache:
      drop:
        - fields: [/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration]
        - apiGroups: ['']
          kinds: [Pod]
          fields: [/status]
",
            podset.display()
        ),
    );
    let run = check(&narrow);
    assert!(!run.ok);
    assert_contains(
        &run.stdout,
        &[
            &format!(
                "config      {}, modules[0], matched by path\n",
                narrow.display()
            ),
            "namespaces  team-a\n",
            "grants      1 rule\n",
            "drops       kubewasm.dev/v1alpha1 PodSet: \
             /metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration\n\
             \x20           v1 Pod: \
             /metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration, /status\n",
            "needs       get,list,watch podsets (kubewasm.dev) in namespace team-a\n",
            "writes      create,patch,delete podsets (kubewasm.dev) in namespace team-a\n\
             \x20           create events (events.k8s.io) in namespace team-a\n",
            "missing     get,list,watch pods (core) in namespace team-a\n\
             \x20           get,list,watch pods (core) in all namespaces\n",
        ],
    );
    assert_contains(
        &run.stderr,
        &["error: the grants of modules[0]", "do not give"],
    );

    let wide = write(
        dir,
        "wide.yaml",
        "modules:
  - path: elsewhere/podset.wasm
    grants:
      - apiGroups: ['', kubewasm.dev]
        resources: ['*']
        verbs: [get, list, watch]
",
    );
    let run = check(&wide);
    assert!(run.ok, "{}", run.stderr);
    assert_contains(
        &run.stdout,
        &[
            "modules[0], matched by name\n",
            "namespaces  as declared\n",
            "drops       nothing\n",
            "granted     everything it needs\n",
        ],
    );

    let open = write(
        dir,
        "open.yaml",
        "modules:\n  - path: a.wasm\n  - path: b.wasm\n    name: podset\n",
    );
    let run = check(&open);
    assert!(run.ok, "{}", run.stderr);
    assert_contains(
        &run.stdout,
        &[
            "modules[1], matched by name\n",
            "grants      none configured: every declared kind is allowed\n",
            "granted     everything it needs\n",
        ],
    );

    let unrelated = write(dir, "unrelated.yaml", "modules:\n  - path: other.wasm\n");
    let run = check(&unrelated);
    assert!(!run.ok);
    assert_contains(&run.stderr, &["has no module with path", "or named podset"]);
}

const PODSET: &str = "apiVersion: kubewasm.dev/v1alpha1
kind: PodSet
metadata:
  name: web
  namespace: shop
  uid: podset-uid
spec:
  replicas: 3
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
        - name: web
          image: registry.k8s.io/pause:3.10
";

#[test]
fn render_prints_the_writes_of_the_podset_sample_the_same_every_time() {
    let podset = podset();
    let sample = workspace().join("examples/podset/samples/podset.yaml");
    let render = || kubewasm([Path::new("render"), &podset, "--object".as_ref(), &sample]);
    let first = render();
    assert!(first.ok, "{}", first.stderr);
    assert_eq!(first.stderr, "");
    let second = render();
    assert_eq!(first.stdout, second.stdout, "render is deterministic");

    let yaml = &first.stdout;
    assert!(
        yaml.starts_with("writes:\n- apply:\n    force: true\n"),
        "{yaml}"
    );
    assert_eq!(yaml.matches("- apply:").count(), 3, "{yaml}");
    assert_eq!(yaml.matches("reason: SuccessfulCreate").count(), 3);
    assert_eq!(yaml.matches("- applyStatus:").count(), 1);
    assert_contains(
        yaml,
        &[
            "        ownerReferences:\n\
             \x20       - apiVersion: kubewasm.dev/v1alpha1\n\
             \x20         blockOwnerDeletion: true\n\
             \x20         controller: true\n\
             \x20         kind: PodSet\n\
             \x20         name: pause\n",
            "        name: pause-",
            "        - image: registry.k8s.io/pause:3.10\n",
            "      status:\n        readyReplicas: 0\n        replicas: 3\n        selector: app=pause\n",
            "logs: []\nresult:\n  outcome: done\n",
        ],
    );
}

#[test]
fn check_and_render_keep_compiled_modules_in_the_compile_cache() {
    let tmp = scratch("compile-cache");
    let (podset, sample) = (
        podset(),
        workspace().join("examples/podset/samples/podset.yaml"),
    );
    let compiled = tmp.path().join("kubewasm/compiled");
    let kubewasm_in_tmp = |args: &[&std::ffi::OsStr]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_kubewasm"));
        run_command(command.args(args).env("XDG_CACHE_HOME", tmp.path()))
    };
    let render = [
        "render".as_ref(),
        podset.as_os_str(),
        "--object".as_ref(),
        sample.as_os_str(),
    ];
    let uncached = kubewasm_in_tmp(&[&render[..], &["--no-compile-cache".as_ref()]].concat());
    assert!(uncached.ok, "{}", uncached.stderr);
    assert!(!compiled.exists(), "--no-compile-cache writes no entry");

    let checked = kubewasm_in_tmp(&["check".as_ref(), podset.as_os_str()]);
    assert!(checked.ok, "{}", checked.stderr);
    let entries: Vec<PathBuf> = std::fs::read_dir(&compiled)
        .expect("check writes the default compile cache")
        .map(|entry| entry.unwrap().path())
        .collect();
    let [entry] = entries.as_slice() else {
        panic!("one entry for one module: {entries:?}");
    };
    let inode = || std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(entry).unwrap());
    let written = inode();
    let cached = kubewasm_in_tmp(&render);
    assert!(cached.ok, "{}", cached.stderr);
    assert_eq!(
        cached.stdout, uncached.stdout,
        "a cached module renders the same"
    );
    assert_eq!(
        inode(),
        written,
        "render read the entry check wrote, not a new one"
    );

    std::fs::write(entry, b"not a compiled module").unwrap();
    let recompiled = kubewasm_in_tmp(&render);
    assert!(
        recompiled.ok,
        "an unusable entry is compiled anew: {}",
        recompiled.stderr
    );
    assert_eq!(recompiled.stdout, uncached.stdout);
    assert!(
        std::fs::metadata(entry).unwrap().len() > 1024,
        "and written again"
    );
}

/// A PodSet asking for `replicas` pods whose status says 3, and a cache of its 3 pods.
fn podset_of_three(dir: &Path, replicas: u32) -> (PathBuf, PathBuf) {
    let object = write(
        dir,
        &format!("podset-{replicas}.yaml"),
        format!(
            "apiVersion: kubewasm.dev/v1alpha1\nkind: PodSet\n\
             metadata: {{name: pause, namespace: default, uid: u1}}\n\
             spec:\n  replicas: {replicas}\n  selector: {{matchLabels: {{app: pause}}}}\n  \
             template:\n    metadata: {{labels: {{app: pause}}}}\n    \
             spec: {{containers: [{{name: pause, image: pause}}]}}\n\
             status: {{replicas: 3, readyReplicas: 0, selector: app=pause}}\n"
        ),
    );
    let pods: String = ["a", "b", "c"]
        .map(|n| {
            format!(
                "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: pause-{n}\n  \
                 namespace: default\n  labels: {{app: pause}}\n  ownerReferences: \
                 [{{apiVersion: kubewasm.dev/v1alpha1, kind: PodSet, name: pause, uid: u1, \
                 controller: true}}]\nspec: {{containers: [{{name: pause, image: pause}}]}}\n"
            )
        })
        .concat();
    (object, write(dir, "cache/pods.yaml", pods))
}

#[test]
fn render_diff_says_what_each_write_does_to_the_cached_objects() {
    let tmp = scratch("render-diff");
    let podset = podset();
    let diff = |object: &Path, cache: &[&Path]| {
        let mut args = vec![Path::new("render"), &podset, "--diff".as_ref()];
        args.extend([Path::new("--object"), object]);
        if !cache.is_empty() {
            args.push("--cache".as_ref());
            args.extend(cache);
        }
        let run = kubewasm(args);
        assert!(run.ok, "{}", run.stderr);
        run.stdout
    };
    let sample = workspace().join("examples/podset/samples/podset.yaml");
    let created = diff(&sample, &[]);
    assert_eq!(created.matches(": creates\n").count(), 3, "{created}");
    assert!(created.starts_with("apply v1 Pod pause-"), "{created}");
    assert!(
        created.ends_with(
            "event Normal SuccessfulCreate on kubewasm.dev/v1alpha1 PodSet pause: records\n\
             applyStatus kubewasm.dev/v1alpha1 PodSet pause: changes\n\
             \x20 status.readyReplicas: (none) -> 0\n\
             \x20 status.replicas: (none) -> 3\n\
             \x20 status.selector: (none) -> \"app=pause\"\n\
             result: done\n"
        ),
        "{created}"
    );

    let (scaled_down, pods) = podset_of_three(tmp.path(), 2);
    assert_eq!(
        diff(&scaled_down, &[&pods]),
        "delete v1 Pod default/pause-a: deletes\n\
         event Normal SuccessfulDelete on kubewasm.dev/v1alpha1 PodSet default/pause: records\n\
         applyStatus kubewasm.dev/v1alpha1 PodSet default/pause: changes\n\
         \x20 status.replicas: 3 -> 2\n\
         result: done\n"
    );
    let (steady, pods) = podset_of_three(tmp.path(), 3);
    assert_eq!(
        diff(&steady, &[&pods]),
        "applyStatus kubewasm.dev/v1alpha1 PodSet default/pause: unchanged\nresult: done\n"
    );
}

#[test]
fn test_records_a_case_then_passes_it_and_shows_a_changed_outcome_as_a_diff() {
    let tmp = scratch("test-cases");
    let podset = podset();
    let (object, pods) = podset_of_three(tmp.path(), 2);
    let cases = tmp.path().join("cases");
    let case = |replicas: u32| {
        let object = std::fs::read_to_string(&object)
            .unwrap()
            .replace("replicas: 2\n", &format!("replicas: {replicas}\n"));
        let object: serde_yaml::Value = serde_yaml::from_str(&object).unwrap();
        let cache: Vec<serde_yaml::Value> =
            (serde_yaml::Deserializer::from_str(&std::fs::read_to_string(&pods).unwrap()))
                .map(|d| serde::Deserialize::deserialize(d).unwrap())
                .collect();
        let text = serde_yaml::to_string(&serde_json::json!({"object": object, "cache": cache}));
        write(&cases, "scale-down.yaml", text.unwrap())
    };
    let file = case(2);
    let test = |extra: &[&str]| {
        let mut args = vec!["test".as_ref(), podset.as_os_str(), cases.as_os_str()];
        args.extend(extra.iter().map(std::ffi::OsStr::new));
        kubewasm(args)
    };
    let unrecorded = test(&[]);
    assert!(!unrecorded.ok);
    assert_contains(&unrecorded.stdout, &["run with --update to record one"]);
    let recorded = test(&["--update"]);
    assert!(recorded.ok, "{}{}", recorded.stdout, recorded.stderr);
    assert_contains(&recorded.stdout, &["0 passed, 1 updated, 0 failed"]);
    let expect = std::fs::read_to_string(&file).unwrap();
    assert_contains(
        &expect,
        &["expect:\n", "name: pause-a\n", "outcome: done\n"],
    );
    let passed = test(&[]);
    assert!(passed.ok, "{}", passed.stdout);
    assert_contains(&passed.stdout, &["1 passed, 0 updated, 0 failed"]);

    // One replica: the guest now deletes two pods, where the case expects one.
    let changed = expect.replacen("replicas: 2\n", "replicas: 1\n", 1);
    assert_ne!(changed, expect);
    std::fs::write(&file, changed).unwrap();
    let failed = test(&[]);
    assert!(!failed.ok, "{}", failed.stdout);
    assert_contains(
        &failed.stdout,
        &[
            "FAILED  ",
            "  writes:\n",
            "    +     name: pause-b\n",
            "    -         replicas: 2\n",
            "    +         replicas: 1\n",
            "0 passed, 0 updated, 1 failed",
        ],
    );
}

#[test]
fn render_reads_the_cache_from_files_and_folders() {
    let tmp = scratch("render-cache");
    let dir = tmp.path();
    let object = write(dir, "podset.yaml", PODSET);
    write(
        dir,
        "cluster/orphan.yaml",
        "apiVersion: v1
kind: Pod
metadata: {name: orphan, namespace: shop, resourceVersion: '4', labels: {app: web}}
---
",
    );
    write(
        dir,
        "cluster/owned.json",
        r#"{"apiVersion": "v1", "kind": "List", "items": [
             {"apiVersion": "v1", "kind": "Pod",
              "metadata": {"name": "web-owned", "namespace": "shop", "labels": {"app": "web"},
                           "managedFields": [{"manager": "kubectl"}],
                           "ownerReferences": [{"apiVersion": "kubewasm.dev/v1alpha1",
                             "kind": "PodSet", "name": "web", "uid": "podset-uid",
                             "controller": true}]}}]}"#,
    );
    write(dir, "cluster/ignored.txt", "not an object");
    let run = kubewasm([
        Path::new("render"),
        &podset(),
        "--object".as_ref(),
        &object,
        "--cache".as_ref(),
        &dir.join("cluster"),
    ]);
    assert!(run.ok, "{}", run.stderr);
    let yaml = &run.stdout;
    assert!(yaml.starts_with("writes:\n- patch:\n"), "{yaml}");
    assert_contains(
        yaml,
        &[
            "    apiVersion: v1\n    kind: Pod\n    namespace: shop\n    name: orphan\n    type: json\n",
            "      path: /metadata/ownerReferences\n",
            "- level: info\n  message: adopted pod\n  fields:\n    pod: orphan\n",
            "        replicas: 3\n",
        ],
    );
    assert_eq!(
        yaml.matches("- apply:").count(),
        1,
        "one pod is missing: {yaml}"
    );
    assert!(!yaml.contains("managedFields"));
}

#[test]
fn render_shows_the_finalize_path_and_guest_failures() {
    let tmp = scratch("render-results");
    let dir = tmp.path();
    let deleting = write(
        dir,
        "website.yaml",
        "apiVersion: kubewasm.dev/v1alpha1
kind: Website
metadata:
  name: blog
  namespace: web
  deletionTimestamp: '2026-01-01T00:00:00Z'
  finalizers: [kubewasm.dev/website-index]
",
    );
    let index = write(
        dir,
        "index.yaml",
        "apiVersion: v1
kind: ConfigMap
metadata: {name: website-index, namespace: web}
data: {blog: 'http://blog.web.svc:80'}
",
    );
    let run = kubewasm([
        Path::new("render"),
        &website(),
        "--object".as_ref(),
        &deleting,
        "--cache".as_ref(),
        &index,
        "--finalize".as_ref(),
    ]);
    assert!(run.ok, "{}", run.stderr);
    assert_eq!(
        run.stdout,
        "writes:
- patch:
    apiVersion: v1
    kind: ConfigMap
    namespace: web
    name: website-index
    type: merge
    patch:
      data:
        blog: null
logs: []
result:
  outcome: done
"
    );

    let invalid = write(
        dir,
        "invalid.yaml",
        PODSET.replace("      app: web\n  template", "      app: db\n  template"),
    );
    let run = kubewasm([
        Path::new("render"),
        &podset(),
        "--object".as_ref(),
        &invalid,
    ]);
    assert!(run.ok, "a failing guest is rendered: {}", run.stderr);
    assert_contains(
        &run.stdout,
        &[
            "        reason: InvalidSpec\n",
            "result:\n  outcome: permanent-error\n  message: ",
        ],
    );
}

#[test]
fn render_refuses_what_the_host_would_never_run() {
    let tmp = scratch("render-refuses");
    let dir = tmp.path();
    let podset = podset();
    let object = write(dir, "podset.yaml", PODSET);
    let render = |module: &Path, object: &Path, extra: &[&str]| {
        let mut args = vec![
            "render".into(),
            module.as_os_str().to_owned(),
            "--object".into(),
            object.as_os_str().to_owned(),
        ];
        args.extend(extra.iter().map(Into::into));
        let run = kubewasm(args);
        assert!(!run.ok, "{}", run.stdout);
        assert_eq!(run.stdout, "");
        run.stderr
    };

    let stderr = render(&podset, &object, &["--finalize"]);
    assert_contains(&stderr, &["module podset declares no finalizer"]);
    let pod = write(
        dir,
        "pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: shop}\n",
    );
    let stderr = render(&podset, &pod, &[]);
    assert_contains(
        &stderr,
        &["the host never calls podset with this object: it is a v1 Pod"],
    );
    let two = write(dir, "two.yaml", format!("{PODSET}---\n{PODSET}"));
    assert_contains(&render(&podset, &two, &[]), &["holds 2 objects"]);
    let nameless = write(dir, "nameless.yaml", "apiVersion: v1\nkind: Pod\n");
    assert_contains(
        &render(&podset, &nameless, &[]),
        &["nameless.yaml, document 1: no metadata.name"],
    );
    let broken = write(dir, "broken.yaml", "kind: [\n");
    assert_contains(&render(&podset, &broken, &[]), &["broken.yaml"]);
    let stderr = render(&podset, &object, &["--cache", "missing-folder"]);
    assert_contains(&stderr, &["reading missing-folder"]);
    let truncated = write(
        dir,
        "truncated.wasm",
        &std::fs::read(&podset).unwrap()[..4096],
    );
    assert_contains(
        &render(&truncated, &object, &[]),
        &["is not a valid WebAssembly component"],
    );
}

#[test]
fn new_creates_a_guest_crate_named_after_the_controller() {
    let tmp = scratch("new");
    let dir = tmp.path();
    let target = dir.join("hello");
    let run = kubewasm([
        Path::new("new"),
        "hello-world".as_ref(),
        "--dir".as_ref(),
        &target,
    ]);
    assert!(run.ok, "{}", run.stderr);
    assert_contains(&run.stdout, &["created the Rust guest hello-world"]);
    let manifest = std::fs::read_to_string(target.join("Cargo.toml")).unwrap();
    assert_contains(&manifest, &["name = \"hello-world\"\n", "[workspace]\n"]);
    let sdk = manifest
        .lines()
        .find_map(|line| line.strip_prefix("kubewasm-guest = { path = \""))
        .and_then(|rest| rest.strip_suffix("\", features = [\"k8s-openapi\"] }"))
        .expect("the SDK by relative path, with its typed helpers for built-in kinds");
    assert_eq!(
        target.join(sdk).canonicalize().unwrap(),
        workspace().join("guests/rust").canonicalize().unwrap()
    );
    let lib = std::fs::read_to_string(target.join("src/lib.rs")).unwrap();
    assert_contains(&lib, &["impl Controller for HelloWorld", "\"hello-world\""]);
    for file in ["tests/reconcile.rs", "README.md", ".gitignore"] {
        assert!(target.join(file).is_file(), "{file}");
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let metadata = Command::new(cargo)
        .args([
            "metadata",
            "--no-deps",
            "--offline",
            "--format-version",
            "1",
        ])
        .arg("--manifest-path")
        .arg(target.join("Cargo.toml"))
        .output()
        .unwrap();
    assert!(
        metadata.status.success(),
        "{}",
        String::from_utf8_lossy(&metadata.stderr)
    );

    let again = kubewasm([
        Path::new("new"),
        "hello-world".as_ref(),
        "--dir".as_ref(),
        &target,
    ]);
    assert!(!again.ok);
    assert_contains(&again.stderr, &["already exists and is not empty"]);
    let bad = kubewasm(["new", "Hello_World"]);
    assert!(!bad.ok);
    assert_contains(&bad.stderr, &["\"Hello_World\" is not a valid name"]);
}
