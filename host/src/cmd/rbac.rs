//! The Kubernetes RBAC the host's service account needs to run a configuration's modules, and
//! nothing more.
//!
//! For each module, in the namespaces it runs in: `get`, `list` and `watch` on every kind it
//! declares (the informers), `patch` on its primary kind when it declares a finalizer, the
//! writes its grants allow on its primary and owned kinds (`create` and `patch` for server-side
//! apply, `patch` on `status`, `delete`), `update` on the primary's `finalizers` when it may
//! write an owned kind (owned applies set `blockOwnerDeletion`, which the
//! OwnerReferencesPermissionEnforcement admission plugin checks), and `create` of
//! `events.k8s.io` Events; for a sharded host, also `patch` on the primary and owned kinds, which
//! carry the shard labels. Needs in every
//! namespace, and every need on a cluster-scoped kind, go to one ClusterRole; needs restricted
//! to namespaces go to a Role and RoleBinding in each. Custom resources are taken as namespaced;
//! built-in kinds have their real scope.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::api::{GroupVersionKind, ObjectMeta};

use crate::cmd::check::{self, CheckError};
use crate::cmd::source::ModuleSource;
use crate::cmd::{fail, out};
use crate::config::{Config, Verb};
use crate::wasm::compile_cache::CompileCache;
use crate::wasm::oci::RegistrySettings;
use crate::wasm::permissions::{self, Requirement};

/// Who the RBAC is for and what its objects are called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Name of the ClusterRole and of every Role and RoleBinding.
    pub name: String,
    /// Namespace of the host's ServiceAccount.
    pub service_account_namespace: String,
    /// Name of the host's ServiceAccount.
    pub service_account: String,
}

/// The RBAC objects for a set of modules.
#[derive(Debug, Clone, PartialEq)]
pub struct Rbac {
    /// Rules in every namespace and on cluster-scoped kinds; always present, so that a binding
    /// to it never dangles.
    pub cluster_role: ClusterRole,
    /// Rules restricted to one namespace each, sorted by namespace.
    pub roles: Vec<(Role, RoleBinding)>,
}

/// Why the RBAC of a configuration could not be worked out.
#[derive(Debug, thiserror::Error)]
pub enum RbacError {
    /// A module or the configuration failed its check.
    #[error("{}: {source}", module.display())]
    Check {
        /// The module.
        module: PathBuf,
        /// What failed.
        source: CheckError,
    },
    /// Module files were given, but none for this entry.
    #[error("no module file given for modules[{index}] ({})", path.display())]
    NoModule {
        /// Index of the entry.
        index: usize,
        /// Its path.
        path: PathBuf,
    },
    /// The host would refuse the module: its grants do not cover its declaration.
    #[error("{}: the grants of modules[{index}] do not give it {missing}", module.display())]
    NotGranted {
        /// The module.
        module: PathBuf,
        /// Index of its entry.
        index: usize,
        /// What is missing, `; `-separated.
        missing: String,
    },
}

/// `kubewasm rbac`: prints as YAML the RBAC of the configuration at `config` (see
/// [`for_config`]) for the ServiceAccount `service_account` (namespace, name), its objects
/// called `name`. Fails when a module does not load or is not granted what it declares.
pub async fn command(
    config: &Path,
    modules: &[PathBuf],
    name: String,
    (service_account_namespace, service_account): (String, String),
    sharded: bool,
) -> ExitCode {
    let target = Target {
        name,
        service_account_namespace,
        service_account,
    };
    match for_config(config, modules, &target, sharded).await {
        Ok(rbac) => out(rbac.to_yaml()),
        Err(error) => return fail(error),
    }
    ExitCode::SUCCESS
}

