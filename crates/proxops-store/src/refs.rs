//! Plane ref names: `proxops/desired/<cluster>` and `proxops/observed/<cluster>` by default,
//! overridable per cluster (`pve.clusters.<c>.planes`), always distinct; and the cluster's
//! change gate, which decides whether desired publications move the live ref or propose a
//! candidate `proxops/candidates/<cluster>/<id>`.

use crate::error::{Result, StoreError};
pub use proxops_model::config::ChangeGate;
use proxops_model::config::ClusterEntry;

/// The default desired branch prefix.
pub const DESIRED_PREFIX: &str = "proxops/desired/";
/// The default observed branch prefix.
pub const OBSERVED_PREFIX: &str = "proxops/observed/";
/// The candidate branch prefix (change gate `pullRequest`).
pub const CANDIDATE_PREFIX: &str = "proxops/candidates/";

/// The branches of one cluster's planes, as full ref names (`refs/heads/...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlaneRefs {
    /// The cluster.
    pub cluster: String,
    /// The desired plane's full ref name.
    pub desired: String,
    /// The observed plane's full ref name.
    pub observed: String,
    /// How desired publications are made (`none`: directly; `pullRequest`: as candidates).
    pub gate: ChangeGate,
}

impl PlaneRefs {
    /// The default branches of `cluster`.
    pub fn for_cluster(cluster: &str) -> Result<PlaneRefs> {
        check_segment(cluster, "cluster name")?;
        PlaneRefs::with_names(
            cluster,
            &format!("{DESIRED_PREFIX}{cluster}"),
            &format!("{OBSERVED_PREFIX}{cluster}"),
        )
    }

    /// Overridden branches (short `a/b` or full `refs/heads/a/b` spelling), which must differ.
    pub fn with_names(cluster: &str, desired: &str, observed: &str) -> Result<PlaneRefs> {
        let desired = branch_ref(desired)?;
        let observed = branch_ref(observed)?;
        if desired == observed {
            return Err(StoreError::RefName {
                name: observed,
                reason: "the desired and observed refs must differ".to_owned(),
            });
        }
        Ok(PlaneRefs {
            cluster: cluster.to_owned(),
            desired,
            observed,
            gate: ChangeGate::None,
        })
    }

    /// The branches and gate `entry` (`pve.clusters.<cluster>`) configures, defaults for what
    /// it leaves out.
    pub fn from_config(cluster: &str, entry: Option<&ClusterEntry>) -> Result<PlaneRefs> {
        check_segment(cluster, "cluster name")?;
        let planes = entry.and_then(|e| e.planes.as_ref());
        let desired = planes
            .and_then(|p| p.desired.clone())
            .unwrap_or_else(|| format!("{DESIRED_PREFIX}{cluster}"));
        let observed = planes
            .and_then(|p| p.observed.clone())
            .unwrap_or_else(|| format!("{OBSERVED_PREFIX}{cluster}"));
        let mut refs = PlaneRefs::with_names(cluster, &desired, &observed)?;
        refs.gate = planes.and_then(|p| p.change_gate).unwrap_or_default();
        Ok(refs)
    }

    /// The same refs with another gate.
    pub fn gated(mut self, gate: ChangeGate) -> PlaneRefs {
        self.gate = gate;
        self
    }

    /// The full ref name of candidate `id` of this cluster.
    pub fn candidate(&self, id: &str) -> String {
        format!("refs/heads/{CANDIDATE_PREFIX}{}/{id}", self.cluster)
    }

    /// The short branch name of the desired plane.
    pub fn desired_branch(&self) -> &str {
        short(&self.desired)
    }

    /// The short branch name of the observed plane.
    pub fn observed_branch(&self) -> &str {
        short(&self.observed)
    }
}

fn short(full: &str) -> &str {
    full.strip_prefix("refs/heads/").unwrap_or(full)
}

/// The full ref name of a branch given as `a/b` or `refs/heads/a/b`; anything else under `refs/`
/// (tags, remotes), an empty name or one git would refuse is an error.
pub fn branch_ref(name: &str) -> Result<String> {
    let err = |reason: &str| StoreError::RefName {
        name: name.to_owned(),
        reason: reason.to_owned(),
    };
    let short = match name.strip_prefix("refs/") {
        Some(rest) => rest
            .strip_prefix("heads/")
            .ok_or_else(|| err("only branches (refs/heads/...) can hold a plane"))?,
        None => name,
    };
    if short.is_empty() {
        return Err(err("empty branch name"));
    }
    let full = format!("refs/heads/{short}");
    gix::validate::reference::name(full.as_str().into()).map_err(|e| err(&e.to_string()))?;
    Ok(full)
}

/// Checks that `s` can be one path segment of a plane (a cluster, kind, resource or artifact
/// name): no `/`, not empty, not `.` or `..`, no control characters.
pub fn check_segment(s: &str, what: &str) -> Result<()> {
    if s.is_empty()
        || s == "."
        || s == ".."
        || s.starts_with('.')
        || s.contains(['/', '\\'])
        || s.chars().any(char::is_control)
    {
        return Err(StoreError::Invalid(format!(
            "{what} `{}` cannot be a path segment",
            s.escape_debug()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_and_full_spellings_are_one_ref() {
        assert_eq!(
            branch_ref("deploy/dev").ok().as_deref(),
            Some("refs/heads/deploy/dev")
        );
        assert_eq!(
            branch_ref("refs/heads/deploy/dev").ok().as_deref(),
            Some("refs/heads/deploy/dev")
        );
        for bad in [
            "",
            "refs/",
            "refs/heads/",
            "refs/tags/v1",
            "a..b",
            "a b",
            "x.lock",
        ] {
            assert!(branch_ref(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn desired_and_observed_must_differ() {
        assert!(PlaneRefs::with_names("c", "a/b", "refs/heads/a/b").is_err());
        let refs = PlaneRefs::for_cluster("home").ok();
        assert_eq!(
            refs.as_ref().map(|r| r.desired.as_str()),
            Some("refs/heads/proxops/desired/home")
        );
        assert_eq!(
            refs.as_ref().map(PlaneRefs::observed_branch),
            Some("proxops/observed/home")
        );
        assert!(PlaneRefs::for_cluster("../x").is_err());
    }
}
