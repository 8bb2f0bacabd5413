//! What a guest may do: the operator's grants (RBAC-like rules in the configuration), narrowed by
//! what the module declares.
//!
//! A module is loaded only if its grants cover what its declaration needs: `get`, `list` and
//! `watch` on its primary, owned and watched kinds in the namespaces it runs in, and `patch` on
//! its primary kind when it declares a finalizer. Every host call is checked again when it is
//! made: reads need `get` or `list`, `apply` needs `create` and `patch` (server-side apply
//! creates or updates), `apply-status` needs `patch` on the `status` subresource, `patch` needs
//! `patch`, `delete` needs `delete`. An event about an object needs `get` on that object's kind
//! in its namespace. A cluster-scoped kind is checked for all namespaces, whatever namespace a
//! call names, so a grant restricted to namespaces never covers it.
//!
//! Resources are named by their plural, derived from the kind as the API server does for
//! regular nouns (`PodSet` → `podsets`, `Policy` → `policies`); grant `*` for a kind with an
//! irregular plural.

use std::fmt;

use kube::api::{ApiResource, GroupVersionKind};

use crate::config::{Grant, ModuleConfig, Verb};
use crate::wasm::declaration::Metadata;

/// A permission a module needs: verbs on a resource in a namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// API group (`""` for the core group).
    pub api_group: String,
    /// Plural resource name, with `/subresource` where one is needed.
    pub resource: String,
    /// The verbs needed.
    pub verbs: Vec<Verb>,
    /// The namespace, or `None` for every namespace (and cluster-scoped objects).
    pub namespace: Option<String>,
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verbs: Vec<_> = self.verbs.iter().map(|v| v.as_str()).collect();
        let group = if self.api_group.is_empty() {
            "core"
        } else {
            &self.api_group
        };
        write!(f, "{} {} ({group}) in ", verbs.join(","), self.resource)?;
        match &self.namespace {
            Some(namespace) => write!(f, "namespace {namespace}"),
            None => f.write_str("all namespaces"),
        }
    }
}

/// The plural resource name of `kind`.
pub fn resource_of(kind: &GroupVersionKind) -> String {
    ApiResource::from_gvk(kind).plural
}

/// What a module needs to run in `namespaces` (empty: the namespace it declares, or all).
pub fn required(metadata: &Metadata, namespaces: &[String]) -> Vec<Requirement> {
    let own_namespaces = metadata.namespaces(namespaces);
    let read = vec![Verb::Get, Verb::List, Verb::Watch];
    let mut needs = Vec::new();
    let mut need = |kind: &GroupVersionKind, verbs: &[Verb], namespace: &Option<String>| {
        let requirement = Requirement {
            api_group: kind.group.clone(),
            resource: resource_of(kind),
            verbs: verbs.to_vec(),
            namespace: namespace.clone(),
        };
        if !needs.contains(&requirement) {
            needs.push(requirement);
        }
    };
    for namespace in &own_namespaces {
        let mut primary = read.clone();
        if metadata.finalizer.is_some() {
            primary.push(Verb::Patch);
        }
        need(&metadata.primary.kind, &primary, namespace);
        for kind in &metadata.owns {
            need(kind, &read, namespace);
        }
    }
    for watch in &metadata.watches {
        need(&watch.selection.kind, &read, &watch.selection.namespace);
    }
    needs
}

/// The operator's grants of one module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permissions {
    grants: Option<Vec<Grant>>,
}

impl Permissions {
    /// `None`: no grants configured, the module may do anything on the kinds it declares.
    pub fn new(grants: Option<Vec<Grant>>) -> Self {
        Self { grants }
    }

    /// Whether the grants allow `verb` on `kind` (or its `subresource`) in `namespace`.
    pub fn allows(
        &self,
        kind: &GroupVersionKind,
        subresource: Option<&str>,
        verb: Verb,
        namespace: Option<&str>,
    ) -> bool {
        let Some(grants) = &self.grants else {
            return true;
        };
        let mut resource = resource_of(kind);
        if let Some(subresource) = subresource {
            resource = format!("{resource}/{subresource}");
        }
        grants
            .iter()
            .any(|g| g.permits(&kind.group, &resource, verb, namespace))
    }

    /// The part of `required` the grants do not allow, one requirement per resource and
    /// namespace with only the missing verbs.
    pub fn missing(&self, required: &[Requirement]) -> Vec<Requirement> {
        let Some(grants) = &self.grants else {
            return Vec::new();
        };
        required
            .iter()
            .filter_map(|r| {
                let verbs: Vec<Verb> = r
                    .verbs
                    .iter()
                    .copied()
                    .filter(|&verb| {
                        !grants.iter().any(|g| {
                            g.permits(&r.api_group, &r.resource, verb, r.namespace.as_deref())
                        })
                    })
                    .collect();
                (!verbs.is_empty()).then(|| Requirement { verbs, ..r.clone() })
            })
            .collect()
    }
}

