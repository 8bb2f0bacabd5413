use serde_json::json;

use super::*;

/// A list's objects.
macro_rules! listed {
    ($($object:expr),* $(,)?) => { vec![$(Arc::new($object)),*] };
}

fn object(namespace: &str, name: &str, version: &str, labels: &[(&str, &str)]) -> CachedObject {
    let labels: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    CachedObject::new(
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {
                "namespace": namespace, "name": name, "resourceVersion": version,
                "labels": labels,
                "managedFields": [{ "manager": "someone", "operation": "Apply" }]
            }
        }))
        .unwrap(),
    )
}

fn with_uid(namespace: &str, name: &str, version: &str, uid: &str) -> CachedObject {
    CachedObject::new(
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": { "namespace": namespace, "name": name, "resourceVersion": version, "uid": uid }
        }))
        .unwrap(),
    )
}

/// A ConfigMap at `version` with a `managedFields` entry per (manager, operation, fields).
fn managed(version: &str, entries: &[(&str, &str, &str)]) -> Arc<CachedObject> {
    let entries: Vec<_> = entries
        .iter()
        .map(|(manager, operation, fields)| {
            serde_json::json!({
                "manager": manager, "operation": operation,
                "fieldsType": "FieldsV1", "fieldsV1": { fields.to_string(): {} }
            })
        })
        .collect();
    Arc::new(CachedObject::new(
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {
                "namespace": "ns", "name": "a", "resourceVersion": version,
                "managedFields": entries
            }
        }))
        .unwrap(),
    ))
}

#[test]
fn a_change_is_a_managers_when_its_apply_added_its_fields() {
    let ours = "kubewasm-copy";
    let change = |old: Option<Arc<CachedObject>>, new: Option<Arc<CachedObject>>| Change {
        old,
        new,
        initial: false,
    };
    let created = managed("1", &[(ours, "Apply", "f:data")]);
    assert!(change(None, Some(created.clone())).applied_by(ours));
    assert!(!change(None, Some(created.clone())).applied_by("kubewasm-other"));
    let by_hand = managed("1", &[("kubectl", "Update", "f:data")]);
    assert!(!change(None, Some(by_hand.clone())).applied_by(ours));
    // Its first apply to an object someone else made.
    let adopted = managed(
        "2",
        &[("kubectl", "Update", "f:x"), (ours, "Apply", "f:data")],
    );
    assert!(change(Some(by_hand), Some(adopted)).applied_by(ours));
    // Someone else took one of its fields, or changed anything else: not its change.
    let taken = managed(
        "3",
        &[
            (ours, "Apply", "f:metadata"),
            ("kubectl", "Update", "f:data"),
        ],
    );
    assert!(!change(Some(created.clone()), Some(taken)).applied_by(ours));
    let edited = managed(
        "3",
        &[(ours, "Apply", "f:data"), ("kubectl", "Update", "f:x")],
    );
    assert!(!change(Some(created.clone()), Some(edited)).applied_by(ours));
    assert!(!change(Some(created), None).applied_by(ours));
}

fn key(namespace: &str, name: &str) -> ObjectKey {
    ObjectKey {
        namespace: Some(namespace.into()),
        name: name.into(),
    }
}

#[test]
fn an_apply_answered_with_the_cached_version_records_what_was_sent() {
    // A guest sends an intent that means what its last one meant but reads otherwise: the
    // API server changes nothing and answers with the version the store holds. That version
    // is what the new intent produces, so the next send of it is unchanged too.
    let store = Store::default();
    let first = with_uid("a", "x", "6", "u1").sent("kubewasm-g", None, [1; 16]);
    assert!(store.record_write(first).is_some());
    let again = with_uid("a", "x", "6", "u1").sent("kubewasm-g", None, [2; 16]);
    assert!(
        store.record_write(again).is_none(),
        "the same version is no change"
    );
    let cached = store.get(&key("a", "x")).unwrap();
    assert_eq!(cached.applied()[0].fields, AppliedFields::Sent([2; 16]));

    let other = with_uid("a", "x", "6", "u2").sent("kubewasm-g", None, [3; 16]);
    assert!(store.record_write(other).is_none());
    let older = with_uid("a", "x", "5", "u1").sent("kubewasm-g", None, [4; 16]);
    assert!(store.record_write(older).is_none());
    let cached = store.get(&key("a", "x")).unwrap();
    assert_eq!(
        (cached.uid(), &cached.applied()[0].fields),
        (Some("u1"), &AppliedFields::Sent([2; 16])),
        "another incarnation or an older version records nothing"
    );
}

