//! The workloads of a run, each measured for every implementation it applies to.

pub mod cache;
pub mod churn;
pub mod convergence;
pub mod density;
pub mod failover;
pub mod idle;
pub mod micro;
pub mod reload;
pub mod scale;
pub mod shards;
