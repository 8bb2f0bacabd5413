use std::time::Duration;

use super::*;
use crate::config::Config;
use crate::wasm::backend::Scope;
use crate::wasm::declaration::Declared;
use crate::wasm::limits::Capture;
use crate::wasm::offline::{OfflineBackend, Write};
use crate::wasm::permissions::Permissions;

#[tokio::test]
async fn a_host_call_finishes_when_the_guest_call_is_dropped() {
    use std::sync::atomic::AtomicBool;
    let context = CallContext::for_tests("writer");
    let done = Arc::new(AtomicBool::new(false));
    let write = {
        let done = done.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            done.store(true, Ordering::SeqCst);
            Ok::<_, CallError>(())
        }
    };
    // The guest's deadline ends its call while the write is on its way.
    let ended = tokio::time::timeout(Duration::from_millis(10), context.timed(|_| write)).await;
    assert!(ended.is_err());
    // The call's failure is reported once the writes on their way have ended, so that a retry
    // reads them in the cache.
    context.writes.close();
    context.writes.wait().await;
    assert!(
        done.load(Ordering::SeqCst),
        "the write was cancelled with the guest's call, or not awaited"
    );
}

#[test]
fn a_grant_restricted_to_namespaces_never_covers_a_cluster_scoped_kind() {
    let role = GroupVersionKind::gvk("rbac.authorization.k8s.io", "v1", "ClusterRole");
    let config = Config::from_yaml(
        "modules: [{path: a.wasm, grants: [{apiGroups: ['*'], resources: ['*'], verbs: ['*'], namespaces: [team-a]}]}]",
        std::path::Path::new(""),
    )
    .unwrap();
    let backend = OfflineBackend::default().with_cluster_scoped(role.clone());
    let env = GuestEnv::new(
        "scoped",
        Declared {
            primary: GroupVersionKind::gvk("", "v1", "ConfigMap"),
            owns: vec![role.clone()],
            watches: Vec::new(),
        },
        Arc::new(backend),
        Duration::from_secs(1),
        Permissions::new(config.modules[0].grants.clone()),
    );
    let context = CallContext::new(Arc::new(env), None);
    let config_map = GroupVersionKind::gvk("", "v1", "ConfigMap");
    assert!(
        context
            .writable(config_map, None, &[Verb::Create], Some("team-a"))
            .is_ok()
    );
    let denied = context.writable(role, None, &[Verb::Create], Some("team-a"));
    assert!(
        matches!(&denied, Err(CallError::Denied(m)) if m.contains("all namespaces")),
        "{denied:?}"
    );
}

const NAMESPACE: &str = "caps";

fn config_map() -> GroupVersionKind {
    GroupVersionKind::gvk("", "v1", "ConfigMap")
}

/// The state of a reconcile of ConfigMap `caps/source` with 1 KiB caps on writes and logs.
fn call(backend: Arc<OfflineBackend>) -> CallState {
    call_owning(backend, Vec::new())
}

/// As [`call`], for a guest that owns `owns`.
fn call_owning(backend: Arc<OfflineBackend>, owns: Vec<GroupVersionKind>) -> CallState {
    let declared = Declared {
        primary: config_map(),
        owns,
        watches: Vec::new(),
    };
    let env = GuestEnv::new(
        "caps",
        declared,
        backend,
        Duration::from_secs(5),
        Permissions::new(None),
    );
    let context = CallContext::new(
        Arc::new(env),
        Some(Scope {
            kind: config_map(),
            namespace: Some(NAMESPACE.into()),
            name: "source".into(),
            uid: Some("uid".into()),
            deleting: false,
        }),
    );
    let limits = CallLimits {
        write_bytes: 1024,
        log_bytes: 1024,
        ..CallLimits::default()
    };
    let output = (
        Capture::new(limits.log_bytes),
        Capture::new(limits.log_bytes),
    );
    let wasi = wasmtime_wasi::WasiCtx::builder().build();
    CallState::new(context, limits, wasi, Default::default(), output)
}

/// The message of an `invalid` error.
fn invalid(result: wasmtime::Result<Result<String, types::Error>>) -> Option<String> {
    match result.unwrap() {
        Err(types::Error::Invalid(message)) => Some(message),
        _ => None,
    }
}