/// The RBAC for every module of the configuration at `config`. The modules are read from
/// `modules`, each matched to its entry as `kubewasm check` does, or when empty from the
/// entries' paths, for a host that runs `sharded` or not. Fails unless every entry has a module
/// that loads and is granted what it declares.
pub async fn for_config(
    config: &Path,
    modules: &[PathBuf],
    target: &Target,
    sharded: bool,
) -> Result<Rbac, RbacError> {
    let loaded = Config::load(config).map_err(|error| RbacError::Check {
        module: config.to_owned(),
        source: error.into(),
    })?;
    let files: Vec<PathBuf> = if modules.is_empty() {
        loaded
            .modules
            .iter()
            .filter_map(|m| m.file().map(Path::to_path_buf))
            .collect()
    } else {
        modules.to_vec()
    };
    let mut found = BTreeMap::new();
    for file in files {
        let report = check::check(
            &ModuleSource::File(file.clone()),
            Some(config),
            (RegistrySettings::default(), CompileCache::default_dir()),
        )
        .await
        .map_err(|source| RbacError::Check {
            module: file.clone(),
            source,
        })?;
        let entry = report
            .entry
            .expect("a check with a configuration finds the entry");
        if !report.missing.is_empty() {
            let missing: Vec<String> = report.missing.iter().map(ToString::to_string).collect();
            return Err(RbacError::NotGranted {
                module: file,
                index: entry.index,
                missing: missing.join("; "),
            });
        }
        let mut needs = permissions::needs(&report.metadata, &entry.module);
        if sharded {
            needs.extend(permissions::shard_labels(
                &report.metadata,
                &entry.module.namespaces,
            ));
        }
        found.insert(entry.index, needs);
    }
    let mut all_needs = Vec::new();
    for (index, entry) in loaded.modules.iter().enumerate() {
        let Some(needs) = found.remove(&index) else {
            return Err(RbacError::NoModule {
                index,
                path: entry.file().map(Path::to_path_buf).unwrap_or_default(),
            });
        };
        all_needs.extend(needs);
    }
    Ok(build(&all_needs, target))
}

