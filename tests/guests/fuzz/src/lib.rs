//! Test fixture for fuzzing the contract: reconciling a ConfigMap labelled
//! `kubewasm.dev/fixture=fuzz`, it runs the program in the ConfigMap's `data.program` (hex).
//! Each step of a program is one host call, chosen by the program's next byte, with arguments
//! drawn from the bytes after it: kinds declared and not, valid and malformed; namespaces and
//! names valid and not (empty, `..`, `/`, `?`, `#`, `%`, NUL, unicode, too long); objects valid,
//! broken, not objects, huge and deeply nested; patches of both types; label selectors of every
//! shape; events and log lines of every size. `data.other` names a namespace that is not the
//! ConfigMap's own.
//!
//! Every call is logged as one line, message `call`, with the fields `op`, `kind`
//! (`group|version|kind`), `ns` (`-` for none), `name`, `form` and `out`. `form` is `good` when
//! the request is well-formed (the host must not refuse it as `invalid`, nor deny it if the kind
//! and namespace are granted), `bad` when the host must refuse it as `invalid` or `denied`,
//! `other` when either may be right, and `opaque` when the object sent is not the one the line
//! names (its kind, namespace and name say nothing). `out` is `ok`, `some` or `none` (get),
//! `items` (list), `denied`, `invalid`, `api:CODE` or `unavailable`. After the program the guest
//! logs `program done` with the number of calls and applies the ConfigMap `<name>-outcome` (not
//! owned) with the program's digest and the count of each `op.out`; a program whose outcome is
//! already there with its digest is not run again. It never traps on purpose, and returns
//! `done` unless applying the outcome fails.

use std::collections::BTreeMap;

use kubewasm_guest::bindings::kubewasm::controller::types::{self, Gvk};
use kubewasm_guest::bindings::kubewasm::controller::{cache, events, log, writes};
use kubewasm_guest::prelude::*;
use serde_json::{Value, json};

/// The most host calls one program makes.
pub const MAX_CALLS: usize = 100;

/// Kinds a program names: the ones the guest declares first, then undeclared and malformed ones.
pub const KINDS: &[(&str, &str, &str)] = &[
    ("", "v1", "ConfigMap"),
    ("", "v1", "Secret"),
    ("", "v1", "Pod"),
    ("", "v1", "ServiceAccount"),
    ("", "v1", "Namespace"),
    ("apps", "v1", "Deployment"),
    ("rbac.authorization.k8s.io", "v1", "ClusterRole"),
    ("", "v2", "ConfigMap"),
    ("core", "v1", "ConfigMap"),
    ("", "v1", "configmap"),
    ("", "", "ConfigMap"),
    ("", "v1", ""),
    ("kubewasm.dev", "v1alpha1", "PodSet"),
    ("", "v1", "ConfigMap\0"),
    ("", "v1", "ConfigMäp"),
    ("../..", "v1", "Secret"),
    ("", "v1", "Secret/status"),
];

/// How many of [`KINDS`] the guest declares.
const DECLARED: usize = 5;

/// Whether `kind` is one of [`KINDS`] that are cluster-scoped: the host ignores the namespace a
/// call names for it.
fn cluster_scoped(kind: &Gvk) -> bool {
    kind.version == "v1" && ["Namespace", "ClusterRole"].contains(&kind.kind.as_str())
}

/// The fixture controller.
pub struct Fuzz;

impl Controller for Fuzz {
    fn metadata() -> Metadata {
        let kind = |index: usize| {
            let (group, version, kind) = KINDS[index];
            Gvk::new(group, version, kind)
        };
        Metadata::new(
            "fuzz",
            Selection::new(kind(0)).with_label_selector("kubewasm.dev/fixture=fuzz"),
        )
        .owns(kind(1))
        .owns(kind(2))
        .owns(kind(3))
        .watch(kind(4), Mapping::Label("kubewasm.dev/fuzz".into()))
        .max_concurrency(4)
    }

