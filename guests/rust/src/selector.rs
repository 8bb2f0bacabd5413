//! Label selectors (`matchLabels` / `matchExpressions`), as in `metav1.LabelSelector`.
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
/// Kubernetes.
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
    /// The label key.
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    pub operator: String,
    /// Non-empty for `In` and `NotIn`, empty for `Exists` and `DoesNotExist`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
}

/// A selector that Kubernetes would reject: an unknown operator or a wrong number of values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SelectorError(String);

impl fmt::Display for SelectorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid label selector: {}", self.0)
    }
}

impl std::error::Error for SelectorError {}

enum Op<'a> {
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

impl LabelSelector {
    /// Whether the selector has no requirement at all (and so matches everything).
    pub fn is_empty(&self) -> bool {
        self.match_labels.as_ref().is_none_or(BTreeMap::is_empty)
            && self.match_expressions.as_ref().is_none_or(Vec::is_empty)
    }

    fn requirements(&self) -> Result<Vec<(&str, Op<'_>)>, SelectorError> {
        self.match_expressions
            .iter()
            .flatten()
            .map(|r| Ok((r.key.as_str(), r.op()?)))
            .collect()
    }

    /// Whether `labels` satisfy every requirement. Fails on an invalid selector, whatever the
    /// labels.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> Result<bool, SelectorError> {
        let requirements = self.requirements()?;
        let labels_match = self
            .match_labels
            .iter()
            .flatten()
            .all(|(key, value)| labels.get(key) == Some(value));
        Ok(labels_match
            && requirements.iter().all(|(key, op)| {
                let value = labels.get(*key);
                match op {
                    Op::In(values) => value.is_some_and(|v| values.contains(v)),
                    Op::NotIn(values) => value.is_none_or(|v| !values.contains(v)),
                    Op::Exists => value.is_some(),
                    Op::DoesNotExist => value.is_none(),
                }
            }))
    }

    /// The selector in the API server's string syntax (`app=web,tier in (a,b),!legacy`), sorted
    /// by key, e.g. for [`cache::list`](crate::cache::list). Empty for an empty selector.
    pub fn to_query(&self) -> Result<String, SelectorError> {
        let mut parts: Vec<(&str, String)> = self
            .match_labels
            .iter()
            .flatten()
            .map(|(key, value)| (key.as_str(), format!("{key}={value}")))
            .collect();
        for (key, op) in self.requirements()? {
            let set = |values: &[String]| {
                let mut values = values.to_vec();
                values.sort();
                values.dedup();
                values.join(",")
            };
            parts.push((
                key,
                match op {
                    Op::In(values) => format!("{key} in ({})", set(values)),
                    Op::NotIn(values) => format!("{key} notin ({})", set(values)),
                    Op::Exists => key.to_owned(),
                    Op::DoesNotExist => format!("!{key}"),
                },
            ));
        }
        parts.sort();
        Ok(parts
            .into_iter()
            .map(|(_, part)| part)
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
