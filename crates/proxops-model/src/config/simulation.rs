//! A cluster's `simulation:` block: how the built-in simulator stands in for the cluster
//! (`--backend sim`, `proxops demo`, `proxops sim --seed-repo`): the PVE release it answers as
//! and the storages the cluster has besides PVE's defaults. The simulator never invents a
//! storage to fit the manifests, so a manifest that names a storage PVE would not have, or puts
//! content on one that does not hold it, fails under simulation as it would on PVE.

use super::problem::{ConfigProblem, at};
use crate::diagnostic::Code;
use crate::names::{is_valid_node, is_valid_storage};
use crate::yaml::PathSeg;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `pve.clusters.<name>.simulation`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
#[non_exhaustive]
pub struct SimulationConfig {
    /// The PVE release to simulate, `"8.4"` or `"9.1"` (the default); quote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pve_version: Option<SimPveVersion>,
    /// Storages besides the defaults of a fresh PVE install (`local`: dir with iso, vztmpl,
    /// backup and, from 9.0, import; `local-lvm`: lvmthin with images and rootdir). One named
    /// like a default replaces it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub storages: Vec<SimStorage>,
    /// A directory laid out as `/etc/pve` is (`nodes/<node>/qemu-server/<vmid>.conf`,
    /// `nodes/<node>/lxc/<vmid>.conf`; a file directly in `qemu-server/` or `lxc/` goes to the
    /// first node) whose guests a fresh simulator starts with, so that `proxops adopt` can be
    /// tried on a copy of an existing cluster. A kept state file (`--sim-state`) wins once it
    /// exists. Relative to the directory of the config file that says it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_configs: Option<String>,
}

/// The PVE releases the simulator can answer as.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum SimPveVersion {
    /// Proxmox VE 8.4.
    #[serde(rename = "8.4")]
    V8_4,
    /// Proxmox VE 9.1.
    #[serde(rename = "9.1")]
    V9_1,
}

impl SimPveVersion {
    /// `8.4` or `9.1`.
    pub fn as_str(self) -> &'static str {
        match self {
            SimPveVersion::V8_4 => "8.4",
            SimPveVersion::V9_1 => "9.1",
        }
    }
}

/// One storage of the simulated cluster, as `/etc/pve/storage.cfg` would declare it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
#[non_exhaustive]
pub struct SimStorage {
    /// The storage id (`vm_disks`, `nas`).
    pub name: String,
    /// The storage type (PVE's plugin).
    #[serde(rename = "type")]
    pub kind: StorageType,
    /// The content types it holds; each must be one the type can hold.
    pub content: Vec<ContentType>,
    /// Whether every node sees the same content (NFS, Ceph, ...). Default: false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared: Option<bool>,
    /// The nodes that have it (default: every node of the cluster).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
}

/// PVE's storage types (the `type` enum of `GET /storage`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)]
#[non_exhaustive]
pub enum StorageType {
    Btrfs,
    Cephfs,
    Cifs,
    Dir,
    Esxi,
    Glusterfs,
    Iscsi,
    Iscsidirect,
    Lvm,
    Lvmthin,
    Nfs,
    Pbs,
    Rbd,
    Zfs,
    Zfspool,
}

/// PVE's storage content types.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ContentType {
    /// VM disk images.
    Images,
    /// Container volumes.
    Rootdir,
    /// Container templates.
    Vztmpl,
    /// ISO images.
    Iso,
    /// Backups.
    Backup,
    /// Snippets (hook scripts, cloud-init files).
    Snippets,
    /// Disk images and appliances to import (PVE 8.3 and later).
    Import,
}

impl ContentType {
    /// PVE's name of the content type.
    pub fn as_str(self) -> &'static str {
        match self {
            ContentType::Images => "images",
            ContentType::Rootdir => "rootdir",
            ContentType::Vztmpl => "vztmpl",
            ContentType::Iso => "iso",
            ContentType::Backup => "backup",
            ContentType::Snippets => "snippets",
            ContentType::Import => "import",
        }
    }
}

impl StorageType {
    /// PVE's name of the type.
    pub fn as_str(self) -> &'static str {
        match self {
            StorageType::Btrfs => "btrfs",
            StorageType::Cephfs => "cephfs",
            StorageType::Cifs => "cifs",
            StorageType::Dir => "dir",
            StorageType::Esxi => "esxi",
            StorageType::Glusterfs => "glusterfs",
            StorageType::Iscsi => "iscsi",
            StorageType::Iscsidirect => "iscsidirect",
            StorageType::Lvm => "lvm",
            StorageType::Lvmthin => "lvmthin",
            StorageType::Nfs => "nfs",
            StorageType::Pbs => "pbs",
            StorageType::Rbd => "rbd",
            StorageType::Zfs => "zfs",
            StorageType::Zfspool => "zfspool",
        }
    }

    /// The content types the type can hold: each pve-storage plugin's `plugindata` `content`
    /// (`src/PVE/Storage/*Plugin.pm`; `none` left out).
    pub fn holds(self) -> &'static [ContentType] {
        use ContentType::*;
        match self {
            StorageType::Dir | StorageType::Btrfs | StorageType::Nfs | StorageType::Cifs => {
                &[Images, Rootdir, Vztmpl, Iso, Backup, Snippets, Import]
            }
            StorageType::Glusterfs => &[Images, Vztmpl, Iso, Backup, Snippets, Import],
            StorageType::Cephfs => &[Vztmpl, Iso, Backup, Snippets, Import],
            StorageType::Lvm | StorageType::Lvmthin | StorageType::Rbd | StorageType::Zfspool => {
                &[Images, Rootdir]
            }
            StorageType::Zfs | StorageType::Iscsi | StorageType::Iscsidirect => &[Images],
            StorageType::Esxi => &[Import],
            StorageType::Pbs => &[Backup],
        }
    }
}

