//! The copy component on fixture objects, through the host's own call path.

use kubewasm_testkit::{Harness, Outcome, build};
use serde_json::{Value, json};

fn harness() -> Harness {
    Harness::new(build(env!("CARGO_MANIFEST_DIR")))
}

fn source(data: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "s1", "namespace": "bench", "uid": "source-uid",
                     "labels": {"bench.kubewasm.dev/role": "source"}},
        "data": data,
    })
}

#[test]
fn declares_labelled_config_maps_as_primary_and_owns_config_maps() {
    let harness = harness();
    let metadata = harness.metadata();
    assert_eq!(metadata.name, "copy");
    assert_eq!(metadata.max_concurrency, 4);
    assert_eq!(metadata.primary.kind.kind, "ConfigMap");
    assert_eq!(
        metadata.primary.selector.as_ref().map(ToString::to_string),
        Some("bench.kubewasm.dev/role=source".to_owned())
    );
    assert_eq!(metadata.owns.len(), 1);
    assert_eq!(metadata.owns[0].kind, "ConfigMap");
}

#[test]
fn applies_the_child_owned_by_the_source_with_the_same_data() {
    let harness = harness();
    let rendered = harness.reconcile(&source(json!({"a": "1", "b": "2"})));

    assert_eq!(rendered.result, Ok(Outcome::Done));
    let applies: Vec<&Value> = rendered.applies().map(|apply| &apply.object).collect();
    assert_eq!(
        applies,
        [&json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {
                "name": "s1-copy", "namespace": "bench",
                "labels": {"bench.kubewasm.dev/role": "copy", "bench.kubewasm.dev/source": "s1"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "s1",
                                     "uid": "source-uid", "controller": true,
                                     "blockOwnerDeletion": true}],
            },
            "data": {"a": "1", "b": "2"},
        })]
    );
    let stored = harness
        .get("v1", "ConfigMap", Some("bench"), "s1-copy")
        .expect("the child is stored");
    assert_eq!(stored["data"], json!({"a": "1", "b": "2"}));
}

#[test]
fn does_nothing_for_a_deleting_source() {
    let mut deleting = source(json!({"a": "1"}));
    deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    let rendered = harness().reconcile(&deleting);

    assert_eq!(rendered.result, Ok(Outcome::Done));
    assert_eq!(rendered.applies().count(), 0);
}
