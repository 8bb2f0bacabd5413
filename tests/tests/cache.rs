//! What guests read from the host's cache, on the real control plane, with the echo fixture
//! (`tests/guests/echo`), which writes what it read of each source ConfigMap, through the
//! request, `get` and `list`, into an owned ConfigMap:
//! - a module's `cache.drop` rules remove the fields they name from every object it reads,
//!   listed or watched, by each of the three ways, and only for the kinds they match;
//! - a second module reading the same kind without the rules, in the same host, reads every
//!   field: the cache of a kind is shared only by modules that drop the same fields.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use kubewasm_tests::{WAIT, control_plane, eventually, guest_wasm, guest_wasm_with, with_host};
use serde_json::Value;

const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// A source ConfigMap for the echo guests, with a last-applied annotation, another annotation,
/// and `data.value` set to `value` beside a large `data.big`.
fn source(name: &str, value: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(BTreeMap::from([(
                "kubewasm.dev/fixture".to_owned(),
                "echo".to_owned(),
            )])),
            annotations: Some(BTreeMap::from([
                (LAST_APPLIED.to_owned(), format!("{{\"name\":\"{name}\"}}")),
                ("kept".to_owned(), "yes".to_owned()),
            ])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([
            ("value".to_owned(), value.to_owned()),
            ("big".to_owned(), "x".repeat(4096)),
        ])),
        ..ConfigMap::default()
    }
}

/// The three readings of the source `name` that `guest` wrote, once they show `value`.
async fn readings(
    config_maps: &Api<ConfigMap>,
    name: &str,
    guest: &str,
    value: &str,
) -> Result<Vec<Value>> {
    let echo = format!("{name}-{guest}");
    eventually(&format!("{echo} showing value {value}"), WAIT, || async {
        let Some(written) = config_maps.get_opt(&echo).await? else {
            return Ok(None);
        };
        let data = written.data.unwrap_or_default();
        let read = ["request", "get", "list"]
            .iter()
            .map(|way| {
                let text = data
                    .get(*way)
                    .with_context(|| format!("{echo} has no {way}"))?;
                Ok(serde_json::from_str::<Value>(text)?)
            })
            .collect::<Result<Vec<Value>>>()?;
        Ok(read
            .iter()
            .all(|object| object["data"]["value"] == value)
            .then_some(read))
    })
    .await
}

#[tokio::test]
async fn a_module_s_drop_rules_remove_fields_from_what_it_reads_and_only_from_it() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("drop").await?;
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), ns.name());
    // Listed by the host's first list.
    config_maps
        .create(&PostParams::default(), &source("listed", "1"))
        .await?;
    let config = format!(
        "modules:
  - path: {dropping}
    namespaces: [{ns}]
    cache:
      drop:
        - fields: [/metadata/annotations/{last_applied}]
        - apiGroups: [\"\"]
          kinds: [ConfigMap]
          fields: [/data/big, /data/absent]
        - kinds: [Secret]
          fields: [/data/value]
  - path: {plain}
    namespaces: [{ns}]
",
        dropping = guest_wasm("echo").display(),
        plain = guest_wasm_with("echo", &["b"]).display(),
        ns = ns.name(),
        last_applied = LAST_APPLIED.replace('/', "~1"),
    );
    with_host("drop", &config, async |_| {
        // Delivered by the watch.
        config_maps
            .create(&PostParams::default(), &source("watched", "1"))
            .await?;
        for name in ["listed", "watched"] {
            for object in readings(&config_maps, name, "echo", "1").await? {
                let annotations = &object["metadata"]["annotations"];
                assert_eq!(annotations[LAST_APPLIED], Value::Null, "{name}: {object}");
                assert_eq!(annotations["kept"], "yes", "{name}: {object}");
                assert_eq!(object["data"]["big"], Value::Null, "{name}: {object}");
                assert_eq!(object["metadata"]["labels"]["kubewasm.dev/fixture"], "echo");
            }
            for object in readings(&config_maps, name, "echo-b", "1").await? {
                let annotations = &object["metadata"]["annotations"];
                assert!(annotations[LAST_APPLIED].is_string(), "{name}: {object}");
                assert_eq!(object["data"]["big"].as_str().map(str::len), Some(4096));
            }
        }
        // An update is read through the rules too.
        let patch = serde_json::json!({ "data": { "value": "2" } });
        config_maps
            .patch("watched", &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        for object in readings(&config_maps, "watched", "echo", "2").await? {
            assert_eq!(object["data"]["big"], Value::Null, "{object}");
        }
        readings(&config_maps, "watched", "echo-b", "2").await?;
        Ok(())
    })
    .await
}
