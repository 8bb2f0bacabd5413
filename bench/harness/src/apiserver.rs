//! What the API server reports about itself: its version, and how many writes it has served.

use anyhow::Result;
use kube::Client;

use crate::prometheus;

/// Verbs of `apiserver_request_total` that change objects. Server-side apply is counted as
/// `APPLY`, other patches as `PATCH`.
const MUTATING_VERBS: [&str; 6] = [
    "POST",
    "PUT",
    "PATCH",
    "APPLY",
    "DELETE",
    "DELETECOLLECTION",
];

/// How many mutating requests on ConfigMaps the API server has served since it started, from
/// `apiserver_request_total` on its `/metrics` endpoint.
pub async fn configmap_writes(client: &Client) -> Result<u64> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    Ok(writes_in(
        &client.request_text(request).await?,
        "configmaps",
    ))
}

/// The API server's `gitVersion`.
pub async fn version(client: &Client) -> Result<String> {
    Ok(client.apiserver_version().await?.git_version)
}

/// The sum of `apiserver_request_total` samples for `resource` with a mutating verb in the
/// Prometheus text `metrics`.
fn writes_in(metrics: &str, resource: &str) -> u64 {
    prometheus::sum(metrics, "apiserver_request_total", |labels| {
        prometheus::has(labels, "resource", resource)
            && MUTATING_VERBS
                .iter()
                .any(|verb| prometheus::has(labels, "verb", verb))
    }) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_mutating_requests_on_the_resource_count() {
        let metrics = r#"# HELP apiserver_request_total x
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="resource",subresource="",verb="APPLY",version="v1"} 7
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="configmaps",scope="resource",subresource="",verb="POST",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="namespace",subresource="",verb="LIST",version="v1"} 40
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="secrets",scope="resource",subresource="",verb="PATCH",version="v1"} 5
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="namespace",subresource="",verb="DELETECOLLECTION",version="v1"} 1
"#;
        assert_eq!(writes_in(metrics, "configmaps"), 10);
        assert_eq!(writes_in(metrics, "secrets"), 5);
    }
}
