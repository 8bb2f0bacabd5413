//! Counters a kubewasm host serves on its /metrics endpoint, summed over its guests.

use std::net::SocketAddr;

use anyhow::Result;
use serde::Serialize;

use kubewasm_tests::prometheus::{self, has};

/// Reconcile counters of a host.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct HostCounters {
    /// Successful reconciles.
    pub reconciles: u64,
    /// Applies not sent because the cache already showed them.
    pub writes_elided: u64,
    /// Time spent in reconciles (instantiation, the guest's code and its host calls).
    pub reconcile_seconds: f64,
}

impl HostCounters {
    /// The counters of the host serving metrics at `address`.
    pub async fn read(address: SocketAddr) -> Result<Self> {
        Ok(Self::parse(&prometheus::scrape(address).await?))
    }

    /// The counters in a host's /metrics text.
    pub fn parse(metrics: &str) -> Self {
        let all = |_: &[(&str, &str)]| true;
        Self {
            reconciles: prometheus::sum(metrics, "controller_runtime_reconcile_total", |labels| {
                has(labels, "result", "success")
            }) as u64,
            writes_elided: prometheus::sum(metrics, "kubewasm_writes_elided_total", all) as u64,
            reconcile_seconds: prometheus::sum(
                metrics,
                "controller_runtime_reconcile_time_seconds_sum",
                all,
            ),
        }
    }

    /// What was counted since `earlier`.
    pub fn since(&self, earlier: &HostCounters) -> HostCounters {
        HostCounters {
            reconciles: self.reconciles - earlier.reconciles,
            writes_elided: self.writes_elided - earlier.writes_elided,
            reconcile_seconds: self.reconcile_seconds - earlier.reconcile_seconds,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_summed_over_guests() {
        let metrics = r#"controller_runtime_reconcile_total{controller="copy-0",result="success"} 10
controller_runtime_reconcile_total{controller="copy-0",result="error"} 2
controller_runtime_reconcile_total{controller="copy-1",result="success"} 5
kubewasm_writes_elided_total{controller="copy-0"} 4
kubewasm_writes_elided_total{controller="copy-1"} 1
controller_runtime_reconcile_time_seconds_bucket{controller="copy-0",le="0.005"} 9
controller_runtime_reconcile_time_seconds_sum{controller="copy-0"} 0.25
controller_runtime_reconcile_time_seconds_sum{controller="copy-1"} 0.5
"#;
        let counters = HostCounters::parse(metrics);
        assert_eq!(
            counters,
            HostCounters {
                reconciles: 15,
                writes_elided: 5,
                reconcile_seconds: 0.75,
            }
        );
        let earlier = HostCounters {
            reconciles: 5,
            writes_elided: 5,
            reconcile_seconds: 0.25,
        };
        assert_eq!(counters.since(&earlier).reconciles, 10);
    }
}
