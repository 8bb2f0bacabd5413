//! A gate that holds back what a replica may do only while it leads: a warm standby runs its
//! informers and loads its modules behind a closed gate, and opens it once it wins the Lease.
//!
//! Guarantees: once opened, a gate stays open; [`Gate::opened`] resolves at once on an open
//! gate, and wakes every waiter when the gate opens.

use std::sync::Arc;

use tokio::sync::watch;

/// Opened once, shared by every task that waits on it; cheap to clone.
#[derive(Debug, Clone)]
pub struct Gate(Arc<watch::Sender<bool>>);

impl Gate {
    /// A gate that is open from the start: the replica does not wait for leadership.
    pub fn open() -> Self {
        Self(Arc::new(watch::Sender::new(true)))
    }

    /// A closed gate, opened by [`Gate::let_through`].
    pub fn closed() -> Self {
        Self(Arc::new(watch::Sender::new(false)))
    }

    /// Opens the gate for good.
    pub fn let_through(&self) {
        self.0.send_replace(true);
    }

    /// Whether the gate is open.
    pub fn is_open(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves once the gate is open.
    pub async fn opened(&self) {
        let mut open = self.0.subscribe();
        // The sender lives in `self`, so the wait ends only when the gate opens.
        let _ = open.wait_for(|open| *open).await;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn waiters_pass_once_the_gate_opens_and_it_stays_open() {
        let gate = Gate::closed();
        let waiter = tokio::spawn({
            let gate = gate.clone();
            async move { gate.opened().await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished() && !gate.is_open());
        gate.let_through();
        waiter.await.unwrap();
        assert!(gate.is_open());
        gate.opened().await;
        Gate::open().opened().await;
    }
}
