//! The notifier on its own, against a local stand-in: what is sent when (changes, reminders,
//! recoveries, filters), and how failing, slow and unusable sinks are handled without holding
//! up the caller.

use super::standin::StandIn;
use proxops_agent::cluster::CycleOutcome;
use proxops_agent::metrics::Format;
use proxops_agent::metrics::prometheus_client::registry::Registry;
use proxops_agent::notify::{ConfiguredSinks, Notifier, NotifyOptions};
use proxops_agent::{CycleRecord, CycleResult};
use proxops_engine::plan::Anomaly;
use proxops_model::config::{DriftMode, SinkConfig};
use serde_json::json;
use std::time::{Duration, Instant};

fn outcome(result: CycleResult, failures: &[&str], anomalies: &[&str]) -> CycleOutcome {
    let mut record = CycleRecord::new("2026-01-01T00:00:00Z", result);
    record.finished = "2026-01-01T00:00:01Z".into();
    record.duration_seconds = 1.0;
    record.source_revision = Some("a".repeat(40));
    record.failed = failures.len();
    record.anomalies = anomalies
        .iter()
        .map(|s| Anomaly::new(*s, format!("{s} is odd")))
        .collect();
    record.errors = failures
        .iter()
        .map(|f| format!("{f}: it broke at 12:00:0{}", f.len()))
        .collect();
    let mut outcome = CycleOutcome::new("lab", record);
    outcome.failures = failures.iter().map(|f| (*f).to_owned()).collect();
    outcome.failed_subjects = failures
        .iter()
        .map(|f| f.split(' ').next().unwrap_or_default().to_owned())
        .collect();
    outcome
}

fn sink(value: serde_json::Value) -> SinkConfig {
    serde_json::from_value(value).unwrap()
}

fn options() -> NotifyOptions {
    NotifyOptions::default()
        .with_attempts(2)
        .with_backoff(Duration::from_millis(20))
        .with_timeout(Duration::from_secs(2))
}

/// Runs `body` with a notifier of `sinks`, whose `file:` secrets are in `dir`.
fn with_notifier(
    dir: &tempfile::TempDir,
    sinks: Vec<SinkConfig>,
    options: NotifyOptions,
    body: impl AsyncFnOnce(&Notifier),
) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let n = Notifier::new("agent-test", options).unwrap();
        n.configure_own(&ConfiguredSinks::new(sinks, dir.path()));
        body(&n).await;
        n.close().await;
    });
}

/// What the notifier's metrics encode to, registered as the agent registers them.
fn metrics_of(n: &Notifier) -> String {
    let mut registry = Registry::default();
    n.register_metrics(registry.sub_registry_with_prefix("proxops"));
    Format::Prometheus.encode(&registry).unwrap()
}

async fn settle(n: &Notifier) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while n.in_flight() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn reasons(standin: &StandIn, path: &str) -> Vec<String> {
    standin
        .received(path)
        .iter()
        .map(|r| {
            let e = r.json();
            format!(
                "{}{}",
                e["reason"].as_str().unwrap_or_default(),
                e["resource"]
                    .as_str()
                    .map(|r| format!(" {r}"))
                    .unwrap_or_default()
            )
        })
        .collect()
}

