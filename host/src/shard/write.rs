//! The sharder's label writes: what each sets, on what condition it lands, and how it ended.
//!
//! A write names the `resourceVersion` it was decided on, so that it lands only on the state
//! the sharder saw; but the relabel of a child labelled already names what the decision rests
//! on (the child's uid, its controller owner and its shard label), so that changes of the child
//! the sharder does not decide on, such as kubelet's status writes, never hold it back.

use kube::api::{GroupVersionKind, Patch, PatchParams};
use serde_json::{Value, json};

use crate::cluster::cache::ObjectKey;
use crate::cluster::resources::Resources;

/// The field manager of shard and drain labels, written by the sharder and by a member
/// handing an object over.
pub const SHARDER_FIELD_MANAGER: &str = "kubewasm-sharder";

/// A labelled child as the sharder saw it: its uid, the place and uid of its controller owner,
/// and its shard label. A relabel on this condition lands on whatever version of the child
/// still shows it so: changes the sharder does not decide on (kubelet's status writes) never
/// hold it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AsSeen {
    /// The child's uid.
    pub uid: String,
    /// The place of its controller owner among its owners, and the owner's uid.
    pub controller: Option<(usize, String)>,
    /// Its shard label's value.
    pub shard: String,
}

/// What a write sets (a value) or removes (null), at the version decided on; or, for a child
/// labelled already, on the condition that it is as seen.
#[derive(Debug, Default)]
pub struct Edit {
    /// Labels to set (a value) or remove (null).
    pub labels: serde_json::Map<String, Value>,
    /// Annotations to set or remove.
    pub annotations: serde_json::Map<String, Value>,
    /// The version decided on.
    pub version: String,
    /// For a child labelled already: what the write lands on instead of the version.
    pub as_seen: Option<AsSeen>,
}

impl Edit {
    /// The RFC 6902 patch of a child's shard label `label`, conditioned on `as_seen`.
    pub fn relabel(&self, label: &str, as_seen: &AsSeen) -> json_patch::Patch {
        let path = format!(
            "/metadata/labels/{}",
            label.replace('~', "~0").replace('/', "~1")
        );
        let mut ops = vec![json!({ "op": "test", "path": "/metadata/uid", "value": as_seen.uid })];
        if let Some((i, uid)) = &as_seen.controller {
            let owner = format!("/metadata/ownerReferences/{i}/uid");
            ops.push(json!({ "op": "test", "path": owner, "value": uid }));
        }
        ops.push(json!({ "op": "test", "path": path, "value": as_seen.shard }));
        ops.push(json!({ "op": "add", "path": path, "value": self.labels[label] }));
        serde_json::from_value(Value::Array(ops)).expect("a JSON patch of tests and an add")
    }
}

/// How a label write ended.
pub enum Sent {
    /// It landed; the object's new resourceVersion, if an integer.
    Written(Option<u64>),
    /// The object changed since the version decided on: its next event, which the watch has
    /// still to deliver, has it decided again on its new version, until a write holds.
    Conflict,
    /// The object is gone: its deletion is on its way too.
    Gone,
    /// It failed otherwise, as said.
    Failed(String),
}

impl Edit {
    /// Sends the write of the object `key` of `kind`, whose shard label is `label`; returns
    /// how it ended. A relabel whose condition fails is answered 422 with no cause: a conflict
    /// too; a 422 that names a cause (the object invalid, a policy's denial) is a failure.
    pub async fn send(
        &self,
        resources: &Resources,
        kind: &GroupVersionKind,
        key: &ObjectKey,
        label: &str,
    ) -> Sent {
        let relabel = self.as_seen.is_some();
        match self.patch(resources, kind, key, label).await {
            Ok(version) => Sent::Written(version.and_then(|v| v.parse().ok())),
            Err(kube::Error::Api(status)) if status.code == 409 => Sent::Conflict,
            Err(kube::Error::Api(status)) if relabel && status.code == 422 && untested(&status) => {
                Sent::Conflict
            }
            Err(kube::Error::Api(status)) if status.code == 404 => Sent::Gone,
            Err(kube::Error::Api(status)) => {
                Sent::Failed(format!("{} ({})", status.message, status.code))
            }
            Err(error) => Sent::Failed(error.to_string()),
        }
    }

    async fn patch(
        &self,
        resources: &Resources,
        kind: &GroupVersionKind,
        key: &ObjectKey,
        label: &str,
    ) -> kube::Result<Option<String>> {
        let params = PatchParams {
            field_manager: Some(SHARDER_FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        let api = resources.api(kind, key.namespace.as_deref()).await?;
        let name = &key.name;
        let edit = self;
        if let Some(as_seen) = &edit.as_seen {
            let patch = Patch::Json::<()>(edit.relabel(label, as_seen));
            return Ok(api
                .patch(name, &params, &patch)
                .await?
                .metadata
                .resource_version);
        }
        let mut metadata = json!({ "resourceVersion": edit.version, "labels": edit.labels });
        if !edit.annotations.is_empty() {
            metadata["annotations"] = Value::Object(edit.annotations.clone());
        }
        let patch = json!({ "metadata": metadata });
        let written = api.patch(name, &params, &Patch::Merge(&patch)).await?;
        Ok(written.metadata.resource_version)
    }
}

/// Whether a 422 answers a JSON patch whose test failed: the API server names no cause then, and
/// its generic message.
fn untested(status: &kube::core::Status) -> bool {
    let causes = status.details.as_ref().map_or(0, |d| d.causes.len());
    causes == 0
        && status
            .message
            .contains("rejected our request due to an error in our request")
}
