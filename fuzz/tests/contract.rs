//! The guest contract under fuzzing. The `fuzz` guest (`tests/guests/fuzz`) runs a program of
//! host calls with arguments drawn from its bytes: every import, with kinds declared and not,
//! namespaces and names that no URL can carry, JSON broken, huge and deep, selectors of every
//! shape. Whatever the program asks for:
//!
//! - the host neither panics nor hangs, and the reconcile ends with `done`;
//! - every write the backend receives is one the grants allow, computed here from the grants,
//!   not by the host's own check, and names exactly one object: a namespace that is a DNS label,
//!   a name that is one URL path segment;
//! - a write or event about a cluster-scoped object names no namespace;
//! - a call on a kind the guest did not declare, or outside its grants, is refused (`denied`, or
//!   `invalid` when malformed), never answered with data; a well-formed call the grants allow
//!   is not refused, and a malformed one always is.
//!
//! Against a fixture, bolero drives it for a few seconds under `cargo test`, each program under
//! two grant profiles (narrow grants in one namespace, and none at all); seeded programs show
//! that every import is reached and answered each way; and the programs that once got past the
//! host are regression tests. Against the real control plane, seeded programs and those run in a
//! host with narrow grants: it stays up and ready, nothing of another namespace or of a kind it
//! may not write changes, and nothing it wrote is beyond its grants.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use kubewasm::config::Config;
use kubewasm::wasm::backend::{LogLine, Scope};
use kubewasm::wasm::bindings::types;
use kubewasm::wasm::dispatch::{self, Entry, Outcome};
use kubewasm::wasm::env::GuestEnv;
use kubewasm::wasm::limits::CallLimits;
use kubewasm::wasm::module::{self, Module};
use kubewasm::wasm::module_bytes::ModuleBytes;
use kubewasm::wasm::offline::{OfflineBackend, Write};
use kubewasm::wasm::permissions::Permissions;
use kubewasm::wasm::runtime::Runtime;
use kubewasm_fuzz::test_time;
use kubewasm_tests::{
    WAIT, control_plane, eventually, free_ports, guest_wasm, http_get, with_host_args,
};
use serde_json::{Value, json};

/// How long bolero runs random programs under `cargo test` by default.
const TEST_TIME: Duration = Duration::from_secs(8);

/// The namespace of the reconciled ConfigMap in the fixture, and another one.
const NS: &str = "fuzz";
const OTHER: &str = "decoy";
/// The reconciled ConfigMap.
const PROGRAM: &str = "program";
const PROGRAM_UID: &str = "program-uid";

/// The kinds the guest declares, as it logs them (`group|version|kind`).
const CONFIG_MAP: &str = "|v1|ConfigMap";
const SECRET: &str = "|v1|Secret";
const POD: &str = "|v1|Pod";
const SERVICE_ACCOUNT: &str = "|v1|ServiceAccount";
const NAMESPACE: &str = "|v1|Namespace";
/// The kinds the fixture holds as cluster-scoped.
const CLUSTER_SCOPED: [&str; 2] = [NAMESPACE, "rbac.authorization.k8s.io|v1|ClusterRole"];

/// Every import a program calls, as the guest names it.
const OPS: [&str; 8] = [
    "get",
    "list",
    "apply",
    "apply-status",
    "patch",
    "delete",
    "event",
    "log",
];

/// The narrow grants, in `namespace`: ConfigMaps fully (status too); Secrets created and patched
/// but not deleted; Pods written but not their status; ServiceAccounts only read; Namespaces
/// read, as they must be for the watch.
fn grants_yaml(namespace: &str) -> String {
    let rules = [
        ("[configmaps, configmaps/status]", "['*']", true),
        ("[secrets]", "[get, list, watch, create, patch]", true),
        ("[pods]", "[get, list, watch, create, patch, delete]", true),
        ("[serviceaccounts]", "[get, list, watch]", true),
        ("[namespaces]", "[get, list, watch]", false),
    ];
    let mut yaml = "    grants:\n".to_owned();
    for (resources, verbs, namespaced) in rules {
        yaml += &format!("      - {{apiGroups: [''], resources: {resources}, verbs: {verbs}");
        if namespaced {
            yaml += &format!(", namespaces: [{namespace}]");
        }
        yaml += "}\n";
    }
    yaml
}

