//! Label selectors (`matchLabels` / `matchExpressions`), as in `metav1.LabelSelector`. They
//! agree with `metav1.LabelSelectorAsSelector` (checked against its vectors in
//! `guests/vectors`).
//!
//! ```
//! use std::collections::BTreeMap;
//! use kubewasm_guest::selector::LabelSelector;
//!
//! let selector: LabelSelector = serde_json::from_value(serde_json::json!({
//!     "matchLabels": {"app": "web"},
//!     "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]
//! })).unwrap();
//! let labels = BTreeMap::from([("app".to_string(), "web".to_string()), ("tier".to_string(), "a".to_string())]);
//! assert!(selector.matches(&labels).unwrap());
//! assert_eq!(selector.to_query().unwrap(), "app=web,tier in (a,b)");
//! ```

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// A label selector. All of its requirements must hold (logical AND).
///
/// A selector with neither `matchLabels` nor `matchExpressions` matches every object, as in
/// Kubernetes. A `LabelSelector` is never nil: read from an absent field (with
/// `#[serde(default)]`) it is empty, where Kubernetes' nil selector matches nothing; an
/// `Option<LabelSelector>` tells them apart.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    /// Labels that must be present with exactly these values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_labels: Option<BTreeMap<String, String>>,
    /// Set-based requirements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_expressions: Option<Vec<LabelSelectorRequirement>>,
}

