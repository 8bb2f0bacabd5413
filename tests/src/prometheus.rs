//! Reading counters out of Prometheus text exposition: the host's metrics and the API server's.

use std::net::SocketAddr;

use anyhow::{Context, Result};
use kube::Client;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

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

/// The body of `GET /metrics` from the plain HTTP server at `address`.
pub async fn scrape(address: SocketAddr) -> Result<String> {
    let mut stream = tokio::net::TcpStream::connect(address).await?;
    let request = format!("GET /metrics HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .context("an HTTP response has a header")?;
    anyhow::ensure!(
        head.starts_with("HTTP/1.1 200"),
        "GET /metrics from {address}: {head}"
    );
    Ok(body.to_owned())
}

/// The sum of the samples of metric `name` whose labels satisfy `keep`. Labels are given to
/// `keep` as `(name, value)` pairs; label values holding commas are not supported.
pub fn sum(text: &str, name: &str, keep: impl Fn(&[(&str, &str)]) -> bool) -> f64 {
    text.lines()
        .filter_map(|line| line.strip_prefix(name))
        .filter_map(|rest| {
            let (labels, value) = match rest.strip_prefix('{') {
                Some(rest) => rest.rsplit_once("} ")?,
                None => ("", rest.strip_prefix(' ')?),
            };
            let labels: Vec<(&str, &str)> = labels
                .split(',')
                .filter_map(|label| {
                    let (key, value) = label.split_once('=')?;
                    Some((key, value.trim_matches('"')))
                })
                .collect();
            keep(&labels).then(|| value.trim().parse::<f64>().ok())?
        })
        .sum()
}

/// How many mutating requests on each of `resources` (plural names, such as `configmaps`; a
/// subresource's requests count for its resource) the API server has served since it started,
/// from one read of `apiserver_request_total` on its `/metrics` endpoint.
pub async fn apiserver_writes(client: &Client, resources: &[&str]) -> Result<Vec<u64>> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    let metrics = client.request_text(request).await?;
    Ok(resources.iter().map(|r| writes_in(&metrics, r)).collect())
}

/// The sum of `apiserver_request_total` samples for `resource` with a mutating verb in the
/// Prometheus text `metrics`.
fn writes_in(metrics: &str, resource: &str) -> u64 {
    sum(metrics, "apiserver_request_total", |labels| {
        has(labels, "resource", resource) && mutating(labels)
    }) as u64
}

/// Whether the `verb` of an API server metric's `labels` changes objects.
pub fn mutating(labels: &[(&str, &str)]) -> bool {
    MUTATING_VERBS.iter().any(|verb| has(labels, "verb", verb))
}

/// Whether `labels` hold `name` with `value`.
pub fn has(labels: &[(&str, &str)], name: &str, value: &str) -> bool {
    labels.iter().any(|&(n, v)| n == name && v == value)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# TYPE controller_runtime_reconcile_total counter
controller_runtime_reconcile_total{controller="copy-0",result="success"} 12
controller_runtime_reconcile_total{controller="copy-0",result="error"} 1
controller_runtime_reconcile_total_other{controller="copy-0"} 100
kubewasm_module_reloads_total 3
"#;

    #[test]
    fn samples_are_summed_by_name_and_labels() {
        let success = sum(TEXT, "controller_runtime_reconcile_total", |labels| {
            has(labels, "result", "success")
        });
        assert_eq!(success, 12.0);
        assert_eq!(
            sum(TEXT, "controller_runtime_reconcile_total", |_| true),
            13.0
        );
        assert_eq!(sum(TEXT, "kubewasm_module_reloads_total", |_| true), 3.0);
    }

    #[test]
    fn only_mutating_requests_on_the_resources_count() {
        let metrics = r#"# HELP apiserver_request_total x
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="resource",subresource="",verb="APPLY",version="v1"} 7
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="configmaps",scope="resource",subresource="",verb="POST",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="namespace",subresource="",verb="LIST",version="v1"} 40
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="secrets",scope="resource",subresource="",verb="PATCH",version="v1"} 5
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="namespace",subresource="",verb="DELETECOLLECTION",version="v1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="kubewasm.dev",resource="websites",scope="resource",subresource="status",verb="APPLY",version="v1alpha1"} 4
"#;
        assert_eq!(writes_in(metrics, "configmaps"), 10);
        assert_eq!(writes_in(metrics, "secrets"), 5);
        assert_eq!(writes_in(metrics, "websites"), 4);
    }
}