#[test]
fn a_recorded_write_is_read_at_once_and_its_watch_event_is_no_change() {
    let store = Store::default();
    store.replace(listed![with_uid("a", "x", "10", "u1")], "10");
    let change = store.record_write(with_uid("a", "y", "12", "u2"));
    assert!(change.is_some_and(|c| c.old.is_none()));
    assert_eq!(store.get(&key("a", "y")).unwrap().version(), Some(12));
    assert!(store.upsert(with_uid("a", "y", "12", "u2")).is_none());
    assert!(store.upsert(with_uid("a", "y", "13", "u2")).is_some());
}

#[test]
fn a_write_the_watch_or_a_list_has_passed_is_not_recorded() {
    let store = Store::default();
    store.replace(Vec::new(), "3");
    store.upsert(with_uid("a", "x", "20", "u1"));
    // The watch delivered version 20 of x; a write returning version 15 of y is older than
    // what the watch has shown, so y may already be deleted again.
    assert!(store.record_write(with_uid("a", "y", "15", "u2")).is_none());
    assert!(store.get(&key("a", "y")).is_none());
    // Nor does a recorded write replace a newer cached version.
    store.upsert(with_uid("a", "z", "30", "u3"));
    assert!(store.record_write(with_uid("a", "z", "25", "u3")).is_none());
    assert_eq!(store.get(&key("a", "z")).unwrap().version(), Some(30));
    // A list at 40 without y has seen y's deletion, whose event will never come.
    store.replace(Vec::new(), "40");
    assert!(store.record_write(with_uid("a", "y", "35", "u2")).is_none());
    assert!(store.record_write(with_uid("a", "y", "41", "u2")).is_some());
}

#[test]
fn writes_recorded_while_a_list_is_in_flight_outlive_its_older_snapshot() {
    let store = Store::default();
    store.replace(listed![with_uid("a", "x", "5", "u1")], "5");
    // A relist starts and its snapshot is taken at version 6; then the host creates y and
    // updates x, and both writes are recorded before the list's response arrives.
    store.record_write(with_uid("a", "y", "8", "u2"));
    store.record_write(with_uid("a", "x", "9", "u1"));
    let changes = store.replace(listed![with_uid("a", "x", "5", "u1")], "6");
    assert!(changes.is_empty(), "{changes:?}");
    assert_eq!(store.get(&key("a", "y")).unwrap().version(), Some(8));
    assert_eq!(store.get(&key("a", "x")).unwrap().version(), Some(9));
    // The watch that follows the list delivers both writes: no change.
    assert!(store.upsert(with_uid("a", "y", "8", "u2")).is_none());
    assert!(store.upsert(with_uid("a", "x", "9", "u1")).is_none());
}

#[test]
fn a_snapshot_newer_than_a_recorded_write_wins() {
    let store = Store::default();
    store.replace(listed![with_uid("a", "x", "5", "u1")], "5");
    store.record_write(with_uid("a", "y", "8", "u2"));
    store.record_write(with_uid("a", "x", "9", "u1"));
    // Someone deleted y and recreated x after the host's writes; the list saw it all.
    let changes = store.replace(listed![with_uid("a", "x", "11", "u3")], "12");
    assert_eq!(changes.len(), 2, "{changes:?}");
    assert!(store.get(&key("a", "y")).is_none());
    assert_eq!(store.get(&key("a", "x")).unwrap().uid(), Some("u3"));
}

#[test]
fn a_delete_recorded_while_a_list_is_in_flight_outlives_its_older_snapshot() {
    let store = Store::default();
    store.replace(listed![with_uid("a", "x", "5", "u1")], "5");
    store.record_delete(&key("a", "x"), "u1").unwrap();
    // The snapshot was taken before the delete: x is in it.
    let changes = store.replace(listed![with_uid("a", "x", "5", "u1")], "6");
    assert!(changes.is_empty(), "{changes:?}");
    assert!(store.get(&key("a", "x")).is_none());
    // Its watch delivers the deletion, which ends the tombstone.
    assert!(store.remove(&with_uid("a", "x", "7", "u1")).is_none());
    assert!(store.upsert(with_uid("a", "x", "8", "u2")).is_some());
}

