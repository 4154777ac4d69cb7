//! The agent's metrics, kept in [`prometheus_client`] metric types and encoded by its text
//! encoders (the Prometheus text format 0.0.4, or OpenMetrics 1.0 when a scraper asks for it).
//!
//! Every metric is a handle onto shared atomics: [`Metrics::register`] puts the same handles
//! into any [`Registry`], so the agent's `/metrics` and an embedding tool's registry (see
//! [`Agent::register_metrics`](super::Agent::register_metrics)) show the same values.
//! Names are registered without their `proxops_` prefix and, for counters, without the
//! `_total` suffix: the agent registers them in a sub-registry prefixed `proxops`, and the
//! encoder adds `_total` to counters itself.

use super::status::{CycleRecord, CycleResult};
pub use prometheus_client;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use proxops_engine::execute::{CycleReport, Outcome};
use proxops_engine::plan::ClusterPlan;
use proxops_pve::Latency;
use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;

mod family;
mod format;

pub use family::OrderedFamily;
pub use format::Format;

/// Upper bounds of the cycle duration histogram, in seconds.
const BUCKETS: [f64; 10] = [0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0];

/// A float counter (seconds).
type SecondsCounter = Counter<f64, AtomicU64>;
/// A float gauge (a Unix time).
type SecondsGauge = Gauge<f64, AtomicU64>;

/// `cluster`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, EncodeLabelSet)]
pub struct ClusterLabels {
    /// The cluster.
    pub cluster: String,
}

/// `cluster`, `result`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, EncodeLabelSet)]
pub struct CycleLabels {
    /// The cluster.
    pub cluster: String,
    /// [`CycleResult::label`].
    pub result: &'static str,
}

/// `cluster`, `kind`, `action`, `result`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, EncodeLabelSet)]
pub struct ActionLabels {
    /// The cluster.
    pub cluster: String,
    /// The resource kind (`VM`, `LXC`, ...).
    pub kind: String,
    /// The verb (`create`, `update`, ...).
    pub action: String,
    /// `succeeded`, `failed`, `deferred` or `not_started`.
    pub result: &'static str,
}

/// `cluster`, `endpoint`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, EncodeLabelSet)]
pub struct EndpointLabels {
    /// The cluster.
    pub cluster: String,
    /// The PVE API endpoint (`GET /cluster/resources`).
    pub endpoint: String,
}

/// `receiver`, `result`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, EncodeLabelSet)]
pub struct WebhookLabels {
    /// The receiver (`github`, `gitlab`, `gitea`, `generic`, or `unknown`).
    pub receiver: &'static str,
    /// What became of the delivery.
    pub result: &'static str,
}

/// Everything `/metrics` reports of passes, cycles, PVE requests and webhooks (the notifier
/// reports its own, [`Notifier::register_metrics`](super::notify::Notifier::register_metrics)).
#[derive(Debug, Clone)]
pub struct Metrics {
    passes: Counter,
    source_failures: Counter,
    source_loads: Counter,
    cycles: OrderedFamily<CycleLabels, Counter>,
    actions: OrderedFamily<ActionLabels, Counter>,
    durations: OrderedFamily<ClusterLabels, Histogram>,
    deferred_prunes: OrderedFamily<ClusterLabels, Counter>,
    anomalies: OrderedFamily<ClusterLabels, Gauge>,
    waiting: OrderedFamily<ClusterLabels, Gauge>,
    waits_timed_out: OrderedFamily<ClusterLabels, Gauge>,
    drift: OrderedFamily<ClusterLabels, Gauge>,
    suspended: OrderedFamily<ClusterLabels, Gauge>,
    last_success: OrderedFamily<ClusterLabels, SecondsGauge>,
    pve_requests: OrderedFamily<EndpointLabels, Counter>,
    pve_seconds: OrderedFamily<EndpointLabels, SecondsCounter>,
    webhooks: OrderedFamily<WebhookLabels, Counter>,
    resources_drifted: OrderedFamily<ClusterLabels, Gauge>,
    verify_last_run: OrderedFamily<ClusterLabels, SecondsGauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            passes: Counter::default(),
            source_failures: Counter::default(),
            source_loads: Counter::default(),
            cycles: OrderedFamily::default(),
            actions: OrderedFamily::default(),
            durations: OrderedFamily::with(|| Histogram::new(BUCKETS)),
            deferred_prunes: OrderedFamily::default(),
            anomalies: OrderedFamily::default(),
            waiting: OrderedFamily::default(),
            waits_timed_out: OrderedFamily::default(),
            drift: OrderedFamily::default(),
            suspended: OrderedFamily::default(),
            last_success: OrderedFamily::default(),
            pve_requests: OrderedFamily::default(),
            pve_seconds: OrderedFamily::default(),
            webhooks: OrderedFamily::default(),
            resources_drifted: OrderedFamily::default(),
            verify_last_run: OrderedFamily::default(),
        }
    }
}