/// What a module declaring `metadata` needs the API server to allow, run as `entry` configures:
/// the reads of [`required`], then its [`writes`].
pub fn needs(metadata: &Metadata, entry: &ModuleConfig) -> Vec<Requirement> {
    let mut needs = required(metadata, &entry.namespaces);
    needs.extend(writes(metadata, entry));
    needs
}

/// `needs` with those on the `cluster_scoped` kinds asked of every namespace: an object of such
/// a kind is in no namespace, and a review that names one would be answered by the rules of
/// that namespace.
pub fn cluster_wide(
    needs: Vec<Requirement>,
    cluster_scoped: &[GroupVersionKind],
) -> Vec<Requirement> {
    let scoped: Vec<(String, String)> = cluster_scoped
        .iter()
        .map(|k| (k.group.clone(), resource_of(k)))
        .collect();
    let mut wide: Vec<Requirement> = Vec::new();
    for mut need in needs {
        let base = need.resource.split('/').next().unwrap_or_default();
        if scoped
            .iter()
            .any(|(g, r)| *g == need.api_group && r == base)
        {
            need.namespace = None;
        }
        match wide.iter_mut().find(|w| {
            w.api_group == need.api_group
                && w.resource == need.resource
                && w.namespace == need.namespace
        }) {
            Some(same) => {
                for verb in need.verbs {
                    if !same.verbs.contains(&verb) {
                        same.verbs.push(verb);
                    }
                }
            }
            None => wide.push(need),
        }
    }
    wide
}

/// What a sharded host needs besides [`needs`] for a module declaring `metadata` in
/// `namespaces`: `patch` on its primary and owned kinds, whose objects carry the shard labels
/// (their `list` and `watch` are among the reads of [`required`]).
pub fn shard_labels(metadata: &Metadata, namespaces: &[String]) -> Vec<Requirement> {
    let mut needs = Vec::new();
    for namespace in &metadata.namespaces(namespaces) {
        for kind in std::iter::once(&metadata.primary.kind).chain(&metadata.owns) {
            push(&mut needs, kind, "", vec![Verb::Patch], namespace);
        }
    }
    needs
}

/// The writes `entry`'s grants let the host make for a module declaring `metadata`: applies,
/// patches and deletes of its primary and owned kinds and their status, the owner's finalizers
/// for owned applies, and Events.
pub fn writes(metadata: &Metadata, entry: &ModuleConfig) -> Vec<Requirement> {
    let mut needs = Vec::new();
    let own = metadata.namespaces(&entry.namespaces);
    let granted = Permissions::new(entry.grants.clone());
    let writable = std::iter::once(&metadata.primary.kind).chain(&metadata.owns);
    for kind in writable {
        for namespace in &own {
            let ns = namespace.as_deref();
            let verbs: Vec<Verb> = [Verb::Create, Verb::Patch, Verb::Delete]
                .into_iter()
                .filter(|&verb| granted.allows(kind, None, verb, ns))
                .collect();
            push(&mut needs, kind, "", verbs, namespace);
            if granted.allows(kind, Some("status"), Verb::Patch, ns) {
                push(&mut needs, kind, "/status", vec![Verb::Patch], namespace);
            }
        }
    }
    // Owned applies set `blockOwnerDeletion`, which the OwnerReferencesPermissionEnforcement
    // admission plugin allows only to who may update the owner's finalizers.
    for namespace in &own {
        let ns = namespace.as_deref();
        let owns_writes = metadata.owns.iter().any(|kind| {
            [Verb::Create, Verb::Patch]
                .into_iter()
                .any(|verb| granted.allows(kind, None, verb, ns))
        });
        if owns_writes {
            let primary = &metadata.primary.kind;
            push(
                &mut needs,
                primary,
                "/finalizers",
                vec![Verb::Update],
                namespace,
            );
        }
    }
    let mut event_namespaces: Vec<&Option<String>> = own.iter().collect();
    event_namespaces.extend(metadata.watches.iter().map(|w| &w.selection.namespace));
    for namespace in event_namespaces {
        let requirement = Requirement {
            api_group: "events.k8s.io".into(),
            resource: "events".into(),
            verbs: vec![Verb::Create],
            namespace: namespace.clone(),
        };
        if !needs.contains(&requirement) {
            needs.push(requirement);
        }
    }
    needs
}

