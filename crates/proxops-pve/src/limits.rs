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
    _guest: OwnedMutexGuard<()>,
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
    pub async fn acquire(&self, node: &str, vmid: u32) -> MutationPermit {
        let guest = {
            let mut guests = self
                .guests
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            guests.entry(vmid).or_default().clone()
        };
        let guest = guest.lock_owned().await;
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
