//! The batch [`observation_batch`](super::observation_batch) builds and
//! [`enrich`](super::enrich) adds PVE's facts to: its own file below both, so `facts` does not
//! import the planes module that imports it.

use proxops_model::ResourceKey;
use proxops_store::ObservationBatch;
use proxops_store::observed::Observation;
use std::collections::BTreeSet;

/// A batch to publish and the resources left out of it.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct BuiltBatch {
    /// Receipts and teardowns.
    pub batch: ObservationBatch,
    /// Desired resources without a receipt this cycle, with why.
    pub withheld: Vec<(ResourceKey, String)>,
    /// Receipts of the batch whose guests' addresses [`enrich`](super::enrich) reads: guests
    /// the plan found running and able to tell them
    /// ([`ClusterPlan::addressable`](crate::plan::ClusterPlan::addressable)) that this cycle
    /// did not create, start, stop or restart (a guest that just booted cannot answer yet).
    pub addresses: BTreeSet<ResourceKey>,
    /// Current receipts of such guests still without a complete `ip-addresses` artifact
    /// ([`addresses::complete`](super::addresses::complete)), rebuilt as they are:
    /// [`enrich`](super::enrich) reads the guest and adds the receipt to the batch with its
    /// artifact when the guest answers with something new.
    pub awaiting: Vec<Observation>,
}