#[test]
fn identical_events_are_sent_once_then_on_change_after_the_reminder_and_recovered_once() {
    let standin = StandIn::start();
    let dir = secrets(&[("hook.url", &standin.url("/hook"))]);
    let sinks = vec![sink(
        json!({"type": "webhook", "url": {"file": "hook.url"}, "reminder": "600ms"}),
    )];
    with_notifier(&dir, sinks, options(), async |n| {
        let fail = outcome(CycleResult::Failed, &["ISO/x download"], &[]);
        n.cycle_ended(&fail, DriftMode::Correct);
        settle(n).await;
        // The same failure again (its message differs in time only): nothing new.
        n.cycle_ended(&fail, DriftMode::Correct);
        settle(n).await;
        assert_eq!(reasons(&standin, "/hook"), ["CycleFailed ISO/x"]);
        // Another failure is news.
        let other = outcome(CycleResult::Failed, &["ISO/x download", "VM/y create"], &[]);
        n.cycle_ended(&other, DriftMode::Correct);
        settle(n).await;
        assert_eq!(standin.received("/hook").len(), 2);
        // Still failing after the reminder interval: told again.
        tokio::time::sleep(Duration::from_millis(700)).await;
        n.cycle_ended(&other, DriftMode::Correct);
        settle(n).await;
        assert_eq!(standin.received("/hook").len(), 3);
        // A stuck cycle does not clear the failure; success does, once.
        n.cycle_ended(&outcome(CycleResult::Stuck, &[], &[]), DriftMode::Correct);
        n.cycle_ended(
            &outcome(CycleResult::Converged, &[], &[]),
            DriftMode::Correct,
        );
        n.cycle_ended(
            &outcome(CycleResult::Converged, &[], &[]),
            DriftMode::Correct,
        );
        settle(n).await;
        // A cycle that observed nothing changes nothing.
        n.cycle_ended(&outcome(CycleResult::Leased, &[], &[]), DriftMode::Correct);
        // And the old failure, back, is news again.
        n.cycle_ended(&fail, DriftMode::Correct);
        settle(n).await;
        assert_eq!(
            reasons(&standin, "/hook"),
            [
                "CycleFailed ISO/x",
                "CycleFailed",
                "CycleFailed",
                "CycleRecovered",
                "CycleFailed ISO/x"
            ]
        );
        let metrics = metrics_of(n);
        assert!(
            metrics.contains("proxops_notifications_total{sink=\"webhook\",result=\"sent\"} 5\n"),
            "{metrics}"
        );
    });
}

#[test]
fn filters_pick_events_and_recoveries_go_where_the_failure_went() {
    let standin = StandIn::start();
    let dir = secrets(&[
        ("a", &standin.url("/errors")),
        ("b", &standin.url("/anomalies")),
    ]);
    let sinks = vec![
        sink(
            json!({"name": "errors", "type": "webhook", "url": {"file": "a"}, "min-severity": "error"}),
        ),
        sink(
            json!({"name": "anomalies", "type": "webhook", "url": {"file": "b"}, "events": ["anomaly"]}),
        ),
    ];
    with_notifier(&dir, sinks, options(), async |n| {
        n.cycle_ended(
            &outcome(CycleResult::Stuck, &[], &["VM/odd"]),
            DriftMode::Correct,
        );
        n.cycle_ended(
            &outcome(CycleResult::Failed, &["VM/y create"], &["VM/odd"]),
            DriftMode::Correct,
        );
        n.cycle_ended(&outcome(CycleResult::Applied, &[], &[]), DriftMode::Correct);
        settle(n).await;
        // A recovery is `info`, below `error`: it still reaches the sink that heard the failure.
        assert_eq!(
            reasons(&standin, "/errors"),
            ["CycleFailed VM/y", "CycleRecovered"]
        );
        assert_eq!(reasons(&standin, "/anomalies"), ["Anomaly VM/odd"]);
    });
}

#[test]
fn a_failing_sink_is_retried_counted_and_told_again_at_the_next_cycle() {
    let standin = StandIn::start();
    standin.fail_first("/down", 1000);
    let dir = secrets(&[("down", &standin.url("/down"))]);
    let sinks = vec![sink(
        json!({"name": "down", "type": "slack", "url": {"file": "down"}}),
    )];
    with_notifier(&dir, sinks, options(), async |n| {
        let fail = outcome(CycleResult::Failed, &["ISO/x download"], &[]);
        n.cycle_ended(&fail, DriftMode::Correct);
        settle(n).await;
        assert_eq!(standin.received("/down").len(), 2, "two tries");
        // Never delivered, so not remembered as told.
        n.cycle_ended(&fail, DriftMode::Correct);
        settle(n).await;
        assert_eq!(standin.received("/down").len(), 4);
        let metrics = metrics_of(n);
        assert!(
            metrics.contains("proxops_notifications_total{sink=\"down\",result=\"failed\"} 2\n"),
            "{metrics}"
        );
        assert!(
            metrics.contains("proxops_notifications_total{sink=\"down\",result=\"sent\"} 0\n"),
            "{metrics}"
        );
    });
}

