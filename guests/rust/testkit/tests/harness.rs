//! The harness on the template guest: loading, fixture objects in and out, and refusing objects
//! the host would never hand to the guest.

use std::path::{Path, PathBuf};

use kubewasm_testkit::{Harness, Level, Outcome, build};
use serde_json::{Value, json};

fn template() -> PathBuf {
    build(Path::new(env!("CARGO_MANIFEST_DIR")).join("../template"))
}

fn config_map(name: &str, labelled: bool) -> Value {
    let mut object = json!({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": name, "namespace": "default"},
                            "data": {"a": "1"}});
    if labelled {
        object["metadata"]["labels"] = json!({"kubewasm.dev/template": "true"});
    }
    object
}

#[test]
fn builds_once_and_reads_what_the_guest_declares() {
    assert_eq!(template(), template());
    let harness = Harness::new(template());
    assert_eq!(harness.metadata().name, "template");
    assert_eq!(harness.metadata().max_concurrency, 2);
}

#[test]
fn holds_objects_as_the_cache_does_and_records_the_call() {
    let dir = std::env::temp_dir().join(format!("kubewasm-testkit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("objects.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-file, namespace: default}\n",
    )
    .unwrap();
    let harness = Harness::new(template())
        .with_objects([config_map("given", false)])
        .with_files(&dir);
    std::fs::remove_dir_all(&dir).unwrap();

    let names: Vec<Value> = harness
        .list("v1", "ConfigMap", Some("default"))
        .iter()
        .map(|object| object["metadata"]["name"].clone())
        .collect();
    assert_eq!(names, [json!("from-file"), json!("given")]);
    let given = harness
        .get("v1", "ConfigMap", Some("default"), "given")
        .unwrap();
    assert!(given["metadata"]["uid"].is_string(), "a uid is filled in");
    assert!(harness.get("v1", "ConfigMap", None, "given").is_none());

    let rendered = harness.reconcile(&config_map("watched", true));
    assert_eq!(rendered.result, Ok(Outcome::Done));
    assert_eq!(rendered.logs.len(), 1);
    assert_eq!(rendered.logs[0].level, Level::Info);
    assert_eq!(rendered.logs[0].message, "reconciled");
    assert!(
        rendered.logs[0]
            .fields
            .contains(&("key".into(), "default/watched".into()))
    );
    assert!(
        harness
            .get("v1", "ConfigMap", Some("default"), "watched")
            .is_some()
    );
}

#[test]
#[should_panic(expected = "its labels do not match the module's selector")]
fn refuses_an_object_outside_the_primary_selection() {
    Harness::new(template()).reconcile(&config_map("unlabelled", false));
}

#[test]
#[should_panic(expected = "declares no finalizer")]
fn refuses_to_finalize_without_a_finalizer() {
    Harness::new(template()).finalize(&config_map("watched", true));
}