fn push(
    needs: &mut Vec<Requirement>,
    kind: &GroupVersionKind,
    suffix: &str,
    verbs: Vec<Verb>,
    namespace: &Option<String>,
) {
    if verbs.is_empty() {
        return;
    }
    needs.push(Requirement {
        api_group: kind.group.clone(),
        resource: format!("{}{suffix}", resource_of(kind)),
        verbs,
        namespace: namespace.clone(),
    });
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::cluster::selection::Selection;
    use crate::config::Config;
    use crate::wasm::declaration::{Mapping, Watch};

    fn kind(group: &str, version: &str, kind: &str) -> GroupVersionKind {
        GroupVersionKind::gvk(group, version, kind)
    }

    /// The podset example's declaration.
    pub(crate) fn podset_metadata() -> Metadata {
        Metadata {
            name: "podset".into(),
            primary: Selection {
                kind: kind("kubewasm.dev", "v1alpha1", "PodSet"),
                namespace: None,
                selector: None,
            },
            owns: vec![kind("", "v1", "Pod")],
            watches: vec![Watch {
                selection: Selection {
                    kind: kind("", "v1", "Pod"),
                    namespace: None,
                    selector: None,
                },
                mapping: Mapping::Guest,
            }],
            finalizer: Some("kubewasm.dev/cleanup".into()),
            max_concurrency: 1,
            resync: None,
            reconcile_on: crate::wasm::bindings::types::Changes::ANY,
        }
    }

    fn grants(yaml: &str) -> Permissions {
        let config = Config::from_yaml(
            &format!("modules: [{{path: a.wasm, grants: {yaml}}}]"),
            std::path::Path::new(""),
        )
        .unwrap();
        Permissions::new(config.modules[0].grants.clone())
    }

    #[test]
    fn needs_on_a_cluster_scoped_kind_are_asked_of_every_namespace() {
        let mut metadata = podset_metadata();
        metadata.primary.kind = kind("", "v1", "Namespace");
        let needs = required(&metadata, &["a".into(), "b".into()]);
        let wide: Vec<String> = cluster_wide(needs, &[kind("", "v1", "Namespace")])
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            wide,
            [
                "get,list,watch,patch namespaces (core) in all namespaces",
                "get,list,watch pods (core) in namespace a",
                "get,list,watch pods (core) in namespace b",
                "get,list,watch pods (core) in all namespaces",
            ]
        );
    }

    #[test]
    fn a_declaration_needs_reads_of_every_kind_and_patch_for_its_finalizer() {
        let needs: Vec<String> = required(&podset_metadata(), &["team-a".into()])
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            needs,
            [
                "get,list,watch,patch podsets (kubewasm.dev) in namespace team-a",
                "get,list,watch pods (core) in namespace team-a",
                "get,list,watch pods (core) in all namespaces",
            ]
        );
    }

    #[test]
    fn missing_lists_only_the_verbs_not_granted() {
        let permissions = grants(
            "[{apiGroups: [kubewasm.dev], resources: [podsets], verbs: [get, list, watch]},
              {apiGroups: [''], resources: [pods], verbs: ['*'], namespaces: [team-a]}]",
        );
        let missing: Vec<String> = permissions
            .missing(&required(&podset_metadata(), &["team-a".into()]))
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            missing,
            [
                "patch podsets (kubewasm.dev) in namespace team-a",
                "get,list,watch pods (core) in all namespaces",
            ]
        );
    }

    #[test]
    fn no_grants_configured_allows_everything_and_empty_grants_nothing() {
        let pods = kind("", "v1", "Pod");
        let open = Permissions::new(None);
        assert!(open.allows(&pods, None, Verb::Delete, Some("x")));
        assert!(open.missing(&required(&podset_metadata(), &[])).is_empty());
        let closed = grants("[]");
        assert!(!closed.allows(&pods, None, Verb::Get, Some("x")));
        assert_eq!(closed.missing(&required(&podset_metadata(), &[])).len(), 2);
    }

    #[test]
    fn subresources_and_namespaces_are_matched() {
        let permissions = grants(
            "[{apiGroups: [kubewasm.dev], resources: [podsets/status], verbs: [patch], namespaces: [a]}]",
        );
        let podset = kind("kubewasm.dev", "v1alpha1", "PodSet");
        assert!(permissions.allows(&podset, Some("status"), Verb::Patch, Some("a")));
        assert!(!permissions.allows(&podset, None, Verb::Patch, Some("a")));
        assert!(!permissions.allows(&podset, Some("status"), Verb::Patch, Some("b")));
        assert!(!permissions.allows(&podset, Some("status"), Verb::Patch, None));
        assert_eq!(
            resource_of(&kind("", "v1", "NetworkPolicy")),
            "networkpolicies"
        );
    }
}
