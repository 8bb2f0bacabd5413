//! How this replica runs among its peers: when it may reconcile, its place in a shard ring,
//! and the lanes every queue of its guests shares.

use std::sync::Arc;

use crate::cluster::gate::Gate;
use crate::control::queue::Lanes;
use crate::shard::sharder::Sharded;

/// How this replica runs among its peers.
#[derive(Clone)]
pub struct Replica {
    /// Opens once this replica may reconcile: on winning the leader Lease, or, when sharded,
    /// on joining the ring.
    pub gate: Gate,
    /// When sharded: its place in the ring.
    pub sharded: Option<Sharded>,
    /// The lanes every queue of its guests shares.
    pub lanes: Arc<Lanes>,
}

impl Replica {
    /// A replica alone: it reconciles every key at once.
    pub fn alone() -> Self {
        Self {
            gate: Gate::open(),
            sharded: None,
            lanes: Lanes::of_host(),
        }
    }
}
