//! The serving layer: the host's HTTP listeners, the Prometheus exposition of its metrics, the
//! `/status` document and the `/healthz` and `/readyz` probes.

pub mod http;
pub mod metrics;
