//! HA resources (`/cluster/ha/resources`, pve-ha-manager `src/PVE/API2/HA/Resources.pm`) and
//! guest migration (`POST /nodes/{node}/{qemu|lxc}/{vmid}/migrate`).

use reqwest::Method;
use serde::Deserialize;

use crate::client::PveClient;
use crate::error::PveError;
use crate::lenient;
use crate::params::{Params, seg};
use crate::request::Request;
use crate::types::{GuestRef, GuestType};
use crate::upid::Upid;

/// One row of `GET /cluster/ha/resources`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct HaResource {
    /// `vm:100`, `ct:101`.
    pub sid: String,
    /// The requested state (`started`, `stopped`, `disabled`, `ignored`).
    #[serde(deserialize_with = "lenient::opt_string")]
    pub state: Option<String>,
    /// The HA group (PVE 8).
    #[serde(deserialize_with = "lenient::opt_string")]
    pub group: Option<String>,
    /// Restart attempts.
    #[serde(deserialize_with = "lenient::opt_u64")]
    pub max_restart: Option<u64>,
    /// Relocation attempts.
    #[serde(deserialize_with = "lenient::opt_u64")]
    pub max_relocate: Option<u64>,
    /// The config digest.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub digest: Option<String>,
}

/// One row of `GET /cluster/ha/rules` (PVE 9, pve-ha-manager `src/PVE/API2/HA/Rules.pm`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct HaRule {
    /// The rule id.
    pub rule: String,
    /// `node-affinity` or `resource-affinity`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Its HA resources, comma-separated and sorted (`vm:100,ct:101`).
    #[serde(deserialize_with = "lenient::opt_string")]
    pub resources: Option<String>,
    /// Node affinity: `node[:priority]`, comma-separated and sorted.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub nodes: Option<String>,
    /// Node affinity: restricted to its nodes (`1`; absent or `0`: preferred only).
    #[serde(deserialize_with = "lenient::opt_u64")]
    pub strict: Option<u64>,
    /// Its comment.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub comment: Option<String>,
}

impl HaRule {
    /// Its resources.
    pub fn resource_list(&self) -> Vec<&str> {
        self.resources
            .as_deref()
            .unwrap_or_default()
            .split(',')
            .filter(|s| !s.is_empty())
            .collect()
    }
}

/// The HA sid of a guest: `vm:<vmid>` or `ct:<vmid>`.
pub fn ha_sid(kind: GuestType, vmid: u32) -> String {
    match kind {
        GuestType::Qemu => format!("vm:{vmid}"),
        GuestType::Lxc => format!("ct:{vmid}"),
    }
}

/// What `POST .../migrate` is asked to do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MigrateRequest {
    /// The target node.
    pub target: String,
    /// Live migration of a running VM (`online`).
    pub online: bool,
    /// Move a VM's local disks along (`with-local-disks`).
    pub with_local_disks: bool,
    /// Restart mode for a running container (`restart`).
    pub restart: bool,
}

impl MigrateRequest {
    /// A migration to `target`: offline, without local disks, no container restart.
    pub fn new(target: impl Into<String>) -> MigrateRequest {
        MigrateRequest {
            target: target.into(),
            ..MigrateRequest::default()
        }
    }

    /// Live migration of a running VM (`online`).
    pub fn with_online(mut self, online: bool) -> MigrateRequest {
        self.online = online;
        self
    }

    /// Move a VM's local disks along (`with-local-disks`).
    pub fn with_local_disks(mut self, with_local_disks: bool) -> MigrateRequest {
        self.with_local_disks = with_local_disks;
        self
    }

    /// Restart mode for a running container (`restart`).
    pub fn with_restart(mut self, restart: bool) -> MigrateRequest {
        self.restart = restart;
        self
    }
}

impl PveClient {
    /// `GET /cluster/ha/resources`.
    pub async fn ha_resources(&self) -> Result<Vec<HaResource>, PveError> {
        self.call(
            Method::GET,
            "/cluster/ha/resources",
            "/cluster/ha/resources",
            &Params::new(),
        )
        .await
    }

    /// `POST /cluster/ha/resources`: `params` are the resource's options (`state`, `group`,
    /// `max_restart`, `max_relocate`).
    pub async fn ha_create(&self, sid: &str, params: Params) -> Result<(), PveError> {
        let r = Request::ha_create(sid, &params);
        self.call_json(r.method, r.template, &r.path, &r.params)
            .await
            .map(|_| ())
    }

