//! Guest endpoints for qemu and lxc alike: create, config read and change, status and power,
//! clone, template, resize, destroy. Asynchronous ones return the task's [`Upid`]; wait for it
//! with [`PveClient::wait_task`].

use reqwest::Method;
use std::collections::BTreeMap;

use super::opt_upid;
use crate::client::PveClient;
use crate::error::PveError;
use crate::params::{Params, seg};
use crate::request::Request;
use crate::tasks::WaitOptions;
use crate::types::{
    CloneRequest, ConfigChange, DestroyOptions, GuestConfig, GuestRef, GuestStatus, GuestType,
    NodeGuest, PendingEntry,
};
use crate::upid::Upid;

fn base(g: &GuestRef) -> String {
    crate::request::guest_base(g)
}

fn template(kind: GuestType, rest: &str) -> &'static str {
    crate::request::guest_template(kind, rest)
}

impl PveClient {
    /// Sends `r`, expecting a task.
    pub(crate) async fn send_upid(&self, r: Request) -> Result<Upid, PveError> {
        let data = self
            .call_json(r.method.clone(), r.template, &r.path, &r.params)
            .await?;
        opt_upid(r.method.as_str(), &r.path, data)?.ok_or_else(|| PveError::Decode {
            method: r.method.to_string(),
            path: r.path,
            detail: "expected a UPID, got null".into(),
        })
    }

    /// Sends `r`, which may finish without a task.
    pub(crate) async fn send_opt_upid(&self, r: Request) -> Result<Option<Upid>, PveError> {
        let data = self
            .call_json(r.method.clone(), r.template, &r.path, &r.params)
            .await?;
        opt_upid(r.method.as_str(), &r.path, data)
    }

    async fn guest_upid(
        &self,
        method: Method,
        g: &GuestRef,
        rest: &str,
        params: &Params,
    ) -> Result<Upid, PveError> {
        let path = format!("{}{rest}", base(g));
        let data = self
            .call_json(method.clone(), template(g.kind, rest), &path, params)
            .await?;
        opt_upid(method.as_str(), &path, data)?.ok_or_else(|| PveError::Decode {
            method: method.to_string(),
            path,
            detail: "expected a UPID, got null".into(),
        })
    }

    /// `POST /nodes/{node}/{qemu|lxc}` with `vmid` and the config keys (e.g. `scsi0=local-lvm:32`,
    /// `net0=virtio,bridge=vmbr0`; for lxc `ostemplate`, `rootfs`, ...).
    pub async fn create_guest(
        &self,
        g: &GuestRef,
        config: &BTreeMap<String, String>,
    ) -> Result<Upid, PveError> {
        let r = Request::create_guest(g, config);
        let path = r.path;
        let data = self
            .call_json(r.method, r.template, &path, &r.params)
            .await?;
        opt_upid("POST", &path, data)?.ok_or_else(|| PveError::Decode {
            method: "POST".into(),
            path,
            detail: "expected a UPID, got null".into(),
        })
    }

    /// `GET /nodes/{node}/{qemu|lxc}`: the node's guests of a type with their live status.
    pub async fn node_guests(
        &self,
        node: &str,
        kind: GuestType,
    ) -> Result<Vec<NodeGuest>, PveError> {
        let (tpl, path) = match kind {
            GuestType::Qemu => ("/nodes/{node}/qemu", format!("/nodes/{}/qemu", seg(node))),
            GuestType::Lxc => ("/nodes/{node}/lxc", format!("/nodes/{}/lxc", seg(node))),
        };
        self.call(Method::GET, tpl, &path, &Params::new()).await
    }

    /// `GET .../config?current=1`: the config the guest runs with, without the changes that
    /// wait for its next start (without `current`, PVE merges those in:
    /// pve-guest-common `PVE::AbstractConfig::load_current_config`), with its digest.
    pub async fn guest_config(&self, g: &GuestRef) -> Result<GuestConfig, PveError> {
        let path = format!("{}/config", base(g));
        let data = self
            .call_json(
                Method::GET,
                template(g.kind, "/config"),
                &path,
                &Params::new().set("current", 1),
            )
            .await?;
        if !data.is_object() {
            return Err(PveError::Decode {
                method: "GET".into(),
                path,
                detail: format!("expected an object, got {data}"),
            });
        }
        Ok(GuestConfig::from_json(&data))
    }

