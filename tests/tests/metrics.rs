//! The host's HTTP endpoints: /metrics counts the guest's reconciles in controller-runtime's
//! names, /healthz and /readyz answer once the host runs and its informers have listed, and
//! /status names the guest's module.

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use kubewasm_tests::{WAIT, control_plane, eventually, module_config, with_host_args};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[tokio::test]
async fn metrics_probes_and_status_are_served() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;
    let ns = plane.namespace("metrics").await?;
    let [metrics, probes] = free_ports()?.map(|port| format!("127.0.0.1:{port}"));
    with_host_args(
        ns.name(),
        &module_config("mirror", ns.name()),
        &[
            "--metrics-bind-address",
            &metrics,
            "--health-probe-bind-address",
            &probes,
        ],
        async |_| exercise(&client, ns.name(), &metrics, &probes).await,
    )
    .await
}

async fn exercise(client: &Client, namespace: &str, metrics: &str, probes: &str) -> Result<()> {
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), namespace);
    let source = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": "source", "labels": { "kubewasm.dev/fixture": "mirror" } },
        "data": { "value": "observed" },
    });
    config_maps
        .patch(
            "source",
            &PatchParams::apply("tests"),
            &Patch::Apply(&source),
        )
        .await?;
    eventually("the mirror", WAIT, || async {
        Ok(config_maps.get_opt("source-mirror").await?)
    })
    .await?;

    let (status, body) = eventually("/readyz to answer 200", WAIT, || async {
        Ok(Some(get(probes, "/readyz").await?).filter(|(status, _)| *status == 200))
    })
    .await?;
    ensure!(
        status == 200 && body == "ok\n",
        "/readyz: {status} {body:?}"
    );
    let (status, _) = get(probes, "/healthz").await?;
    ensure!(status == 200, "/healthz answers {status}");
    ensure!(
        get(probes, "/metrics").await?.0 == 404,
        "no /metrics on the probe address"
    );
    ensure!(
        get(metrics, "/nothing").await?.0 == 404,
        "unknown paths are 404"
    );

    let samples = eventually("a successful reconcile in /metrics", WAIT, || async {
        let (status, body) = get(metrics, "/metrics").await?;
        ensure!(status == 200, "/metrics answers {status}");
        let samples = parse(&body)?;
        let succeeded = samples
            .iter()
            .find(|(name, _)| {
                name == r#"controller_runtime_reconcile_total{controller="mirror",result="success"}"#
            })
            .map_or(0.0, |(_, value)| *value);
        Ok((succeeded >= 1.0).then_some(samples))
    })
    .await?;
    ensure!(
        samples
            .iter()
            .any(|(name, _)| name == r#"workqueue_depth{name="mirror"}"#),
        "workqueue_depth of mirror missing: {samples:?}"
    );

    let (status, body) = get(metrics, "/status").await?;
    ensure!(status == 200, "/status answers {status}");
    let document: Value = serde_json::from_str(&body).context("/status is JSON")?;
    let guests = document["guests"].as_array().context("guests")?;
    let mirror = guests
        .iter()
        .find(|g| g["name"] == "mirror")
        .with_context(|| format!("mirror in /status: {body}"))?;
    let digest = mirror["digest"].as_str().unwrap_or_default();
    ensure!(
        digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()),
        "digest {digest:?}"
    );
    ensure!(
        mirror["counters"]["succeeded"].as_u64() >= Some(1),
        "{body}"
    );
    ensure!(mirror["consecutiveFailures"] == 0, "{body}");
    Ok(())
}

/// Two distinct ports nothing listens on right now.
fn free_ports() -> Result<[u16; 2]> {
    let first = std::net::TcpListener::bind("127.0.0.1:0")?;
    let second = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok([first.local_addr()?.port(), second.local_addr()?.port()])
}

/// `GET path` over HTTP/1.1; the status code and the body.
async fn get(address: &str, path: &str) -> Result<(u16, String)> {
    let mut stream = TcpStream::connect(address).await?;
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .with_context(|| format!("no header end in {response:?}"))?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("no status in {head:?}"))?;
    Ok((status, body.to_owned()))
}

/// The samples of a text exposition: series (name and labels, as written) and value.
fn parse(text: &str) -> Result<Vec<(String, f64)>> {
    let mut samples = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let Some((series, value)) = line.rsplit_once(' ') else {
            bail!("not a sample: {line:?}");
        };
        samples.push((series.to_owned(), value.parse()?));
    }
    Ok(samples)
}