/// What a guest may do: the narrow grants in [`NS`], or no grants configured (anything on the
/// kinds it declares, in any namespace).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Profile {
    Narrow,
    Open,
}

/// What a call does, as far as grants go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Access {
    Read,
    Apply,
    ApplyStatus,
    Patch,
    Delete,
    Event,
}

impl Access {
    fn of(op: &str) -> Option<Self> {
        Some(match op {
            "get" | "list" => Access::Read,
            "apply" => Access::Apply,
            "apply-status" => Access::ApplyStatus,
            "patch" => Access::Patch,
            "delete" => Access::Delete,
            "event" => Access::Event,
            _ => return None,
        })
    }
}

/// Whether `profile` lets the guest make `access` on `kind` (`group|version|kind`) in
/// `namespace` (`None`: all namespaces, or cluster-scoped), from the grants and the declaration
/// as documented, independently of the host's own check.
fn allowed(profile: Profile, access: Access, kind: &str, namespace: Option<&str>) -> bool {
    let read = matches!(access, Access::Read | Access::Event);
    // Cluster-scoped and only watched: read anywhere, never written.
    if kind == NAMESPACE {
        return read;
    }
    if ![CONFIG_MAP, SECRET, POD, SERVICE_ACCOUNT].contains(&kind) {
        return false;
    }
    match profile {
        Profile::Open => true,
        Profile::Narrow => {
            namespace == Some(NS)
                && match access {
                    Access::Read | Access::Event => true,
                    Access::Apply | Access::Patch => [CONFIG_MAP, SECRET, POD].contains(&kind),
                    Access::ApplyStatus => kind == CONFIG_MAP,
                    Access::Delete => [CONFIG_MAP, POD].contains(&kind),
                }
        }
    }
}

/// A kind as the guest logs it.
fn kind_key(kind: &GroupVersionKind) -> String {
    format!("{}|{}|{}", kind.group, kind.version, kind.kind)
}

/// Whether `namespace` is one the API server can have: a DNS-1123 label.
fn is_namespace(namespace: &str) -> bool {
    let bytes = namespace.as_bytes();
    (1..=63).contains(&bytes.len())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-'
}

/// Whether `name` is one path segment of a URL that names exactly the object: at most 253
/// bytes, not empty, `.` or `..`, and visible ASCII other than `/`, `%`, `?` and `#`.
fn is_segment(name: &str) -> bool {
    name.len() <= 253
        && !matches!(name, "" | "." | "..")
        && name
            .bytes()
            .all(|b| b.is_ascii_graphic() && !b"/%?#".contains(&b))
}

/// Whether a write to `namespace` and `name` addresses exactly one object.
fn addresses_one(namespace: Option<&str>, name: &str) -> bool {
    namespace.is_none_or(is_namespace) && is_segment(name)
}

/// One call of a program, as the guest logged it.
struct Call {
    op: String,
    kind: String,
    ns: Option<String>,
    name: String,
    form: String,
    out: String,
}

impl Call {
    /// The call a `call` line reports.
    fn of(line: &LogLine) -> Option<Call> {
        if line.message != "call" {
            return None;
        }
        let field = |key: &str| {
            let found = line.fields.iter().find(|(k, _)| k == key);
            found.map(|(_, v)| v.clone()).unwrap_or_default()
        };
        let ns = field("ns");
        Some(Call {
            op: field("op"),
            kind: field("kind"),
            ns: (ns != "-").then_some(ns),
            name: field("name"),
            form: field("form"),
            out: field("out"),
        })
    }

