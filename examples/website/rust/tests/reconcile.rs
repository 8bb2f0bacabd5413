//! The Website component on fixture objects, through the host's own call path: it applies its
//! three children and its status, registers in the shared index, and its finalizer removes the
//! entry again. A child's name taken by an object it does not control is left alone.

use kubewasm_testkit::{Harness, Outcome, build};
use serde_json::{Value, json};

const NAMESPACE: &str = "web";
const URL: &str = "http://blog.web.svc:8080";

fn harness() -> Harness {
    Harness::new(build(env!("CARGO_MANIFEST_DIR")))
}

fn website() -> Value {
    json!({
        "apiVersion": "kubewasm.dev/v1alpha1", "kind": "Website",
        "metadata": {"name": "blog", "namespace": NAMESPACE, "uid": "website-uid",
                     "generation": 1, "finalizers": ["kubewasm.dev/website-index"]},
        "spec": {"content": "<h1>Blog</h1>", "port": 8080, "replicas": 2},
    })
}

fn index(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "website-index", "namespace": NAMESPACE}, "data": data})
}

#[test]
fn applies_its_three_children_registers_in_the_index_and_writes_its_status() {
    let harness = harness();
    let rendered = harness.reconcile(&website());

    assert_eq!(rendered.result, Ok(Outcome::Done));
    let applied: Vec<(&str, &str, &Value)> = rendered
        .applies()
        .map(|apply| {
            let object = &apply.object;
            (
                object["kind"].as_str().unwrap(),
                object["metadata"]["name"].as_str().unwrap(),
                &object["metadata"]["ownerReferences"],
            )
        })
        .collect();
    let owner = json!([{"apiVersion": "kubewasm.dev/v1alpha1", "kind": "Website", "name": "blog",
                        "uid": "website-uid", "controller": true, "blockOwnerDeletion": true}]);
    assert_eq!(
        applied,
        [
            ("ConfigMap", "blog-content", &owner),
            ("Deployment", "blog", &owner),
            ("Service", "blog", &owner),
            // The shared index is not owned: it outlives every Website.
            ("ConfigMap", "website-index", &Value::Null),
        ]
    );
    let children: Vec<Value> = rendered.applies().map(|a| a.object.clone()).collect();
    assert_eq!(children[0]["data"]["index.html"], "<h1>Blog</h1>");
    assert_eq!(children[1]["spec"]["replicas"], 2);
    assert_eq!(children[2]["spec"]["ports"][0]["port"], 8080);

    let patches: Vec<_> = rendered.patches().collect();
    assert_eq!(patches.len(), 1);
    assert_eq!(patches[0].name, "website-index");
    assert_eq!(patches[0].patch, json!({"data": {"blog": URL}}));

    let status = &rendered.status_applies().next().unwrap().object["status"];
    assert_eq!(status["url"], URL);
    assert_eq!(status["observedGeneration"], 1);
    assert_eq!(status["conditions"][0]["type"], "Ready");
    assert_eq!(status["conditions"][0]["status"], "True");
    assert_eq!(status["conditions"][0]["reason"], "ChildrenApplied");

    // Once registered, the entry is not patched again.
    let again = harness.reconcile(&website());
    assert_eq!(again.result, Ok(Outcome::Done));
    assert_eq!(again.patches().count(), 0);
}

#[test]
fn a_deployment_it_does_not_control_is_left_alone_and_reported() {
    let foreign = json!({"apiVersion": "apps/v1", "kind": "Deployment",
                         "metadata": {"name": "blog", "namespace": NAMESPACE},
                         "spec": {"replicas": 5}});
    let harness = harness().with_objects([foreign]);
    let rendered = harness.reconcile(&website());

    assert!(
        matches!(&rendered.result, Err(failure) if failure.to_string().contains("AlreadyExists")),
        "{:?}",
        rendered.result
    );
    let event = rendered.events().next().expect("a Warning event");
    assert!(event.warning);
    assert_eq!(event.reason, "ErrResourceExists");
    let deployment = harness
        .get("apps/v1", "Deployment", Some(NAMESPACE), "blog")
        .unwrap();
    assert_eq!(deployment["spec"]["replicas"], 5);
    assert!(deployment["metadata"]["ownerReferences"].is_null());
    let status = &rendered.status_applies().next().unwrap().object["status"];
    assert_eq!(status["conditions"][0]["status"], "False");
    assert_eq!(status["conditions"][0]["reason"], "ApplyFailed");
}

#[test]
fn finalize_removes_its_entry_from_the_index() {
    let harness = harness().with_objects([index(json!({"blog": URL, "shop": "http://shop"}))]);
    let mut deleting = website();
    deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");

    let rendered = harness.finalize(&deleting);

    assert_eq!(rendered.result, Ok(Outcome::Done));
    let patches: Vec<_> = rendered.patches().collect();
    assert_eq!(patches.len(), 1);
    assert!(!patches[0].json_patch);
    assert_eq!(patches[0].patch, json!({"data": {"blog": null}}));
    assert_eq!(rendered.writes.len(), 1, "finalize writes nothing else");
    let index = harness
        .get("v1", "ConfigMap", Some(NAMESPACE), "website-index")
        .unwrap();
    assert_eq!(index["data"], json!({"shop": "http://shop"}));
}

#[test]
fn finalize_without_an_index_is_done() {
    let mut deleting = website();
    deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");

    let rendered = harness().finalize(&deleting);

    assert_eq!(rendered.result, Ok(Outcome::Done));
    assert_eq!(rendered.patches().count(), 1);
}