    /// `PUT /cluster/ha/resources/{sid}` (`delete` names the options to drop).
    pub async fn ha_update(&self, sid: &str, params: Params) -> Result<(), PveError> {
        let r = Request::ha_update(sid, params);
        self.call_json(r.method, r.template, &r.path, &r.params)
            .await
            .map(|_| ())
    }

    /// `DELETE /cluster/ha/resources/{sid}`.
    pub async fn ha_delete(&self, sid: &str) -> Result<(), PveError> {
        let path = format!("/cluster/ha/resources/{}", seg(sid));
        self.call_json(
            Method::DELETE,
            "/cluster/ha/resources/{sid}",
            &path,
            &Params::new(),
        )
        .await
        .map(|_| ())
    }

    /// `GET /cluster/ha/rules` (PVE 9; PVE 8 has no such path).
    pub async fn ha_rules(&self) -> Result<Vec<HaRule>, PveError> {
        self.call(
            Method::GET,
            "/cluster/ha/rules",
            "/cluster/ha/rules",
            &Params::new(),
        )
        .await
    }

    /// `POST /cluster/ha/rules` (`params`: `type`, `resources`, `nodes`, ... besides `rule`).
    pub async fn ha_rule_create(&self, rule: &str, params: Params) -> Result<(), PveError> {
        let mut p = Params::new().set("rule", rule);
        for (k, v) in params.pairs() {
            p.push(k, v);
        }
        self.call_json(Method::POST, "/cluster/ha/rules", "/cluster/ha/rules", &p)
            .await
            .map(|_| ())
    }

    /// `PUT /cluster/ha/rules/{rule}` (`type` is required; `delete` names options to drop).
    pub async fn ha_rule_update(&self, rule: &str, params: Params) -> Result<(), PveError> {
        let path = format!("/cluster/ha/rules/{}", seg(rule));
        self.call_json(Method::PUT, "/cluster/ha/rules/{rule}", &path, &params)
            .await
            .map(|_| ())
    }

    /// `DELETE /cluster/ha/rules/{rule}` (no error for a rule that is not there).
    pub async fn ha_rule_delete(&self, rule: &str) -> Result<(), PveError> {
        let path = format!("/cluster/ha/rules/{}", seg(rule));
        self.call_json(
            Method::DELETE,
            "/cluster/ha/rules/{rule}",
            &path,
            &Params::new(),
        )
        .await
        .map(|_| ())
    }

    /// `GET /cluster/ha/groups`: the group names (PVE 8; PVE 9 refuses once groups have been
    /// migrated to rules).
    pub async fn ha_groups(&self) -> Result<Vec<String>, PveError> {
        #[derive(Deserialize)]
        struct Row {
            group: String,
        }
        let rows: Vec<Row> = self
            .call(
                Method::GET,
                "/cluster/ha/groups",
                "/cluster/ha/groups",
                &Params::new(),
            )
            .await?;
        Ok(rows.into_iter().map(|r| r.group).collect())
    }

    /// `POST /nodes/{node}/{qemu|lxc}/{vmid}/migrate`: a `qmigrate`/`vzmigrate` worker (or,
    /// for an HA guest, a `hamigrate` request the HA manager carries out later).
    pub async fn migrate(&self, g: &GuestRef, request: &MigrateRequest) -> Result<Upid, PveError> {
        let path = format!(
            "/nodes/{}/{}/{}/migrate",
            seg(&g.node),
            g.kind.as_str(),
            g.vmid
        );
        let template = match g.kind {
            GuestType::Qemu => "/nodes/{node}/qemu/{vmid}/migrate",
            GuestType::Lxc => "/nodes/{node}/lxc/{vmid}/migrate",
        };
        let mut p = Params::new().set("target", &request.target);
        if request.online {
            p.push("online", 1);
        }
        if request.with_local_disks {
            p.push("with-local-disks", 1);
        }
        if request.restart {
            p.push("restart", 1);
        }
        let data = self.call_json(Method::POST, template, &path, &p).await?;
        super::opt_upid("POST", &path, data)?.ok_or_else(|| PveError::Decode {
            method: "POST".into(),
            path,
            detail: "expected a UPID, got null".into(),
        })
    }
}
