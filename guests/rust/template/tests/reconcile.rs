//! Runs the component on fixture objects, through the host's own call path. `cargo test` builds
//! it for wasm32-wasip2 first.

use kubewasm_testkit::{Harness, Outcome, build};
use serde_json::json;

#[test]
fn logs_what_it_sees_and_writes_nothing() {
    let harness = Harness::new(build(env!("CARGO_MANIFEST_DIR")));
    let config_map = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "greeting", "namespace": "default", "resourceVersion": "7",
                     "labels": {"kubewasm.dev/template": "true"}},
        "data": {"text": "hello", "language": "en"},
    });

    let rendered = harness.reconcile(&config_map);

    assert_eq!(rendered.result, Ok(Outcome::Done));
    assert!(rendered.writes.is_empty());
    assert_eq!(rendered.logs.len(), 1);
    assert_eq!(rendered.logs[0].message, "reconciled");
    assert!(
        rendered.logs[0]
            .fields
            .contains(&("dataKeys".into(), "2".into()))
    );
}
