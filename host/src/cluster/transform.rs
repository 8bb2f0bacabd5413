//! Cache transforms: fields removed from every object of a kind before it is cached, as
//! controller-runtime's cache transforms do, so that a guest that never reads them does not hold
//! them in memory.
//!
//! A transform never touches what the host reads: `apiVersion`, `kind`, `metadata` other than
//! annotations, and the annotations under [`HOST_ANNOTATIONS`] stay whole. Dropped annotations are also gone for the host's
//! annotation-change trigger, as for the guest. Informers are keyed by their transform as well
//! as their selection, so guests that drop different fields never share a cache.

use std::fmt;
use std::str::FromStr;

use kube::api::DynamicObject;
use serde_json::Value;

/// The prefix of the annotations the host reads, kept by every transform: on a sharded key, the
/// versions its new member's watches must show before it is reconciled.
pub const HOST_ANNOTATIONS: &str = "children.shard.kubewasm.dev/";

/// A field that a transform may drop, as a JSON pointer (RFC 6901) such as `/status` or
/// `/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration`. It names object
/// members only: a path through a list matches nothing.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FieldPath(Vec<String>);

impl FromStr for FieldPath {
    type Err = String;

    /// Parses a pointer; refuses the whole object, anything under `apiVersion` or `kind`, any
    /// metadata but the annotations or one annotation, empty segments, and commas (which no
    /// field name or annotation key has, and which separate the fields of a [`Transform`] as
    /// printed).
    fn from_str(text: &str) -> Result<Self, String> {
        let Some(rest) = text.strip_prefix('/') else {
            return Err(format!(
                "{text:?} is not a JSON pointer: it must start with /"
            ));
        };
        if rest.is_empty() {
            return Err(format!("{text:?} names the whole object"));
        }
        let segments = rest
            .split('/')
            .map(|segment| match unescape(segment) {
                None => Err(format!(
                    "{text:?}: {segment:?} has a ~ not followed by 0 or 1"
                )),
                Some(s) if s.is_empty() => Err(format!("{text:?} has an empty segment")),
                Some(s) if s.contains(',') => Err(format!("{text:?} has a comma")),
                Some(s) => Ok(s),
            })
            .collect::<Result<Vec<String>, String>>()?;
        let kept = "the host reads it: only /metadata/annotations and its members may be dropped";
        match segments.iter().map(String::as_str).collect::<Vec<_>>()[..] {
            ["metadata", "annotations", key] if key.starts_with(HOST_ANNOTATIONS) => Err(format!(
                "{text:?}: the host reads the annotations {HOST_ANNOTATIONS}*"
            )),
            ["metadata", "annotations"] | ["metadata", "annotations", _] => Ok(Self(segments)),
            ["apiVersion" | "kind" | "metadata", ..] => Err(format!("{text:?}: {kept}")),
            _ => Ok(Self(segments)),
        }
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for segment in &self.0 {
            write!(f, "/{}", segment.replace('~', "~0").replace('/', "~1"))?;
        }
        Ok(())
    }
}

/// A segment of a JSON pointer with `~1` read as `/` and `~0` as `~`; `None` for another `~`.
fn unescape(segment: &str) -> Option<String> {
    let mut text = String::with_capacity(segment.len());
    let mut chars = segment.chars();
    while let Some(c) = chars.next() {
        text.push(match c {
            '~' => match chars.next()? {
                '0' => '~',
                '1' => '/',
                _ => return None,
            },
            c => c,
        });
    }
    Some(text)
}

/// The fields dropped from every object of one kind, sorted and distinct; the default drops
/// nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Transform(Vec<FieldPath>);

impl Transform {
    /// Drops `fields`.
    pub fn new(fields: impl IntoIterator<Item = FieldPath>) -> Self {
        let mut fields: Vec<FieldPath> = fields.into_iter().collect();
        fields.sort();
        fields.dedup();
        Self(fields)
    }

    /// Whether it drops nothing.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The fields it drops.
    pub fn fields(&self) -> &[FieldPath] {
        &self.0
    }

