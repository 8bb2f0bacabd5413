//! The cluster layer: what the host knows of Kubernetes, shared by every guest. Label selectors
//! and selections, the API resources behind kinds, informers (list, then watch, relist on 410)
//! and the caches they fill, whether the host may watch a kind in every namespace, the view each
//! guest reads through, leader election on a Lease and the gate a standby waits at, and the API client's keeping of
//! `Retry-After`. Nothing here knows
//! WebAssembly or the guests' contract.

pub mod cache;
pub mod gate;
pub mod leader;
pub mod managed;
pub mod reach;
pub mod resources;
pub mod retry_after;
pub mod selection;
pub mod selector;
pub mod transform;
pub mod view;
pub mod watch;
