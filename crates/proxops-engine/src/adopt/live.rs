//! Reading the guests to adopt from PVE, and writing the adopted manifests into a repository.

use super::error::AdoptError;
use super::{AdoptContext, AdoptRefusal, Adopted, LiveGuest, adopt};
use proxops_model::Cluster;
use proxops_model::kind::GuestType;
use proxops_model::manifest::Spec;
use proxops_pve::PveClient;
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
            guest: g.kind,
            config: config.values,
            raw_lxc: config.raw_lxc,
            snapshots: client.guest_snapshots(&g.guest_ref()).await?,
            running: g.status == "running",
            pool: g.pool.clone(),
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

/// What [`write()`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Written {
    /// The manifests, relative to the repository (one already there, identical, counts).
    pub manifests: Vec<PathBuf>,
    /// Whether the composition had to be rewritten canonically (its comments lost).
    pub composition_rewritten: bool,
}

/// Writes each manifest into `repo` and adds its entry to `clusters/<cluster>/resources.yaml`
/// (edited as YAML, in the list's own style, comments kept), all or nothing: every target is
/// checked first (a manifest file that exists is refused unless it holds exactly this
/// manifest, so a rerun after a failure goes on), every file is written to a temporary beside
/// it, and the temporaries are renamed only once all of them are written.
pub fn write(repo: &Path, cluster: &str, adopted: &[&Adopted]) -> Result<Written, AdoptError> {
    let files: Vec<(PathBuf, String)> = adopted
        .iter()
        .map(|a| (manifest_path(cluster, a), a.to_yaml()))
        .collect();
    write_files(repo, cluster, &files)
}

/// [`write()`] for adopted cluster objects.
pub fn write_objects(
    repo: &Path,
    cluster: &str,
    adopted: &[&super::objects::AdoptedObject],
) -> Result<Written, AdoptError> {
    let files: Vec<(PathBuf, String)> = adopted
        .iter()
        .map(|a| (a.path(cluster), a.to_yaml()))
        .collect();
    write_files(repo, cluster, &files)
}

/// Writes manifests (repository-relative path, text) and lists them in the cluster's
/// composition, as [`write()`] says.
fn write_files(
    repo: &Path,
    cluster: &str,
    adopted: &[(PathBuf, String)],
) -> Result<Written, AdoptError> {
    let fail =
        |p: &Path, e: &dyn std::fmt::Display| AdoptError::Write(p.to_path_buf(), e.to_string());
    let comp = repo.join("clusters").join(cluster).join("resources.yaml");
    let composition = match std::fs::read_to_string(&comp) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(fail(&comp, &e)),
    };
    let listed = super::composition::entries(&composition).map_err(|e| fail(&comp, &e))?;
    let mut files: Vec<(PathBuf, String)> = Vec::new();
    let mut manifests = Vec::new();
    let mut added = Vec::new();
    for (rel, text) in adopted {
        let rel = rel.clone();
        let path = repo.join(&rel);
        match std::fs::read_to_string(&path) {
            Ok(existing) if existing == *text => {}
            Ok(_) => {
                return Err(fail(
                    &path,
                    &"the file exists; adopt never overwrites a manifest",
                ));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                files.push((path.clone(), text.clone()));
            }
            Err(e) => return Err(fail(&path, &e)),
        }
        let entry = format!("../../{}", rel.display());
        if !listed.contains(&entry) && !added.contains(&entry) {
            added.push(entry);
        }
        manifests.push(rel);
    }
    let edited =
        super::composition::add_entries(&composition, &added).map_err(|e| fail(&comp, &e))?;
    if edited.text != composition {
        files.push((comp.clone(), edited.text));
    }
    // Temporaries first; nothing is renamed unless all of them were written.
    let mut staged: Vec<(PathBuf, PathBuf)> = Vec::new();
    let staging = files.iter().try_for_each(|(path, text)| {
        let parent = path.parent().unwrap_or(repo);
        std::fs::create_dir_all(parent).map_err(|e| fail(parent, &e))?;
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let temp = parent.join(format!(".{}.proxops-adopt", name.unwrap_or_default()));
        staged.push((temp.clone(), path.clone()));
        std::fs::write(&temp, text).map_err(|e| fail(&temp, &e))
    });
    if let Err(e) = staging {
        for (temp, _) in &staged {
            let _ = std::fs::remove_file(temp);
        }
        return Err(e);
    }
    for (done, (temp, path)) in staged.iter().enumerate() {
        if let Err(e) = std::fs::rename(temp, path) {
            for (left, _) in &staged[done..] {
                let _ = std::fs::remove_file(left);
            }
            return Err(fail(path, &e));
        }
    }
    Ok(Written {
        manifests,
        composition_rewritten: edited.rewritten,
    })
}