    /// The answer, without an API status code: `ok`, `some`, `none`, `items`, `denied`,
    /// `invalid`, `api` or `unavailable`.
    fn answer(&self) -> &str {
        self.out.split(':').next().unwrap_or_default()
    }

    /// Checks the answer against what `profile` allows; `None` if it is as the contract says.
    /// An `opaque` call sent another object than the one it names: only its writes are checked.
    fn violation(&self, profile: Profile) -> Option<String> {
        let access = Access::of(&self.op).filter(|_| self.form != "opaque")?;
        // Reads name the namespace they read (`None`: all); writes and events default to the
        // reconciled object's.
        let namespace = match access {
            Access::Read => self.ns.as_deref(),
            _ => Some(self.ns.as_deref().unwrap_or(NS)),
        };
        let refused = matches!(self.answer(), "denied" | "invalid");
        let why = match (
            allowed(profile, access, &self.kind, namespace),
            self.form.as_str(),
        ) {
            (false, _) if self.answer() == "denied" => return None,
            (false, "good") => "a well-formed call the grants do not allow is not denied",
            (false, _) if refused => return None,
            (false, _) => "a call the grants do not allow is answered",
            (true, "good") if refused => "a well-formed call the grants allow is refused",
            (true, "bad") if !refused => "a malformed call is not refused",
            _ => return None,
        };
        let Call {
            op,
            kind,
            ns,
            name,
            out,
            ..
        } = self;
        Some(format!(
            "{why}: {op} of {kind} {ns:?}/{name:?} answered {out}"
        ))
    }
}

/// The fuzz guest loaded once, and what each run against a fresh fixture needs.
struct Harness {
    tokio: tokio::runtime::Runtime,
    runtime: Runtime,
    module: Arc<Module>,
    limits: CallLimits,
    narrow: Permissions,
    programs: AtomicUsize,
    calls: AtomicUsize,
}

impl Harness {
    fn new() -> Self {
        let tokio = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let runtime = Runtime::new().expect("a WebAssembly runtime");
        // Room for every log line of a program, so that no call goes unreported, and deadlines
        // that a loaded machine does not reach: what is checked is the answers, not the time.
        let limits = CallLimits {
            log_bytes: 64 << 20,
            timeout: Duration::from_secs(60),
            host_call_timeout: Duration::from_secs(30),
            ..CallLimits::default()
        };
        let bytes = std::fs::read(guest_wasm("fuzz")).expect("the fuzz guest");
        let module = tokio
            .block_on(module::load_bytes(
                &runtime,
                "fuzz".into(),
                ModuleBytes::new(bytes),
                &limits,
            ))
            .expect("the fuzz guest loads");
        let config = Config::from_yaml(
            &format!("modules:\n  - path: fuzz.wasm\n{}", grants_yaml(NS)),
            Path::new("/"),
        )
        .expect("the grants parse");
        let narrow = Permissions::new(config.modules[0].grants.clone());
        Self {
            tokio,
            runtime,
            module,
            limits,
            narrow,
            programs: AtomicUsize::new(0),
            calls: AtomicUsize::new(0),
        }
    }

