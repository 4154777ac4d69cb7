//! [`MutationLimits`]: a per-node semaphore bounding in-flight mutations and a per-guest lock
//! allowing one mutation per VMID at a time — the client-side half of avoiding PVE's
//! `VM is locked` and `can't lock file ... got timeout` failures under parallel applies.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::{OwnedMutexGuard, OwnedSemaphorePermit, Semaphore};

/// Per-node and per-guest mutation limits.
#[derive(Debug)]
pub struct MutationLimits {
    per_node: usize,
    nodes: Mutex<HashMap<String, Arc<Semaphore>>>,
    guests: Mutex<HashMap<u32, Arc<tokio::sync::Mutex<()>>>>,
}

/// The right to mutate one guest; released on drop.
#[derive(Debug)]
pub struct MutationPermit {
    // Field order matters: the node slot is released before the guest lock.
    _node: OwnedSemaphorePermit,
    _guest: Option<OwnedMutexGuard<()>>,
    /// The node.
    pub node: String,
    /// The guest.
    pub vmid: u32,
}

impl MutationLimits {
    /// Limits with `per_node` concurrent mutations per node.
    pub fn new(per_node: usize) -> MutationLimits {
        MutationLimits {
            per_node: per_node.max(1),
            nodes: Mutex::new(HashMap::new()),
            guests: Mutex::new(HashMap::new()),
        }
    }

    /// The per-node limit.
    pub fn per_node(&self) -> usize {
        self.per_node
    }

    /// Waits for the guest's lock, then for a slot on its node (in that order, so a mutation
    /// queued behind another on the same guest does not hold a node slot while it waits).
    /// VMID 0, which no guest has, takes only a node slot: work on a node's storage (a
    /// download) is not serialised with other such work.
    pub async fn acquire(&self, node: &str, vmid: u32) -> MutationPermit {
        let guest = if vmid == 0 {
            None
        } else {
            Some(self.guest_lock(vmid).await)
        };
        let node_permit = loop {
            let sem = {
                let mut nodes = self
                    .nodes
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                nodes
                    .entry(node.to_string())
                    .or_insert_with(|| Arc::new(Semaphore::new(self.per_node)))
                    .clone()
            };
            match sem.acquire_owned().await {
                Ok(p) => break p,
                // Only a closed semaphore refuses, and none is ever closed; replace it anyway.
                Err(_) => {
                    self.nodes
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .remove(node);
                }
            }
        };
        MutationPermit {
            _node: node_permit,
            _guest: guest,
            node: node.to_string(),
            vmid,
        }
    }

    /// Waits for the lock of one guest.
    async fn guest_lock(&self, vmid: u32) -> OwnedMutexGuard<()> {
        let lock = {
            let mut guests = self
                .guests
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            guests.entry(vmid).or_default().clone()
        };
        lock.lock_owned().await
    }

    /// Mutations currently holding a slot on a node.
    pub fn in_flight(&self, node: &str) -> usize {
        let nodes = self
            .nodes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        nodes
            .get(node)
            .map_or(0, |s| self.per_node - s.available_permits())
    }
}

#[cfg(test)]
mod tests {
    use super::MutationLimits;
    use std::time::Duration;

    #[tokio::test]
    async fn node_work_without_a_guest_is_not_serialised_but_a_guest_is() {
        let limits = MutationLimits::new(4);
        let first = limits.acquire("pve1", 0).await;
        // A second download on the node gets a slot at once.
        let second =
            tokio::time::timeout(Duration::from_millis(200), limits.acquire("pve1", 0)).await;
        assert!(second.is_ok());
        assert_eq!(limits.in_flight("pve1"), 2);
        drop((first, second));
        // Two mutations of one guest wait for each other.
        let held = limits.acquire("pve1", 100).await;
        let waiting =
            tokio::time::timeout(Duration::from_millis(200), limits.acquire("pve1", 100)).await;
        assert!(waiting.is_err());
        drop(held);
    }
}
