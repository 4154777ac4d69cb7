//! The notifier's `/metrics`: a [`Collector`] that reads the sinks at each scrape, since sinks
//! come and go with every configuration a pass loads.

use super::{Inner, lock};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// The notifier's sinks, as the collector sees them.
pub(super) struct SinkMetrics(pub(super) Arc<Mutex<Inner>>);

impl std::fmt::Debug for SinkMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SinkMetrics")
    }
}

impl Collector for SinkMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        // Read under the lock, encode after it: a scrape never holds up a cycle's notices.
        let (counts, up) = {
            let inner = lock(&self.0);
            let counts: Vec<(String, [u64; 3])> = inner
                .kept
                .iter()
                .map(|(label, kept)| {
                    let c = &kept.counters;
                    let n = [&c.sent, &c.failed, &c.dropped].map(|a| a.load(Ordering::Relaxed));
                    (label.clone(), n)
                })
                .collect();
            let up: Vec<(String, bool)> = inner
                .slots
                .iter()
                .map(|(label, slot)| (label.clone(), slot.resolved.is_some()))
                .collect();
            (counts, up)
        };
        if !counts.is_empty() {
            let mut family = encoder.encode_descriptor(
                "notifications",
                "Notifications by sink and result (failed: after every retry; dropped: the \
                 sink's queue was full).",
                None,
                prometheus_client::metrics::MetricType::Counter,
            )?;
            for (sink, n) in &counts {
                for (result, n) in ["sent", "failed", "dropped"].into_iter().zip(n) {
                    let labels = [("sink", sink.as_str()), ("result", result)];
                    ConstCounter::new(*n).encode(family.encode_family(&labels)?)?;
                }
            }
        }
        if !up.is_empty() {
            let mut family = encoder.encode_descriptor(
                "notification_sink_up",
                "1 when the sink is configured and its secrets read, 0 when it cannot be used \
                 (see the log).",
                None,
                prometheus_client::metrics::MetricType::Gauge,
            )?;
            for (sink, up) in &up {
                let labels = [("sink", sink.as_str())];
                ConstGauge::new(i64::from(*up)).encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}