fn config_map_json(value: &str) -> String {
    serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": "target" },
        "data": { "value": value },
    })
    .to_string()
}

#[tokio::test]
async fn an_owned_apply_adopts_only_when_asked_and_never_from_another_controller_or_while_deleting()
{
    let controller = |uid: &str| {
        serde_json::json!([{ "apiVersion": "v1", "kind": "ConfigMap", "name": uid,
                             "uid": uid, "controller": true }])
    };
    let existing = |name: &str, owners: serde_json::Value| {
        serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": { "name": name, "namespace": NAMESPACE, "uid": name,
                          "ownerReferences": owners },
        })
    };
    let mut leaving = existing("leaving", serde_json::json!([]));
    leaving["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z".into();
    let backend = Arc::new(OfflineBackend::new(vec![
        existing("foreign", serde_json::json!([])),
        existing("taken", controller("other")),
        existing("ours", controller("uid")),
        leaving,
    ]));
    let mut call = call(backend.clone());
    let state = &mut call;
    let apply = async |state: &mut CallState, name: &str, adopt: bool| {
        let object = serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": name },
        });
        let options = writes::ApplyOptions {
            owned: true,
            force: true,
            adopt,
        };
        match writes::Host::apply(state, object.to_string(), options).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(types::Error::Api(status))) => Err((status.code, status.reason)),
            other => panic!("{name}: {other:?}"),
        }
    };
    let refused = Err((409, "AlreadyExists".to_owned()));
    assert_eq!(apply(state, "foreign", false).await, refused);
    assert_eq!(apply(state, "taken", false).await, refused);
    assert_eq!(apply(state, "taken", true).await, refused);
    assert_eq!(apply(state, "leaving", true).await, refused);
    state.context.scope.as_mut().unwrap().deleting = true;
    assert_eq!(apply(state, "foreign", true).await, refused);
    state.context.scope.as_mut().unwrap().deleting = false;
    assert!(
        backend.take_writes().is_empty(),
        "a refused apply is not sent"
    );
    assert_eq!(apply(state, "foreign", true).await, Ok(()));
    assert_eq!(apply(state, "ours", false).await, Ok(()));
    assert_eq!(apply(state, "new", false).await, Ok(()));
    assert_eq!(backend.take_writes().len(), 3);
}

#[test]
fn a_list_larger_than_the_guests_memory_is_invalid() {
    let objects = (0..64)
        .map(|i| {
            serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": { "name": format!("cm-{i}"), "namespace": NAMESPACE },
                "data": { "value": "x".repeat(1024) },
            })
        })
        .collect();
    let backend = Arc::new(OfflineBackend::new(objects));
    let mut call = call(backend);
    let state = &mut call;
    let list = |state: &mut CallState| {
        let kind = types::Gvk::from(config_map());
        state.list(kind, Some(NAMESPACE.into()), None)
    };
    state.limits.memory_bytes = 1 << 20;
    assert_eq!(list(state).unwrap().unwrap().len(), 64);
    state.limits.memory_bytes = 32 << 10;
    let message = invalid(list(state).map(|r| r.map(|_| String::new())));
    assert!(
        message
            .as_deref()
            .is_some_and(|m| m.starts_with("the list of 64 objects takes")
                && m.ends_with(
                    "more than the guest's memory limit of 32768 bytes: narrow it with \
                            a namespace or a label selector"
                )),
        "{message:?}"
    );
}

fn gvk(kind: &GroupVersionKind) -> types::Gvk {
    types::Gvk::from(kind.clone())
}