    fn reconcile(req: Request) -> Result<Action, ReconcileError> {
        let Some(object) = &req.object else {
            return Ok(Action::Done);
        };
        let Some(program) = object["data"]["program"].as_str().and_then(unhex) else {
            return Ok(Action::Done);
        };
        let own = req.namespace().unwrap_or_default().to_owned();
        let outcome = format!("{}-outcome", req.name());
        let digest = format!("{:016x}", fnv1a(&program));
        let config_map = Gvk::new("", "v1", "ConfigMap");
        let done = cache::get(&config_map, Some(&own), &outcome).ok().flatten();
        let done: Option<Value> = done.and_then(|text| serde_json::from_str(&text).ok());
        if done.is_some_and(|o| o["data"]["digest"] == digest.as_str()) {
            return Ok(Action::Done);
        }
        let text = |field: &str| object["metadata"][field].as_str().unwrap_or_default();
        let mut run = Run {
            program: Program::new(&program),
            name: req.name().to_owned(),
            other: object["data"]["other"]
                .as_str()
                .unwrap_or("other")
                .to_owned(),
            uid: text("uid").to_owned(),
            version: text("resourceVersion").to_owned(),
            own,
            counts: BTreeMap::new(),
            calls: 0,
        };
        while !run.program.done() && run.calls < MAX_CALLS {
            run.step();
        }
        let calls = run.calls.to_string();
        kubewasm_guest::log::info("program done", &[("calls", &calls)]);
        let mut data: BTreeMap<String, String> = run
            .counts
            .iter()
            .map(|(key, count)| (key.clone(), count.to_string()))
            .collect();
        data.insert("digest".into(), digest);
        data.insert("calls".into(), calls);
        let summary = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": { "name": outcome }, "data": data,
        });
        kubewasm_guest::apply(&summary, ApplyOptions::not_owned())
            .map_err(|e| ReconcileError::from(e).context("applying the outcome"))?;
        Ok(Action::Done)
    }
}

kubewasm_guest::export_controller!(Fuzz);

/// Bytes of hex text; `None` if it is not hex.
fn unhex(text: &str) -> Option<Vec<u8>> {
    let digits = text.trim().as_bytes();
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok())
        .collect()
}

/// FNV-1a, 64 bits: the digest that tells one program from another.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A program's bytes, read from the front; reading past the end gives zeros.
struct Program<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Program<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, at: 0 }
    }

    fn done(&self) -> bool {
        self.at >= self.bytes.len()
    }

    fn byte(&mut self) -> u8 {
        let byte = self.bytes.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        byte
    }

    fn below(&mut self, n: usize) -> usize {
        usize::from(self.byte()) % n
    }

    fn pick<T: Clone>(&mut self, table: &[T]) -> T {
        table[self.below(table.len())].clone()
    }

    /// Up to 31 of the next bytes as text, invalid UTF-8 replaced.
    fn raw(&mut self) -> String {
        let len = self.below(32);
        let start = self.at.min(self.bytes.len());
        let end = (self.at + len).min(self.bytes.len());
        self.at += len;
        String::from_utf8_lossy(&self.bytes[start..end]).into_owned()
    }

    /// 0 to 2 MiB in steps of 8 KiB.
    fn size(&mut self) -> usize {
        usize::from(self.byte()) << 13
    }
}

/// How a request is formed; see the crate documentation.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    Good,
    Bad,
    Other,
    Opaque,
}

impl Form {
    fn as_str(self) -> &'static str {
        match self {
            Form::Good => "good",
            Form::Bad => "bad",
            Form::Other => "other",
            Form::Opaque => "opaque",
        }
    }

    /// `Good` if every part is good, else `Bad` if any part is bad, else `Other`.
    fn all(parts: &[Form]) -> Form {
        if parts.contains(&Form::Bad) {
            Form::Bad
        } else if parts.contains(&Form::Other) {
            Form::Other
        } else {
            Form::Good
        }
    }
}

/// One run of a program.
struct Run<'a> {
    program: Program<'a>,
    /// The reconciled ConfigMap's namespace and name, uid and resourceVersion.
    own: String,
    name: String,
    uid: String,
    version: String,
    /// A namespace other than `own`.
    other: String,
    counts: BTreeMap<String, u32>,
    calls: usize,
}