    /// Runs `program` against a fresh fixture under `profile` and checks every invariant;
    /// returns the calls it made.
    fn run(&self, program: &[u8], profile: Profile) -> Vec<Call> {
        let backend = Arc::new(fixture(program));
        let permissions = match profile {
            Profile::Narrow => self.narrow.clone(),
            Profile::Open => Permissions::new(None),
        };
        let env = Arc::new(GuestEnv::new(
            &self.module.metadata.name,
            self.module.metadata.declared(),
            backend.clone(),
            self.limits.host_call_timeout,
            permissions,
        ));
        let request = types::Request {
            key: types::ObjectKey {
                namespace: Some(NS.into()),
                name: PROGRAM.into(),
            },
            reason: types::Reason::Added,
            attempt: 1,
            object: Some(program_object(program).to_string()),
        };
        let scope = Scope {
            kind: GroupVersionKind::gvk("", "v1", "ConfigMap"),
            namespace: Some(NS.into()),
            name: PROGRAM.into(),
            uid: Some(PROGRAM_UID.into()),
            deleting: false,
        };
        let call = dispatch::call(
            &self.runtime,
            &self.module,
            &env,
            &self.limits,
            scope,
            Entry::Reconcile,
            request,
        );
        let (result, _) = self.tokio.block_on(call);
        let hex = to_hex(program);
        assert_eq!(
            result,
            Ok(Outcome::Done),
            "program {hex} under {profile:?} did not end with done"
        );
        let logs = backend.take_logs();
        let calls: Vec<Call> = logs.iter().filter_map(Call::of).collect();
        let done = logs.iter().find(|l| l.message == "program done");
        let counted = done.and_then(|l| l.fields.first()).map(|(_, n)| n.as_str());
        assert_eq!(
            counted,
            Some(calls.len().to_string().as_str()),
            "program {hex}: every call is reported"
        );
        for call in &calls {
            if let Some(violation) = call.violation(profile) {
                panic!("program {hex} under {profile:?}: {violation}");
            }
        }
        for write in backend.writes() {
            if let Some(violation) = write_violation(&write, profile) {
                panic!("program {hex} under {profile:?}: {violation}: {write:?}");
            }
        }
        self.programs.fetch_add(1, Ordering::Relaxed);
        self.calls.fetch_add(calls.len(), Ordering::Relaxed);
        calls
    }
}

/// What is wrong with a write the backend received, if anything.
fn write_violation(write: &Write, profile: Profile) -> Option<&'static str> {
    let (access, kind, namespace, name) = match write {
        Write::Apply(apply) => {
            let access = if apply.status {
                Access::ApplyStatus
            } else {
                Access::Apply
            };
            let metadata = &apply.object["metadata"];
            let same = metadata["name"] == apply.name.as_str()
                && metadata["namespace"].as_str() == apply.namespace.as_deref()
                && kubewasm::cluster::selection::kind_of(&apply.object).as_ref()
                    == Some(&apply.kind);
            if !same {
                return Some("an apply names another object than its body");
            }
            (access, &apply.kind, &apply.namespace, &apply.name)
        }
        Write::Patch(patch) => (Access::Patch, &patch.kind, &patch.namespace, &patch.name),
        Write::Delete(delete) => (
            Access::Delete,
            &delete.kind,
            &delete.namespace,
            &delete.name,
        ),
        Write::Event(event) => {
            let namespace = event.namespace.as_deref();
            if !namespace.is_none_or(is_namespace) {
                return Some("an event goes to a namespace that cannot exist");
            }
            (Access::Event, &event.kind, &event.namespace, &event.name)
        }
    };
    let namespace = namespace.as_deref();
    if CLUSTER_SCOPED.contains(&kind_key(kind).as_str()) && namespace.is_some() {
        return Some("a write or event about a cluster-scoped object names a namespace");
    }
    if !allowed(profile, access, &kind_key(kind), namespace) {
        return Some("a write the grants do not allow reached the backend");
    }
    if access != Access::Event && !addresses_one(namespace, name) {
        return Some("a write whose URL would not name exactly its object reached the backend");
    }
    None
}

/// The reconciled ConfigMap, holding `program`.
fn program_object(program: &[u8]) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {
            "name": PROGRAM, "namespace": NS, "uid": PROGRAM_UID, "resourceVersion": "1",
            "labels": { "kubewasm.dev/fixture": "fuzz" },
        },
        "data": { "program": to_hex(program), "other": OTHER },
    })
}

