//! The pure logic of the Website controller: the child objects built from a Website's spec,
//! the shared index patches and the status. Nothing here calls the host, so it is unit-tested
//! natively.

use std::collections::BTreeMap;

use kubewasm_guest::Gvk;
use kubewasm_guest::conditions::{Condition, ConditionStatus, set_condition};
use kubewasm_guest::k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use kubewasm_guest::k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, PodSpec, PodTemplateSpec, Service,
    ServicePort, ServiceSpec, Volume, VolumeMount,
};
use kubewasm_guest::k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kubewasm_guest::k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// API group of the Website kind.
pub const GROUP: &str = "kubewasm.dev";
/// API version of the Website kind.
pub const VERSION: &str = "v1alpha1";
/// The Website kind.
pub const KIND: &str = "Website";
/// The finalizer the host manages for this controller.
pub const FINALIZER: &str = "kubewasm.dev/website-index";
/// The shared, not owned, ConfigMap mapping website names to URLs in each namespace.
pub const INDEX: &str = "website-index";
/// The condition reporting whether the children were applied.
pub const READY: &str = "Ready";
/// Port nginx listens on inside the pod.
pub const CONTAINER_PORT: i32 = 80;
/// Where nginx serves files from; the content ConfigMap is mounted there.
pub const HTML_DIR: &str = "/usr/share/nginx/html";

/// The Website kind as a [`Gvk`].
pub fn website_kind() -> Gvk {
    Gvk::new(GROUP, VERSION, KIND)
}

/// A Website as read from the cache.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Website {
    /// Standard object metadata.
    pub metadata: ObjectMeta,
    /// Desired state.
    #[serde(default)]
    pub spec: WebsiteSpec,
    /// Observed state, as last written by this controller.
    #[serde(default)]
    pub status: Option<WebsiteStatus>,
}

/// Desired state of a Website; defaults mirror the CRD's.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebsiteSpec {
    /// The nginx image (default `nginx:1.27`).
    #[serde(default = "default_image")]
    pub image: String,
    /// Number of nginx pods (default 1).
    #[serde(default = "default_replicas")]
    pub replicas: i32,
    /// The HTML served as `index.html`.
    #[serde(default)]
    pub content: String,
    /// The Service port (default 80).
    #[serde(default = "default_port")]
    pub port: i32,
}

fn default_image() -> String {
    "nginx:1.27".into()
}

fn default_replicas() -> i32 {
    1
}

fn default_port() -> i32 {
    80
}

impl Default for WebsiteSpec {
    fn default() -> Self {
        Self {
            image: default_image(),
            replicas: default_replicas(),
            content: String::new(),
            port: default_port(),
        }
    }
}

/// Observed state of a Website.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebsiteStatus {
    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`: whether the ConfigMap, Deployment and Service were applied.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// In-cluster URL of the site.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

impl Website {
    fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// `app.kubernetes.io/name=website`, `app.kubernetes.io/instance=<name>`: the labels of
    /// every child and the selector of the Deployment and Service.
    pub fn labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("app.kubernetes.io/name".to_owned(), "website".to_owned()),
            (
                "app.kubernetes.io/instance".to_owned(),
                self.name().to_owned(),
            ),
        ])
    }

    fn child_metadata(&self, name: String) -> ObjectMeta {
        ObjectMeta {
            name: Some(name),
            namespace: self.metadata.namespace.clone(),
            labels: Some(self.labels()),
            ..ObjectMeta::default()
        }
    }

    /// Name of the ConfigMap holding `index.html`.
    pub fn content_name(&self) -> String {
        format!("{}-content", self.name())
    }

    /// `http://<name>.<namespace>.svc:<port>`.
    pub fn url(&self) -> String {
        format!(
            "http://{}.{}.svc:{}",
            self.name(),
            self.metadata.namespace.as_deref().unwrap_or("default"),
            self.spec.port
        )
    }
}

/// The ConfigMap `<name>-content` with `index.html`.
pub fn config_map(site: &Website) -> ConfigMap {
    ConfigMap {
        metadata: site.child_metadata(site.content_name()),
        data: Some(BTreeMap::from([(
            "index.html".to_owned(),
            site.spec.content.clone(),
        )])),
        ..ConfigMap::default()
    }
}

