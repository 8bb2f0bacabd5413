//! The workloads of a run, each measured for every implementation it applies to.

pub mod cache;
pub mod churn;
pub mod convergence;
pub mod dispatch;
pub mod idle;
pub mod reload;
pub mod scale;
