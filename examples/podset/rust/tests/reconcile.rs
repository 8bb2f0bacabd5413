//! The PodSet component on fixture objects, through the host's own call path: it creates the
//! missing pods with a controller owner reference, deletes surplus ones, adopts orphans and
//! reports its status.

use std::collections::BTreeSet;

use kubewasm_testkit::{Harness, Outcome, build};
use serde_json::{Value, json};

const NAMESPACE: &str = "shop";
const UID: &str = "podset-uid";

fn harness() -> Harness {
    Harness::new(build(env!("CARGO_MANIFEST_DIR")))
}

fn podset(replicas: i32) -> Value {
    json!({
        "apiVersion": "kubewasm.dev/v1alpha1", "kind": "PodSet",
        "metadata": {"name": "web", "namespace": NAMESPACE, "uid": UID, "generation": 2},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "registry.k8s.io/pause:3.10"}]},
            },
        },
    })
}

/// The controller owner reference the host adds to what the PodSet applies with `owned`.
fn controller_reference() -> Value {
    json!({"apiVersion": "kubewasm.dev/v1alpha1", "kind": "PodSet", "name": "web", "uid": UID,
           "controller": true, "blockOwnerDeletion": true})
}

/// A pod of the PodSet, created at `created`; `ready` pods run on a node.
fn pod(name: &str, created: &str, ready: bool) -> Value {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": format!("uid-{name}"),
                     "resourceVersion": "5", "creationTimestamp": created,
                     "labels": {"app": "web"}, "ownerReferences": [controller_reference()]},
        "spec": {"containers": [{"name": "web", "image": "registry.k8s.io/pause:3.10"}]},
        "status": {"phase": "Pending"},
    });
    if ready {
        pod["spec"]["nodeName"] = json!("node-1");
        pod["status"] = json!({"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": created}]});
    }
    pod
}

fn pod_names(harness: &Harness) -> BTreeSet<String> {
    harness
        .list("v1", "Pod", Some(NAMESPACE))
        .iter()
        .map(|pod| pod["metadata"]["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn creates_the_missing_pods_owned_by_the_podset_and_writes_the_status() {
    let harness = harness();
    let rendered = harness.reconcile(&podset(3));

    assert_eq!(rendered.result, Ok(Outcome::Done));
    let pods: Vec<&Value> = rendered.applies().map(|apply| &apply.object).collect();
    assert_eq!(pods.len(), 3);
    let mut names = BTreeSet::new();
    for pod in &pods {
        assert_eq!(pod["kind"], "Pod");
        assert_eq!(pod["metadata"]["namespace"], NAMESPACE);
        assert_eq!(pod["metadata"]["labels"], json!({"app": "web"}));
        assert_eq!(
            pod["metadata"]["ownerReferences"],
            json!([controller_reference()])
        );
        assert_eq!(pod["spec"]["containers"][0]["name"], "web");
        let name = pod["metadata"]["name"].as_str().unwrap();
        assert!(name.starts_with("web-") && name.len() == 9, "{name}");
        names.insert(name.to_owned());
    }
    assert_eq!(names.len(), 3, "names are distinct");
    let events: Vec<&str> = rendered.events().map(|e| e.reason.as_str()).collect();
    assert_eq!(events, ["SuccessfulCreate"; 3]);

    let statuses: Vec<&Value> = rendered.status_applies().map(|a| &a.object).collect();
    assert_eq!(statuses.len(), 1);
    assert_eq!(
        statuses[0]["status"],
        json!({"replicas": 3, "readyReplicas": 0, "observedGeneration": 2, "selector": "app=web"})
    );
    assert_eq!(pod_names(&harness), names);

    // The guest reads its own writes: the next reconcile has nothing to create.
    let stored = harness
        .get("kubewasm.dev/v1alpha1", "PodSet", Some(NAMESPACE), "web")
        .unwrap();
    assert_eq!(stored["status"]["replicas"], 3);
    let again = harness.reconcile(&stored);
    assert_eq!(again.result, Ok(Outcome::Done));
    assert_eq!(again.applies().count(), 0);
    assert_eq!(again.status_applies().count(), 1);
}

#[test]
fn deletes_surplus_pods_pending_and_unready_first() {
    let harness = harness().with_objects([
        pod("web-ready", "2026-01-01T00:00:00Z", true),
        pod("web-pending", "2025-01-01T00:00:00Z", false),
        pod("web-newer", "2026-02-01T00:00:00Z", true),
    ]);
    let rendered = harness.reconcile(&podset(1));

    assert_eq!(rendered.result, Ok(Outcome::Done));
    assert_eq!(rendered.applies().count(), 0);
    let deleted: Vec<(&str, Option<&str>)> = rendered
        .deletes()
        .map(|d| (d.name.as_str(), d.uid.as_deref()))
        .collect();
    assert_eq!(
        deleted,
        [
            ("web-pending", Some("uid-web-pending")),
            ("web-newer", Some("uid-web-newer"))
        ]
    );
    let events: Vec<&str> = rendered.events().map(|e| e.note.as_str()).collect();
    assert_eq!(
        events,
        ["Deleted pod: web-pending", "Deleted pod: web-newer"]
    );
    let status = &rendered.status_applies().next().unwrap().object["status"];
    assert_eq!(
        (&status["replicas"], &status["readyReplicas"]),
        (&json!(1), &json!(1))
    );
    assert_eq!(
        pod_names(&harness),
        BTreeSet::from(["web-ready".to_owned()])
    );
}

#[test]
fn adopts_a_matching_orphan_instead_of_creating_a_pod() {
    let mut orphan = pod("orphan", "2026-01-01T00:00:00Z", true);
    orphan["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("ownerReferences");
    let harness = harness().with_objects([orphan]);
    let rendered = harness.reconcile(&podset(1));

    assert_eq!(rendered.result, Ok(Outcome::Done));
    assert_eq!(rendered.applies().count(), 0);
    let patches: Vec<_> = rendered.patches().collect();
    assert_eq!(patches.len(), 1);
    assert!(patches[0].json_patch);
    assert_eq!(patches[0].name, "orphan");
    assert_eq!(
        patches[0].patch,
        json!([
            {"op": "replace", "path": "/metadata/resourceVersion", "value": "5"},
            {"op": "add", "path": "/metadata/ownerReferences", "value": [controller_reference()]},
        ])
    );
    assert_eq!(rendered.logs[0].message, "adopted pod");
    let adopted = harness.get("v1", "Pod", Some(NAMESPACE), "orphan").unwrap();
    assert_eq!(
        adopted["metadata"]["ownerReferences"],
        json!([controller_reference()])
    );
    let status = &rendered.status_applies().next().unwrap().object["status"];
    assert_eq!(status["replicas"], 1);
}

#[test]
fn renders_the_same_writes_on_every_run() {
    let first = harness().reconcile(&podset(2)).to_yaml();
    let second = harness().reconcile(&podset(2)).to_yaml();
    assert_eq!(first, second);
    assert_eq!(first.matches("- apply:").count(), 2);
}
