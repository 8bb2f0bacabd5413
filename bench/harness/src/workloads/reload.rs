//! Hot reload under churn (kubewasm only): while sources are updated at a fixed rate, the
//! module file is replaced, by an atomic rename, with the other of two builds of the copy guest
//! that differ only in a custom section, both already in the compile cache. The host reports
//! how long each swap took; the harness times each from the rename to the host's reload
//! counter moving, and checks that every source's last update still reaches its child.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::Serialize;
use serde_json::Value;
use tokio::time::Instant;

use crate::bench::{Bench, report_unclean};
use crate::controllers::{HostModule, RunOptions, free_loopback_address, link_or_copy};
use crate::load;
use crate::stats::{Latencies, millis};
use crate::workloads::churn;
use kubewasm_tests::prometheus;

/// The host's log message for a module swapped without restarting its controller.
const SWAPPED: &str = "module swapped in place";
/// The host's log message for a module loaded at start.
const LOADED: &str = "module loaded";
/// Updates per second during the swaps.
const RATE: u32 = 100;

/// Two builds of the copy guest with different digests and the same behaviour.
pub struct Variants {
    pub files: [PathBuf; 2],
}

/// The hot reload run.
#[derive(Debug, Clone, Serialize)]
pub struct HotReload {
    pub rate_per_second: u32,
    pub sources: usize,
    pub swaps: usize,
    /// Swaps the host logged as done in place.
    pub swapped_in_place: usize,
    /// Reloads that restarted the controller or were rejected instead.
    pub other_reloads: usize,
    /// How long each swap took as the host logs it (`took`): reading the file, loading the
    /// compiled module from the cache, validating it and swapping.
    pub swap_ms: Vec<f64>,
    /// From the rename to the host's reload counter moving, including the file watcher's
    /// quiet period of 250 ms.
    pub rename_to_swapped_ms: Vec<f64>,
    pub latency: Latencies,
    /// Updates slower than `late_ms`.
    pub late: usize,
    pub late_ms: u64,
    /// Sources whose last update never reached their child.
    pub lost: usize,
}

/// Writes the two variants into `dir`: the guest as built, and the guest with a custom section
/// appended. Then runs a host once with both, so that both are compiled into the cache.
pub async fn prime(bench: &Bench) -> Result<Variants> {
    let dir = bench.launcher.folder("variants")?;
    let guest = &bench.launcher.binaries().guest;
    let files = [dir.join("copy-a.wasm"), dir.join("copy-b.wasm")];
    link_or_copy(guest, &files[0])?;
    let mut bytes = std::fs::read(guest).with_context(|| format!("reading {}", guest.display()))?;
    kubewasm_tests::append_custom_section(&mut bytes, "kubewasm-bench-variant", b"b");
    std::fs::write(&files[1], bytes)?;
    let modules: Vec<HostModule> = files
        .iter()
        .zip(["prime-a", "prime-b"])
        .map(|(path, name)| HostModule {
            path: path.clone(),
            name: name.to_owned(),
            namespace: "bench-prime".to_owned(),
        })
        .collect();
    let folder = bench.launcher.folder("prime")?;
    let mut host = bench
        .launcher
        .host(&folder, &modules, &RunOptions::default())?;
    crate::observer::poll("both variants to load", Duration::from_secs(300), || {
        host.check_running()?;
        Ok((log_events(&host.log(), LOADED).len() == files.len()).then_some(()))
    })
    .await?;
    report_unclean(&host.stop().await?);
    Ok(Variants { files })
}