#[test]
fn an_older_watch_event_does_not_hide_a_recorded_write() {
    let store = Store::default();
    store.replace(listed![with_uid("a", "x", "5", "u1")], "5");
    store.record_write(with_uid("a", "x", "9", "u1"));
    // Someone else's change at 7 was still on its way in the watch.
    assert!(store.upsert(with_uid("a", "x", "7", "u1")).is_none());
    assert_eq!(store.get(&key("a", "x")).unwrap().version(), Some(9));
    // So is a late event of an older incarnation; a newer incarnation is cached.
    assert!(store.upsert(with_uid("a", "x", "8", "u0")).is_none());
    assert!(store.upsert(with_uid("a", "x", "10", "u2")).is_some());
}

#[test]
fn the_late_deletion_of_an_older_incarnation_keeps_the_tombstone_of_the_newer() {
    let store = Store::default();
    store.replace(listed![with_uid("a", "x", "5", "u0")], "5");
    // The host deletes x, creates it again and deletes it again, ahead of the watch.
    store.record_delete(&key("a", "x"), "u0");
    store.record_write(with_uid("a", "x", "9", "u1"));
    store.record_delete(&key("a", "x"), "u1");
    assert!(store.remove(&with_uid("a", "x", "8", "u0")).is_none());
    assert!(store.upsert(with_uid("a", "x", "9", "u1")).is_none());
    assert!(store.get(&key("a", "x")).is_none());
}

#[test]
fn a_relist_older_than_a_recorded_create_and_delete_keeps_the_delete() {
    let store = Store::default();
    store.replace(Vec::new(), "5");
    store.record_write(with_uid("a", "x", "9", "u1"));
    store.record_delete(&key("a", "x"), "u1");
    // The snapshot, taken at 8, never saw x; the watch from 8 delivers its creation.
    assert!(store.replace(Vec::new(), "8").is_empty());
    assert!(store.upsert(with_uid("a", "x", "9", "u1")).is_none());
    assert!(store.get(&key("a", "x")).is_none());
    assert!(store.remove(&with_uid("a", "x", "10", "u1")).is_none());
    assert!(store.upsert(with_uid("a", "x", "11", "u2")).is_some());
}

#[test]
fn the_watermark_is_what_the_watch_and_lists_showed_never_a_recorded_write() {
    let store = Store::default();
    store.replace(listed![with_uid("a", "x", "5", "u1")], "6");
    assert_eq!(store.watermark(), 6);
    store.upsert(with_uid("a", "x", "8", "u1"));
    store.bookmark("10");
    assert_eq!(store.watermark(), 10);
    // A write the host recorded is no proof that the watch showed every change before it,
    // even once a relist keeps it.
    assert!(store.record_write(with_uid("a", "y", "14", "u2")).is_some());
    assert_eq!(store.watermark(), 10);
    store.replace(listed![with_uid("a", "x", "8", "u1")], "12");
    assert!(
        store.get(&key("a", "y")).is_some(),
        "the recorded write is kept"
    );
    assert_eq!(store.watermark(), 12);
}

#[test]
fn non_numeric_versions_are_never_recorded() {
    let store = Store::default();
    assert!(
        store
            .record_write(with_uid("a", "y", "abc", "u2"))
            .is_none()
    );
}

#[test]
fn a_recorded_delete_hides_late_updates_until_the_deletion_arrives() {
    let store = Store::default();
    store.replace(listed![with_uid("a", "x", "5", "u1")], "5");
    assert!(store.record_delete(&key("a", "x"), "u1").is_some());
    assert!(store.get(&key("a", "x")).is_none());
    // A modification queued in the watch before the deletion does not bring it back.
    assert!(store.upsert(with_uid("a", "x", "6", "u1")).is_none());
    assert!(store.get(&key("a", "x")).is_none());
    assert!(store.remove(&with_uid("a", "x", "7", "u1")).is_none());
    // A new object with the same name is cached as usual.
    assert!(store.upsert(with_uid("a", "x", "8", "u2")).is_some());
}

#[test]
fn a_deletion_of_an_old_incarnation_keeps_the_new_one() {
    let store = Store::default();
    store.replace(listed![with_uid("a", "x", "5", "u1")], "5");
    store.record_delete(&key("a", "x"), "u1");
    store.record_write(with_uid("a", "x", "9", "u2"));
    assert!(store.remove(&with_uid("a", "x", "7", "u1")).is_none());
    assert_eq!(store.get(&key("a", "x")).unwrap().uid(), Some("u2"));
}