/// Built-in kinds that are not namespaced.
const CLUSTER_SCOPED: &[(&str, &str)] = &[
    ("", "ComponentStatus"),
    ("", "Namespace"),
    ("", "Node"),
    ("", "PersistentVolume"),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicy"),
    (
        "admissionregistration.k8s.io",
        "MutatingAdmissionPolicyBinding",
    ),
    (
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
    ),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    (
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicyBinding",
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
    ),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("apiregistration.k8s.io", "APIService"),
    ("certificates.k8s.io", "CertificateSigningRequest"),
    ("certificates.k8s.io", "ClusterTrustBundle"),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
    ("networking.k8s.io", "IPAddress"),
    ("networking.k8s.io", "IngressClass"),
    ("networking.k8s.io", "ServiceCIDR"),
    ("node.k8s.io", "RuntimeClass"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("resource.k8s.io", "DeviceClass"),
    ("resource.k8s.io", "ResourceSlice"),
    ("scheduling.k8s.io", "PriorityClass"),
    ("storage.k8s.io", "CSIDriver"),
    ("storage.k8s.io", "CSINode"),
    ("storage.k8s.io", "StorageClass"),
    ("storage.k8s.io", "VolumeAttachment"),
    ("storage.k8s.io", "VolumeAttributesClass"),
];

/// Verbs needed per (API group, resource).
type Resources<'a> = BTreeMap<(&'a str, &'a str), BTreeSet<Verb>>;

/// Merges `needs` into the RBAC objects of `target`: one rule per API group and verb set,
/// listing its resources, in a stable order.
pub fn build(needs: &[Requirement], target: &Target) -> Rbac {
    let mut scopes: BTreeMap<Option<&str>, Resources> = BTreeMap::new();
    for need in needs {
        let resource = (need.api_group.as_str(), need.resource.as_str());
        let namespace = need
            .namespace
            .as_deref()
            .filter(|_| !is_cluster_scoped(need));
        scopes
            .entry(namespace)
            .or_default()
            .entry(resource)
            .or_default()
            .extend(need.verbs.iter().copied());
    }
    let cluster_rules = scopes.remove(&None).map(rules).unwrap_or_default();
    let meta = |namespace: Option<&str>| ObjectMeta {
        name: Some(target.name.clone()),
        namespace: namespace.map(str::to_owned),
        ..ObjectMeta::default()
    };
    let roles = scopes
        .into_iter()
        .map(|(namespace, resources)| {
            let role = Role {
                metadata: meta(namespace),
                rules: Some(rules(resources)),
            };
            let binding = RoleBinding {
                metadata: meta(namespace),
                role_ref: RoleRef {
                    api_group: Some("rbac.authorization.k8s.io".into()),
                    kind: "Role".into(),
                    name: target.name.clone(),
                },
                subjects: Some(vec![Subject {
                    kind: "ServiceAccount".into(),
                    name: target.service_account.clone(),
                    namespace: Some(target.service_account_namespace.clone()),
                    api_group: None,
                }]),
            };
            (role, binding)
        })
        .collect();
    Rbac {
        cluster_role: ClusterRole {
            metadata: meta(None),
            rules: Some(cluster_rules),
            aggregation_rule: None,
        },
        roles,
    }
}

/// Whether `need` is on a built-in cluster-scoped kind, which only a ClusterRole can grant.
fn is_cluster_scoped(need: &Requirement) -> bool {
    let plural = need.resource.split('/').next().unwrap_or_default();
    CLUSTER_SCOPED.iter().any(|&(group, kind)| {
        group == need.api_group
            && permissions::resource_of(&GroupVersionKind::gvk(group, "v1", kind)) == plural
    })
}

fn rules(resources: Resources) -> Vec<PolicyRule> {
    let mut by_verbs: BTreeMap<(&str, Vec<&str>), Vec<String>> = BTreeMap::new();
    for ((group, resource), verbs) in resources {
        let mut verbs: Vec<&str> = verbs.into_iter().map(Verb::as_str).collect();
        verbs.sort_unstable();
        by_verbs
            .entry((group, verbs))
            .or_default()
            .push(resource.to_owned());
    }
    by_verbs
        .into_iter()
        .map(|((group, verbs), resources)| PolicyRule {
            api_groups: Some(vec![group.to_owned()]),
            resources: Some(resources),
            verbs: verbs.into_iter().map(str::to_owned).collect(),
            ..PolicyRule::default()
        })
        .collect()
}

impl Rbac {
    /// The objects as one YAML stream: the ClusterRole, then each Role and its RoleBinding.
    pub fn to_yaml(&self) -> String {
        let mut documents = vec![document(&self.cluster_role)];
        for (role, binding) in &self.roles {
            documents.push(document(role));
            documents.push(document(binding));
        }
        documents.join("---\n")
    }
}

fn document<K>(object: &K) -> String
where
    K: k8s_openapi::Resource + serde::Serialize,
{
    let mut value = serde_json::to_value(object).expect("RBAC objects serialize");
    if let Some(map) = value.as_object_mut() {
        map.insert("apiVersion".into(), K::API_VERSION.into());
        map.insert("kind".into(), K::KIND.into());
    }
    serde_yaml::to_string(&value).expect("JSON values serialize as YAML")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wasm::declaration::Metadata;
    use crate::wasm::permissions::tests::podset_metadata;

    /// The podset declaration, watching Namespaces (a cluster-scoped kind) instead of Pods.
    fn podset() -> Metadata {
        let mut metadata = podset_metadata();
        metadata.watches[0].selection.kind = GroupVersionKind::gvk("", "v1", "Namespace");
        metadata
    }

    #[test]
    fn needs_follow_the_declaration_and_the_grants() {
        let config = Config::from_yaml(
            "modules:
  - path: a.wasm
    namespaces: [team-a]
    grants:
      - {apiGroups: [kubewasm.dev], resources: [podsets, podsets/status], verbs: ['*']}
      - {apiGroups: [''], resources: [pods], verbs: [get, list, watch, create, patch]}
      - {apiGroups: [''], resources: [namespaces], verbs: [get, list, watch]}
",
            Path::new(""),
        )
        .unwrap();
        let needs: Vec<String> = permissions::needs(&podset(), &config.modules[0])
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            needs,
            [
                "get,list,watch,patch podsets (kubewasm.dev) in namespace team-a",
                "get,list,watch pods (core) in namespace team-a",
                "get,list,watch namespaces (core) in all namespaces",
                "create,patch,delete podsets (kubewasm.dev) in namespace team-a",
                "patch podsets/status (kubewasm.dev) in namespace team-a",
                "create,patch pods (core) in namespace team-a",
                "update podsets/finalizers (kubewasm.dev) in namespace team-a",
                "create events (events.k8s.io) in namespace team-a",
                "create events (events.k8s.io) in all namespaces",
            ]
        );
    }

    #[test]
    fn a_module_without_grants_needs_every_write_on_its_own_kinds() {
        let config = Config::from_yaml("modules: [{path: a.wasm}]", Path::new("")).unwrap();
        let needs = permissions::needs(&podset(), &config.modules[0]);
        let writes: Vec<String> = needs
            .iter()
            .filter(|n| {
                n.verbs
                    .iter()
                    .any(|v| v != &Verb::Get && v != &Verb::List && v != &Verb::Watch)
            })
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            writes,
            [
                "get,list,watch,patch podsets (kubewasm.dev) in all namespaces",
                "create,patch,delete podsets (kubewasm.dev) in all namespaces",
                "patch podsets/status (kubewasm.dev) in all namespaces",
                "create,patch,delete pods (core) in all namespaces",
                "patch pods/status (core) in all namespaces",
                "update podsets/finalizers (kubewasm.dev) in all namespaces",
                "create events (events.k8s.io) in all namespaces",
            ]
        );
    }

    #[test]
    fn a_sharded_host_also_patches_the_primary_and_owned_kinds_where_the_module_runs() {
        let config = Config::from_yaml(
            "modules:
  - path: a.wasm
    namespaces: [team-a, team-b]
    grants:
      - {apiGroups: [kubewasm.dev], resources: [podsets], verbs: [get, list, watch]}
      - {apiGroups: [''], resources: [pods], verbs: [get, list, watch, create]}
",
            Path::new(""),
        )
        .unwrap();
        let entry = &config.modules[0];
        let needs: Vec<String> = permissions::shard_labels(&podset(), &entry.namespaces)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            needs,
            [
                "patch podsets (kubewasm.dev) in namespace team-a",
                "patch pods (core) in namespace team-a",
                "patch podsets (kubewasm.dev) in namespace team-b",
                "patch pods (core) in namespace team-b",
            ]
        );
        // The module alone needs no patch on the pods it owns.
        let own = permissions::needs(&podset(), entry);
        assert!(
            !own.iter()
                .any(|need| need.resource == "pods" && need.verbs.contains(&Verb::Patch))
        );
    }

    fn need(group: &str, resource: &str, verbs: &[Verb], namespace: Option<&str>) -> Requirement {
        Requirement {
            api_group: group.into(),
            resource: resource.into(),
            verbs: verbs.to_vec(),
            namespace: namespace.map(str::to_owned),
        }
    }

    fn target() -> Target {
        Target {
            name: "kubewasm".into(),
            service_account_namespace: "kubewasm-system".into(),
            service_account: "kubewasm".into(),
        }
    }

    #[test]
    fn rules_merge_by_group_and_verbs_and_split_by_namespace() {
        let read = [Verb::Get, Verb::List, Verb::Watch];
        let rbac = build(
            &[
                need("kubewasm.dev", "podsets", &read, None),
                need("kubewasm.dev", "podsets", &[Verb::Patch], None),
                need(
                    "kubewasm.dev",
                    "websites",
                    &[Verb::Get, Verb::List, Verb::Patch, Verb::Watch],
                    None,
                ),
                need("", "pods", &read, Some("team-a")),
                need("", "pods", &[Verb::Create, Verb::Delete], Some("team-a")),
                need("", "namespaces", &read, Some("team-a")),
            ],
            &target(),
        );
        assert_eq!(rbac.to_yaml(), MERGED_AND_SPLIT);
    }

    /// The RBAC of [`rules_merge_by_group_and_verbs_and_split_by_namespace`], as YAML.
    const MERGED_AND_SPLIT: &str = "\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: kubewasm
rules:
- apiGroups:
  - ''
  resources:
  - namespaces
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - kubewasm.dev
  resources:
  - podsets
  - websites
  verbs:
  - get
  - list
  - patch
  - watch
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: kubewasm
  namespace: team-a
rules:
- apiGroups:
  - ''
  resources:
  - pods
  verbs:
  - create
  - delete
  - get
  - list
  - watch
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: kubewasm
  namespace: team-a
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: kubewasm
subjects:
- kind: ServiceAccount
  name: kubewasm
  namespace: kubewasm-system
";

    #[test]
    fn no_needs_still_yield_a_cluster_role() {
        let rbac = build(&[], &target());
        assert_eq!(rbac.cluster_role.rules, Some(Vec::new()));
        assert!(rbac.roles.is_empty());
    }
}
