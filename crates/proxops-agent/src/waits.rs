//! How long each consumer has waited for what its reference expressions read, across passes:
//! a consumer waiting longer than its `waitTimeout` (default 15 minutes,
//! [`proxops_model::expr::DEFAULT_WAIT_TIMEOUT`]) becomes an anomaly of the cycle, so that
//! `/status`, the dashboard, the metrics and the notifications say so.
//!
//! The clock starts when this agent first sees the consumer wait: a restart starts it again.

use super::cluster::CycleOutcome;
use proxops_engine::plan::Anomaly;
use proxops_model::Repository;
use proxops_store::documents::utc_timestamp;
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

/// Since when each waiting consumer (`Kind/name`) of each cluster has waited.
#[derive(Debug, Default)]
pub(crate) struct WaitClock {
    since: BTreeMap<String, BTreeMap<String, SystemTime>>,
}

impl WaitClock {
    /// Notes the consumers `outcome` found waiting at `now`, forgets those that no longer wait,
    /// and adds an anomaly (and a `waits_timed_out` entry) for each that waited longer than its
    /// timeout. A cycle that planned nothing (invalid, leased, suspended, failed early) keeps
    /// the clocks as they are.
    pub fn observe(&mut self, repo: &Repository, outcome: &mut CycleOutcome, now: SystemTime) {
        if outcome.plan.is_none() {
            return;
        }
        let cluster = repo.cluster(&outcome.cluster);
        let clocks = self.since.entry(outcome.cluster.clone()).or_default();
        let record = &mut outcome.record;
        clocks.retain(|subject, _| record.waiting.iter().any(|w| w.subject == *subject));
        for wait in &record.waiting {
            let since = *clocks.entry(wait.subject.clone()).or_insert(now);
            let timeout = cluster
                .and_then(|c| {
                    c.resources
                        .iter()
                        .find(|r| r.key().to_string() == wait.subject)
                })
                .map_or(proxops_model::expr::DEFAULT_WAIT_TIMEOUT, |r| {
                    r.wait_timeout()
                });
            let waited = now.duration_since(since).unwrap_or_default();
            if waited < timeout {
                continue;
            }
            // Worded without the elapsed time: the message is the notification's fingerprint,
            // told again only when it changes (or a reminder is due).
            record.anomalies.push(Anomaly::new(
                wait.subject.clone(),
                format!(
                    "has waited since {} (longer than its waitTimeout of {}): {}",
                    utc_timestamp(since),
                    words(timeout),
                    wait.reason
                ),
            ));
            record.waits_timed_out.push(wait.subject.clone());
        }
    }
}

/// `15m`, `1h30m`, `45s`.
fn words(d: Duration) -> String {
    let secs = d.as_secs();
    if secs == 0 {
        return format!("{}ms", d.as_millis());
    }
    let (h, m, s) = (secs / 3600, secs % 3600 / 60, secs % 60);
    let mut out = String::new();
    for (n, unit) in [(h, "h"), (m, "m"), (s, "s")] {
        if n > 0 {
            out.push_str(&format!("{n}{unit}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn durations_read_as_they_are_written() {
        assert_eq!(words(Duration::from_secs(900)), "15m");
        assert_eq!(words(Duration::from_secs(5400)), "1h30m");
        assert_eq!(words(Duration::from_secs(1)), "1s");
        assert_eq!(words(Duration::from_millis(250)), "250ms");
    }
}
