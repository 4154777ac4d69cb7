//! Deliveries already handled, remembered for a while so that a replay does nothing.
//!
//! A delivery is known by its id (`X-GitHub-Delivery`, ...) and by the digest of its body: a
//! forge signs the body only, so a captured delivery replayed under a fresh id is recognised
//! by its body. Only verified deliveries are remembered; the memory is bounded in time and size.

use std::collections::{HashSet, VecDeque};
use std::time::{Duration, Instant};

/// How long a delivery is remembered.
pub(crate) const REMEMBER: Duration = Duration::from_secs(24 * 3600);

/// How many deliveries are remembered at most (the oldest go first).
pub(crate) const CAPACITY: usize = 4096;

/// The memory.
#[derive(Debug)]
pub(crate) struct Seen {
    order: VecDeque<(Instant, Vec<String>)>,
    keys: HashSet<String>,
    ttl: Duration,
    capacity: usize,
}

impl Default for Seen {
    fn default() -> Self {
        Seen::new(REMEMBER, CAPACITY)
    }
}

impl Seen {
    pub(crate) fn new(ttl: Duration, capacity: usize) -> Seen {
        Seen {
            order: VecDeque::new(),
            keys: HashSet::new(),
            ttl,
            capacity: capacity.max(1),
        }
    }

    /// Whether any of `keys` was seen; if none was, remembers them all (at `now`).
    pub(crate) fn first_time(&mut self, keys: Vec<String>, now: Instant) -> bool {
        while let Some((at, _)) = self.order.front() {
            if now.duration_since(*at) < self.ttl && self.order.len() < self.capacity {
                break;
            }
            if let Some((_, old)) = self.order.pop_front() {
                for k in old {
                    self.keys.remove(&k);
                }
            }
        }
        if keys.iter().any(|k| self.keys.contains(k)) {
            return false;
        }
        self.keys.extend(keys.iter().cloned());
        self.order.push_back((now, keys));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delivery_is_new_once_until_it_is_forgotten() {
        let mut seen = Seen::new(Duration::from_secs(60), 2);
        let t = Instant::now();
        let d = |id: &str, body: &str| vec![format!("id:{id}"), format!("body:{body}")];
        assert!(seen.first_time(d("1", "a"), t));
        assert!(!seen.first_time(d("1", "a"), t));
        // A fresh id on a known body, or a known id on another body: both replays.
        assert!(!seen.first_time(d("2", "a"), t));
        assert!(!seen.first_time(d("1", "b"), t));
        assert!(seen.first_time(d("2", "b"), t));
        // Past the capacity, the oldest is forgotten.
        assert!(seen.first_time(d("3", "c"), t));
        assert!(seen.first_time(d("1", "a"), t));
        // And past its time.
        assert!(seen.first_time(d("3", "c"), t + Duration::from_secs(61)));
    }
}