    /// `GET .../snapshot`: the names of the guest's snapshots, in PVE's order, without the
    /// `current` entry PVE lists for the running state (qemu-server `PVE/API2/Qemu.pm`
    /// `snapshot_list`,
    /// pve-container `PVE/API2/LXC/Snapshot.pm` `list`).
    pub async fn guest_snapshots(&self, g: &GuestRef) -> Result<Vec<String>, PveError> {
        let path = format!("{}/snapshot", base(g));
        let data = self
            .call_json(
                Method::GET,
                template(g.kind, "/snapshot"),
                &path,
                &Params::new(),
            )
            .await?;
        let Some(rows) = data.as_array() else {
            return Err(PveError::Decode {
                method: "GET".into(),
                path,
                detail: format!("expected an array, got {data}"),
            });
        };
        Ok(rows
            .iter()
            .filter_map(|r| r.get("name")?.as_str())
            .filter(|n| *n != "current")
            .map(str::to_owned)
            .collect())
    }

    /// `GET .../snapshot/{snapname}/config`: the config the guest had when snapshot `name`
    /// was taken (qemu-server `PVE/API2/Qemu.pm` `get_snapshot_config`, pve-container
    /// `PVE/API2/LXC/Snapshot.pm` `get_snapshot_config`).
    pub async fn guest_snapshot_config(
        &self,
        g: &GuestRef,
        name: &str,
    ) -> Result<GuestConfig, PveError> {
        let path = format!("{}/snapshot/{}/config", base(g), seg(name));
        let template = match g.kind {
            GuestType::Qemu => "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}/config",
            GuestType::Lxc => "/nodes/{node}/lxc/{vmid}/snapshot/{snapname}/config",
        };
        let data = self
            .call_json(Method::GET, template, &path, &Params::new())
            .await?;
        if !data.is_object() {
            return Err(PveError::Decode {
                method: "GET".into(),
                path,
                detail: format!("expected an object, got {data}"),
            });
        }
        Ok(GuestConfig::from_json(&data))
    }

    /// `GET .../pending`: every config key with its current value and what waits for the
    /// guest's next start, sorted by key.
    pub async fn guest_pending(&self, g: &GuestRef) -> Result<Vec<PendingEntry>, PveError> {
        let path = format!("{}/pending", base(g));
        let data = self
            .call_json(
                Method::GET,
                template(g.kind, "/pending"),
                &path,
                &Params::new(),
            )
            .await?;
        if !data.is_array() {
            return Err(PveError::Decode {
                method: "GET".into(),
                path,
                detail: format!("expected an array, got {data}"),
            });
        }
        Ok(PendingEntry::rows_from_json(&data))
    }

    /// `POST /nodes/{node}/qemu/{vmid}/config` (qemu only): the asynchronous change. PVE always
    /// forks a `qmconfig` worker and answers its UPID (qemu-server `src/PVE/API2/Qemu.pm`
    /// `update_vm_api`); only with `background_delay` may it answer `null`, when the worker
    /// ended within that time. Use it for work that takes long (allocating or importing disks):
    /// the call itself is never held up by it.
    ///
    /// Not retried after a failure that leaves the outcome unknown
    /// ([`PveError::outcome_unknown`]): the worker may run all the same.
    pub async fn set_config_async(
        &self,
        g: &GuestRef,
        change: &ConfigChange,
    ) -> Result<Option<Upid>, PveError> {
        if g.kind != GuestType::Qemu {
            return Err(PveError::Config(
                "asynchronous config changes exist for qemu only; use set_config".into(),
            ));
        }
        let r = Request::set_config(g, change, true);
        let data = self
            .call_json_once(r.method, r.template, &r.path, &r.params)
            .await?;
        opt_upid("POST", &r.path, data)
    }

    /// `PUT .../config`: the synchronous change (`delete=` and `digest` included). PVE does the
    /// whole change, disk allocation and `import-from` included, before it answers, and
    /// pveproxy gives up on that answer after 30 s with `596 Connection timed out` while the
    /// change goes on (see [`PveError::outcome_unknown`]). Such a failure is therefore not
    /// retried: read the config back (its values and digest) to learn what landed.
    pub async fn set_config(&self, g: &GuestRef, change: &ConfigChange) -> Result<(), PveError> {
        let r = Request::set_config(g, change, false);
        self.call_json_once(r.method, r.template, &r.path, &r.params)
            .await
            .map(|_| ())
    }

    /// `GET .../status/current`.
    pub async fn guest_status(&self, g: &GuestRef) -> Result<GuestStatus, PveError> {
        let path = format!("{}/status/current", base(g));
        self.call(
            Method::GET,
            template(g.kind, "/status/current"),
            &path,
            &Params::new(),
        )
        .await
    }

