//! Reading counters out of Prometheus text exposition.

use std::net::SocketAddr;

use anyhow::{Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

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
}