/// Churns while swapping the module back and forth.
pub async fn run(bench: &Bench, variants: &Variants) -> Result<HotReload> {
    let namespace = "reload-kubewasm".to_owned();
    let mut sources = bench.sources(&namespace, bench.plan.churn_sources).await?;
    let folder = bench.launcher.folder("reload-kubewasm")?;
    let (modules, staging) = (folder.join("modules"), folder.join("staging"));
    std::fs::create_dir_all(&modules)?;
    std::fs::create_dir_all(&staging)?;
    let module = modules.join("copy.wasm");
    std::fs::copy(&variants.files[0], &module)?;
    let metrics = free_loopback_address()?;
    let options = RunOptions {
        reload: true,
        metrics: Some(metrics),
        ..RunOptions::default()
    };
    let host_module = HostModule {
        path: module.clone(),
        name: "copy".to_owned(),
        namespace: namespace.clone(),
    };
    let mut host = bench.launcher.host(&folder, &[host_module], &options)?;
    bench
        .converged(&namespace, &sources, Some(&mut host))
        .await?;
    let swaps = bench.plan.swaps;
    let interval = Duration::from_millis(bench.plan.swap_interval_ms);
    let window = interval * (swaps as u32 + 1);
    let (load, renames) = tokio::join!(
        churn::generate(bench, &mut sources, RATE, window, false),
        swap(variants, &module, &staging, metrics, swaps, interval),
    );
    let (load, renames) = (load?, renames?);
    host.check_running()?;
    let log = host.log();
    report_unclean(&host.stop().await?);
    load::delete_namespaces(&bench.client, &[namespace]).await?;
    let swap_ms: Vec<f64> = log_events(&log, SWAPPED)
        .iter()
        .map(|fields| took_ms(fields).context("a swap logs how long it took"))
        .collect::<Result<_>>()?;
    let other_reloads = [
        "module replaced with a new declaration",
        "module change rejected",
    ]
    .iter()
    .map(|message| log_events(&log, message).len())
    .sum();
    let late_ms = bench.plan.late_ms;
    let result = HotReload {
        rate_per_second: RATE,
        sources: sources.len(),
        swaps,
        swapped_in_place: swap_ms.len(),
        other_reloads,
        swap_ms,
        rename_to_swapped_ms: renames.into_iter().map(millis).collect(),
        late: load
            .latencies
            .iter()
            .filter(|l| l.as_millis() > u128::from(late_ms))
            .count(),
        latency: Latencies::of(load.latencies),
        late_ms,
        lost: load.lost,
    };
    println!(
        "hot reload: {}/{swaps} swapped in place, longest swap {:.1} ms, p99 {:.1} ms, {} late, {} lost",
        result.swapped_in_place,
        result.swap_ms.iter().copied().fold(0.0, f64::max),
        result.latency.p99_ms,
        result.late,
        result.lost
    );
    Ok(result)
}

/// Replaces `module` with the other variant every `interval`, `swaps` times; returns how long
/// each took from the rename until the host's reload counter moved.
async fn swap(
    variants: &Variants,
    module: &Path,
    staging: &Path,
    metrics: SocketAddr,
    swaps: usize,
    interval: Duration,
) -> Result<Vec<Duration>> {
    let reloads = async || -> Result<f64> {
        let text = prometheus::scrape(metrics).await?;
        Ok(prometheus::sum(
            &text,
            "kubewasm_module_reloads_total",
            |_| true,
        ))
    };
    let mut took = Vec::new();
    for index in 0..swaps {
        tokio::time::sleep(interval).await;
        let staged = staging.join("copy.wasm");
        std::fs::copy(&variants.files[(index + 1) % 2], &staged)?;
        let before = reloads().await?;
        let renamed = Instant::now();
        std::fs::rename(&staged, module)?;
        loop {
            if reloads().await? > before {
                took.push(renamed.elapsed());
                break;
            }
            if renamed.elapsed() > Duration::from_secs(30) {
                bail!("the host did not reload {} within 30 s", module.display());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    Ok(took)
}

/// The `fields` of the JSON log lines whose message is `message`.
fn log_events(log: &str, message: &str) -> Vec<Value> {
    log.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .map(|line| line["fields"].clone())
        .filter(|fields| fields["message"] == message)
        .collect()
}

/// The `took` field of a log event (a `Duration` in Rust's debug format, e.g. `1.5ms`), in
/// milliseconds.
fn took_ms(fields: &Value) -> Option<f64> {
    let text = fields["took"].as_str()?;
    let split = text.find(|c: char| !c.is_ascii_digit() && c != '.')?;
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let scale = match unit {
        "ns" => 1e-6,
        "µs" | "us" => 1e-3,
        "ms" => 1.0,
        "s" => 1e3,
        _ => return None,
    };
    Some(number * scale)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn took_is_read_in_every_unit() {
        for (took, ms) in [
            ("1.5ms", 1.5),
            ("250µs", 0.25),
            ("2s", 2000.0),
            ("800ns", 0.0008),
        ] {
            let read = took_ms(&json!({ "took": took })).unwrap();
            assert!((read - ms).abs() < 1e-9, "{took}: {read}");
        }
        assert_eq!(took_ms(&json!({ "took": "soon" })), None);
    }

    #[test]
    fn log_events_are_found_by_message() {
        let log = concat!(
            r#"{"level":"INFO","fields":{"message":"module swapped in place","took":"3ms"}}"#,
            "\nnot json\n",
            r#"{"level":"INFO","fields":{"message":"module loaded"}}"#,
        );
        let swapped = log_events(log, SWAPPED);
        assert_eq!(swapped.len(), 1);
        assert_eq!(took_ms(&swapped[0]), Some(3.0));
    }
}