    /// Polls `GET .../status/current` until the guest's `status` is `want` (`running`,
    /// `stopped`), with the poll intervals and timeout of `opts`; after an HA request
    /// ([`Upid::is_ha_request`]) this is when the guest actually got there.
    pub async fn wait_guest_status(
        &self,
        g: &GuestRef,
        want: &str,
        opts: &WaitOptions,
    ) -> Result<GuestStatus, PveError> {
        let started = tokio::time::Instant::now();
        let deadline = started + opts.timeout;
        let mut interval = opts.first_poll;
        loop {
            let status = self.guest_status(g).await?;
            if status.status == want {
                return Ok(status);
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Err(PveError::HaStateTimeout {
                    vmid: g.vmid,
                    want: want.to_string(),
                    status: status.status,
                    waited: started.elapsed(),
                });
            }
            tokio::time::sleep(interval.min(deadline - now)).await;
            interval = interval.mul_f64(opts.growth.max(1.0)).min(opts.max_poll);
        }
    }

    /// Waits until the cluster (`GET /cluster/resources?type=vm`) shows guest `vmid` on `node`
    /// with status `want`: how an HA migration ends, the CRM moving the guest rounds after the
    /// `hamigrate` task (pve-ha-manager `HA/Config.pm` `queue_crm_commands`). Asking the target
    /// node directly fails until the move (its config file does not exist there yet).
    pub async fn wait_guest_moved(
        &self,
        vmid: u32,
        node: &str,
        want: &str,
        opts: &WaitOptions,
    ) -> Result<(), PveError> {
        let started = tokio::time::Instant::now();
        let deadline = started + opts.timeout;
        let mut interval = opts.first_poll;
        loop {
            let rows = self.cluster_resources(Some("vm")).await?;
            let found = rows.iter().find(|r| r.vmid == Some(vmid));
            let (at, status) =
                found.map_or((None, None), |r| (r.node.as_deref(), r.status.as_deref()));
            if at == Some(node) && status == Some(want) {
                return Ok(());
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Err(PveError::HaStateTimeout {
                    vmid,
                    want: format!("{want} on {node}"),
                    status: format!(
                        "{} on {}",
                        status.unwrap_or("absent"),
                        at.unwrap_or("no node")
                    ),
                    waited: started.elapsed(),
                });
            }
            tokio::time::sleep(interval.min(deadline - now)).await;
            interval = interval.mul_f64(opts.growth.max(1.0)).min(opts.max_poll);
        }
    }

    /// `POST .../status/start`.
    pub async fn start(&self, g: &GuestRef) -> Result<Upid, PveError> {
        self.send_upid(Request::start(g)).await
    }

    /// `POST .../status/stop` (immediate, like pulling the plug).
    pub async fn stop(&self, g: &GuestRef) -> Result<Upid, PveError> {
        self.guest_upid(Method::POST, g, "/status/stop", &Params::new())
            .await
    }

    /// `POST .../status/shutdown` (ACPI or container shutdown), optionally with a timeout in
    /// seconds and, for qemu, `forceStop` after it.
    pub async fn shutdown(
        &self,
        g: &GuestRef,
        timeout_secs: Option<u32>,
        force_stop: Option<bool>,
    ) -> Result<Upid, PveError> {
        // qemu and lxc take the same two options.
        let params = Params::new()
            .opt("timeout", timeout_secs)
            .flag("forceStop", force_stop);
        self.guest_upid(Method::POST, g, "/status/shutdown", &params)
            .await
    }

    /// `POST .../clone`.
    pub async fn clone_guest(&self, g: &GuestRef, req: &CloneRequest) -> Result<Upid, PveError> {
        self.send_upid(Request::clone_guest(g, req)).await
    }

    /// `POST .../template`: a task for qemu; `None` for lxc, which forks a `vztemplate` worker
    /// all the same without naming it (find it with [`PveClient::node_tasks`]).
    pub async fn make_template(&self, g: &GuestRef) -> Result<Option<Upid>, PveError> {
        self.send_opt_upid(Request::make_template(g)).await
    }

    /// `PUT .../resize`: grow `disk` to `size` (`32G`) or by `+size` (`+8G`). A task on PVE 8, or
    /// `None` where it finishes synchronously.
    pub async fn resize(
        &self,
        g: &GuestRef,
        disk: &str,
        size: &str,
        digest: Option<&str>,
    ) -> Result<Option<Upid>, PveError> {
        self.send_opt_upid(Request::resize(g, disk, size, digest))
            .await
    }

    /// `DELETE /nodes/{node}/{qemu|lxc}/{vmid}`.
    pub async fn destroy(&self, g: &GuestRef, opts: &DestroyOptions) -> Result<Upid, PveError> {
        self.guest_upid(Method::DELETE, g, "", &opts.params(g.kind))
            .await
    }
}