#[test]
fn the_compared_metadata_is_read_once_from_the_object() {
    let parsed = |metadata: serde_json::Value| {
        CachedObject::new(
            serde_json::from_value(serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata,
            }))
            .unwrap(),
        )
    };
    let deleted = parsed(serde_json::json!({
        "name": "x", "generation": 3, "deletionTimestamp": "2026-01-02T03:04:05Z",
    }));
    assert!(deleted.deleting());
    assert_eq!(deleted.deleted_at(), Some(1_767_323_045));
    assert_eq!(deleted.generation(), Some(3));
    let bare = parsed(serde_json::json!({ "name": "x" }));
    let empty = parsed(serde_json::json!({ "name": "x", "annotations": {} }));
    let one = parsed(serde_json::json!({ "name": "x", "annotations": { "a": "1" } }));
    let other = parsed(serde_json::json!({ "name": "x", "annotations": { "a": "2" } }));
    assert_eq!(bare.annotations(), empty.annotations());
    assert_ne!(bare.annotations(), one.annotations());
    assert_ne!(one.annotations(), other.annotations());
    assert_eq!(
        (bare.deleting(), bare.deleted_at(), bare.generation()),
        (false, None, None)
    );
}

#[test]
fn the_packed_metadata_reads_back_as_the_object_has_it() {
    let object = CachedObject::new(
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "namespace": "shop", "name": "web-0", "uid": "u1", "resourceVersion": "42",
                "labels": { "tier": "web", "app": "shop", "": "empty-key", "zone": "" },
                "finalizers": ["b.example/one", "a.example/two"],
                "ownerReferences": [
                    { "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "r1" },
                    { "apiVersion": "v1", "kind": "Node", "name": "n", "uid": "n1", "controller": true }
                ]
            }
        }))
        .unwrap(),
    );
    assert_eq!(object.namespace(), Some("shop"));
    assert_eq!((object.name(), object.uid()), ("web-0", Some("u1")));
    assert_eq!(object.version(), Some(42));
    let labels: Vec<_> = object.labels().collect();
    assert_eq!(
        labels,
        [
            ("", "empty-key"),
            ("app", "shop"),
            ("tier", "web"),
            ("zone", "")
        ]
    );
    for (key, value) in labels {
        assert_eq!(object.label(key), Some(value));
    }
    assert_eq!(object.label("missing"), None);
    assert_eq!(object.label("zzz"), None);
    let finalizers: Vec<_> = object.finalizers().collect();
    assert_eq!(finalizers, ["b.example/one", "a.example/two"]);
    assert!(object.has_finalizer("a.example/two") && !object.has_finalizer("c"));
    let owners: Vec<_> = object
        .owners()
        .map(|o| (o.kind, o.name, o.controller))
        .collect();
    assert_eq!(owners, [("ReplicaSet", "web", false), ("Node", "n", true)]);
    let controller = object.controller().unwrap();
    assert_eq!((controller.api_version, controller.uid), ("v1", "n1"));

    let bare = CachedObject::new(
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": "shop" }
        }))
        .unwrap(),
    );
    assert_eq!((bare.namespace(), bare.name()), (None, "shop"));
    assert_eq!((bare.uid(), bare.resource_version()), (None, None));
    assert_eq!(
        bare.labels().len() + bare.finalizers().len() + bare.owners().len(),
        0
    );
    assert!(bare.controller().is_none());
}

#[test]
fn metadata_the_json_text_escapes_reads_back_as_the_object_has_it() {
    let object = CachedObject::new(
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "namespace": "sh\"op", "name": "wéb\\0", "uid": "u\n1",
                "labels": { "a\"b": "c\td", "plain": "x" },
                "finalizers": ["f\u{1}"],
                "ownerReferences": [
                    { "apiVersion": "v1", "kind": "K\"", "name": "n", "uid": "o", "controller": true }
                ]
            },
            "data": { "name": "decoy" }
        }))
        .unwrap(),
    );
    assert_eq!(object.namespace(), Some("sh\"op"));
    assert_eq!((object.name(), object.uid()), ("wéb\\0", Some("u\n1")));
    assert_eq!(object.resource_version(), None);
    assert_eq!(
        object.labels().collect::<Vec<_>>(),
        [("a\"b", "c\td"), ("plain", "x")]
    );
    assert_eq!(object.label("a\"b"), Some("c\td"));
    assert_eq!(object.finalizers().collect::<Vec<_>>(), ["f\u{1}"]);
    let owner = object.controller().unwrap();
    assert_eq!((owner.kind, owner.name, owner.uid), ("K\"", "n", "o"));
}