/// The program's ConfigMap, and decoys: every declared kind in both namespaces, the
/// namespaces, and kinds the guest did not declare.
fn fixture(program: &[u8]) -> OfflineBackend {
    let object = |api_version: &str, kind: &str, namespace: Option<&str>, name: &str| {
        let mut object = json!({
            "apiVersion": api_version, "kind": kind,
            "metadata": { "name": name, "uid": format!("{kind}-{name}"), "resourceVersion": "1" },
        });
        if let Some(namespace) = namespace {
            object["metadata"]["namespace"] = namespace.into();
        }
        object
    };
    let mut objects = vec![program_object(program)];
    for namespace in [NS, OTHER] {
        for kind in ["ConfigMap", "Secret", "Pod", "ServiceAccount", "Deployment"] {
            for name in ["decoy", "fuzz-a"] {
                let api_version = if kind == "Deployment" {
                    "apps/v1"
                } else {
                    "v1"
                };
                objects.push(object(api_version, kind, Some(namespace), name));
            }
        }
        objects.push(object("v1", "Namespace", None, namespace));
    }
    objects.push(object(
        "rbac.authorization.k8s.io/v1",
        "ClusterRole",
        None,
        "decoy",
    ));
    OfflineBackend::new(objects)
        .with_cluster_scoped(GroupVersionKind::gvk("", "v1", "Namespace"))
        .with_cluster_scoped(GroupVersionKind::gvk(
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRole",
        ))
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The program of `seed`: 16 to 143 bytes of a xorshift generator.
fn seeded_program(seed: u64) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let len = 16 + (next() % 128) as usize;
    (0..len).map(|_| next() as u8).collect()
}

/// Programs that once got past the host, each with what its one call must now be answered
/// under the narrow grants and under none (see `tests/guests/fuzz` for how the bytes read).
const REGRESSIONS: [(&str, &[u8], [&str; 2]); 3] = [
    // A merge patch of Pod `fuzz-a/status` in its own namespace: the name's `/status` reached
    // the status subresource, which the grants do not give.
    (
        "a name holding a subresource",
        &[5, 2, 1, 195, 0, 5],
        ["invalid", "invalid"],
    ),
    // A delete of ConfigMap `decoy` in namespace `<other>?`: the URL's path was the other
    // namespace's own, and the delete would have deleted it.
    (
        "a namespace ending the URL's path",
        &[6, 0, 168, 3, 0, 0],
        ["denied", "invalid"],
    ),
    // An Event about Namespace `decoy` named in the other namespace: the Event was written
    // there.
    (
        "an event about a cluster-scoped object",
        &[7, 4, 3, 3, 0, 0, 0, 1],
        ["ok", "ok"],
    ),
];

#[test]
fn programs_that_once_got_past_the_host_no_longer_do() {
    let harness = Harness::new();
    for (what, program, answers) in REGRESSIONS {
        for (profile, answer) in [Profile::Narrow, Profile::Open].into_iter().zip(answers) {
            let calls = harness.run(program, profile);
            let got: Vec<&str> = calls.iter().map(Call::answer).collect();
            assert_eq!(got, [answer], "{what} under {profile:?}");
        }
    }
}

#[test]
fn random_programs_keep_the_contract() {
    let harness = std::panic::AssertUnwindSafe(Harness::new());
    let start = Instant::now();
    // Programs long enough for sequences of calls on the same objects.
    let programs = bolero::generator::produce::<Vec<u8>>()
        .with()
        .len(16usize..=512);
    bolero::check!()
        .with_generator(programs)
        .with_test_time(test_time(TEST_TIME))
        .for_each(|program: &Vec<u8>| {
            harness.run(program, Profile::Narrow);
            harness.run(program, Profile::Open);
        });
    eprintln!(
        "contract: {} program runs, {} host calls in {:.1?}",
        harness.programs.load(Ordering::Relaxed),
        harness.calls.load(Ordering::Relaxed),
        start.elapsed()
    );
}

