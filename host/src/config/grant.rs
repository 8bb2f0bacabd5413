//! Grants: the RBAC-like rules of what a module may do, and the verbs they allow.

use std::collections::BTreeSet;

use serde::Deserialize;

use super::{ConfigError, invalid, namespace_list};
use crate::cluster::selector::{is_dns1123_label, is_dns1123_subdomain};

/// An API verb a [`Grant`] can allow, as in Kubernetes RBAC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verb {
    /// `get`
    Get,
    /// `list`
    List,
    /// `watch`
    Watch,
    /// `create`
    Create,
    /// `update`
    Update,
    /// `patch`
    Patch,
    /// `delete`
    Delete,
    /// `deletecollection`
    DeleteCollection,
    /// `*`: every verb.
    All,
}

impl Verb {
    const EVERY: [Verb; 9] = [
        Verb::Get,
        Verb::List,
        Verb::Watch,
        Verb::Create,
        Verb::Update,
        Verb::Patch,
        Verb::Delete,
        Verb::DeleteCollection,
        Verb::All,
    ];

    /// The verb as written in the configuration and in RBAC rules.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
            Verb::All => "*",
        }
    }
}

/// An RBAC-like rule: the verbs allowed on the resources of the API groups, in the namespaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// API groups (`""` is the core group, `*` any group); non-empty.
    pub api_groups: Vec<String>,
    /// Resources as plural names (`pods`), subresources (`pods/status`, `*/scale`) or `*`;
    /// non-empty.
    pub resources: Vec<String>,
    /// Allowed verbs, sorted and distinct; non-empty.
    pub verbs: Vec<Verb>,
    /// Namespaces the rule applies to, sorted, distinct DNS-1123 labels; empty means every
    /// namespace and cluster-scoped objects.
    pub namespaces: Vec<String>,
}

impl Grant {
    /// Whether this rule allows `verb` on `resource` (`plural` or `plural/subresource`) of
    /// `api_group` in `namespace` (`None`: cluster-scoped, or across all namespaces), with RBAC's
    /// matching: `*` matches any group, resource or verb, `*/sub` any resource's subresource
    /// `sub`. A rule restricted to namespaces never allows `namespace: None`.
    pub fn permits(
        &self,
        api_group: &str,
        resource: &str,
        verb: Verb,
        namespace: Option<&str>,
    ) -> bool {
        let group_ok = self.api_groups.iter().any(|g| g == "*" || g == api_group);
        let resource_ok = self.resources.iter().any(|r| {
            r == "*"
                || r == resource
                || r.strip_prefix("*/").is_some_and(|sub| {
                    resource
                        .split_once('/')
                        .is_some_and(|(_, requested)| requested == sub)
                })
        });
        let verb_ok = self.verbs.iter().any(|&v| v == Verb::All || v == verb);
        let namespace_ok = self.namespaces.is_empty()
            || namespace.is_some_and(|ns| self.namespaces.iter().any(|n| n == ns));
        group_ok && resource_ok && verb_ok && namespace_ok
    }
}

/// A grant as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RawGrant {
    api_groups: Vec<String>,
    resources: Vec<String>,
    verbs: Vec<String>,
    #[serde(default)]
    namespaces: Vec<String>,
}

const VERBS: &str = "get, list, watch, create, update, patch, delete, deletecollection, *";

/// `raw`, the grant at `at`: its lists non-empty, its verbs sorted and distinct.
pub(super) fn validate_grant(raw: RawGrant, at: &str) -> Result<Grant, ConfigError> {
    let non_empty = |list: &[String], name: &str| {
        if list.is_empty() {
            Err(invalid(format!("{at}.{name}"), "must not be empty"))
        } else {
            Ok(())
        }
    };
    non_empty(&raw.api_groups, "apiGroups")?;
    non_empty(&raw.resources, "resources")?;
    non_empty(&raw.verbs, "verbs")?;
    for (i, group) in raw.api_groups.iter().enumerate() {
        if !(group.is_empty() || group == "*" || is_dns1123_subdomain(group)) {
            return Err(invalid(
                format!("{at}.apiGroups[{i}]"),
                format!(
                    "{group:?} is not an API group (\"\" for core, \"*\", or a DNS subdomain such as apps)"
                ),
            ));
        }
    }
    for (i, resource) in raw.resources.iter().enumerate() {
        let (plural, sub) = match resource.split_once('/') {
            Some((plural, sub)) => (plural, Some(sub)),
            None => (resource.as_str(), None),
        };
        let plural_ok = plural == "*" || is_dns1123_label(plural);
        if !plural_ok || sub.is_some_and(|s| !is_dns1123_label(s)) {
            return Err(invalid(
                format!("{at}.resources[{i}]"),
                format!(
                    "{resource:?} is not a resource (a lowercase plural such as pods, optionally \
                     with /subresource, or *)"
                ),
            ));
        }
    }
    let mut verbs = BTreeSet::new();
    for (i, verb) in raw.verbs.iter().enumerate() {
        let parsed = Verb::EVERY
            .into_iter()
            .find(|v| v.as_str() == verb)
            .ok_or_else(|| {
                invalid(
                    format!("{at}.verbs[{i}]"),
                    format!("{verb:?} is not a verb (one of {VERBS})"),
                )
            })?;
        verbs.insert(parsed);
    }
    let namespaces = namespace_list(raw.namespaces, &format!("{at}.namespaces"))?;
    Ok(Grant {
        api_groups: raw.api_groups,
        resources: raw.resources,
        verbs: verbs.into_iter().collect(),
        namespaces,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_match_like_rbac() {
        let grant =
            |groups: &[&str], resources: &[&str], verbs: &[Verb], namespaces: &[&str]| Grant {
                api_groups: groups.iter().map(|s| s.to_string()).collect(),
                resources: resources.iter().map(|s| s.to_string()).collect(),
                verbs: verbs.to_vec(),
                namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
            };
        let pods = grant(&[""], &["pods"], &[Verb::Get, Verb::List], &[]);
        assert!(pods.permits("", "pods", Verb::Get, Some("a")));
        assert!(pods.permits("", "pods", Verb::List, None));
        assert!(!pods.permits("", "pods", Verb::Delete, Some("a")));
        assert!(!pods.permits("apps", "pods", Verb::Get, Some("a")));
        assert!(!pods.permits("", "pods/status", Verb::Get, Some("a")));
        assert!(!pods.permits("", "services", Verb::Get, Some("a")));

        let scoped = grant(
            &["*"],
            &["*/scale", "deployments"],
            &[Verb::All],
            &["team-a"],
        );
        assert!(scoped.permits(
            "apps",
            "deployments",
            Verb::DeleteCollection,
            Some("team-a")
        ));
        assert!(scoped.permits("x.io", "widgets/scale", Verb::Patch, Some("team-a")));
        assert!(!scoped.permits("apps", "deployments/status", Verb::Patch, Some("team-a")));
        assert!(!scoped.permits("apps", "deployments", Verb::Get, Some("team-b")));
        assert!(!scoped.permits("apps", "deployments", Verb::Get, None));

        let everything = grant(&["*"], &["*"], &[Verb::All], &[]);
        assert!(everything.permits("", "nodes", Verb::Watch, None));
        assert!(everything.permits("", "pods/log", Verb::Get, Some("x")));
        assert!(!pods.permits("", "pods", Verb::All, None));
    }

    #[test]
    fn verbs_render_as_written() {
        let rendered: Vec<&str> = Verb::EVERY.iter().map(|v| v.as_str()).collect();
        assert_eq!(rendered.join(", "), VERBS);
    }
}
