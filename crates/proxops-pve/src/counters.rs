//! [`RequestCounters`]: how many requests the client sent, in total and per endpoint template,
//! so callers can check and report the cost of an inventory or a plan.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Request counts by `METHOD /path/{template}`.
#[derive(Debug, Default)]
pub struct RequestCounters {
    total: AtomicU64,
    by_endpoint: Mutex<BTreeMap<String, u64>>,
}

impl RequestCounters {
    pub(crate) fn hit(&self, method: &str, template: &str) {
        self.total.fetch_add(1, Ordering::Relaxed);
        let mut map = self
            .by_endpoint
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *map.entry(format!("{method} {template}")).or_insert(0) += 1;
    }

    /// All requests sent.
    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// Requests to one endpoint, e.g. `("GET", "/cluster/resources")`.
    pub fn count(&self, method: &str, template: &str) -> u64 {
        self.snapshot()
            .get(&format!("{method} {template}"))
            .copied()
            .unwrap_or(0)
    }

    /// A copy of the per-endpoint counts, sorted.
    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        self.by_endpoint
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Resets all counts to zero.
    pub fn reset(&self) {
        let mut map = self
            .by_endpoint
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.clear();
        self.total.store(0, Ordering::Relaxed);
    }
}
