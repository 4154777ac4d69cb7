//! What a cycle tells the notification sinks: the conditions that hold for a cluster after it
//! (`Condition`), and the JSON document of one event ([`EventDocument`]).
//!
//! A condition is keyed by its reason and resource and carries a fingerprint of what makes it
//! this condition (the failing actions, the anomaly's message), never of what changes every
//! pass (task ids, times): a sink is told again only when the fingerprint changes, or when its
//! reminder is due.

use super::super::cluster::CycleOutcome;
use super::super::status::CycleResult;
use proxops_model::config::{DriftMode, EventKind, NotifySeverity};
use serde::Serialize;
use std::collections::BTreeMap;

/// One thing that holds for a cluster (or, without one, for the repository).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Condition {
    pub kind: EventKind,
    pub reason: &'static str,
    pub severity: NotifySeverity,
    pub resource: Option<String>,
    pub message: String,
    pub fingerprint: String,
    /// Cycles in a row a resource has been WAITing (`ResourceWaiting` only).
    pub waiting: u32,
}

impl Condition {
    /// Its key among the conditions of one cluster.
    pub fn key(&self) -> String {
        format!(
            "{}|{}",
            self.reason,
            self.resource.as_deref().unwrap_or_default()
        )
    }

    /// Whether it is a failure, which only a successful cycle clears (and then a recovery is
    /// told).
    pub fn is_failure(&self) -> bool {
        matches!(
            self.kind,
            EventKind::CycleFailed | EventKind::RepositoryInvalid
        )
    }
}

/// What the notifier remembers of a cluster between its cycles.
#[derive(Debug, Clone, Default)]
pub(crate) struct ClusterTrack {
    /// Cycles in a row each resource has been WAITing.
    waits: BTreeMap<String, u32>,
    /// `Kind/name` -> the blob id of the desired document it was last CLEAN at: an action
    /// planned on it while its document is still that one is drift (PVE moved, not git),
    /// whatever else the cluster holds.
    clean_at: BTreeMap<String, String>,
}

/// The longest message sent.
const MAX_MESSAGE: usize = 2000;

/// `text` cut to at most `max` bytes on a character boundary, with `…` when cut.
pub(crate) fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max.saturating_sub(3);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

fn one_or_none(subjects: &[String]) -> Option<String> {
    match subjects {
        [only] => Some(only.clone()),
        _ => None,
    }
}

