//! Reading the guests to adopt from PVE, and writing the adopted manifests into a repository.

use super::{AdoptContext, AdoptRefusal, Adopted, LiveGuest, adopt};
use proxops_model::Cluster;
use proxops_model::kind::GuestType;
use proxops_model::manifest::Spec;
use proxops_pve::{PveClient, PveError};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

impl AdoptContext {
    /// The context of a loaded cluster: its node allowlist and the vmids its resources declare.
    pub fn for_cluster(cluster: &Cluster) -> AdoptContext {
        let mut declared = BTreeMap::new();
        for r in &cluster.resources {
            let vmid = match &r.spec {
                Spec::Vm(v) => v.vmid,
                Spec::Lxc(l) => l.vmid,
                _ => continue,
            };
            declared.insert(vmid, format!("{}/{}", r.kind, r.metadata.name));
        }
        AdoptContext {
            cluster: cluster.name.clone(),
            nodes: cluster
                .entry
                .as_ref()
                .map(|e| e.nodes.clone())
                .unwrap_or_default(),
            declared,
        }
    }
}

/// What to adopt: the listed vmids, or every guest without a ProxOps identity tag.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Selection {
    /// These vmids.
    Vmids(Vec<u32>),
    /// Every untagged guest on the allowlisted nodes.
    All,
}

/// One guest's outcome.
#[derive(Debug)]
#[non_exhaustive]
pub enum Outcome {
    /// Adopted.
    Adopted(Box<Adopted>),
    /// Refused, with why.
    Refused(AdoptRefusal),
}

/// Errors reading guests for adoption.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdoptError {
    /// A PVE read failed.
    #[error("reading from PVE: {0}")]
    Pve(#[from] PveError),
    /// A listed vmid is not a guest of the cluster.
    #[error("vmid {0} is not a guest of the cluster")]
    NoSuchGuest(u32),
    /// Writing the repository failed.
    #[error("writing {0}: {1}")]
    Write(PathBuf, String),
}

/// Reads the selected guests' configs (`GET .../config`) and adopts each. Reads only.
pub async fn adopt_live(
    client: &PveClient,
    ctx: &AdoptContext,
    selection: &Selection,
) -> Result<Vec<(u32, Outcome)>, AdoptError> {
    let inventory = client.inventory().await?;
    let chosen: Vec<_> = match selection {
        Selection::Vmids(vmids) => {
            let mut out = Vec::new();
            for v in vmids {
                out.push(inventory.guests.get(v).ok_or(AdoptError::NoSuchGuest(*v))?);
            }
            out
        }
        // `--all`: untagged guests on allowlisted nodes; a claimed or foreign one is skipped,
        // not refused (it was never asked for).
        Selection::All => inventory
            .guests
            .values()
            .filter(|g| {
                !g.tags
                    .iter()
                    .any(|t| t.starts_with(crate::desired::IDENTITY_PREFIX))
            })
            .filter(|g| ctx.nodes.is_empty() || ctx.nodes.contains(&g.node))
            .filter(|g| !ctx.declared.contains_key(&g.vmid))
            .collect(),
    };
    let mut configs = client
        .guest_configs(chosen.iter().map(|g| g.guest_ref()), 8)
        .await;
    let mut out = Vec::new();
    // Names the repository or an earlier guest of this run already uses, per kind: a second
    // `jellyfin` becomes `jellyfin-<vmid>`.
    let mut taken: BTreeSet<String> = ctx.declared.values().cloned().collect();
    for g in chosen {
        let config = match configs.remove(&g.vmid) {
            Some(Ok(c)) => c,
            Some(Err(e)) => return Err(AdoptError::Pve(e)),
            None => return Err(AdoptError::NoSuchGuest(g.vmid)),
        };
        let live = LiveGuest {
            vmid: g.vmid,
            node: g.node.clone(),
            guest: match g.kind {
                proxops_pve::GuestType::Qemu => GuestType::Qemu,
                proxops_pve::GuestType::Lxc => GuestType::Lxc,
            },
            config: config.values,
            raw_lxc: config.raw_lxc,
            snapshots: client.guest_snapshots(&g.guest_ref()).await?,
            running: g.status == "running",
        };
        let outcome = match adopt(ctx, &live) {
            Ok(mut a) => {
                if !taken.insert(format!("{}/{}", a.report.kind, a.report.name)) {
                    rename(&mut a, &live);
                    taken.insert(format!("{}/{}", a.report.kind, a.report.name));
                }
                Outcome::Adopted(Box::new(a))
            }
            Err(r) => Outcome::Refused(r),
        };
        out.push((g.vmid, outcome));
    }
    Ok(out)
}

/// Gives `a` the name `<name>-<vmid>`; a VM's PVE name then goes to `pve-name`, which the
/// resource name no longer is.
fn rename(a: &mut Adopted, live: &LiveGuest) {
    let name = format!("{}-{}", a.report.name, live.vmid);
    a.report.name.clone_from(&name);
    a.manifest["metadata"]["name"] = serde_json::Value::from(name);
    if live.guest == GuestType::Qemu
        && let Some(pve) = live.config.get("name")
        && let Some(spec) = a.manifest["spec"].as_object_mut()
    {
        spec.entry("pve-name")
            .or_insert_with(|| serde_json::Value::from(pve.clone()));
    }
}

/// The repository path of an adopted guest's manifest: `<kind>/<cluster>/<name>.yaml`.
pub fn manifest_path(cluster: &str, adopted: &Adopted) -> PathBuf {
    Path::new(&adopted.report.kind.to_ascii_lowercase())
        .join(cluster)
        .join(format!("{}.yaml", adopted.report.name))
}

/// Writes each manifest into `repo` and appends its composition entry to
/// `clusters/<cluster>/resources.yaml`; refuses to overwrite an existing manifest file.
pub fn write(repo: &Path, cluster: &str, adopted: &[&Adopted]) -> Result<Vec<PathBuf>, AdoptError> {
    let fail =
        |p: &Path, e: &dyn std::fmt::Display| AdoptError::Write(p.to_path_buf(), e.to_string());
    let mut written = Vec::new();
    let mut entries = String::new();
    for a in adopted {
        let rel = manifest_path(cluster, a);
        let path = repo.join(&rel);
        if path.exists() {
            return Err(fail(
                &path,
                &"the file exists; adopt never overwrites a manifest",
            ));
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| fail(parent, &e))?;
        }
        std::fs::write(&path, a.to_yaml()).map_err(|e| fail(&path, &e))?;
        entries.push_str(&format!("  - ../../{}\n", rel.display()));
        written.push(rel);
    }
    let comp = repo.join("clusters").join(cluster).join("resources.yaml");
    let mut text = match std::fs::read_to_string(&comp) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => "resources:\n".to_owned(),
        Err(e) => return Err(fail(&comp, &e)),
    };
    if !text.ends_with('\n') {
        text.push('\n');
    }
    // An empty list written flow-style cannot take block entries.
    if text.contains("resources: []") {
        text = text.replace("resources: []", "resources:");
    }
    text.push_str("  # adopted by `proxops adopt`\n");
    text.push_str(&entries);
    if let Some(parent) = comp.parent() {
        std::fs::create_dir_all(parent).map_err(|e| fail(parent, &e))?;
    }
    std::fs::write(&comp, text).map_err(|e| fail(&comp, &e))?;
    Ok(written)
}
