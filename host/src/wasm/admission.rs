//! Admission of guest instances: a call waits until the host holds fewer than its count of
//! instances and has room in its budget of linear memory for what the call is expected to take,
//! both in the order asked. Without the budget, a host starting a hundred guests whose runtime
//! takes 12 MiB each (an interpreter's heap) held them all at once: 7.3 GiB at its peak.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The unit the memory budget is counted in.
const MIB: u64 = 1 << 20;

/// The budget of instance memory when the host's cgroup sets no memory limit.
pub const DEFAULT_MEMORY_BUDGET: u64 = 1 << 30;

/// The smallest budget: room for one instance at the default memory limit.
const MIN_MEMORY_BUDGET: u64 = 64 * MIB;

/// Room for instances, shared by every call of the host.
#[derive(Debug)]
pub struct Admission {
    slots: Arc<Semaphore>,
    memory: Arc<Semaphore>,
    /// The budget, in MiB: no call asks for more.
    budget: u32,
}

/// Held while an instance lives: its slot and its share of the memory budget.
#[derive(Debug)]
pub struct Admitted {
    _slot: OwnedSemaphorePermit,
    _memory: OwnedSemaphorePermit,
}

impl Admission {
    /// Room for `instances` instances holding `memory_budget` bytes of linear memory in all.
    pub fn new(instances: u32, memory_budget: u64) -> Self {
        let budget = u32::try_from(memory_budget.max(MIB) / MIB).unwrap_or(u32::MAX);
        Self {
            slots: Arc::new(Semaphore::new(instances as usize)),
            memory: Arc::new(Semaphore::new(budget as usize)),
            budget,
        }
    }

    /// Waits for a slot, then for `memory_bytes` of the budget (rounded up to MiB; all of it
    /// if the budget is smaller). Calls are let in in the order they asked.
    pub async fn admit(&self, memory_bytes: u64) -> Admitted {
        let slot = self.slots.clone().acquire_owned().await;
        let mib = u32::try_from(memory_bytes.div_ceil(MIB))
            .unwrap_or(u32::MAX)
            .clamp(1, self.budget);
        let memory = self.memory.clone().acquire_many_owned(mib).await;
        Admitted {
            _slot: slot.expect("the slots are never closed"),
            _memory: memory.expect("the memory budget is never closed"),
        }
    }
}

/// The budget of instance memory for this process: half the memory limit of its cgroup (the
/// rest is the host's own), at least 64 MiB; [`DEFAULT_MEMORY_BUDGET`] without a limit.
pub fn memory_budget() -> u64 {
    cgroup_memory_limit().map_or(DEFAULT_MEMORY_BUDGET, |limit| {
        (limit / 2).max(MIN_MEMORY_BUDGET)
    })
}

/// The memory limit of the process's cgroup (v2, else v1), if one is set.
fn cgroup_memory_limit() -> Option<u64> {
    [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .find_map(|path| std::fs::read_to_string(path).ok())
    .and_then(|text| parse_limit(&text))
}

/// A cgroup memory limit as its file holds it: `max`, or a huge number, for none.
fn parse_limit(text: &str) -> Option<u64> {
    text.trim()
        .parse::<u64>()
        .ok()
        .filter(|limit| *limit < 1 << 50)
}

/// How much linear memory a guest's instances take: the most any of its calls ended with, or
/// the memory limit until one has run.
#[derive(Debug, Default)]
pub struct MemoryEstimate(AtomicU64);

impl MemoryEstimate {
    /// The bytes a call of the guest is expected to take, at most `limit`.
    pub fn bytes(&self, limit: u64) -> u64 {
        match self.0.load(Ordering::Relaxed) {
            0 => limit,
            seen => seen.min(limit),
        }
    }

    /// Notes that a call ended holding `bytes`.
    pub fn observe(&self, bytes: u64) {
        self.0.fetch_max(bytes, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn calls_wait_for_room_in_the_memory_budget_in_the_order_asked() {
        let admission = Arc::new(Admission::new(10, 8 * MIB));
        let first = admission.admit(6 * MIB).await;
        let waiting = {
            let admission = admission.clone();
            tokio::spawn(async move { admission.admit(4 * MIB).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "admitted past the budget");
        // A small call behind it waits its turn rather than passing it.
        let small = {
            let admission = admission.clone();
            tokio::spawn(async move { admission.admit(1).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!small.is_finished(), "admitted out of turn");
        drop(first);
        waiting.await.unwrap();
        small.await.unwrap();
    }

    #[tokio::test]
    async fn a_call_larger_than_the_budget_takes_all_of_it_rather_than_waiting_forever() {
        let admission = Admission::new(10, 8 * MIB);
        let all = admission.admit(100 * MIB).await;
        drop(all);
        admission.admit(8 * MIB).await;
    }

    #[tokio::test]
    async fn calls_wait_for_a_slot_whatever_their_memory() {
        let admission = Arc::new(Admission::new(1, 1 << 30));
        let first = admission.admit(MIB).await;
        let second = {
            let admission = admission.clone();
            tokio::spawn(async move { admission.admit(MIB).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!second.is_finished(), "two instances in a pool of one");
        drop(first);
        second.await.unwrap();
    }

    #[test]
    fn an_estimate_is_the_limit_until_a_call_ran_then_the_most_a_call_took() {
        let estimate = MemoryEstimate::default();
        assert_eq!(estimate.bytes(64 * MIB), 64 * MIB);
        estimate.observe(3 * MIB);
        estimate.observe(2 * MIB);
        assert_eq!(estimate.bytes(64 * MIB), 3 * MIB);
        assert_eq!(estimate.bytes(MIB), MIB, "never more than the limit");
    }

    #[test]
    fn cgroup_limits_are_read_as_written() {
        assert_eq!(parse_limit("max\n"), None);
        assert_eq!(parse_limit("536870912\n"), Some(512 * MIB));
        assert_eq!(
            parse_limit("9223372036854771712\n"),
            None,
            "v1 without a limit"
        );
    }
}