/// The conditions after `outcome`; `None` when the cycle observed nothing (another writer held
/// the lease, the cluster is suspended, a shutdown stopped it): what held before still holds.
pub(crate) fn conditions(
    outcome: &CycleOutcome,
    drift: DriftMode,
    track: &mut ClusterTrack,
) -> Option<Vec<Condition>> {
    let record = &outcome.record;
    let mut out = Vec::new();
    match record.result {
        CycleResult::Leased | CycleResult::Suspended | CycleResult::Stopped => return None,
        CycleResult::Invalid => {
            out.push(Condition {
                kind: EventKind::RepositoryInvalid,
                reason: "RepositoryInvalid",
                severity: NotifySeverity::Error,
                resource: None,
                message: cut(
                    &format!(
                        "cluster {} is invalid; nothing is done until it is fixed: {}",
                        outcome.cluster,
                        record.errors.join("; ")
                    ),
                    MAX_MESSAGE,
                ),
                fingerprint: record.errors.join("\n"),
                waiting: 0,
            });
            return Some(out);
        }
        CycleResult::Failed => out.push(Condition {
            kind: EventKind::CycleFailed,
            reason: "CycleFailed",
            severity: NotifySeverity::Error,
            resource: one_or_none(&outcome.failed_subjects),
            message: cut(
                &format!("cycle failed: {}", record.errors.join("; ")),
                MAX_MESSAGE,
            ),
            fingerprint: outcome.failures.join("\n"),
            waiting: 0,
        }),
        _ => {}
    }
    let actions: Vec<(String, String)> = outcome
        .plan
        .as_ref()
        .map(|p| {
            p.actions
                .iter()
                .map(|a| {
                    let subject = format!("{}/{}", a.kind, a.name);
                    (format!("{subject} {}", verb(a.verb)), subject)
                })
                .collect()
        })
        .unwrap_or_default();
    if record.result == CycleResult::Drifted && drift == DriftMode::Report {
        let (lines, subjects): (Vec<String>, Vec<String>) = actions.iter().cloned().unzip();
        out.push(drift_condition(
            "DriftReported",
            format!(
                "drift reported (drift: report): {} change(s) left alone: {}",
                lines.len(),
                lines.join(", ")
            ),
            &lines,
            &subjects,
        ));
    } else if let Some(rows) = &outcome.resources {
        // Per resource: its document is the one it was last CLEAN at, yet it needed actions.
        let mut drifted: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for (line, subject) in &actions {
            let document = rows
                .iter()
                .find(|r| format!("{}/{}", r.kind, r.name) == *subject)
                .and_then(|r| r.document.as_ref());
            if document.is_some() && document == track.clean_at.get(subject) {
                drifted.entry(subject).or_default().push(line.clone());
            }
        }
        for (subject, lines) in drifted {
            out.push(drift_condition(
                "DriftCorrected",
                format!("drift corrected: {}", lines.join(", ")),
                &lines,
                &[subject.to_owned()],
            ));
        }
    }
    if let Some(rows) = &outcome.resources {
        track.clean_at = rows
            .iter()
            .filter_map(|r| {
                let subject = format!("{}/{}", r.kind, r.name);
                let kept = track.clean_at.get(&subject).cloned();
                let now = (r.state == "CLEAN").then(|| r.document.clone()).flatten();
                Some((subject, now.or(kept)?))
            })
            .collect();
    }
    for a in &record.anomalies {
        out.push(Condition {
            kind: EventKind::Anomaly,
            reason: "Anomaly",
            severity: NotifySeverity::Warning,
            resource: Some(a.subject.clone()),
            message: cut(&a.message, MAX_MESSAGE),
            fingerprint: a.message.clone(),
            waiting: 0,
        });
    }
    if !record.deferred_prunes.is_empty() {
        let listed: Vec<String> = record
            .deferred_prunes
            .iter()
            .map(|s| format!("{} ({})", s.subject, s.reason))
            .collect();
        let mut keys: Vec<&str> = record
            .deferred_prunes
            .iter()
            .map(|s| s.subject.as_str())
            .collect();
        keys.sort_unstable();
        out.push(Condition {
            kind: EventKind::DeferredPrunes,
            reason: "PrunesDeferred",
            severity: NotifySeverity::Warning,
            resource: match keys.as_slice() {
                [only] => Some((*only).to_owned()),
                _ => None,
            },
            message: cut(
                &format!("{} prune(s) held back: {}", listed.len(), listed.join("; ")),
                MAX_MESSAGE,
            ),
            fingerprint: keys.join("\n"),
            waiting: 0,
        });
    }
    if let Some(rows) = &outcome.resources {
        let mut waits = BTreeMap::new();
        for row in rows.iter().filter(|r| r.state == "WAIT") {
            let key = format!("{}/{}", row.kind, row.name);
            let n = track.waits.get(&key).copied().unwrap_or(0) + 1;
            out.push(Condition {
                kind: EventKind::ResourceWaiting,
                reason: "ResourceWaiting",
                severity: NotifySeverity::Warning,
                resource: Some(key.clone()),
                message: cut(
                    &format!("{key} has been waiting for {n} cycles: {}", row.reason),
                    MAX_MESSAGE,
                ),
                fingerprint: row.reason.clone(),
                waiting: n,
            });
            waits.insert(key, n);
        }
        track.waits = waits;
    }
    for (i, message) in outcome.lease_events.iter().enumerate() {
        out.push(Condition {
            kind: EventKind::LeaseTakenOver,
            reason: "LeaseTakenOver",
            severity: NotifySeverity::Warning,
            resource: (i > 0).then(|| format!("#{i}")),
            message: message.clone(),
            fingerprint: message.clone(),
            waiting: 0,
        });
    }
    Some(out)
}

