//! The sharding layer: several replicas share each guest's keys. Each replica holds a
//! membership Lease on which it announces the guests it runs; the members that announce a guest
//! form its consistent-hash ring; one member runs each guest's sharder, which labels each
//! primary object (and what it controls) for its member; each member's share is the objects
//! labelled for it, handed over with a drain label when the ring changes, and reconciled by its
//! new member once that member's caches hold every child the sharder labelled for it.

pub mod children;
pub mod membership;
pub mod retries;
pub mod ring;
pub mod roster;
pub mod sharder;
pub mod share;
pub mod stats;
pub mod watches;
pub mod write;