#[test]
fn seeded_programs_reach_every_import_and_every_answer() {
    let harness = Harness::new();
    let mut answers: BTreeMap<(String, String), usize> = BTreeMap::new();
    for seed in 0..300 {
        let program = seeded_program(seed);
        for profile in [Profile::Narrow, Profile::Open] {
            for call in harness.run(&program, profile) {
                *answers
                    .entry((call.op.clone(), call.answer().into()))
                    .or_default() += 1;
            }
        }
    }
    let answered = |op: &str, answer: &str| answers.contains_key(&(op.into(), answer.into()));
    for op in OPS {
        let success = match op {
            "get" => "some",
            "list" => "items",
            _ => "ok",
        };
        assert!(answered(op, success), "{op} never succeeds: {answers:?}");
        if op != "log" {
            assert!(answered(op, "denied"), "{op} never denied: {answers:?}");
        }
        // A read is malformed only by its label selector.
        if !["get", "log"].contains(&op) {
            assert!(answered(op, "invalid"), "{op} never invalid: {answers:?}");
        }
    }
    for op in ["apply", "apply-status", "patch", "delete"] {
        assert!(
            answered(op, "api"),
            "{op} never reaches the API: {answers:?}"
        );
    }
}

/// Seeded programs run against the real control plane.
const SEEDS: u64 = 50;

/// The field manager of the fuzz guest's writes.
const MANAGER: &str = "kubewasm-fuzz";

/// The kinds the control-plane test looks at: the declared ones, and kinds the guest may not
/// write (undeclared, or cluster-scoped).
fn resources() -> [(&'static str, ApiResource); 7] {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
    use k8s_openapi::api::rbac::v1::ClusterRole;
    [
        ("ConfigMap", ApiResource::erase::<ConfigMap>(&())),
        ("Secret", ApiResource::erase::<Secret>(&())),
        ("Pod", ApiResource::erase::<Pod>(&())),
        ("ServiceAccount", ApiResource::erase::<ServiceAccount>(&())),
        ("Deployment", ApiResource::erase::<Deployment>(&())),
        ("Namespace", ApiResource::erase::<Namespace>(&())),
        ("ClusterRole", ApiResource::erase::<ClusterRole>(&())),
    ]
}

/// Objects of `resource` in `namespace`, or in all namespaces and cluster-scoped ones.
async fn list(
    client: &kube::Client,
    resource: &ApiResource,
    namespace: Option<&str>,
) -> Result<Vec<DynamicObject>> {
    let api: Api<DynamicObject> = match namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, resource),
        None => Api::all_with(client.clone(), resource),
    };
    Ok(api.list(&ListParams::default()).await?.items)
}

/// `kind namespace/name` to resourceVersion of what the guest may not write: everything of the
/// other namespace, its own ServiceAccounts and Deployments, and both namespaces.
async fn untouchable(
    client: &kube::Client,
    own: &str,
    other: &str,
) -> Result<BTreeMap<String, String>> {
    let mut versions = BTreeMap::new();
    for (kind, resource) in resources() {
        let namespaces: &[Option<&str>] = match kind {
            "Namespace" => &[None],
            "ClusterRole" => &[],
            "ServiceAccount" | "Deployment" => &[Some(own), Some(other)],
            _ => &[Some(other)],
        };
        for namespace in namespaces {
            for object in list(client, &resource, *namespace).await? {
                let meta = &object.metadata;
                let (ns, name) = (meta.namespace.as_deref(), meta.name.as_deref());
                if kind == "Namespace" && ![Some(own), Some(other)].contains(&name) {
                    continue;
                }
                let key = format!(
                    "{kind} {}/{}",
                    ns.unwrap_or_default(),
                    name.unwrap_or_default()
                );
                versions.insert(key, meta.resource_version.clone().unwrap_or_default());
            }
        }
    }
    Ok(versions)
}

