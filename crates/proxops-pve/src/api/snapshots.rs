//! Snapshots of a guest and the QEMU guest agent's `ping`: what a snapshot-guarded update
//! needs. qemu-server `src/PVE/API2/Qemu.pm` (`snapshot_list`, `snapshot`,
//! `update_snapshot_config`, `rollback`, `delsnapshot`) and pve-container
//! `src/PVE/API2/LXC/Snapshot.pm` serve the same paths under `qemu` and `lxc`; each write forks
//! a worker (`qmsnapshot`, `qmrollback`, `qmdelsnapshot`; `vz...`) whose UPID is answered.

use reqwest::Method;
use serde_json::Value;

use super::opt_upid;
use crate::client::PveClient;
use crate::error::PveError;
use crate::params::{Params, seg};
use crate::types::{GuestRef, GuestType};
use crate::upid::Upid;

/// One snapshot of a guest, as `GET .../snapshot` lists it (the `current` entry left out).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SnapshotEntry {
    /// Its name.
    pub name: String,
    /// Its description (empty when it has none).
    pub description: String,
    /// When it was taken (seconds since the epoch; 0 when PVE gives none).
    pub snaptime: u64,
    /// Whether it holds a running VM's memory.
    pub vmstate: bool,
    /// The snapshot it was taken on top of.
    pub parent: Option<String>,
}

impl SnapshotEntry {
    /// A snapshot named `name` with `description`, taken at `snaptime`.
    pub fn new(name: impl Into<String>, description: impl Into<String>, snaptime: u64) -> Self {
        SnapshotEntry {
            name: name.into(),
            description: description.into(),
            snaptime,
            vmstate: false,
            parent: None,
        }
    }
}

/// What `POST .../snapshot` takes besides the name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SnapshotRequest {
    /// The snapshot's description.
    pub description: Option<String>,
    /// Save a running VM's memory too (qemu only; PVE saves none for a stopped VM).
    pub vmstate: bool,
}

impl SnapshotRequest {
    /// A snapshot with `description`.
    pub fn new(description: impl Into<String>) -> Self {
        SnapshotRequest {
            description: Some(description.into()),
            vmstate: false,
        }
    }

    /// Saves a running VM's memory too.
    pub fn with_vmstate(mut self, vmstate: bool) -> Self {
        self.vmstate = vmstate;
        self
    }
}

fn base(g: &GuestRef) -> String {
    format!("/nodes/{}/{}/{}", seg(&g.node), g.kind.as_str(), g.vmid)
}

fn template(kind: GuestType, rest: &str) -> &'static str {
    match (kind, rest) {
        (GuestType::Qemu, "") => "/nodes/{node}/qemu/{vmid}/snapshot",
        (GuestType::Qemu, "one") => "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}",
        (GuestType::Qemu, "config") => "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}/config",
        (GuestType::Qemu, "rollback") => "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}/rollback",
        (GuestType::Lxc, "") => "/nodes/{node}/lxc/{vmid}/snapshot",
        (GuestType::Lxc, "one") => "/nodes/{node}/lxc/{vmid}/snapshot/{snapname}",
        (GuestType::Lxc, "config") => "/nodes/{node}/lxc/{vmid}/snapshot/{snapname}/config",
        (GuestType::Lxc, "rollback") => "/nodes/{node}/lxc/{vmid}/snapshot/{snapname}/rollback",
        _ => "/nodes/{node}/{type}/{vmid}/snapshot/?",
    }
}

fn upid(method: &Method, path: &str, data: Value) -> Result<Upid, PveError> {
    opt_upid(method.as_str(), path, data)?.ok_or_else(|| PveError::Decode {
        method: method.to_string(),
        path: path.to_owned(),
        detail: "expected a UPID, got null".into(),
    })
}

fn entry(row: &Value) -> Option<SnapshotEntry> {
    let name = row.get("name")?.as_str()?;
    if name == "current" {
        return None;
    }
    let number = |v: &Value| v.as_u64().or_else(|| v.as_str()?.parse().ok());
    Some(SnapshotEntry {
        name: name.to_owned(),
        description: row
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        snaptime: row.get("snaptime").and_then(number).unwrap_or(0),
        vmstate: row.get("vmstate").and_then(number).is_some_and(|v| v != 0)
            || row.get("vmstate").and_then(Value::as_bool) == Some(true),
        parent: row.get("parent").and_then(Value::as_str).map(str::to_owned),
    })
}

