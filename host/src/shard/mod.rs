//! The sharding layer: several replicas share each guest's keys. Each replica holds a
//! membership Lease; the members form a consistent-hash ring; the replica that leads runs the
//! sharder, which labels each primary object (and what it controls) for its member; each
//! member's share is the objects labelled for it, handed over with a drain label when the ring
//! changes.

pub mod membership;
pub mod ring;
pub mod roster;
pub mod sharder;
pub mod share;