/// What the guest wrote beyond its grants, from the field managers of every object: only the
/// ConfigMaps, Secrets and Pods of its own namespace, never a Pod's status, never under a field
/// manager of another name; and Events only in its namespace or, about a cluster-scoped object,
/// in `default`.
async fn beyond_grants(client: &kube::Client, own: &str) -> Result<Vec<String>> {
    let mut found = Vec::new();
    for (kind, resource) in resources() {
        for object in list(client, &resource, None).await? {
            let meta = &object.metadata;
            let at = format!(
                "{kind} {}/{}",
                meta.namespace.as_deref().unwrap_or_default(),
                meta.name.as_deref().unwrap_or_default()
            );
            for entry in meta.managed_fields.iter().flatten() {
                let manager = entry.manager.as_deref().unwrap_or_default();
                let subresource = entry.subresource.as_deref().unwrap_or_default();
                let granted = meta.namespace.as_deref() == Some(own)
                    && match kind {
                        "ConfigMap" => true,
                        "Secret" | "Pod" => subresource.is_empty(),
                        _ => false,
                    };
                if manager == MANAGER && !granted || manager.contains("intruder") {
                    found.push(format!("{at}: {manager} wrote {subresource:?}"));
                }
            }
        }
    }
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::all(client.clone());
    for event in events.list(&ListParams::default()).await?.items {
        let namespace = event.metadata.namespace.unwrap_or_default();
        if event.reporting_controller.as_deref() == Some("kubewasm.dev/fuzz")
            && ![own, "default"].contains(&namespace.as_str())
        {
            found.push(format!(
                "an Event in namespace {namespace}: {:?}",
                event.regarding
            ));
        }
    }
    Ok(found)
}

/// Creates the objects the guest may not write, and a Pod of its own namespace whose status it
/// may not write, once both namespaces have the ServiceAccount the control plane adds by itself.
async fn decoys(client: &kube::Client, own: &str, other: &str) -> Result<()> {
    for namespace in [own, other] {
        let accounts =
            Api::<DynamicObject>::namespaced_with(client.clone(), namespace, &resources()[3].1);
        eventually("the namespace's default ServiceAccount", WAIT, || async {
            Ok(accounts.get_opt("default").await?.map(drop))
        })
        .await?;
    }
    let pod = |name: &str| {
        json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": { "name": name },
            "spec": { "containers": [{ "name": "c", "image": "registry.k8s.io/pause:3.10" }] },
        })
    };
    let object = |kind: &str, name: &str| {
        let metadata = json!({ "name": name });
        json!({ "apiVersion": "v1", "kind": kind, "metadata": metadata })
    };
    let created = [
        (own, 3, object("ServiceAccount", "decoy")),
        (own, 2, pod("fuzz-a")),
        (other, 0, object("ConfigMap", "decoy")),
        (other, 0, object("ConfigMap", "fuzz-a")),
        (other, 1, object("Secret", "decoy")),
        (other, 1, object("Secret", "fuzz-a")),
        (other, 2, pod("decoy")),
        (other, 3, object("ServiceAccount", "decoy")),
    ];
    for (namespace, resource, object) in created {
        let api = Api::<DynamicObject>::namespaced_with(
            client.clone(),
            namespace,
            &resources()[resource].1,
        );
        let object: DynamicObject = serde_json::from_value(object)?;
        api.create(&PostParams::default(), &object)
            .await
            .with_context(|| format!("creating {:?} in {namespace}", object.metadata.name))?;
    }
    Ok(())
}