#[test]
fn a_sent_apply_replaces_only_its_own_record() {
    let entry = |manager: &str, subresource: Option<&str>| {
        serde_json::json!({
            "manager": manager, "operation": "Apply", "apiVersion": "v1",
            "subresource": subresource, "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {}},
        })
    };
    let object = CachedObject::new(
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {
                "name": "x",
                "managedFields": [
                    entry("kubewasm-a", None),
                    entry("kubewasm-a", Some("status")),
                    entry("kubewasm-b", None),
                    entry("kubectl", None),
                ]
            }
        }))
        .unwrap(),
    );
    let recorded = AppliedFields::Recorded(r#"{"f:data":{}}"#.into());
    let fields = |object: &CachedObject| -> Vec<(String, Option<String>, AppliedFields)> {
        object
            .applied()
            .iter()
            .map(|a| {
                let subresource = a.subresource.as_deref().map(str::to_owned);
                (a.manager.to_string(), subresource, a.fields.clone())
            })
            .collect()
    };
    assert_eq!(
        fields(&object),
        [
            ("kubewasm-a".into(), None, recorded.clone()),
            ("kubewasm-a".into(), Some("status".into()), recorded.clone()),
            ("kubewasm-b".into(), None, recorded.clone()),
        ]
    );
    let sent = object.sent("kubewasm-a", Some("status"), [7; 16]);
    assert_eq!(
        fields(&sent),
        [
            ("kubewasm-a".into(), None, recorded.clone()),
            ("kubewasm-b".into(), None, recorded),
            (
                "kubewasm-a".into(),
                Some("status".into()),
                AppliedFields::Sent([7; 16])
            ),
        ]
    );
    let first = sent.sent("kubewasm-c", None, [1; 16]);
    assert_eq!(
        first.applied().len(),
        4,
        "a manager without a record gets one"
    );
}

#[test]
fn a_relist_keeps_the_cached_copy_of_an_unchanged_object() {
    let store = Store::default();
    store.replace(listed![with_uid("a", "x", "5", "u1")], "5");
    let cached = store.get(&key("a", "x")).unwrap();
    let listed = |version: &str, uid: &str| -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": { "namespace": "a", "name": "x", "resourceVersion": version, "uid": uid }
        }))
        .unwrap()
    };
    let same = store.same(&listed("5", "u1")).unwrap();
    assert!(Arc::ptr_eq(&same, &cached));
    assert!(store.same(&listed("6", "u1")).is_none());
    assert!(store.same(&listed("5", "u2")).is_none());
    assert!(store.replace(vec![same], "7").is_empty());
    assert!(Arc::ptr_eq(&store.get(&key("a", "x")).unwrap(), &cached));
}

#[test]
fn managed_fields_are_dropped() {
    let cached = object("a", "x", "1", &[]);
    assert!(!cached.json().contains("managedFields"));
    assert_eq!(cached.parse()["metadata"]["name"], "x");
}

#[test]
fn upsert_reports_changes_but_not_repeats() {
    let store = Store::default();
    let first = store.upsert(object("a", "x", "1", &[])).unwrap();
    assert!(first.old.is_none());
    assert!(store.upsert(object("a", "x", "1", &[])).is_none());
    let second = store.upsert(object("a", "x", "2", &[])).unwrap();
    assert_eq!(second.old.unwrap().resource_version(), Some("1"));
    let gone = store.remove(&object("a", "x", "3", &[])).unwrap();
    assert!(gone.new.is_none());
    assert!(store.is_empty());
}