#[tokio::test]
async fn a_write_whose_url_would_name_another_object_is_invalid_and_not_sent() {
    let backend = Arc::new(OfflineBackend::default());
    let mut call = call(backend.clone());
    let state = &mut call;
    let names = [
        "x/status",
        "..",
        ".",
        "",
        "x?dryRun=All",
        "x#y",
        "x%2Fstatus",
        "ünï",
        "x y",
        "x<y>",
        "x`y",
    ];
    let namespaces = [
        "caps?dryRun=All",
        "caps/configmaps/x",
        "..",
        "",
        "Caps",
        "caps\0",
    ];
    let targets = names
        .iter()
        .map(|name| (NAMESPACE, *name))
        .chain(namespaces.iter().map(|namespace| (*namespace, "target")));
    for (namespace, name) in targets {
        let object = serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": { "name": name, "namespace": namespace },
        });
        let options = writes::ApplyOptions {
            owned: false,
            force: true,
            adopt: false,
        };
        let applied = writes::Host::apply(state, object.to_string(), options).await;
        let status = writes::StatusOptions { force: true };
        let status = writes::Host::apply_status(state, object.to_string(), status).await;
        let (kind, given) = (gvk(&config_map()), Some(namespace.to_owned()));
        let merge = writes::PatchType::Merge;
        let patched = writes::Host::patch(
            state,
            kind.clone(),
            given.clone(),
            name.into(),
            merge,
            "{}".into(),
        )
        .await;
        let preconditions = writes::Preconditions {
            uid: None,
            resource_version: None,
        };
        let deleted = writes::Host::delete(state, kind, given, name.into(), preconditions).await;
        for answer in [
            applied,
            status,
            patched,
            deleted.map(|r| r.map(|()| String::new())),
        ] {
            let message = invalid(answer);
            assert!(message.is_some(), "{namespace:?}/{name:?}: {message:?}");
        }
    }
    assert!(backend.take_writes().is_empty(), "nothing was sent");
}

#[tokio::test]
async fn an_event_the_api_server_would_refuse_is_invalid_and_nothing_is_kept() {
    let backend = Arc::new(OfflineBackend::default());
    let mut call = call(backend.clone());
    let event = |name: &str, reason: &str, action: &str, note: &str| events::Event {
        regarding_kind: gvk(&config_map()),
        regarding_namespace: None,
        regarding_name: name.into(),
        event_type: events::EventType::Normal,
        reason: reason.into(),
        action: action.into(),
        note: note.into(),
    };
    let long = "x".repeat(1 << 20);
    for (what, refused) in [
        (
            "a name longer than any object's",
            event(&long, "R", "A", ""),
        ),
        ("a name that is no object's", event("a/b", "R", "A", "")),
        ("an empty reason", event("source", "", "A", "")),
        (
            "a reason over 128 bytes",
            event("source", &"r".repeat(129), "A", ""),
        ),
        ("an empty action", event("source", "R", "", "")),
        (
            "an action over 128 bytes",
            event("source", "R", &"a".repeat(129), ""),
        ),
        (
            "a note over 1024 bytes",
            event("source", "R", "A", &"n".repeat(1025)),
        ),
    ] {
        let answer = events::Host::record_event(&mut call, refused).await;
        assert!(
            matches!(answer, Ok(Err(types::Error::Invalid(_)))),
            "{what}: {answer:?}"
        );
    }
    let at_the_bounds = event(
        &"s".repeat(253),
        &"r".repeat(128),
        &"a".repeat(128),
        &"n".repeat(1024),
    );
    let answer = events::Host::record_event(&mut call, at_the_bounds).await;
    assert!(matches!(answer, Ok(Ok(()))), "{answer:?}");
    assert_eq!(
        backend.take_writes().len(),
        1,
        "only the event within the bounds"
    );
}