impl Run<'_> {
    fn step(&mut self) {
        match self.program.below(9) {
            0 => self.get(),
            1 => self.list(),
            2 | 3 => self.apply(),
            4 => self.apply_status(),
            5 => self.patch(),
            6 => self.delete(),
            7 => self.event(),
            _ => self.log(),
        }
    }

    /// A kind: one the guest declares three times in four, else any.
    fn kind(&mut self) -> Gvk {
        let byte = usize::from(self.program.byte());
        let index = if byte < 192 {
            byte % DECLARED
        } else {
            byte % (KINDS.len() + 1)
        };
        match KINDS.get(index) {
            Some((group, version, kind)) => Gvk::new(*group, *version, *kind),
            None => Gvk::new("", "v1", "K".repeat(300)),
        }
    }

    /// A namespace for `kind`: a valid one (or none) five times in eight, else a malformed one,
    /// which is good for a cluster-scoped kind all the same.
    fn namespace(&mut self, kind: &Gvk) -> (Option<String>, Form) {
        let own = self.own.clone();
        let byte = usize::from(self.program.byte());
        if byte < 160 {
            let good = [
                None,
                Some(own.clone()),
                Some(own),
                Some(self.other.clone()),
                Some("default".into()),
                Some("kube-system".into()),
            ];
            return (good[byte % good.len()].clone(), Form::Good);
        }
        let bad = [
            String::new(),
            own.to_uppercase(),
            "..".into(),
            format!("{own}/configmaps/fuzz-a"),
            format!("{own}?dryRun=All"),
            format!("{own}#x"),
            format!("{own}%2Fx"),
            format!("{own}\0"),
            format!("{own}ñ"),
            "n".repeat(300),
            format!(" {own}"),
            format!("{own}/../{}", self.other),
            format!("{}?", self.other),
        ];
        let form = if cluster_scoped(kind) {
            Form::Good
        } else {
            Form::Bad
        };
        (Some(bad[byte % bad.len()].clone()), form)
    }

    /// A name: a valid one three times in four, else one that no URL path segment can carry.
    fn name(&mut self) -> (String, Form) {
        let byte = usize::from(self.program.byte());
        if byte < 192 {
            let good = [
                self.name.clone(),
                "fuzz-a".into(),
                "fuzz-b".into(),
                "decoy".into(),
                "UPPER".into(),
                "x".repeat(253),
            ];
            return (good[byte % good.len()].clone(), Form::Good);
        }
        let bad = [
            "",
            ".",
            "..",
            "fuzz-a/status",
            "fuzz-a?fieldManager=intruder",
            "fuzz-a#x",
            "fuzz-a%2Fstatus",
            "n\0ul",
            "ünï",
            "../decoy",
            " fuzz-a",
            "fuzz-a\n",
            &"x".repeat(254),
        ];
        (bad[byte % bad.len()].into(), Form::Bad)
    }

    /// Logs the answer to one call and counts it.
    fn record<T>(
        &mut self,
        op: &str,
        (kind, ns, name): (&Gvk, Option<&str>, &str),
        form: Form,
        answer: Result<T, types::Error>,
        ok: impl FnOnce(T) -> String,
    ) {
        let out = match answer {
            Ok(value) => ok(value),
            Err(types::Error::Api(status)) => format!("api:{}", status.code),
            Err(types::Error::Denied(_)) => "denied".into(),
            Err(types::Error::Invalid(_)) => "invalid".into(),
            Err(types::Error::Unavailable(_)) => "unavailable".into(),
        };
        let class = out.split(':').next().unwrap_or_default();
        *self.counts.entry(format!("{op}.{class}")).or_default() += 1;
        self.calls += 1;
        let kind = format!("{}|{}|{}", kind.group, kind.version, kind.kind);
        let fields = [
            ("op", op),
            ("kind", &kind),
            ("ns", ns.unwrap_or("-")),
            ("name", name),
            ("form", form.as_str()),
            ("out", &out),
        ];
        kubewasm_guest::log::info("call", &fields);
    }

    fn get(&mut self) {
        let kind = self.kind();
        let (ns, _) = self.namespace(&kind);
        let (name, _) = self.name();
        let answer = cache::get(&kind, ns.as_deref(), &name);
        let found = |o: Option<String>| if o.is_some() { "some" } else { "none" }.into();
        self.record(
            "get",
            (&kind, ns.as_deref(), &name),
            Form::Good,
            answer,
            found,
        );
    }

    fn list(&mut self) {
        let kind = self.kind();
        let (ns, _) = self.namespace(&kind);
        let (selector, form) = self.selector();
        let answer = cache::list(&kind, ns.as_deref(), selector.as_deref());
        let target = (&kind, ns.as_deref(), selector.as_deref().unwrap_or("-"));
        self.record("list", target, form, answer, |_| "items".into());
    }

    /// A label selector: valid ones, malformed ones, huge ones and raw bytes.
    fn selector(&mut self) -> (Option<String>, Form) {
        let good = |s: &str| (Some(s.to_owned()), Form::Good);
        let other = |s: String| (Some(s), Form::Other);
        match self.program.below(16) {
            0 => (None, Form::Good),
            1 => good(""),
            2 => good("app=web"),
            3 => good("app in (a,b),!legacy"),
            4 => good("kubewasm.dev/fixture=fuzz"),
            5 => good("app!=web,tier"),
            6 => other("=".into()),
            7 => other("a=b=c".into()),
            8 => other("!!".into()),
            9 => other("a in (b".into()),
            10 => other("é=ü".into()),
            11 => other("a\0=b".into()),
            12 => other(",".repeat(self.program.size() / 8)),
            13 => other(format!("a={}", "v".repeat(self.program.size()))),
            14 => other(format!("{}=v", "k/".repeat(self.program.size() / 64))),
            _ => other(self.program.raw()),
        }
    }

    /// An object to apply (or, with `status`, its status): its kind, namespace and name, its
    /// text and its form.
    fn object(&mut self, status: bool) -> (Gvk, Option<String>, String, String, Form) {
        let kind = self.kind();
        let (ns, ns_form) = self.namespace(&kind);
        let (name, name_form) = self.name();
        let api_version = match kind.group.as_str() {
            "" => kind.version.clone(),
            group => format!("{group}/{}", kind.version),
        };
        let mut value = json!({
            "apiVersion": api_version, "kind": kind.kind, "metadata": { "name": name },
        });
        if let Some(ns) = &ns {
            value["metadata"]["namespace"] = ns.as_str().into();
        }
        let calls = self.calls.to_string();
        match (status, kind.kind.as_str()) {
            (true, _) => {
                let condition = json!({ "type": "Fuzzed", "status": "True" });
                value["status"] = json!({ "conditions": [condition] })
            }
            (false, "ConfigMap") => value["data"] = json!({ "fuzz": calls }),
            (false, "Secret") => value["stringData"] = json!({ "fuzz": calls }),
            (false, "Pod") => {
                let container = json!({ "name": "c", "image": "registry.k8s.io/pause:3.10" });
                value["spec"] = json!({ "containers": [container] })
            }
            _ => {}
        }
        // An apiVersion that does not parse may be refused as `invalid` before the kind is
        // looked at.
        let malformed = kind.version.is_empty() || kind.kind.is_empty() || kind.group.contains('/');
        let kind_form = if malformed { Form::Other } else { Form::Good };
        let address = Form::all(&[kind_form, ns_form, name_form]);
        let (text, form) = match self.program.below(16) {
            0..=5 => (value.to_string(), address),
            6 => {
                let text = value.to_string();
                (
                    text[..text.floor_char_boundary(text.len() / 2)].to_owned(),
                    Form::Bad,
                )
            }
            7 => {
                let texts = ["[]", "null", "\"x\"", "42", "true", ""];
                (self.program.pick(&texts).to_owned(), Form::Bad)
            }
            8 => {
                value["apiVersion"].take();
                (value.to_string(), Form::Bad)
            }
            9 => {
                value["kind"] = 5.into();
                (value.to_string(), Form::Bad)
            }
            10 => {
                let junk = [
                    json!("x"),
                    json!({ "name": 5 }),
                    json!({ "name": "" }),
                    json!({}),
                ];
                value["metadata"] = self.program.pick(&junk);
                (value.to_string(), Form::Bad)
            }
            11 => {
                value["data"] = json!({ "huge": "x".repeat(self.program.size()) });
                (value.to_string(), Form::Other)
            }
            12 => (with_deep(&value, self.program.below(256) * 4), Form::Other),
            13 => {
                let junk = [json!(5), json!("x"), json!([{ "uid": "u" }]), json!({})];
                value["metadata"]["ownerReferences"] = self.program.pick(&junk);
                (value.to_string(), Form::Other)
            }
            14 => {
                let versions = ["", "/", "v1/", "/v1", "a/b/c", "V1", "v1 ", "apps/v1/x"];
                value["apiVersion"] = self.program.pick(&versions).into();
                (value.to_string(), Form::Opaque)
            }
            _ => {
                // A key twice, a null namespace, a lone surrogate, a number beyond f64, a BOM.
                let config_map = r#""apiVersion":"v1","kind":"ConfigMap""#;
                let odd = [
                    self.program.raw(),
                    format!(r#"{{{config_map},"kind":"Secret","metadata":{{"name":"fuzz-a"}}}}"#),
                    format!(r#"{{{config_map},"metadata":{{"name":"a","namespace":null}}}}"#),
                    format!(r#"{{{config_map},"metadata":{{"name":"\ud800"}}}}"#),
                    format!(r#"{{{config_map},"metadata":{{"name":"a"}},"n":1e400}}"#),
                    format!("\u{feff}{value}"),
                ];
                (self.program.pick(&odd), Form::Opaque)
            }
        };
        (kind, ns, name, text, form)
    }

    fn apply(&mut self) {
        let (kind, ns, name, text, form) = self.object(false);
        let flags = self.program.byte();
        let options = writes::ApplyOptions {
            owned: flags & 1 != 0,
            force: flags & 2 != 0,
            adopt: flags & 4 != 0,
        };
        let answer = writes::apply(&text, options);
        self.record("apply", (&kind, ns.as_deref(), &name), form, answer, ok);
    }

    fn apply_status(&mut self) {
        let (kind, ns, name, text, form) = self.object(true);
        let options = writes::StatusOptions {
            force: self.program.byte() & 1 != 0,
        };
        let answer = writes::apply_status(&text, options);
        self.record(
            "apply-status",
            (&kind, ns.as_deref(), &name),
            form,
            answer,
            ok,
        );
    }

    fn patch(&mut self) {
        let kind = self.kind();
        let (ns, ns_form) = self.namespace(&kind);
        let (name, name_form) = self.name();
        let patch_type = if self.program.byte() & 1 == 0 {
            writes::PatchType::Merge
        } else {
            writes::PatchType::Json
        };
        let other = self.other.clone();
        // Bodies 0 to 6 are merge patches, 7 to 11 JSON patches: good only as their own type.
        let shape = self.program.below(17);
        let (text, body) = match shape {
            0 => (json!({ "data": { "fuzz": "p" } }).to_string(), Form::Good),
            1 => (
                json!({ "metadata": { "labels": { "fuzz": "p" } } }).to_string(),
                Form::Good,
            ),
            2 => (
                json!({ "metadata": { "name": "renamed" } }).to_string(),
                Form::Good,
            ),
            3 => (
                json!({ "metadata": { "namespace": other } }).to_string(),
                Form::Good,
            ),
            4 => (
                json!({ "metadata": { "resourceVersion": "1" } }).to_string(),
                Form::Good,
            ),
            5 => (
                json!({ "status": { "conditions": [{ "type": "Fuzzed", "status": "True" }] } })
                    .to_string(),
                Form::Good,
            ),
            6 => (
                json!({ "apiVersion": "v1", "kind": "Secret" }).to_string(),
                Form::Good,
            ),
            7 => {
                let add =
                    json!([{ "op": "add", "path": "/metadata/labels", "value": { "fuzz": "j" } }]);
                (add.to_string(), Form::Good)
            }
            8 => (
                json!([{ "op": "remove", "path": "/metadata" }]).to_string(),
                Form::Good,
            ),
            9 => {
                let replace =
                    json!([{ "op": "replace", "path": "/metadata/namespace", "value": other }]);
                (replace.to_string(), Form::Good)
            }
            10 => {
                let test = json!([{ "op": "test", "path": "/data/none", "value": 1 }]);
                (test.to_string(), Form::Good)
            }
            11 => {
                let into_itself =
                    json!([{ "op": "move", "from": "/metadata", "path": "/metadata/x" }]);
                (into_itself.to_string(), Form::Good)
            }
            12 => {
                let odd = ["[{\"op\":\"bogus\"}]", "{}", "[]", "null", "\"x\"", "5"];
                (self.program.pick(&odd).to_owned(), Form::Other)
            }
            13 => ("{\"data\":".to_owned(), Form::Bad),
            14 => {
                let huge = json!({ "data": { "huge": "x".repeat(self.program.size()) } });
                (huge.to_string(), Form::Other)
            }
            15 => (deep(self.program.below(256) * 4), Form::Other),
            _ => (self.program.raw(), Form::Other),
        };
        let json = matches!(patch_type, writes::PatchType::Json);
        let body = match shape {
            0..=6 if json => Form::Other,
            7..=11 if !json => Form::Other,
            _ => body,
        };
        let form = Form::all(&[ns_form, name_form, body]);
        let answer = writes::patch(&kind, ns.as_deref(), &name, patch_type, &text);
        self.record("patch", (&kind, ns.as_deref(), &name), form, answer, ok);
    }

    fn delete(&mut self) {
        let kind = self.kind();
        let (ns, ns_form) = self.namespace(&kind);
        let (name, name_form) = self.name();
        let uids = [
            None,
            Some(String::new()),
            Some("bogus".into()),
            Some(self.uid.clone()),
        ];
        let versions = [
            None,
            Some("1".into()),
            Some("x".into()),
            Some(self.version.clone()),
        ];
        let preconditions = writes::Preconditions {
            uid: self.program.pick(&uids),
            resource_version: self.program.pick(&versions),
        };
        let form = Form::all(&[ns_form, name_form]);
        let answer = writes::delete(&kind, ns.as_deref(), &name, &preconditions);
        self.record(
            "delete",
            (&kind, ns.as_deref(), &name),
            form,
            answer,
            |()| "ok".into(),
        );
    }

    fn event(&mut self) {
        let kind = self.kind();
        let (ns, ns_form) = self.namespace(&kind);
        let (name, name_form) = self.name();
        let event_type = if self.program.byte() & 1 == 0 {
            events::EventType::Normal
        } else {
            events::EventType::Warning
        };
        let reasons = [
            "Fuzzed".to_owned(),
            String::new(),
            "R".repeat(200),
            "Ré\0son".into(),
        ];
        let actions = ["Fuzz".to_owned(), String::new(), "A".repeat(200)];
        let reason = self.program.pick(&reasons);
        let action = self.program.pick(&actions);
        let note = match self.program.below(4) {
            0 => String::new(),
            1 => "a note".into(),
            2 => "n".repeat(2000),
            _ => "x".repeat(self.program.size()),
        };
        // The host refuses what the API server would: an empty or long reason or action, a long
        // note. It sends a reason with NUL, which the API server may refuse.
        let sized = |s: &str| (1..=128).contains(&s.len());
        let fields = if !sized(&reason) || !sized(&action) || note.len() > 1024 {
            Form::Bad
        } else if reason.contains('\0') {
            Form::Other
        } else {
            Form::Good
        };
        let form = Form::all(&[ns_form, name_form, fields]);
        let event = events::Event {
            regarding_kind: kind.clone(),
            regarding_namespace: ns.clone(),
            regarding_name: name.clone(),
            event_type,
            reason,
            action,
            note,
        };
        let answer = events::record_event(&event);
        self.record("event", (&kind, ns.as_deref(), &name), form, answer, |()| {
            "ok".into()
        });
    }

    /// A line into the host's log: empty, with NUL or unicode, or up to 128 KiB.
    fn log(&mut self) {
        let levels = [
            log::Level::Trace,
            log::Level::Debug,
            log::Level::Info,
            log::Level::Warn,
            log::Level::Error,
        ];
        let level = self.program.pick(&levels);
        let texts = [String::new(), "hello".into(), "m\0".into(), "ünï".into()];
        let message = match self.program.below(5) {
            4 => "x".repeat(self.program.size() / 16),
            i => texts[i].clone(),
        };
        let fields: Vec<(String, String)> = (0..self.program.below(4))
            .map(|_| (self.program.pick(&texts), self.program.raw()))
            .collect();
        log::log(level, &message, &fields);
        let target = (&Gvk::new("", "", ""), None, "");
        self.record("log", target, Form::Good, Ok::<_, types::Error>(()), |()| {
            "ok".into()
        });
    }
}

fn ok(_: String) -> String {
    "ok".into()
}

/// `depth` nested JSON arrays.
fn deep(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

/// `object` with a field `deep` of `depth` nested arrays.
fn with_deep(object: &Value, depth: usize) -> String {
    let text = object.to_string();
    format!("{},\"deep\":{}}}", &text[..text.len() - 1], deep(depth))
}