/// A count as a gauge's value.
fn gauge_value(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn cluster(name: &str) -> ClusterLabels {
    ClusterLabels {
        cluster: name.to_owned(),
    }
}

impl Metrics {
    /// Registers every metric in `registry` by its name without the `proxops_` prefix
    /// (`passes`, `cycles`, ...; the agent passes a sub-registry prefixed `proxops`). The
    /// registered metrics are handles onto these: they show what the agent counts.
    pub fn register(&self, registry: &mut Registry) {
        let r = registry;
        r.register("passes", "Passes over the clusters", self.passes.clone());
        r.register(
            "source_failures",
            "Failed fetches or loads of the repository",
            self.source_failures.clone(),
        );
        r.register(
            "source_loads",
            "Loads of the repository (a pass on the commit loaded last reuses it)",
            self.source_loads.clone(),
        );
        r.register(
            "cycles",
            "Reconcile cycles by cluster and result",
            self.cycles.clone(),
        );
        r.register(
            "actions",
            "Executed actions by cluster, kind, action and result",
            self.actions.clone(),
        );
        r.register(
            "cycle_duration_seconds",
            "Duration of reconcile cycles",
            self.durations.clone(),
        );
        r.register(
            "deferred_prunes",
            "Prunes held back by the prune budget or the empty-composition guard",
            self.deferred_prunes.clone(),
        );
        r.register(
            "anomalies",
            "Anomalies (never fixed automatically) found by the last cycle",
            self.anomalies.clone(),
        );
        r.register(
            "resources_waiting",
            "Consumers the last cycle found waiting for what their reference expressions read",
            self.waiting.clone(),
        );
        r.register(
            "waits_timed_out",
            "Consumers waiting longer than their waitTimeout (each also an anomaly)",
            self.waits_timed_out.clone(),
        );
        r.register(
            "drift_actions",
            "Actions the last cycle planned but left alone (drift mode report)",
            self.drift.clone(),
        );
        r.register(
            "cluster_suspended",
            "1 when the cluster is suspended",
            self.suspended.clone(),
        );
        r.register(
            "last_success_timestamp_seconds",
            "Unix time of the last successful cycle",
            self.last_success.clone(),
        );
        r.register(
            "pve_requests",
            "PVE API requests by cluster and endpoint",
            self.pve_requests.clone(),
        );
        r.register(
            "pve_request_seconds",
            "Time spent in PVE API requests by cluster and endpoint",
            self.pve_seconds.clone(),
        );
        r.register(
            "webhook_requests",
            "Webhook deliveries by receiver and result (triggered, ignored, replayed, \
             unauthorized, too_large, bad_request, forbidden, not_configured)",
            self.webhooks.clone(),
        );
        r.register(
            "resources_drifted",
            "Resources the last verification found drifted or missing, until a verification or \
             cycle finds them in sync",
            self.resources_drifted.clone(),
        );
        r.register(
            "verify_last_run_timestamp_seconds",
            "Unix time of the cluster's last verification",
            self.verify_last_run.clone(),
        );
    }

    /// A pass over the clusters began.
    pub fn pass(&self) {
        self.passes.inc();
    }

    /// Fetching or loading the repository failed.
    pub fn source_failed(&self) {
        self.source_failures.inc();
    }

    /// The repository was loaded and checked at a commit the agent had not loaded last.
    pub fn source_loaded(&self) {
        self.source_loads.inc();
    }

    /// The waits of a cycle that planned: consumers waiting, those waiting past their
    /// timeout, and the anomalies those count in.
    pub fn waits(&self, name: &str, record: &CycleRecord) {
        let c = cluster(name);
        self.waiting.get(&c).set(gauge_value(record.waiting.len()));
        self.waits_timed_out
            .get(&c)
            .set(gauge_value(record.waits_timed_out.len()));
        self.anomalies
            .get(&c)
            .set(gauge_value(record.anomalies.len()));
    }

    /// A cluster's cycle ended.
    pub fn cycle(
        &self,
        name: &str,
        result: CycleResult,
        seconds: f64,
        finished_unix: f64,
        plan: Option<&ClusterPlan>,
        report: Option<&CycleReport>,
    ) {
        let c = cluster(name);
        self.cycles
            .get(&CycleLabels {
                cluster: name.to_owned(),
                result: result.label(),
            })
            .inc();
        self.durations.get(&c).observe(seconds);
        self.suspended
            .get(&c)
            .set(i64::from(result == CycleResult::Suspended));
        if result.is_success() {
            self.last_success.get(&c).set(finished_unix);
        }
        if let Some(plan) = plan {
            self.deferred_prunes
                .get(&c)
                .inc_by(plan.deferred_prunes.len() as u64);
            self.anomalies
                .get(&c)
                .set(gauge_value(plan.anomalies.len()));
            let drift = if result == CycleResult::Drifted {
                plan.actions.len()
            } else {
                0
            };
            self.drift.get(&c).set(gauge_value(drift));
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
                    // An outcome the engine adds later (its enum is non-exhaustive).
                    _ => "other",
                };
                let verb = serde_json::to_value(action.verb)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default();
                self.actions
                    .get(&ActionLabels {
                        cluster: name.to_owned(),
                        kind: action.kind.clone(),
                        action: verb,
                        result: outcome,
                    })
                    .inc();
            }
        }
    }

    /// A cluster's verification ended at `finished_unix`.
    pub fn verified(&self, name: &str, finished_unix: f64) {
        self.verify_last_run.get(&cluster(name)).set(finished_unix);
    }

    /// The resources of a verified cluster now known drifted or missing.
    pub fn drifted(&self, name: &str, resources: usize) {
        self.resources_drifted
            .get(&cluster(name))
            .set(gauge_value(resources));
    }

    /// A webhook delivery was answered (`result`: triggered, ignored, replayed, unauthorized,
    /// too_large, bad_request, forbidden, not_configured).
    pub fn webhook(&self, receiver: &'static str, result: &'static str) {
        self.webhooks.get(&WebhookLabels { receiver, result }).inc();
    }

    /// Adds a cycle's PVE requests.
    pub fn pve(
        &self,
        name: &str,
        requests: &BTreeMap<String, u64>,
        latencies: &BTreeMap<String, Latency>,
    ) {
        let labels = |endpoint: &str| EndpointLabels {
            cluster: name.to_owned(),
            endpoint: endpoint.to_owned(),
        };
        for (endpoint, n) in requests {
            self.pve_requests.get(&labels(endpoint)).inc_by(*n);
        }
        for (endpoint, l) in latencies {
            self.pve_seconds.get(&labels(endpoint)).inc_by(l.seconds);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::{prometheus_text, text};

    fn exposition(m: &Metrics) -> String {
        let mut registry = Registry::default();
        m.register(registry.sub_registry_with_prefix("proxops"));
        let mut out = String::new();
        prometheus_text::encode(&mut out, &registry).unwrap_or_default();
        out
    }

    #[test]
    fn a_cycle_shows_in_counters_histogram_and_gauges() {
        let m = Metrics::default();
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
        let text = exposition(&m);
        assert!(
            text.contains(
                "# HELP proxops_passes_total Passes over the clusters.\n\
                 # TYPE proxops_passes_total counter\n\
                 proxops_passes_total 1\n"
            ),
            "{text}"
        );
        assert!(text.contains("proxops_cycles_total{cluster=\"lab\",result=\"applied\"} 1\n"));
        assert!(text.contains("proxops_cycles_total{cluster=\"lab\",result=\"failed\"} 1\n"));
        assert!(
            text.contains("proxops_cycle_duration_seconds_bucket{cluster=\"lab\",le=\"1\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("proxops_cycle_duration_seconds_bucket{cluster=\"lab\",le=\"60\"} 2\n")
        );
        assert!(text.contains("proxops_cycle_duration_seconds_count{cluster=\"lab\"} 2\n"));
        // The failed cycle did not move the last success.
        assert!(
            text.contains("proxops_last_success_timestamp_seconds{cluster=\"lab\"} 1800000000.0\n"),
            "{text}"
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
        // The Prometheus text format has no end marker; OpenMetrics has.
        assert!(!text.contains("# EOF"));
        let mut registry = Registry::default();
        m.register(registry.sub_registry_with_prefix("proxops"));
        let mut open = String::new();
        text::encode(&mut open, &registry).unwrap_or_default();
        assert!(open.ends_with("# EOF\n"), "{open}");
        assert!(open.contains("# TYPE proxops_passes counter\nproxops_passes_total 1\n"));
    }

    #[test]
    fn families_come_out_in_label_order_and_label_values_are_escaped() {
        let m = Metrics::default();
        for receiver in ["gitlab", "github", "generic"] {
            m.webhook(receiver, "triggered");
        }
        let mut latencies = BTreeMap::new();
        latencies.insert(
            "GET /a\"b\\c\nd".to_owned(),
            Latency {
                seconds: 0.5,
                ..Latency::default()
            },
        );
        m.pve("lab", &BTreeMap::new(), &latencies);
        let text = exposition(&m);
        let receivers: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("proxops_webhook_requests_total{receiver=\""))
            .filter_map(|l| l.split('"').next())
            .collect();
        assert_eq!(receivers, ["generic", "github", "gitlab"]);
        assert!(
            text.contains(
                "proxops_pve_request_seconds_total{cluster=\"lab\",endpoint=\"GET /a\\\"b\\\\c\\nd\"} 0.5\n"
            ),
            "{text}"
        );
        assert_eq!(text, exposition(&m), "the same state, the same text");
    }

    #[test]
    fn a_verification_sets_the_drifted_gauge_and_its_time() {
        let m = Metrics::default();
        assert!(!exposition(&m).contains("proxops_resources_drifted{"));
        m.verified("lab", 1_800_000_000.0);
        m.drifted("lab", 2);
        let text = exposition(&m);
        assert!(
            text.contains("# TYPE proxops_resources_drifted gauge\n"),
            "{text}"
        );
        assert!(text.contains("proxops_resources_drifted{cluster=\"lab\"} 2\n"));
        assert!(
            text.contains(
                "proxops_verify_last_run_timestamp_seconds{cluster=\"lab\"} 1800000000.0\n"
            )
        );
        m.drifted("lab", 0);
        assert!(exposition(&m).contains("proxops_resources_drifted{cluster=\"lab\"} 0\n"));
    }

    #[test]
    fn a_second_registry_sees_the_same_counts() {
        let m = Metrics::default();
        let mut theirs = Registry::with_prefix("tool");
        m.register(theirs.sub_registry_with_prefix("proxops"));
        m.pass();
        m.pass();
        let mut out = String::new();
        prometheus_text::encode(&mut out, &theirs).unwrap_or_default();
        assert!(out.contains("\ntool_proxops_passes_total 2\n"), "{out}");
        assert!(exposition(&m).contains("\nproxops_passes_total 2\n"));
    }
}