#[tokio::test]
async fn a_cluster_scoped_object_is_written_and_evented_without_a_namespace() {
    let role = GroupVersionKind::gvk("rbac.authorization.k8s.io", "v1", "ClusterRole");
    let taken = serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": { "name": "taken", "uid": "taken",
                      "ownerReferences": [{ "uid": "other", "controller": true }] },
    });
    let backend = OfflineBackend::new(vec![taken]).with_cluster_scoped(role.clone());
    let backend = Arc::new(backend);
    let mut call = call_owning(backend.clone(), vec![role.clone()]);
    let state = &mut call;
    let options = writes::ApplyOptions {
        owned: true,
        force: true,
        adopt: true,
    };
    // Named in a namespace, the object controlled by another owner is still found.
    let taken = serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": { "name": "taken", "namespace": "elsewhere" },
    });
    let answer = writes::Host::apply(state, taken.to_string(), options).await;
    assert!(
        matches!(answer, Ok(Err(types::Error::Api(ref s))) if s.code == 409),
        "{answer:?}"
    );
    let new = serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": { "name": "new" },
    });
    let answer = writes::Host::apply(state, new.to_string(), options).await;
    assert!(matches!(answer, Ok(Ok(_))), "{answer:?}");
    let preconditions = writes::Preconditions {
        uid: None,
        resource_version: None,
    };
    let elsewhere = Some("elsewhere".to_owned());
    let deleted = writes::Host::delete(
        state,
        gvk(&role),
        elsewhere.clone(),
        "new".into(),
        preconditions,
    )
    .await;
    assert!(matches!(deleted, Ok(Ok(()))), "{deleted:?}");
    let event = events::Event {
        regarding_kind: gvk(&role),
        regarding_namespace: elsewhere,
        regarding_name: "new".into(),
        event_type: events::EventType::Normal,
        reason: "Tested".into(),
        action: "Test".into(),
        note: String::new(),
    };
    let recorded = events::Host::record_event(state, event).await;
    assert!(matches!(recorded, Ok(Ok(()))), "{recorded:?}");
    let writes = backend.take_writes();
    let namespaces: Vec<Option<&str>> = writes
        .iter()
        .map(|write| match write {
            Write::Apply(apply) => {
                assert!(
                    apply.object["metadata"].get("namespace").is_none(),
                    "{apply:?}"
                );
                apply.namespace.as_deref()
            }
            Write::Delete(delete) => delete.namespace.as_deref(),
            Write::Event(event) => event.namespace.as_deref(),
            Write::Patch(patch) => patch.namespace.as_deref(),
        })
        .collect();
    assert_eq!(namespaces, [None, None, None], "{writes:?}");
}

#[tokio::test]
async fn a_write_over_the_cap_is_invalid_and_not_sent() {
    let backend = Arc::new(OfflineBackend::default());
    let mut call = call(backend.clone());
    let state = &mut call;
    let options = writes::ApplyOptions {
        owned: false,
        force: false,
        adopt: false,
    };
    let small = config_map_json("small");
    let applied = writes::Host::apply(state, small, options).await;
    assert!(applied.unwrap().is_ok());
    let large = config_map_json(&"x".repeat(2048));
    let expected = format!("object of {} bytes exceeds the limit of 1024", large.len());
    let applied = writes::Host::apply(state, large.clone(), options).await;
    assert_eq!(invalid(applied), Some(expected.clone()));
    let options = writes::StatusOptions { force: false };
    let applied = writes::Host::apply_status(state, large, options).await;
    assert_eq!(invalid(applied), Some(expected));
    let patch = serde_json::json!({ "data": { "value": "y".repeat(2048) } }).to_string();
    let expected = format!("patch of {} bytes exceeds the limit of 1024", patch.len());
    let patched = writes::Host::patch(
        state,
        types::Gvk {
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
        },
        None,
        "target".into(),
        writes::PatchType::Merge,
        patch,
    )
    .await;
    assert_eq!(invalid(patched), Some(expected));
    assert_eq!(
        backend.take_writes().len(),
        1,
        "only the small apply went out"
    );
}

#[tokio::test]
async fn log_lines_beyond_the_budget_are_dropped_after_one_note() {
    let backend = Arc::new(OfflineBackend::default());
    let mut call = call(backend.clone());
    let state = &mut call;
    for line in 0..50 {
        let message = format!("line {line:02} {}", "-".repeat(80));
        let fields = vec![("k".to_owned(), "v".to_owned())];
        log::Host::log(state, log::Level::Info, message, fields)
            .await
            .unwrap();
    }
    let logs = backend.take_logs();
    // Each line is 90 bytes of message and 2 of fields: eleven fit in 1024 bytes.
    assert_eq!(logs.len(), 12, "{logs:?}");
    assert!(logs[10].message.starts_with("line 10 "));
    assert_eq!(logs[11].level, log::Level::Warn);
    assert_eq!(
        logs[11].message,
        "log output truncated: more than 1024 bytes in one call"
    );
}