#[test]
fn list_filters_by_namespace_and_labels() {
    let store = Store::default();
    store.upsert(object("a", "x", "1", &[("app", "web")]));
    store.upsert(object("a", "y", "1", &[("app", "db")]));
    store.upsert(object("b", "z", "1", &[("app", "web")]));
    let web: LabelSelector = "app=web".parse().unwrap();
    let names = |objects: Vec<Arc<CachedObject>>| {
        objects
            .iter()
            .map(|o| o.name().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(store.list(Some("a"), None)), ["x", "y"]);
    assert_eq!(names(store.list(None, Some(&web))), ["x", "z"]);
    assert_eq!(names(store.list(Some("b"), Some(&web))), ["z"]);
    assert!(store.list(Some("c"), None).is_empty());
}

#[test]
fn replace_emits_adds_updates_and_deletes() {
    let store = Store::default();
    store.upsert(object("a", "kept", "1", &[]));
    store.upsert(object("a", "changed", "1", &[]));
    store.upsert(object("a", "gone", "1", &[]));
    let changes = store.replace(
        listed![
            object("a", "kept", "1", &[]),
            object("a", "changed", "2", &[]),
            object("a", "new", "1", &[]),
        ],
        "2",
    );
    let mut summary: Vec<_> = changes
        .iter()
        .map(|c| match (&c.old, &c.new) {
            (None, Some(n)) => format!("add {}", n.name()),
            (Some(o), None) => format!("delete {}", o.name()),
            (Some(o), Some(_)) => format!("update {}", o.name()),
            (None, None) => unreachable!(),
        })
        .collect();
    summary.sort();
    assert_eq!(summary, ["add new", "delete gone", "update changed"]);
    assert_eq!(store.len(), 3);
}

/// A Pod with labels and owners: `controller` is the uid of its controller owner, `other` that
/// of an owner that does not control it. An empty `namespace` makes it cluster-scoped.
fn owned(
    namespace: &str,
    name: &str,
    version: u64,
    labels: &[(&str, &str)],
    controller: Option<&str>,
    other: Option<&str>,
) -> CachedObject {
    let labels: BTreeMap<&str, &str> = labels.iter().copied().collect();
    let owner = |uid: &str, controller: bool| {
        json!({ "apiVersion": "kubewasm.dev/v1alpha1", "kind": "PodSet", "name": uid,
                "uid": uid, "controller": controller })
    };
    let owners: Vec<_> = other
        .map(|uid| owner(uid, false))
        .into_iter()
        .chain(controller.map(|uid| owner(uid, true)))
        .collect();
    CachedObject::new(
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": { "namespace": (!namespace.is_empty()).then_some(namespace),
                          "name": name, "uid": format!("{namespace}/{name}"),
                          "resourceVersion": version.to_string(), "labels": labels,
                          "ownerReferences": owners }
        }))
        .unwrap(),
    )
}

fn names(objects: &[Arc<CachedObject>]) -> Vec<String> {
    objects.iter().map(|o| o.key().to_string()).collect()
}

#[test]
fn controlled_objects_are_found_by_their_controllers_uid_only() {
    let store = Store::default();
    store.replace(
        listed![
            owned("a", "p1", 1, &[], Some("set"), None),
            owned("a", "p2", 2, &[], None, Some("set")),
            owned("b", "p3", 3, &[], Some("set"), Some("other")),
            owned("a", "p0", 4, &[], Some("another"), None),
        ],
        "4",
    );
    assert_eq!(names(&store.controlled("set", None)), ["a/p1", "b/p3"]);
    assert_eq!(names(&store.controlled("set", Some("b"))), ["b/p3"]);
    assert_eq!(
        names(&store.controlled("other", None)),
        Vec::<String>::new()
    );
    assert_eq!(names(&store.controlled("another", Some("a"))), ["a/p0"]);

    // A new controller moves the object; a recorded write and delete are seen at once.
    store.upsert(owned("a", "p1", 5, &[], Some("another"), None));
    assert_eq!(names(&store.controlled("set", None)), ["b/p3"]);
    assert_eq!(names(&store.controlled("another", None)), ["a/p0", "a/p1"]);
    store.record_write(owned("a", "p2", 6, &[], Some("set"), None));
    assert_eq!(names(&store.controlled("set", None)), ["a/p2", "b/p3"]);
    store.record_delete(&key("b", "p3"), "b/p3");
    assert_eq!(names(&store.controlled("set", None)), ["a/p2"]);
    store.remove(&owned("a", "p2", 7, &[], Some("set"), None));
    assert!(store.controlled("set", None).is_empty());
    assert_eq!(store.index_entries(), 2);
}