fn drift_condition(
    reason: &'static str,
    message: String,
    actions: &[String],
    subjects: &[String],
) -> Condition {
    let mut sorted = actions.to_vec();
    sorted.sort();
    Condition {
        kind: EventKind::Drift,
        reason,
        severity: NotifySeverity::Warning,
        resource: one_or_none(subjects),
        message: cut(&message, MAX_MESSAGE),
        fingerprint: sorted.join("\n"),
        waiting: 0,
    }
}

fn verb(v: proxops_engine::plan::Verb) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The repository could not be fetched or read.
pub(crate) fn source_failed(error: &str) -> Condition {
    Condition {
        kind: EventKind::RepositoryInvalid,
        reason: "RepositoryInvalid",
        severity: NotifySeverity::Error,
        resource: None,
        message: cut(
            &format!("the repository cannot be read: {error}"),
            MAX_MESSAGE,
        ),
        fingerprint: error.to_owned(),
        waiting: 0,
    }
}

/// A recovery: the cluster (or the repository) works again.
pub(crate) fn recovered(cluster: Option<&str>, result: Option<CycleResult>) -> Condition {
    let message = match (cluster, result) {
        (Some(c), Some(r)) => format!("cluster {c} recovered: its cycle {} again", r.label()),
        (Some(c), None) => format!("cluster {c} recovered"),
        (None, _) => "the repository reads again".to_owned(),
    };
    Condition {
        kind: EventKind::CycleRecovered,
        reason: "CycleRecovered",
        severity: NotifySeverity::Info,
        resource: None,
        message,
        fingerprint: String::new(),
        waiting: 0,
    }
}

/// `{"apiVersion":"proxops/v1alpha1","kind":"Event",...}`: what a `webhook` sink receives.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct EventDocument {
    /// Always `proxops/v1alpha1`.
    pub api_version: &'static str,
    /// Always `Event`.
    pub kind: &'static str,
    /// The event, as sinks name it in `events:` (`cycle-failed`, ...).
    pub event: EventKind,
    /// Why, in one word: `CycleFailed`, `CycleRecovered`, `DriftCorrected`, `DriftReported`,
    /// `Anomaly`, `PrunesDeferred`, `ResourceWaiting`, `LeaseTakenOver`, `RepositoryInvalid`.
    pub reason: &'static str,
    /// `info`, `warning` or `error`.
    pub severity: &'static str,
    /// The cluster (none: the repository as a whole).
    pub cluster: Option<String>,
    /// The resource (`Kind/name`), when the event is about one.
    pub resource: Option<String>,
    /// What happened, in words.
    pub message: String,
    /// The source commit the cycle reconciled, or the one read.
    pub revision: Option<String>,
    /// When (RFC 3339, UTC).
    pub time: String,
    /// The agent (its lease holder name).
    pub agent: String,
}

impl EventDocument {
    pub(crate) fn new(
        c: &Condition,
        cluster: Option<&str>,
        revision: Option<&str>,
        agent: &str,
    ) -> EventDocument {
        EventDocument {
            api_version: "proxops/v1alpha1",
            kind: "Event",
            event: c.kind,
            reason: c.reason,
            severity: c.severity.name(),
            cluster: cluster.map(str::to_owned),
            resource: c.resource.clone(),
            message: c.message.clone(),
            revision: revision.map(str::to_owned),
            time: proxops_store::documents::utc_timestamp(std::time::SystemTime::now()),
            agent: agent.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_cut_on_character_boundaries() {
        assert_eq!(cut("abc", 10), "abc");
        let long = "é".repeat(100);
        let c = cut(&long, 11);
        assert!(c.len() <= 11 + '…'.len_utf8(), "{c}");
        assert!(c.ends_with('…'));
    }
}