    /// Removes the fields from `object`; a field it does not have is left alone.
    pub fn apply(&self, object: &mut DynamicObject) {
        for FieldPath(path) in &self.0 {
            match path.as_slice() {
                // Parsing lets through no metadata but the annotations.
                [metadata, _] if metadata == "metadata" => {
                    let annotations = &mut object.metadata.annotations;
                    if let Some(kept) = annotations {
                        kept.retain(|key, _| key.starts_with(HOST_ANNOTATIONS));
                    }
                    annotations.take_if(|kept| kept.is_empty());
                }
                [metadata, _, key] if metadata == "metadata" => {
                    if let Some(annotations) = &mut object.metadata.annotations {
                        annotations.remove(key);
                    }
                }
                [parents @ .., last] => {
                    let parent = parents
                        .iter()
                        .try_fold(&mut object.data, |value, segment| value.get_mut(segment));
                    if let Some(Value::Object(members)) = parent {
                        members.remove(last);
                    }
                }
                [] => {}
            }
        }
    }
}

impl fmt::Display for Transform {
    /// The fields, separated by commas.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, field) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{field}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn transform(fields: &[&str]) -> Transform {
        Transform::new(fields.iter().map(|f| f.parse().unwrap()))
    }

    fn object() -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {
                "name": "web", "namespace": "ns", "labels": { "app": "web" },
                "annotations": { "kubectl.kubernetes.io/last-applied-configuration": "{}", "a~b": "1", "kept": "yes" },
            },
            "spec": { "replicas": 2, "template": { "spec": { "containers": [{ "name": "c", "env": [] }] } } },
            "status": { "replicas": 2 },
        }))
        .unwrap()
    }

    #[test]
    fn the_named_fields_are_dropped_and_nothing_else() {
        let mut object = object();
        transform(&[
            "/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration",
            "/metadata/annotations/a~0b",
            "/status",
            "/spec/template/spec",
            "/spec/absent/deeper",
            "/spec/replicas/deeper",
        ])
        .apply(&mut object);
        let json = serde_json::to_value(&object).unwrap();
        assert_eq!(
            json,
            json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": { "name": "web", "namespace": "ns", "labels": { "app": "web" }, "annotations": { "kept": "yes" } },
                "spec": { "replicas": 2, "template": {} },
            })
        );
    }

    #[test]
    fn every_annotation_can_be_dropped_and_a_path_through_a_list_matches_nothing() {
        let mut object = object();
        let before = serde_json::to_value(object.clone()).unwrap();
        transform(&["/spec/template/spec/containers/0/env"]).apply(&mut object);
        assert_eq!(serde_json::to_value(&object).unwrap(), before);
        transform(&["/metadata/annotations"]).apply(&mut object);
        assert_eq!(object.metadata.annotations, None);
        assert_eq!(object.metadata.labels.as_ref().unwrap().len(), 1);
        // But for those the host reads.
        let host = "children.shard.kubewasm.dev/podset";
        let annotations = [
            (host.to_owned(), "Pod.v1=7".to_owned()),
            ("other".to_owned(), "x".to_owned()),
        ];
        object.metadata.annotations = Some(annotations.into());
        transform(&["/metadata/annotations"]).apply(&mut object);
        let kept = object.metadata.annotations.unwrap();
        assert_eq!(kept.keys().collect::<Vec<_>>(), [host]);
    }

    #[test]
    fn pointers_to_what_the_host_reads_or_malformed_ones_are_refused() {
        for refused in [
            "status",
            "/",
            "/kind",
            "/apiVersion",
            "/metadata",
            "/metadata/labels",
            "/metadata/ownerReferences",
            "/metadata/annotations/a/b",
            "/metadata/annotations/children.shard.kubewasm.dev~1podset",
            "/metadata/annotations/",
            "/kind/x",
            "/status/",
            "/data/a,b",
            "/spec//replicas",
            "/spec/a~2b",
        ] {
            assert!(refused.parse::<FieldPath>().is_err(), "{refused}");
        }
    }

    #[test]
    fn a_transform_is_canonical_and_prints_its_pointers_as_written() {
        let written = "/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration";
        let a = transform(&["/status", written, "/status"]);
        let b = transform(&[written, "/status"]);
        assert_eq!(a, b);
        assert_eq!(a.to_string(), format!("{written}, /status"));
        assert!(Transform::default().is_empty());
    }
}
