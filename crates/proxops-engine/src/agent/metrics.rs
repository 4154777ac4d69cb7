//! The agent's metrics, rendered in the Prometheus text exposition format (version 0.0.4).
//! Written by hand: a handful of counters and gauges do not justify a metrics framework.

use super::status::CycleResult;
use crate::execute::{CycleReport, Outcome};
use crate::plan::ClusterPlan;
use proxops_pve::Latency;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Upper bounds of the cycle duration histogram, in seconds.
const BUCKETS: [f64; 10] = [0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0];

#[derive(Debug, Default, Clone)]
struct Histogram {
    buckets: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        for (i, bound) in BUCKETS.iter().enumerate() {
            if seconds <= *bound {
                self.buckets[i] += 1;
            }
        }
        self.count += 1;
        self.sum += seconds;
    }
}

/// Everything `/metrics` reports.
#[derive(Debug, Default)]
pub struct Metrics {
    passes: u64,
    source_failures: u64,
    source_loads: u64,
    cycles: BTreeMap<(String, &'static str), u64>,
    actions: BTreeMap<(String, String, String, &'static str), u64>,
    durations: BTreeMap<String, Histogram>,
    deferred_prunes: BTreeMap<String, u64>,
    anomalies: BTreeMap<String, u64>,
    drift: BTreeMap<String, u64>,
    last_success: BTreeMap<String, f64>,
    suspended: BTreeMap<String, u64>,
    pve_requests: BTreeMap<(String, String), u64>,
    pve_seconds: BTreeMap<(String, String), f64>,
    webhooks: BTreeMap<(&'static str, &'static str), u64>,
}

impl Metrics {
    /// A pass over the clusters began.
    pub fn pass(&mut self) {
        self.passes += 1;
    }

    /// Fetching or loading the repository failed.
    pub fn source_failed(&mut self) {
        self.source_failures += 1;
    }

    /// The repository was loaded and checked at a commit the agent had not loaded last.
    pub fn source_loaded(&mut self) {
        self.source_loads += 1;
    }

    /// A cluster's cycle ended.
    pub fn cycle(
        &mut self,
        cluster: &str,
        result: CycleResult,
        seconds: f64,
        finished_unix: f64,
        plan: Option<&ClusterPlan>,
        report: Option<&CycleReport>,
    ) {
        *self
            .cycles
            .entry((cluster.to_owned(), result.label()))
            .or_default() += 1;
        self.durations
            .entry(cluster.to_owned())
            .or_default()
            .observe(seconds);
        self.suspended.insert(
            cluster.to_owned(),
            u64::from(result == CycleResult::Suspended),
        );
        if result.is_success() {
            self.last_success.insert(cluster.to_owned(), finished_unix);
        }
        if let Some(plan) = plan {
            *self.deferred_prunes.entry(cluster.to_owned()).or_default() +=
                plan.deferred_prunes.len() as u64;
            self.anomalies
                .insert(cluster.to_owned(), plan.anomalies.len() as u64);
            let drift = if result == CycleResult::Drifted {
                plan.actions.len() as u64
            } else {
                0
            };
            self.drift.insert(cluster.to_owned(), drift);
        }
        if let (Some(plan), Some(report)) = (plan, report) {
            for r in &report.results {
                let Some(action) = plan.actions.get(r.id) else {
                    continue;
                };
                let outcome = match r.outcome {
                    Outcome::Succeeded => "succeeded",
                    Outcome::Failed { .. } => "failed",
                    Outcome::Deferred { .. } => "deferred",
                    Outcome::NotStarted => "not_started",
                };
                let verb = serde_json::to_value(action.verb)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default();
                *self
                    .actions
                    .entry((cluster.to_owned(), action.kind.clone(), verb, outcome))
                    .or_default() += 1;
            }
        }
    }

    /// A webhook delivery was answered (`result`: triggered, ignored, replayed, unauthorized,
    /// too_large, bad_request, forbidden, not_configured).
    pub fn webhook(&mut self, receiver: &'static str, result: &'static str) {
        *self.webhooks.entry((receiver, result)).or_default() += 1;
    }

    /// Adds a cycle's PVE requests.
    pub fn pve(
        &mut self,
        cluster: &str,
        requests: &BTreeMap<String, u64>,
        latencies: &BTreeMap<String, Latency>,
    ) {
        for (endpoint, n) in requests {
            *self
                .pve_requests
                .entry((cluster.to_owned(), endpoint.clone()))
                .or_default() += n;
        }
        for (endpoint, l) in latencies {
            *self
                .pve_seconds
                .entry((cluster.to_owned(), endpoint.clone()))
                .or_default() += l.seconds;
        }
    }

    /// The text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        header(
            &mut out,
            "proxops_passes_total",
            "counter",
            "Passes over the clusters.",
        );
        let _ = writeln!(out, "proxops_passes_total {}", self.passes);
        header(
            &mut out,
            "proxops_source_failures_total",
            "counter",
            "Failed fetches or loads of the repository.",
        );
        let _ = writeln!(
            out,
            "proxops_source_failures_total {}",
            self.source_failures
        );
        header(
            &mut out,
            "proxops_source_loads_total",
            "counter",
            "Loads of the repository (a pass on the commit loaded last reuses it).",
        );
        let _ = writeln!(out, "proxops_source_loads_total {}", self.source_loads);
        header(
            &mut out,
            "proxops_cycles_total",
            "counter",
            "Reconcile cycles by cluster and result.",
        );
        for ((cluster, result), n) in &self.cycles {
            let _ = writeln!(
                out,
                "proxops_cycles_total{{cluster=\"{}\",result=\"{result}\"}} {n}",
                esc(cluster)
            );
        }
        header(
            &mut out,
            "proxops_actions_total",
            "counter",
            "Executed actions by cluster, kind, action and result.",
        );
        for ((cluster, kind, action, result), n) in &self.actions {
            let _ = writeln!(
                out,
                "proxops_actions_total{{cluster=\"{}\",kind=\"{}\",action=\"{}\",result=\"{result}\"}} {n}",
                esc(cluster),
                esc(kind),
                esc(action)
            );
        }
        header(
            &mut out,
            "proxops_cycle_duration_seconds",
            "histogram",
            "Duration of reconcile cycles.",
        );
        for (cluster, h) in &self.durations {
            let c = esc(cluster);
            for (bound, n) in BUCKETS.iter().zip(h.buckets) {
                let _ = writeln!(
                    out,
                    "proxops_cycle_duration_seconds_bucket{{cluster=\"{c}\",le=\"{bound}\"}} {n}"
                );
            }
            let _ = writeln!(
                out,
                "proxops_cycle_duration_seconds_bucket{{cluster=\"{c}\",le=\"+Inf\"}} {}",
                h.count
            );
            let _ = writeln!(
                out,
                "proxops_cycle_duration_seconds_sum{{cluster=\"{c}\"}} {}",
                h.sum
            );
            let _ = writeln!(
                out,
                "proxops_cycle_duration_seconds_count{{cluster=\"{c}\"}} {}",
                h.count
            );
        }
        per_cluster(
            &mut out,
            "proxops_deferred_prunes_total",
            "counter",
            "Prunes held back by the prune budget or the empty-composition guard.",
            &self.deferred_prunes,
        );
        per_cluster(
            &mut out,
            "proxops_anomalies",
            "gauge",
            "Anomalies (never fixed automatically) found by the last cycle.",
            &self.anomalies,
        );
        per_cluster(
            &mut out,
            "proxops_drift_actions",
            "gauge",
            "Actions the last cycle planned but left alone (drift mode report).",
            &self.drift,
        );
        per_cluster(
            &mut out,
            "proxops_cluster_suspended",
            "gauge",
            "1 when the cluster is suspended.",
            &self.suspended,
        );
        header(
            &mut out,
            "proxops_last_success_timestamp_seconds",
            "gauge",
            "Unix time of the last successful cycle.",
        );
        for (cluster, t) in &self.last_success {
            let _ = writeln!(
                out,
                "proxops_last_success_timestamp_seconds{{cluster=\"{}\"}} {t}",
                esc(cluster)
            );
        }
        header(
            &mut out,
            "proxops_pve_requests_total",
            "counter",
            "PVE API requests by cluster and endpoint.",
        );
        for ((cluster, endpoint), n) in &self.pve_requests {
            let _ = writeln!(
                out,
                "proxops_pve_requests_total{{cluster=\"{}\",endpoint=\"{}\"}} {n}",
                esc(cluster),
                esc(endpoint)
            );
        }
        header(
            &mut out,
            "proxops_pve_request_seconds_total",
            "counter",
            "Time spent in PVE API requests by cluster and endpoint.",
        );
        for ((cluster, endpoint), s) in &self.pve_seconds {
            let _ = writeln!(
                out,
                "proxops_pve_request_seconds_total{{cluster=\"{}\",endpoint=\"{}\"}} {s}",
                esc(cluster),
                esc(endpoint)
            );
        }
        header(
            &mut out,
            "proxops_webhook_requests_total",
            "counter",
            "Webhook deliveries by receiver and result (triggered, ignored, replayed, unauthorized, too_large, bad_request, forbidden, not_configured).",
        );
        for ((receiver, result), n) in &self.webhooks {
            let _ = writeln!(
                out,
                "proxops_webhook_requests_total{{receiver=\"{receiver}\",result=\"{result}\"}} {n}"
            );
        }
        out
    }
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn per_cluster(out: &mut String, name: &str, kind: &str, help: &str, map: &BTreeMap<String, u64>) {
    header(out, name, kind, help);
    for (cluster, n) in map {
        let _ = writeln!(out, "{name}{{cluster=\"{}\"}} {n}", esc(cluster));
    }
}

/// Escapes a label value (backslash, double quote, newline).
pub(crate) fn esc(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cycle_shows_in_counters_histogram_and_gauges() {
        let mut m = Metrics::default();
        m.pass();
        m.cycle(
            "lab",
            CycleResult::Applied,
            0.7,
            1_800_000_000.0,
            None,
            None,
        );
        m.cycle(
            "lab",
            CycleResult::Failed,
            40.0,
            1_800_000_100.0,
            None,
            None,
        );
        let text = m.render();
        assert!(text.contains("proxops_passes_total 1\n"), "{text}");
        assert!(text.contains("proxops_cycles_total{cluster=\"lab\",result=\"applied\"} 1\n"));
        assert!(text.contains("proxops_cycles_total{cluster=\"lab\",result=\"failed\"} 1\n"));
        assert!(
            text.contains("proxops_cycle_duration_seconds_bucket{cluster=\"lab\",le=\"1\"} 1\n")
        );
        assert!(
            text.contains("proxops_cycle_duration_seconds_bucket{cluster=\"lab\",le=\"60\"} 2\n")
        );
        assert!(text.contains("proxops_cycle_duration_seconds_count{cluster=\"lab\"} 2\n"));
        // The failed cycle did not move the last success.
        assert!(
            text.contains("proxops_last_success_timestamp_seconds{cluster=\"lab\"} 1800000000\n")
        );
        // Every sample line belongs to a declared metric family.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let name = line.split(['{', ' ']).next().unwrap_or_default();
            let family = name
                .trim_end_matches("_bucket")
                .trim_end_matches("_sum")
                .trim_end_matches("_count");
            assert!(text.contains(&format!("# TYPE {family} ")), "{line}");
        }
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(esc("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