#[test]
fn a_stuck_sink_drops_what_its_queue_cannot_hold_and_never_holds_up_a_cycle() {
    // Accepts connections and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dir = secrets(&[(
        "stuck",
        &format!("http://{}/hook", silent.local_addr().unwrap()),
    )]);
    let sinks = vec![sink(
        json!({"name": "stuck", "type": "webhook", "url": {"file": "stuck"}}),
    )];
    let opts = options()
        .with_attempts(1)
        .with_queue(1)
        .with_timeout(Duration::from_secs(30))
        .with_flush_timeout(Duration::from_millis(200));
    with_notifier(&dir, sinks, opts, async |n| {
        let many = ["VM/a", "VM/b", "VM/c", "VM/d", "VM/e", "VM/f"];
        let started = Instant::now();
        n.cycle_ended(&outcome(CycleResult::Stuck, &[], &many), DriftMode::Correct);
        assert!(
            started.elapsed() < Duration::from_millis(500),
            "{:?}",
            started.elapsed()
        );
        let metrics = metrics_of(n);
        let dropped: u64 = metrics
            .lines()
            .find(|l| {
                l.starts_with("proxops_notifications_total{sink=\"stuck\",result=\"dropped\"}")
            })
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
            .unwrap();
        // One being sent, at most one waiting: the rest dropped.
        assert!((4..=5).contains(&dropped), "{metrics}");
    });
    drop(silent);
}

#[test]
fn an_unusable_sink_is_down_and_says_why_without_a_secret() {
    let dir = secrets(&[]);
    let sinks = vec![sink(
        json!({"name": "nowhere", "type": "ntfy", "url": {"env": "PROXOPS_TEST_NOTIFIER_UNSET"}}),
    )];
    with_notifier(&dir, sinks, options(), async |n| {
        n.cycle_ended(
            &outcome(CycleResult::Failed, &["VM/y create"], &[]),
            DriftMode::Correct,
        );
        let metrics = metrics_of(n);
        assert!(
            metrics.contains("proxops_notification_sink_up{sink=\"nowhere\"} 0\n"),
            "{metrics}"
        );
        let errors = n.sink_errors();
        assert_eq!(errors.len(), 1);
        let why = errors[0].1.clone().unwrap_or_default();
        assert!(
            why.contains("PROXOPS_TEST_NOTIFIER_UNSET is not set"),
            "{why}"
        );
    });
}

/// A directory holding secret files.
fn secrets(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), format!("{text}\n")).unwrap();
    }
    dir
}

#[test]
fn lease_takeovers_waiting_resources_and_held_back_prunes_are_events() {
    let standin = StandIn::start();
    let dir = secrets(&[("u", &standin.url("/all"))]);
    let sinks = vec![sink(
        json!({"name": "all", "type": "webhook", "url": {"file": "u"}, "wait-cycles": 2}),
    )];
    with_notifier(&dir, sinks, options(), async |n| {
        let mut o = outcome(CycleResult::Stuck, &[], &[]);
        o.lease_events =
            vec!["took over the lease of cluster lab from agent-b (pid 7 on h)".into()];
        o.record.deferred_prunes = vec![proxops_engine::plan::Skipped::new(
            "VM/old",
            "the prune budget (2) is spent",
        )];
        o.resources = Some(vec![proxops_agent::status::ResourceRow::new(
            "VM",
            "web",
            "WAIT",
            "waiting for ISO/x",
        )]);
        // Waiting for one, two, then three cycles: only more than two is an event.
        for _ in 0..3 {
            n.cycle_ended(&o, DriftMode::Correct);
            o.lease_events.clear();
        }
        settle(n).await;
        assert_eq!(
            reasons(&standin, "/all"),
            [
                "PrunesDeferred VM/old",
                "LeaseTakenOver",
                "ResourceWaiting VM/web"
            ]
        );
        let waiting = standin.received("/all")[2].json();
        assert!(
            waiting["message"].as_str().unwrap().contains("3 cycles"),
            "{waiting}"
        );
        assert_eq!(waiting["severity"], "warning");
    });
}
