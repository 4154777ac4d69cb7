//! Deliveries already handled, remembered for a while so that a replay does nothing.
//!
//! A delivery is known by its id (`X-GitHub-Delivery`, ...) and by the digest of its body: a
//! forge signs the body only, so a captured delivery replayed under a fresh id is recognised
//! by its body. Only verified deliveries are remembered; the memory is bounded in time and size
//! and kept in the data directory (`webhook-deliveries.json`), so a restart forgets nothing: a
//! delivery captured before it is still a replay after it.

use serde::{Deserialize, Serialize};
use std::collections::{HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long a delivery is remembered.
pub(crate) const REMEMBER: Duration = Duration::from_secs(24 * 3600);

/// How many deliveries are remembered at most (the oldest go first).
pub(crate) const CAPACITY: usize = 4096;

/// The file of the memory, in the data directory.
const FILE: &str = "webhook-deliveries.json";

/// One delivery remembered: when (seconds since the epoch, wall clock, which survives a
/// restart as `Instant` does not) and its keys.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Entry {
    at: u64,
    keys: Vec<String>,
}

/// The memory.
#[derive(Debug)]
pub(crate) struct Seen {
    order: VecDeque<Entry>,
    keys: HashSet<String>,
    ttl: Duration,
    capacity: usize,
    /// Where it is kept (`None`: in memory only).
    file: Option<PathBuf>,
}

impl Default for Seen {
    fn default() -> Self {
        Seen::new(REMEMBER, CAPACITY)
    }
}

fn seconds(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl Seen {
    pub(crate) fn new(ttl: Duration, capacity: usize) -> Seen {
        Seen {
            order: VecDeque::new(),
            keys: HashSet::new(),
            ttl,
            capacity: capacity.max(1),
            file: None,
        }
    }

    /// The memory kept in `data_dir`, with what it held when the agent last stopped. A file
    /// that cannot be read is reported and started afresh: a lost memory only lets an old
    /// delivery run one more pass.
    pub(crate) fn kept_in(data_dir: &Path) -> Seen {
        let file = data_dir.join(FILE);
        let mut seen = Seen::new(REMEMBER, CAPACITY);
        match std::fs::read(&file) {
            Ok(bytes) => match serde_json::from_slice::<Vec<Entry>>(&bytes) {
                Ok(entries) => {
                    for e in entries.into_iter().rev().take(CAPACITY).rev() {
                        seen.keys.extend(e.keys.iter().cloned());
                        seen.order.push_back(e);
                    }
                }
                Err(e) => tracing::warn!(
                    file = %file.display(),
                    "the webhook delivery memory is unreadable, started afresh: {e}"
                ),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(
                file = %file.display(),
                "cannot read the webhook delivery memory, started afresh: {e}"
            ),
        }
        seen.file = Some(file);
        seen
    }

    /// Whether any of `keys` was seen; if none was, remembers them all (at `now`).
    pub(crate) fn first_time(&mut self, keys: Vec<String>, now: SystemTime) -> bool {
        let now = seconds(now);
        while let Some(front) = self.order.front() {
            let age = Duration::from_secs(now.saturating_sub(front.at));
            if age < self.ttl && self.order.len() < self.capacity {
                break;
            }
            if let Some(old) = self.order.pop_front() {
                for k in old.keys {
                    self.keys.remove(&k);
                }
            }
        }
        if keys.iter().any(|k| self.keys.contains(k)) {
            return false;
        }
        self.keys.extend(keys.iter().cloned());
        self.order.push_back(Entry { at: now, keys });
        self.save();
        true
    }

    /// Writes the memory to its file (a temporary renamed over it); a failure is reported,
    /// never fatal to the delivery.
    fn save(&self) {
        let Some(file) = &self.file else { return };
        let entries: Vec<&Entry> = self.order.iter().collect();
        let written = serde_json::to_vec(&entries)
            .map_err(std::io::Error::other)
            .and_then(|bytes| {
                let tmp = file.with_extension("json.tmp");
                std::fs::write(&tmp, bytes)?;
                std::fs::rename(tmp, file)
            });
        if let Err(e) = written {
            tracing::warn!(file = %file.display(), "cannot keep the webhook delivery memory: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delivery_is_new_once_until_it_is_forgotten() {
        let mut seen = Seen::new(Duration::from_secs(60), 2);
        let t = SystemTime::now();
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

#[cfg(test)]
mod kept {
    use super::*;

    #[test]
    fn a_restart_remembers_what_was_handled() {
        let dir = tempfile::tempdir().unwrap();
        let now = SystemTime::now();
        let mut seen = Seen::kept_in(dir.path());
        assert!(seen.first_time(vec!["id:github:1".into(), "body:aa".into()], now));
        let mut again = Seen::kept_in(dir.path());
        assert!(!again.first_time(vec!["body:aa".into()], now));
        assert!(again.first_time(vec!["body:bb".into()], now));
        // A day later it is forgotten.
        let mut later = Seen::kept_in(dir.path());
        assert!(later.first_time(vec!["body:aa".into()], now + REMEMBER));
        // An unreadable file starts afresh.
        std::fs::write(dir.path().join(FILE), "{not json").unwrap();
        let mut fresh = Seen::kept_in(dir.path());
        assert!(fresh.first_time(vec!["body:aa".into()], now));
    }
}