/// One set-based requirement: `key` `operator` `values`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabelSelectorRequirement {
    /// The label key (read as empty when absent, which no selector accepts).
    #[serde(default)]
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist` (read as empty when absent, which no selector
    /// accepts).
    #[serde(default)]
    pub operator: String,
    /// Non-empty for `In` and `NotIn`, empty for `Exists` and `DoesNotExist`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
}

/// A selector that Kubernetes would reject: an unknown operator, a wrong number of values, or an
/// invalid label key or value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SelectorError(String);

impl fmt::Display for SelectorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid label selector: {}", self.0)
    }
}

impl std::error::Error for SelectorError {}

enum Op<'a> {
    /// A `matchLabels` entry: its one value.
    Equals(&'a [String]),
    In(&'a [String]),
    NotIn(&'a [String]),
    Exists,
    DoesNotExist,
}

impl LabelSelectorRequirement {
    fn op(&self) -> Result<Op<'_>, SelectorError> {
        let values = self.values.as_deref().unwrap_or_default();
        let op = match self.operator.as_str() {
            "In" => Op::In(values),
            "NotIn" => Op::NotIn(values),
            "Exists" => Op::Exists,
            "DoesNotExist" => Op::DoesNotExist,
            other => {
                return Err(SelectorError(format!(
                    "key {:?}: unknown operator {other:?}",
                    self.key
                )));
            }
        };
        match (&op, values.is_empty()) {
            (Op::In(_) | Op::NotIn(_), true) => Err(SelectorError(format!(
                "key {:?}: operator {} needs at least one value",
                self.key, self.operator
            ))),
            (Op::Exists | Op::DoesNotExist, false) => Err(SelectorError(format!(
                "key {:?}: operator {} takes no values",
                self.key, self.operator
            ))),
            _ => Ok(op),
        }
    }
}

/// The requirement, if its key and values are valid.
fn checked<'a>(key: &'a str, op: Op<'a>) -> Result<(&'a str, Op<'a>), SelectorError> {
    if !is_label_key(key) {
        return Err(SelectorError(format!("invalid key {key:?}")));
    }
    if let Op::Equals(values) | Op::In(values) | Op::NotIn(values) = op
        && let Some(value) = values.iter().find(|v| !is_label_value(v))
    {
        return Err(SelectorError(format!(
            "key {key:?}: invalid value {value:?}"
        )));
    }
    Ok((key, op))
}

/// Whether `key` is a name with an optional prefix and `/`, the prefix a DNS subdomain: at most
/// 253 characters, dot-separated lowercase letters, digits and `-`, each part starting and
/// ending with a letter or digit.
fn is_label_key(key: &str) -> bool {
    let Some((prefix, name)) = key.split_once('/') else {
        return is_name(key);
    };
    prefix.len() <= 253
        && prefix.split('.').all(|part| {
            !part.is_empty()
                && !part.starts_with('-')
                && !part.ends_with('-')
                && part
                    .bytes()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        })
        && is_name(name)
}

/// Whether `value` is empty or a name.
fn is_label_value(value: &str) -> bool {
    value.is_empty() || is_name(value)
}

/// Whether `s` has at most 63 letters, digits, `-`, `_` or `.`, starting and ending with a
/// letter or digit.
fn is_name(s: &str) -> bool {
    let bytes = s.as_bytes();
    (1..=63).contains(&bytes.len())
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

impl LabelSelector {
    /// Whether the selector has no requirement at all (and so matches everything).
    pub fn is_empty(&self) -> bool {
        self.match_labels.as_ref().is_none_or(BTreeMap::is_empty)
            && self.match_expressions.as_ref().is_none_or(Vec::is_empty)
    }

    /// The checked requirements, `matchLabels` first, as apimachinery lists them.
    fn requirements(&self) -> Result<Vec<(&str, Op<'_>)>, SelectorError> {
        let labels = self
            .match_labels
            .iter()
            .flatten()
            .map(|(key, value)| checked(key, Op::Equals(std::slice::from_ref(value))));
        let expressions = self
            .match_expressions
            .iter()
            .flatten()
            .map(|r| checked(&r.key, r.op()?));
        labels.chain(expressions).collect()
    }

    /// Whether `labels` satisfy every requirement. Fails on an invalid selector, whatever the
    /// labels.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> Result<bool, SelectorError> {
        Ok(self.requirements()?.iter().all(|(key, op)| {
            let value = labels.get(*key);
            match op {
                Op::Equals(values) | Op::In(values) => value.is_some_and(|v| values.contains(v)),
                Op::NotIn(values) => value.is_none_or(|v| !values.contains(v)),
                Op::Exists => value.is_some(),
                Op::DoesNotExist => value.is_none(),
            }
        }))
    }

    /// The selector in the API server's string syntax (`app=web,tier in (a,b),!legacy`), as
    /// apimachinery prints it, e.g. for [`cache::list`](crate::cache::list): requirements sorted
    /// by key (those on one key in the order given, `matchLabels` first), values sorted. Empty
    /// for an empty selector.
    pub fn to_query(&self) -> Result<String, SelectorError> {
        let mut requirements = self.requirements()?;
        requirements.sort_by_key(|(key, _)| *key);
        let set = |values: &[String]| {
            let mut values = values.to_vec();
            values.sort();
            values.join(",")
        };
        Ok(requirements
            .into_iter()
            .map(|(key, op)| match op {
                Op::Equals(values) => format!("{key}={}", values[0]),
                Op::In(values) => format!("{key} in ({})", set(values)),
                Op::NotIn(values) => format!("{key} notin ({})", set(values)),
                Op::Exists => key.to_owned(),
                Op::DoesNotExist => format!("!{key}"),
            })
            .collect::<Vec<_>>()
            .join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn selector(value: serde_json::Value) -> LabelSelector {
        serde_json::from_value(value).unwrap()
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn empty_selector_matches_everything() {
        let empty = selector(json!({}));
        assert!(empty.is_empty());
        assert!(empty.matches(&labels(&[])).unwrap());
        assert!(selector(json!({"matchLabels": {}, "matchExpressions": []})).is_empty());
        assert_eq!(empty.to_query().unwrap(), "");
    }

    #[test]
    fn match_labels_need_exact_values() {
        let s = selector(json!({"matchLabels": {"app": "web", "tier": "fe"}}));
        assert!(
            s.matches(&labels(&[("app", "web"), ("tier", "fe"), ("x", "y")]))
                .unwrap()
        );
        assert!(!s.matches(&labels(&[("app", "web")])).unwrap());
        assert!(
            !s.matches(&labels(&[("app", "db"), ("tier", "fe")]))
                .unwrap()
        );
    }

    #[test]
    fn match_expressions() {
        let s = selector(json!({"matchExpressions": [
            {"key": "env", "operator": "In", "values": ["prod", "staging"]},
            {"key": "track", "operator": "NotIn", "values": ["canary"]},
            {"key": "app", "operator": "Exists"},
            {"key": "legacy", "operator": "DoesNotExist", "values": []},
        ]}));
        assert!(
            s.matches(&labels(&[("env", "prod"), ("app", "a")]))
                .unwrap()
        );
        assert!(
            s.matches(&labels(&[
                ("env", "staging"),
                ("app", "a"),
                ("track", "stable")
            ]))
            .unwrap()
        );
        assert!(!s.matches(&labels(&[("env", "dev"), ("app", "a")])).unwrap());
        assert!(
            !s.matches(&labels(&[
                ("env", "prod"),
                ("app", "a"),
                ("track", "canary")
            ]))
            .unwrap()
        );
        assert!(!s.matches(&labels(&[("env", "prod")])).unwrap());
        assert!(
            !s.matches(&labels(&[("env", "prod"), ("app", "a"), ("legacy", "")]))
                .unwrap()
        );
        assert_eq!(
            s.to_query().unwrap(),
            "app,env in (prod,staging),!legacy,track notin (canary)"
        );
    }

    #[test]
    fn rejects_invalid_selectors() {
        for bad in [
            json!({"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["x"]}]}),
            json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}),
            json!({"matchExpressions": [{"key": "a", "operator": "NotIn"}]}),
            json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}),
        ] {
            let s = selector(bad);
            assert!(s.matches(&labels(&[("a", "x")])).is_err());
            assert!(s.to_query().is_err());
        }
    }

    #[test]
    fn serialises_in_api_shape() {
        let value = json!({"matchLabels": {"app": "web"},
                           "matchExpressions": [{"key": "a", "operator": "Exists"}]});
        assert_eq!(
            serde_json::to_value(selector(value.clone())).unwrap(),
            value
        );
    }
}