impl PveClient {
    /// `GET .../snapshot`: the guest's snapshots with their descriptions and times, in PVE's
    /// order, without the `current` entry.
    pub async fn snapshot_list(&self, g: &GuestRef) -> Result<Vec<SnapshotEntry>, PveError> {
        let path = format!("{}/snapshot", base(g));
        let data = self
            .call_json(Method::GET, template(g.kind, ""), &path, &Params::new())
            .await?;
        let Some(rows) = data.as_array() else {
            return Err(PveError::Decode {
                method: "GET".into(),
                path,
                detail: format!("expected an array, got {data}"),
            });
        };
        Ok(rows.iter().filter_map(entry).collect())
    }

    /// `POST .../snapshot`: takes snapshot `name` in a worker, whose UPID is answered. PVE
    /// refuses a used name, a template, a locked guest and a volume whose storage has no
    /// snapshots ("snapshot feature is not available") in the worker. Sent once: a lost answer
    /// is not sent again (the snapshot may be taken all the same).
    pub async fn snapshot_create(
        &self,
        g: &GuestRef,
        name: &str,
        request: &SnapshotRequest,
    ) -> Result<Upid, PveError> {
        let path = format!("{}/snapshot", base(g));
        let mut params = Params::new().set("snapname", name);
        if let Some(d) = &request.description {
            params.push("description", d);
        }
        if request.vmstate && g.kind == GuestType::Qemu {
            params.push("vmstate", 1);
        }
        let data = self
            .call_json_once(Method::POST, template(g.kind, ""), &path, &params)
            .await?;
        upid(&Method::POST, &path, data)
    }

    /// `PUT .../snapshot/{name}/config`: changes the snapshot's description (synchronous).
    pub async fn snapshot_describe(
        &self,
        g: &GuestRef,
        name: &str,
        description: &str,
    ) -> Result<(), PveError> {
        let path = format!("{}/snapshot/{}/config", base(g), seg(name));
        self.call_json(
            Method::PUT,
            template(g.kind, "config"),
            &path,
            &Params::new().set("description", description),
        )
        .await
        .map(|_| ())
    }

    /// `POST .../snapshot/{name}/rollback`: puts the guest back to snapshot `name` in a
    /// worker (it stops a running guest first); `start` starts it again afterwards (a VM
    /// whose snapshot holds its memory is resumed either way). Sent once.
    pub async fn snapshot_rollback(
        &self,
        g: &GuestRef,
        name: &str,
        start: bool,
    ) -> Result<Upid, PveError> {
        let path = format!("{}/snapshot/{}/rollback", base(g), seg(name));
        let mut params = Params::new();
        if start {
            params.push("start", 1);
        }
        let data = self
            .call_json_once(Method::POST, template(g.kind, "rollback"), &path, &params)
            .await?;
        upid(&Method::POST, &path, data)
    }

    /// `DELETE .../snapshot/{name}`: deletes snapshot `name` in a worker.
    pub async fn snapshot_delete(&self, g: &GuestRef, name: &str) -> Result<Upid, PveError> {
        let path = format!("{}/snapshot/{}", base(g), seg(name));
        let data = self
            .call_json(
                Method::DELETE,
                template(g.kind, "one"),
                &path,
                &Params::new(),
            )
            .await?;
        upid(&Method::DELETE, &path, data)
    }

    /// `POST /nodes/{node}/qemu/{vmid}/agent/ping`: whether the VM's QEMU guest agent answers.
    /// PVE answers 500 while the agent is not configured (`No QEMU guest agent configured`),
    /// the VM is not running, or the agent does not answer (`QEMU guest agent is not
    /// running`); needs `VM.Monitor` (PVE 8) or `VM.GuestAgent.Audit` (PVE 9).
    pub async fn agent_ping(&self, node: &str, vmid: u32) -> Result<(), PveError> {
        let path = format!("/nodes/{}/qemu/{vmid}/agent/ping", seg(node));
        self.call_json_once(
            Method::POST,
            "/nodes/{node}/qemu/{vmid}/agent/ping",
            &path,
            &Params::new(),
        )
        .await
        .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_listing_reads_without_current() {
        let rows = json!([
            {"name": "proxops-a", "description": "proxops: x", "snaptime": 10, "vmstate": 0},
            {"name": "b", "snaptime": "20", "vmstate": 1, "parent": "proxops-a"},
            {"name": "current", "description": "You are here!", "parent": "b"},
        ]);
        let got: Vec<SnapshotEntry> = rows
            .as_array()
            .map(|r| r.iter().filter_map(entry).collect())
            .unwrap_or_default();
        assert_eq!(
            got,
            vec![
                SnapshotEntry::new("proxops-a", "proxops: x", 10),
                SnapshotEntry {
                    vmstate: true,
                    parent: Some("proxops-a".into()),
                    ..SnapshotEntry::new("b", "", 20)
                },
            ]
        );
    }
}
