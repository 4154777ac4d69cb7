//! [`RequestCounters`]: how many requests the client sent, in total and per endpoint template,
//! so callers can check and report the cost of an inventory or a plan.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Request counts by `METHOD /path/{template}`, and how long they took.
#[derive(Debug, Default)]
pub struct RequestCounters {
    total: AtomicU64,
    by_endpoint: Mutex<BTreeMap<String, u64>>,
    latency: Mutex<BTreeMap<String, Latency>>,
}

/// Completed requests to one endpoint and their total time (answered or failed alike).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Latency {
    /// Requests that completed.
    pub count: u64,
    /// Their summed duration in seconds.
    pub seconds: f64,
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

    pub(crate) fn took(&self, method: &str, template: &str, elapsed: std::time::Duration) {
        let mut map = self
            .latency
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let entry = map.entry(format!("{method} {template}")).or_default();
        entry.count += 1;
        entry.seconds += elapsed.as_secs_f64();
    }

    /// Completed requests and their summed duration per endpoint, sorted.
    pub fn latencies(&self) -> BTreeMap<String, Latency> {
        self.latency
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
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
        self.latency
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clear();
        self.total.store(0, Ordering::Relaxed);
    }
}
