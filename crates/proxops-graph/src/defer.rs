//! What to skip after failures: every transitive dependant of a failed step waits for the next
//! cycle.

use crate::graph::{Graph, StepId};

/// A step skipped because a prerequisite failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deferred {
    /// The skipped step.
    pub step: StepId,
    /// The failed steps it depends on, directly or transitively, in create order (never empty).
    pub blocked_by: Vec<StepId>,
}

/// The answer of [`Graph::defer`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Deferral {
    /// Steps to skip, in create order.
    pub skipped: Vec<Deferred>,
    /// Steps that neither failed nor depend on a failure, in create order.
    pub runnable: Vec<StepId>,
}

impl Deferral {
    /// Whether `step` is skipped.
    pub fn is_skipped(&self, step: StepId) -> bool {
        self.skipped.binary_search_by(|d| d.step.cmp(&step)).is_ok()
    }
}

/// Merges two sorted lists without repeats.
fn union(into: &mut Vec<StepId>, other: &[StepId]) {
    if other.is_empty() {
        return;
    }
    let mut merged = Vec::with_capacity(into.len() + other.len());
    let (mut i, mut j) = (0, 0);
    while i < into.len() || j < other.len() {
        let next = match (into.get(i), other.get(j)) {
            (Some(a), Some(b)) if a == b => {
                i += 1;
                j += 1;
                *a
            }
            (Some(a), Some(b)) if a < b => {
                i += 1;
                *a
            }
            (Some(a), None) => {
                i += 1;
                *a
            }
            (_, Some(b)) => {
                j += 1;
                *b
            }
            (None, None) => break,
        };
        merged.push(next);
    }
    *into = merged;
}

impl Graph {
    /// Given the steps that failed, the steps to skip (each with the failures that block it) and
    /// the steps that can still run. Ids outside the graph are ignored.
    pub fn defer(&self, failed: &[StepId]) -> Deferral {
        let n = self.step_count();
        let mut is_failed = vec![false; n];
        for f in failed {
            if let Some(slot) = is_failed.get_mut(f.index()) {
                *slot = true;
            }
        }
        // Create order puts every prerequisite first, so one forward pass sees each step's
        // prerequisites finished.
        let mut blockers: Vec<Vec<StepId>> = vec![Vec::new(); n];
        let mut out = Deferral::default();
        for step in self.steps() {
            let mut mine = Vec::new();
            for p in self.prerequisites(step.id) {
                union(&mut mine, &blockers[p.index()]);
                if is_failed[p.index()] {
                    union(&mut mine, &[*p]);
                }
            }
            if is_failed[step.id.index()] {
                // A failed step is reported as failed, not skipped; its dependants still are.
            } else if mine.is_empty() {
                out.runnable.push(step.id);
            } else {
                out.skipped.push(Deferred {
                    step: step.id,
                    blocked_by: mine.clone(),
                });
            }
            blockers[step.id.index()] = mine;
        }
        out
    }
}