#[test]
fn a_selection_by_label_value_is_served_by_an_index_started_on_first_use() {
    let store = Store::default();
    store.replace(
        listed![
            owned(
                "a",
                "web-1",
                1,
                &[("app", "web"), ("tier", "x")],
                None,
                None
            ),
            owned("a", "db-1", 2, &[("app", "db")], None, None),
            owned("b", "web-2", 3, &[("app", "web")], None, None),
        ],
        "3",
    );
    assert_eq!(store.index_entries(), 0);
    let selector = |s: &str| s.parse::<LabelSelector>().unwrap();
    let web = selector("app=web");
    assert_eq!(names(&store.list(None, Some(&web))), ["a/web-1", "b/web-2"]);
    assert_eq!(store.index_entries(), 3, "every object with the label key");
    assert_eq!(names(&store.list(Some("a"), Some(&web))), ["a/web-1"]);
    let narrower = selector("app in (web),tier!=y,tier");
    assert_eq!(names(&store.list(None, Some(&narrower))), ["a/web-1"]);

    // Selectors without an equality are scanned, and start no index.
    let exists = selector("tier,app notin (db)");
    assert_eq!(names(&store.list(None, Some(&exists))), ["a/web-1"]);
    assert_eq!(store.index_entries(), 3);

    // Past the limit of label keys, an equality is scanned.
    for i in 0..MAX_LABEL_INDEXES + 2 {
        let unknown = selector(&format!("key-{i}=value"));
        assert!(store.list(None, Some(&unknown)).is_empty());
    }
    let tier = selector("tier=x");
    assert_eq!(names(&store.list(None, Some(&tier))), ["a/web-1"]);
}

/// A generator of small pseudo-random numbers, the same in every run.
struct Dice(u64);

impl Dice {
    fn roll(&mut self, sides: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        (self.0 >> 33) % sides
    }
}

#[test]
fn the_indexes_answer_as_a_scan_does_through_every_kind_of_change() {
    let mut dice = Dice(7);
    let store = Store::default();
    let pick = |dice: &mut Dice, of: &[&'static str]| of[dice.roll(of.len() as u64) as usize];
    let mut version = 0;
    let mut random = |dice: &mut Dice| {
        version += 1;
        let (ns, name) = (
            pick(dice, &["a", "b", ""]),
            pick(dice, &["p", "q", "r", "s"]),
        );
        let mut labels = vec![("app", pick(dice, &["web", "db"]))];
        if dice.roll(2) == 0 {
            labels.push(("tier", pick(dice, &["x", "y"])));
        }
        let controller = [None, Some("u1"), Some("u2")][dice.roll(3) as usize];
        let other = [None, Some("u1"), Some("u3")][dice.roll(3) as usize];
        owned(ns, name, version, &labels, controller, other)
    };
    let queries = ["app=web", "app=db,tier=x", "tier=y", "tier in (x),app!=web"]
        .map(|s| s.parse::<LabelSelector>().unwrap());
    for step in 0..2_000 {
        match dice.roll(5) {
            0 => {
                store.upsert(random(&mut dice));
            }
            1 => {
                let object = random(&mut dice);
                store.remove(&object);
            }
            2 => {
                store.record_write(random(&mut dice));
            }
            3 => {
                let object = random(&mut dice);
                store.record_delete(&object.key(), object.uid().unwrap());
            }
            4 if dice.roll(2) == 0 => {
                // The same version written again, as an apply that changed nothing answers.
                if let Some(cached) = store.scan(None, None).first() {
                    store.record_write((**cached).clone());
                }
            }
            _ => {
                let snapshot: Vec<_> = (0..dice.roll(6))
                    .map(|_| Arc::new(random(&mut dice)))
                    .collect();
                store.replace(snapshot, "0");
            }
        }
        let all = store.scan(None, None);
        for namespace in [None, Some("a"), Some("b")] {
            for query in &queries {
                let scanned = store.scan(namespace, Some(query));
                assert_eq!(
                    names(&store.list(namespace, Some(query))),
                    names(&scanned),
                    "step {step}: {query}"
                );
            }
            for uid in ["u1", "u2", "u3"] {
                let expected: Vec<_> = all
                    .iter()
                    .filter(|o| namespace.is_none_or(|ns| o.namespace() == Some(ns)))
                    .filter(|o| o.controller().is_some_and(|c| c.uid == uid))
                    .cloned()
                    .collect();
                assert_eq!(
                    names(&store.controlled(uid, namespace)),
                    names(&expected),
                    "step {step}: {uid}"
                );
            }
        }
    }
}