/// The Deployment `<name>`: `replicas` nginx pods serving the content ConfigMap.
pub fn deployment(site: &Website) -> Deployment {
    let labels = site.labels();
    let container = Container {
        name: "nginx".into(),
        image: Some(site.spec.image.clone()),
        ports: Some(vec![ContainerPort {
            name: Some("http".into()),
            container_port: CONTAINER_PORT,
            protocol: Some("TCP".into()),
            ..ContainerPort::default()
        }]),
        volume_mounts: Some(vec![VolumeMount {
            name: "content".into(),
            mount_path: HTML_DIR.into(),
            read_only: Some(true),
            ..VolumeMount::default()
        }]),
        ..Container::default()
    };
    Deployment {
        metadata: site.child_metadata(site.name().to_owned()),
        spec: Some(DeploymentSpec {
            replicas: Some(site.spec.replicas),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![container],
                    volumes: Some(vec![Volume {
                        name: "content".into(),
                        config_map: Some(ConfigMapVolumeSource {
                            name: site.content_name(),
                            ..ConfigMapVolumeSource::default()
                        }),
                        ..Volume::default()
                    }]),
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    }
}

/// The ClusterIP Service `<name>`: `port` → the pods' `http` port.
pub fn service(site: &Website) -> Service {
    Service {
        metadata: site.child_metadata(site.name().to_owned()),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".into()),
            selector: Some(site.labels()),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                port: site.spec.port,
                target_port: Some(IntOrString::String("http".into())),
                protocol: Some("TCP".into()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// The shared index ConfigMap as this controller applies it (not owned): name and namespace
/// only, so the apply never claims or removes the entries other Websites merge in.
pub fn index_config_map(namespace: Option<&str>) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(INDEX.into()),
            namespace: namespace.map(str::to_owned),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}

/// Whether the cached index lacks `name → url`.
pub fn index_needs_entry(index: Option<&ConfigMap>, name: &str, url: &str) -> bool {
    index
        .and_then(|index| index.data.as_ref())
        .and_then(|data| data.get(name))
        .is_none_or(|current| current != url)
}

/// The merge patch adding `name → url` to the index.
pub fn index_entry_patch(name: &str, url: &str) -> Value {
    json!({"data": {name: url}})
}

/// The merge patch removing `name` from the index.
pub fn index_removal_patch(name: &str) -> Value {
    json!({"data": {name: null}})
}

/// The status after a reconcile: `Ready` is `True` with reason `ChildrenApplied` when `error`
/// is `None`, `False` with reason `ApplyFailed` and the error otherwise. The URL is reported
/// once the children exist.
pub fn status(site: &Website, error: Option<&str>) -> WebsiteStatus {
    let generation = site.metadata.generation;
    let previous = site.status.clone().unwrap_or_default();
    let mut conditions = previous.conditions;
    let (state, reason, message) = match error {
        None => (
            ConditionStatus::True,
            "ChildrenApplied",
            "ConfigMap, Deployment and Service applied",
        ),
        Some(error) => (ConditionStatus::False, "ApplyFailed", error),
    };
    set_condition(&mut conditions, READY, state, reason, message, generation);
    WebsiteStatus {
        observed_generation: generation,
        conditions,
        url: if error.is_none() {
            Some(site.url())
        } else {
            previous.url
        },
    }
}

/// The object to apply to the status subresource.
pub fn status_object(site: &Website, status: &WebsiteStatus) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "kind": KIND,
        "metadata": {"name": site.metadata.name, "namespace": site.metadata.namespace},
        "status": status,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(spec: Value) -> Website {
        serde_json::from_value(json!({
            "apiVersion": "kubewasm.dev/v1alpha1", "kind": "Website",
            "metadata": {"name": "blog", "namespace": "web", "uid": "u", "generation": 3},
            "spec": spec,
        }))
        .unwrap()
    }

    #[test]
    fn applies_spec_defaults() {
        let site = site(json!({}));
        assert_eq!(site.spec, WebsiteSpec::default());
        assert_eq!(site.spec.image, "nginx:1.27");
        assert_eq!(site.url(), "http://blog.web.svc:80");
    }

    #[test]
    fn builds_the_content_config_map() {
        let cm =
            serde_json::to_value(config_map(&site(json!({"content": "<h1>hi</h1>"})))).unwrap();
        assert_eq!(
            cm,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "blog-content", "namespace": "web", "labels": {
                    "app.kubernetes.io/name": "website", "app.kubernetes.io/instance": "blog"}},
                "data": {"index.html": "<h1>hi</h1>"}})
        );
    }

    #[test]
    fn builds_the_deployment() {
        let d = serde_json::to_value(deployment(&site(
            json!({"image": "nginx:1.26", "replicas": 2}),
        )))
        .unwrap();
        assert_eq!(d["apiVersion"], "apps/v1");
        assert_eq!(d["kind"], "Deployment");
        assert_eq!(d["metadata"]["name"], "blog");
        assert_eq!(d["spec"]["replicas"], 2);
        let labels =
            json!({"app.kubernetes.io/name": "website", "app.kubernetes.io/instance": "blog"});
        assert_eq!(d["spec"]["selector"], json!({"matchLabels": labels}));
        assert_eq!(d["spec"]["template"]["metadata"]["labels"], labels);
        let pod = &d["spec"]["template"]["spec"];
        assert_eq!(
            pod["containers"],
            json!([{"name": "nginx", "image": "nginx:1.26",
                "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}],
                "volumeMounts": [{"name": "content", "mountPath": "/usr/share/nginx/html", "readOnly": true}]}])
        );
        assert_eq!(
            pod["volumes"],
            json!([{"name": "content", "configMap": {"name": "blog-content"}}])
        );
        assert!(d.get("status").is_none());
    }

    #[test]
    fn builds_the_service() {
        let s = serde_json::to_value(service(&site(json!({"port": 8080})))).unwrap();
        assert_eq!(s["metadata"]["name"], "blog");
        assert_eq!(
            s["spec"],
            json!({"type": "ClusterIP",
                "selector": {"app.kubernetes.io/name": "website", "app.kubernetes.io/instance": "blog"},
                "ports": [{"name": "http", "port": 8080, "targetPort": "http", "protocol": "TCP"}]})
        );
    }

    #[test]
    fn index_objects_and_patches() {
        assert_eq!(
            serde_json::to_value(index_config_map(Some("web"))).unwrap(),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "website-index", "namespace": "web"}})
        );
        assert_eq!(
            index_entry_patch("blog", "http://x"),
            json!({"data": {"blog": "http://x"}})
        );
        assert_eq!(index_removal_patch("blog"), json!({"data": {"blog": null}}));
        let index: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": "website-index"},
            "data": {"blog": "http://blog.web.svc:80"}}))
            .unwrap();
        assert!(!index_needs_entry(
            Some(&index),
            "blog",
            "http://blog.web.svc:80"
        ));
        assert!(index_needs_entry(
            Some(&index),
            "blog",
            "http://blog.web.svc:8080"
        ));
        assert!(index_needs_entry(
            Some(&index),
            "shop",
            "http://shop.web.svc:80"
        ));
        assert!(index_needs_entry(None, "blog", "http://blog.web.svc:80"));
    }

    #[test]
    fn reports_readiness() {
        let mut site = site(json!({}));
        let ready = status(&site, None);
        assert_eq!(ready.observed_generation, Some(3));
        assert_eq!(ready.url.as_deref(), Some("http://blog.web.svc:80"));
        assert_eq!(ready.conditions[0].type_, READY);
        assert_eq!(ready.conditions[0].status, ConditionStatus::True);
        assert_eq!(ready.conditions[0].reason, "ChildrenApplied");

        site.status = Some(ready.clone());
        let failed = status(&site, Some("quota exceeded"));
        assert_eq!(failed.conditions[0].status, ConditionStatus::False);
        assert_eq!(failed.conditions[0].reason, "ApplyFailed");
        assert_eq!(failed.url, ready.url);

        let object = status_object(&site, &failed);
        assert_eq!(object["apiVersion"], "kubewasm.dev/v1alpha1");
        assert_eq!(
            object["metadata"],
            json!({"name": "blog", "namespace": "web"})
        );
        assert_eq!(
            object["status"]["conditions"][0]["message"],
            "quota exceeded"
        );
    }
}
