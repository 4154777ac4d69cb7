//! A labelled family kept in label order.

use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::{MetricType, TypedMetric};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// A labelled family like [`prometheus_client::metrics::family::Family`], but kept in label
/// order: that family is a `HashMap`, and `/metrics` is to come out the same for the same
/// state.
#[derive(Debug)]
pub struct OrderedFamily<S, M> {
    members: Arc<Mutex<BTreeMap<S, M>>>,
    new: fn() -> M,
}

impl<S, M> Clone for OrderedFamily<S, M> {
    fn clone(&self) -> Self {
        OrderedFamily {
            members: Arc::clone(&self.members),
            new: self.new,
        }
    }
}

impl<S: Ord + Clone, M: Clone + Default> Default for OrderedFamily<S, M> {
    fn default() -> Self {
        OrderedFamily::with(M::default)
    }
}

impl<S: Ord + Clone, M: Clone> OrderedFamily<S, M> {
    /// A family whose members start as `new()` makes them.
    pub(super) fn with(new: fn() -> M) -> Self {
        OrderedFamily {
            members: Arc::new(Mutex::new(BTreeMap::new())),
            new,
        }
    }

    /// The member of `labels` (created on first use); a handle onto the same atomics.
    pub fn get(&self, labels: &S) -> M {
        let mut members = self
            .members
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        members
            .entry(labels.clone())
            .or_insert_with(self.new)
            .clone()
    }
}

impl<S, M: TypedMetric> TypedMetric for OrderedFamily<S, M> {
    const TYPE: MetricType = M::TYPE;
}

impl<S, M> EncodeMetric for OrderedFamily<S, M>
where
    S: EncodeLabelSet + Send + Sync + std::fmt::Debug + 'static,
    M: EncodeMetric + TypedMetric,
{
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let members = self
            .members
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (labels, metric) in members.iter() {
            metric.encode(encoder.encode_family(labels)?)?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        M::TYPE
    }

    fn is_empty(&self) -> bool {
        self.members
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_empty()
    }
}