/// Creates a ConfigMap for the fuzz guest in `config_maps` for each of `programs` (name, bytes)
/// with `other` as the other namespace, and returns the data of each one's outcome once all are
/// there.
async fn run_programs(
    config_maps: &Api<ConfigMap>,
    programs: &[(String, Vec<u8>)],
    other: &str,
) -> Result<Vec<BTreeMap<String, String>>> {
    for (name, program) in programs {
        let program: ConfigMap = serde_json::from_value(json!({
            "metadata": { "name": name, "labels": { "kubewasm.dev/fixture": "fuzz" } },
            "data": { "program": to_hex(program), "other": other },
        }))?;
        config_maps.create(&PostParams::default(), &program).await?;
    }
    eventually("every program's outcome", WAIT, || async {
        let mut outcomes = Vec::new();
        for (name, _) in programs {
            match config_maps.get_opt(&format!("{name}-outcome")).await? {
                Some(outcome) => outcomes.push(outcome.data.unwrap_or_default()),
                None => return Ok(None),
            }
        }
        Ok(Some(outcomes))
    })
    .await
}

#[tokio::test]
async fn seeded_programs_on_the_control_plane_stay_within_the_grants() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let own = plane.namespace("fuzz").await?;
    let open = plane.namespace("open").await?;
    let other = plane.namespace("decoy").await?;
    let (own, open, other) = (own.name(), open.name(), other.name());
    decoys(&client, own, other).await?;
    let before = untouchable(&client, own, other).await?;
    // Beside it, the same guest with no grants, in a namespace of its own, runs the regression
    // programs: no grant stops them from reaching the other namespace but the host's checks.
    let dir = tempfile::tempdir()?;
    let unbound = dir.path().join("fuzz-open.wasm");
    std::fs::copy(guest_wasm("fuzz"), &unbound)?;
    let config = format!(
        "modules:\n  - path: {}\n    namespaces: [{own}]\n{}  - path: {}\n    name: fuzz-open\n    \
         namespaces: [{open}]\n",
        guest_wasm("fuzz").display(),
        grants_yaml(own),
        unbound.display(),
    );
    let [port] = free_ports()?;
    let probes = format!("127.0.0.1:{port}");
    let args = ["--health-probe-bind-address", probes.as_str()];
    let regressions: Vec<(String, Vec<u8>)> = REGRESSIONS
        .iter()
        .enumerate()
        .map(|(i, (_, program, _))| (format!("regression-{i}"), program.to_vec()))
        .collect();
    let programs: Vec<(String, Vec<u8>)> = (0..SEEDS)
        .map(|seed| (format!("program-{seed}"), seeded_program(seed)))
        .chain(regressions.iter().cloned())
        .collect();
    let mut totals: BTreeMap<String, u64> = BTreeMap::new();
    let mut took = Duration::ZERO;
    with_host_args(own, &config, &args, async |host| {
        let start = Instant::now();
        let in_open = Api::<ConfigMap>::namespaced(client.clone(), open);
        let unbound = run_programs(&in_open, &regressions, other).await?;
        let outcomes =
            run_programs(&Api::namespaced(client.clone(), own), &programs, other).await?;
        took = start.elapsed();
        for (key, count) in outcomes.iter().chain(&unbound).flatten() {
            if key != "digest" {
                *totals.entry(key.clone()).or_default() += count.parse::<u64>()?;
            }
        }
        let (status, body) = http_get(&probes, "/readyz").await?;
        ensure!(status == 200, "/readyz answers {status}: {body}");
        ensure!(
            !host.log().contains("panicked"),
            "the host's log shows a panic"
        );
        Ok(())
    })
    .await?;
    let after = untouchable(&client, own, other).await?;
    let changed: Vec<_> = before
        .iter()
        .filter(|(key, version)| after.get(*key) != Some(version))
        .chain(after.iter().filter(|(key, _)| !before.contains_key(*key)))
        .collect();
    ensure!(
        changed.is_empty(),
        "objects the guest may not write changed: {changed:?}"
    );
    let beyond = beyond_grants(&client, own).await?;
    ensure!(beyond.is_empty(), "writes beyond the grants: {beyond:#?}");
    eprintln!(
        "{} programs ({SEEDS} seeded) with narrow grants and {} without reconciled on the control \
         plane in {took:.1?}: {totals:?}",
        programs.len(),
        regressions.len()
    );
    Ok(())
}