impl SimulationConfig {
    /// Checks of the block; paths are relative to the cluster entry. `nodes` is the cluster's
    /// allowlist (empty: no check).
    pub fn check(&self, nodes: &[String]) -> Vec<ConfigProblem> {
        let mut out = Vec::new();
        let version = self.pve_version.unwrap_or(SimPveVersion::V9_1);
        if self
            .guest_configs
            .as_deref()
            .is_some_and(|p| p.trim().is_empty())
        {
            out.push(ConfigProblem {
                code: Code::InvalidValue,
                path: at(&["simulation", "guest-configs"]),
                message: "`guest-configs` is empty".into(),
                help: Some("a directory laid out as /etc/pve, e.g. `../../etc-pve`".into()),
            });
        }
        for (i, s) in self.storages.iter().enumerate() {
            let here = |key: &str| {
                let mut path = at(&["simulation", "storages"]);
                path.push(PathSeg::Index(i));
                path.push(PathSeg::from(key));
                path
            };
            let mut problem = |path: Vec<PathSeg>, message: String, help: Option<String>| {
                out.push(ConfigProblem {
                    code: Code::InvalidValue,
                    path,
                    message,
                    help,
                });
            };
            if !is_valid_storage(&s.name) {
                problem(
                    here("name"),
                    format!("`{}` is not a valid PVE storage id", s.name),
                    Some("letters, digits, `-`, `_` and `.`, starting with a letter".into()),
                );
            } else if self.storages[..i].iter().any(|o| o.name == s.name) {
                problem(
                    here("name"),
                    format!("storage `{}` is declared twice", s.name),
                    None,
                );
            }
            if s.kind == StorageType::Glusterfs && version >= SimPveVersion::V9_1 {
                problem(
                    here("type"),
                    "PVE 9 has no `glusterfs` storage type (its plugin was removed)".into(),
                    Some("use `nfs` or `cephfs`, or simulate `pve-version: \"8.4\"`".into()),
                );
            }
            for (j, c) in s.content.iter().enumerate() {
                let mut path = here("content");
                path.push(PathSeg::Index(j));
                if !s.kind.holds().contains(c) {
                    let can: Vec<&str> = s.kind.holds().iter().map(|c| c.as_str()).collect();
                    problem(
                        path,
                        format!(
                            "a `{}` storage cannot hold `{}` content",
                            s.kind.as_str(),
                            c.as_str()
                        ),
                        Some(format!("it can hold: {}", can.join(", "))),
                    );
                } else if s.content[..j].contains(c) {
                    problem(
                        path,
                        format!("content `{}` is listed twice", c.as_str()),
                        None,
                    );
                }
            }
            for (j, node) in s.nodes.iter().enumerate() {
                let mut path = here("nodes");
                path.push(PathSeg::Index(j));
                if !is_valid_node(node) {
                    problem(path, format!("`{node}` is not a valid PVE node name"), None);
                } else if !nodes.is_empty() && !nodes.contains(node) {
                    problem(
                        path,
                        format!("node `{node}` is not in the cluster's `nodes`"),
                        Some(format!("one of: {}", nodes.join(", "))),
                    );
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn storage(name: &str, kind: StorageType, content: &[ContentType]) -> SimStorage {
        SimStorage {
            name: name.into(),
            kind,
            content: content.to_vec(),
            shared: None,
            nodes: Vec::new(),
        }
    }

    #[test]
    fn storages_hold_what_their_type_can() {
        use ContentType::*;
        let ok = SimulationConfig {
            pve_version: None,
            storages: vec![
                storage("vm_disks", StorageType::Lvmthin, &[Images, Rootdir]),
                storage("nas", StorageType::Nfs, &[Iso, Vztmpl, Import]),
            ],
            guest_configs: None,
        };
        assert!(ok.check(&[]).is_empty(), "{:?}", ok.check(&[]));
        let mut bad = SimulationConfig {
            pve_version: None,
            storages: vec![
                storage("vm_disks", StorageType::Lvmthin, &[Images, Iso]),
                storage("vm_disks", StorageType::Glusterfs, &[Images, Images]),
                storage("1x", StorageType::Dir, &[]),
            ],
            guest_configs: Some(" ".into()),
        };
        bad.storages[0].nodes = vec!["pve9".into()];
        let problems = bad.check(&["pve1".into()]);
        let messages: Vec<&str> = problems.iter().map(|p| p.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "`guest-configs` is empty",
                "a `lvmthin` storage cannot hold `iso` content",
                "node `pve9` is not in the cluster's `nodes`",
                "storage `vm_disks` is declared twice",
                "PVE 9 has no `glusterfs` storage type (its plugin was removed)",
                "content `images` is listed twice",
                "`1x` is not a valid PVE storage id",
            ]
        );
        assert_eq!(
            problems[1].path,
            vec![
                PathSeg::from("simulation"),
                PathSeg::from("storages"),
                PathSeg::Index(0),
                PathSeg::from("content"),
                PathSeg::Index(1),
            ]
        );
        bad.pve_version = Some(SimPveVersion::V8_4);
        assert!(
            !bad.check(&[])
                .iter()
                .any(|p| p.message.contains("glusterfs")),
            "8.4 still has glusterfs"
        );
    }
}
