//! Backups: vzdump jobs (pve-manager `PVE/API2/Backup.pm`: `/cluster/backup` index, create,
//! read, update, delete, kept in `jobs.cfg`) and a backup run (`PVE/API2/VZDump.pm`: `POST
//! /nodes/{node}/vzdump`, a `vzdump` worker writing one archive per guest to a storage that
//! holds `backup` content). [`included`] is `PVE::VZDump::get_included_guests` for
//! `/cluster/backup-info/not-backed-up`.

use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

use super::Ctx;
use crate::error::ApiError;
use crate::schema::{self, split_list};
use crate::state::{GuestType, State, Volume};
use crate::tasks::{self, INJECTED};
use crate::version::PveVersion;

/// Parameters that are not job options.
const CONTROL: &[&str] = &["id", "delete", "digest"];

fn no_job(id: &str) -> ApiError {
    ApiError::param("id", format!("No such job '{id}'"))
}

/// The options jobs.cfg keeps as property strings and its reader decodes into objects
/// (pve-manager `VZDump/Common.pm` `$PROPERTY_STRINGS`; pve-guest-common `VZDump/JobBase.pm`
/// `decode_value`).
const PROPERTY_STRINGS: &[&str] = &["performance", "prune-backups", "fleecing"];

/// A job as `jobs.cfg`'s reader gives it to `index` and `read_job`: the section `type`, its
/// `id`, booleans and numbers as numbers (pve-common `SectionConfig::check_value`: `$value + 0`),
/// and the property-string options as objects (`parse_property_string`: booleans parsed, other
/// values kept as the text they are, so `keep-daily` arrives as `"7"`).
fn job_json(id: &str, opts: &BTreeMap<String, String>, version: PveVersion) -> Value {
    let mut out = json!({ "id": id, "type": "vzdump" });
    let endpoint = schema::endpoint("POST", "/cluster/backup");
    for (k, v) in opts {
        let param = endpoint.and_then(|e| e.param(version.schema(), k));
        out[k] = match param.and_then(|p| p.format.sub_keys()) {
            Some(keys) if PROPERTY_STRINGS.contains(&k.as_str()) => {
                match schema::parse_property_string(keys, v) {
                    Ok(parsed) => Value::Object(
                        parsed
                            .into_iter()
                            .map(|(sub, text)| {
                                let boolean = keys
                                    .iter()
                                    .any(|s| s.name == sub && matches!(s.ty, schema::Ty::Bool));
                                let value = match schema::parse_bool(&text) {
                                    Some(b) if boolean => json!(u8::from(b)),
                                    _ => json!(text),
                                };
                                (sub, value)
                            })
                            .collect(),
                    ),
                    Err(_) => json!(v),
                }
            }
            _ => match (param.map(|p| p.ty), v.parse::<f64>()) {
                (Some(schema::Ty::Bool | schema::Ty::Int), Ok(_)) => {
                    v.parse::<i64>().map_or_else(|_| json!(v), |n| json!(n))
                }
                (Some(schema::Ty::Num), Ok(n)) => json!(n),
                _ => json!(v),
            },
        };
    }
    out
}

/// `index`: each job with its `next-run`, computed from now ("vzdump jobs are cluster wide,
/// there maybe was no local run").
pub(crate) fn index(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/", "Sys.Audit")?;
    let st = ctx.state();
    let now = i64::try_from(crate::auth::now()).unwrap_or(i64::MAX);
    Ok(Value::Array(
        st.backup_jobs
            .iter()
            .map(|(id, o)| {
                let mut job = job_json(id, o, st.pve_version);
                let next = o
                    .get("schedule")
                    .and_then(|s| crate::calendar::CalendarEvent::parse(s).ok())
                    .and_then(|event| event.next_after(now));
                if let Some(next) = next {
                    job["next-run"] = json!(next);
                }
                job
            })
            .collect(),
    ))
}

/// `$schedule_param_check`: one of `schedule` and `starttime` (not both; one needed on
/// create), `starttime` and `dow` turned into `schedule` (`$convert_to_schedule`: no `dow`, or
/// every day, is the time alone).
fn schedule_check(opts: &mut BTreeMap<String, String>, required: bool) -> Result<(), ApiError> {
    match (
        opts.contains_key("schedule"),
        opts.get("starttime").cloned(),
    ) {
        (true, Some(_)) => {
            return Err(ApiError::param(
                "starttime",
                "'starttime' and 'schedule' cannot both be set",
            ));
        }
        (false, None) if required => {
            return Err(ApiError::param(
                "schedule",
                "neither 'starttime' nor 'schedule' were set",
            ));
        }
        (false, Some(start)) => {
            let schedule = convert_to_schedule(&start, opts.get("dow").map(String::as_str));
            opts.insert("schedule".into(), schedule);
        }
        _ => {}
    }
    opts.remove("starttime");
    opts.remove("dow");
    Ok(())
}

fn convert_to_schedule(start: &str, dow: Option<&str>) -> String {
    let days = dow.map(split_list).unwrap_or_default();
    if days.is_empty() || days.join(",") == "mon,tue,wed,thu,fri,sat,sun" {
        start.to_owned()
    } else {
        format!("{} {start}", days.join(","))
    }
}

pub(crate) fn create(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/", "Sys.Modify")?;
    let mut opts: BTreeMap<String, String> = ctx
        .params
        .iter()
        .filter(|(k, _)| !CONTROL.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    root_only(ctx, opts.keys())?;
    storage_permission(ctx, opts.get("storage"))?;
    let mut st = ctx.state();
    if let Some(pool) = opts.get("pool") {
        super::pool::check_pool_exists(&st, pool)?;
        ctx.require(&format!("/pool/{pool}"), "VM.Backup")?;
    }
    schedule_check(&mut opts, true)?;
    opts.entry("enabled".into()).or_insert_with(|| "1".into());
    // Without an id PVE makes up a UUID (kept "for api compatibility").
    let id = ctx
        .p("id")
        .map(str::to_string)
        .unwrap_or_else(crate::rng::uuid);
    if st.backup_jobs.contains_key(&id) {
        return Err(ApiError::fail(format!("Job '{id}' already exists")));
    }
    selection_check(&opts)?;
    st.backup_jobs.insert(id, opts);
    Ok(Value::Null)
}

/// `assert_param_permission_common`: the options only `root@pam` itself may set or delete.
fn root_only<'k>(ctx: &Ctx, keys: impl Iterator<Item = &'k String>) -> Result<(), ApiError> {
    let who = ctx.who();
    if who.userid == "root@pam" && who.tokenid.is_none() {
        return Ok(());
    }
    for k in keys {
        if proxops_pve_schema::ROOT_ONLY_BACKUP_OPTIONS.contains(&k.as_str()) {
            return Err(ApiError::param(k, "Only root may set this option."));
        }
    }
    Ok(())
}

/// `assert_param_permission_create`/`_update`: a job's storage (its `storage`, else the
/// default `local`) needs `Datastore.Allocate`, for anyone but `root@pam` itself.
fn storage_permission(ctx: &Ctx, storage: Option<&String>) -> Result<(), ApiError> {
    let who = ctx.who();
    if who.userid == "root@pam" && who.tokenid.is_none() {
        return Ok(());
    }
    let storage = storage.map(String::as_str).unwrap_or("local");
    ctx.require(&format!("/storage/{storage}"), "Datastore.Allocate")
}

/// `verify_vzdump_parameters` with `$check_missing`: the selection options exclude each
/// other, and one of them is needed.
fn selection_check(opts: &BTreeMap<String, String>) -> Result<(), ApiError> {
    let has = |k: &str| opts.get(k).is_some_and(|v| !v.is_empty() && v != "0");
    for other in ["all", "exclude", "pool"] {
        if has(other) && has("vmid") {
            return Err(ApiError::param(
                other,
                "option conflicts with option 'vmid'",
            ));
        }
    }
    if !(has("all") || has("exclude") || has("pool") || has("vmid")) {
        return Err(ApiError::param("vmid", "property is missing"));
    }
    Ok(())
}

pub(crate) fn read(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/", "Sys.Audit")?;
    let id = ctx.req("id")?;
    let st = ctx.state();
    let opts = st.backup_jobs.get(&id).ok_or_else(|| no_job(&id))?;
    Ok(job_json(&id, opts, st.pve_version))
}

pub(crate) fn update(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/", "Sys.Modify")?;
    let id = ctx.req("id")?;
    let deletes = ctx.p("delete").map(split_list).unwrap_or_default();
    let mut sets: BTreeMap<String, String> = ctx
        .params
        .iter()
        .filter(|(k, _)| !CONTROL.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    root_only(ctx, sets.keys().chain(&deletes))?;
    if sets.contains_key("storage") {
        storage_permission(ctx, sets.get("storage"))?;
    } else if deletes.iter().any(|d| d == "storage") {
        storage_permission(ctx, None)?;
    }
    schedule_check(&mut sets, false)?;
    if sets.is_empty() && deletes.is_empty() {
        return Err(ApiError::fail("no options specified"));
    }
    let mut st = ctx.state();
    let Some(opts) = st.backup_jobs.get(&id) else {
        return Err(ApiError::fail("no such vzdump job"));
    };
    storage_permission(ctx, opts.get("storage"))?;
    let mut next = opts.clone();
    for k in &deletes {
        next.remove(k);
    }
    // A job written before `schedule` existed is converted when it is next edited.
    schedule_check(&mut next, false)?;
    let (vmid, all) = (
        sets.contains_key("vmid"),
        sets.get("all").is_some_and(|a| a != "0"),
    );
    next.extend(sets);
    if next.contains_key("exclude") && !next.contains_key("pool") {
        next.insert("all".into(), "1".into());
    }
    // The new selection replaces the old one (`update_job`).
    let drop: &[&str] = if vmid {
        &["all", "exclude", "pool"]
    } else if all {
        &["vmid", "pool"]
    } else if next.contains_key("pool") {
        &["vmid", "all", "exclude"]
    } else {
        &[]
    };
    for k in drop {
        next.remove(*k);
    }
    selection_check(&next)?;
    st.backup_jobs.insert(id, next);
    Ok(Value::Null)
}

pub(crate) fn delete(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/", "Sys.Modify")?;
    let id = ctx.req("id")?;
    let mut st = ctx.state();
    st.backup_jobs.remove(&id).ok_or_else(|| no_job(&id))?;
    Ok(Value::Null)
}

/// The vmids an enabled job covers (`get_included_guests` over every job), guests no node
/// has included.
pub(crate) fn included(st: &State) -> BTreeSet<u32> {
    st.backup_jobs
        .values()
        .filter(|opts| opts.get("enabled").is_none_or(|e| e != "0"))
        .flat_map(|opts| Selection::of_job(opts).per_node(st).into_values().flatten())
        .collect()
}

/// pve-guest-common `PVE/VZDump/Plugin.pm` `remove_vmid_from_backup_jobs` (a destroy with
/// `purge`): out of each job's `vmid` list (a job left with none is deleted) or `exclude`.
pub(crate) fn remove_vmid_from_jobs(st: &mut State, vmid: u32) {
    let without = |list: &str| -> String {
        split_list(list)
            .into_iter()
            .filter(|v| v.parse::<u32>().ok() != Some(vmid))
            .collect::<Vec<_>>()
            .join(",")
    };
    st.backup_jobs.retain(|_, job| {
        if let Some(list) = job.get("vmid").cloned() {
            let rest = without(&list);
            if rest.is_empty() {
                return false;
            }
            job.insert("vmid".into(), rest);
        } else if let Some(list) = job.get("exclude").cloned() {
            let rest = without(&list);
            if rest.is_empty() {
                job.remove("exclude");
            } else {
                job.insert("exclude".into(), rest);
            }
        }
        true
    });
}

/// `GET /cluster/backup/{id}/included_volumes` (`get_volume_backup_included`): each guest the
/// job names that the caller may audit, with its volumes and whether they are backed up
/// (qemu-server `PVE/QemuConfig.pm` and pve-container `PVE/LXC/Config.pm`
/// `get_backup_volumes`); a vmid no guest has is `unknown`.
pub(crate) fn included_volumes(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/", "Sys.Audit")?;
    let id = ctx.req("id")?;
    let st = ctx.state();
    let job = st.backup_jobs.get(&id).ok_or_else(|| no_job(&id))?;
    let mut vmids: Vec<u32> = Selection::of_job(job)
        .per_node(&st)
        .into_values()
        .flatten()
        .filter(|v| ctx.allowed(&format!("/vms/{v}"), "VM.Audit"))
        .collect();
    vmids.sort_unstable();
    let mut children = Vec::new();
    for vmid in vmids {
        let Some(g) = st.guests.get(&vmid) else {
            children.push(json!({ "id": vmid, "type": "unknown", "leaf": 1 }));
            continue;
        };
        let mut volumes = Vec::new();
        for (key, value) in &g.config {
            if !super::disks::is_volume(g.kind, key) || key.starts_with("unused") {
                continue;
            }
            let Some(file) = value.split(',').next() else {
                continue;
            };
            let file = file
                .strip_prefix("file=")
                .or_else(|| file.strip_prefix("volume="))
                .unwrap_or(file);
            let flag = |k: &str| {
                value
                    .split(',')
                    .find_map(|p| p.strip_prefix(k))
                    .map(|v| matches!(v, "1" | "yes" | "on" | "true"))
            };
            let (included, reason) = match g.kind {
                GuestType::Qemu => {
                    if value.split(',').any(|p| p == "media=cdrom") {
                        continue;
                    }
                    let backup = flag("backup=");
                    let reason = if backup.is_some() {
                        "backup=no"
                    } else {
                        "backup=yes"
                    };
                    if key.starts_with("efidisk")
                        && g.config.get("bios").is_none_or(|b| b != "ovmf")
                    {
                        (false, "efidisk but no OVMF BIOS")
                    } else {
                        (backup.unwrap_or(true), reason)
                    }
                }
                GuestType::Lxc if key == "rootfs" => (true, "rootfs"),
                GuestType::Lxc if file.starts_with('/') => (false, "not a volume"),
                GuestType::Lxc if flag("backup=") == Some(true) => (true, "enabled"),
                GuestType::Lxc => (false, "disabled"),
            };
            volumes.push(json!({
                "id": format!("{vmid}:{key}"),
                "name": file,
                "included": u8::from(included),
                "reason": reason,
                "leaf": 1,
            }));
        }
        let name = match g.kind {
            GuestType::Qemu => g.config.get("name"),
            GuestType::Lxc => g.config.get("hostname"),
        };
        let leaf = u8::from(volumes.is_empty());
        children.push(json!({
            "id": vmid,
            "type": g.kind.as_str(),
            "name": name.map(String::as_str).unwrap_or_default(),
            "children": volumes,
            "leaf": leaf,
        }));
    }
    Ok(json!({ "children": children }))
}

/// `POST /nodes/{node}/vzdump`, as pve-manager `PVE/API2/VZDump.pm` `vzdump` and
/// `PVE/VZDump.pm` do it. Before the worker: the selection's parameter checks
/// (`verify_vzdump_parameters`), the guests it names per node (`get_included_guests`; an
/// unknown vmid counts as this node's, to fail visibly), `"OK"` and no task when none is here,
/// and `Datastore.AllocateSpace` on the storage. In the worker: the storage (`storage_info`),
/// `VM.Backup` per guest (a guest without it skipped under `all`, else the job dies), then one
/// guest after the other, each under `lock: backup` for its share of the task's time
/// (`lock_vm`); a missing or locked guest is an error of its own, and any error ends the task
/// with `job errors`.
pub(crate) fn vzdump(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let node = ctx.node();
    let has = |k: &str| ctx.p(k).is_some_and(|v| !v.is_empty());
    let mut all = ctx.flag("all").unwrap_or(false);
    for other in ["all", "exclude", "pool"] {
        let set = if other == "all" { all } else { has(other) };
        if set && has("vmid") {
            return Err(ApiError::param(
                other,
                "option conflicts with option 'vmid'",
            ));
        }
    }
    if has("exclude") && !has("pool") {
        all = true;
    }
    let stop = ctx.flag("stop").unwrap_or(false);
    if !(all || stop || has("pool") || has("vmid")) {
        return Err(ApiError::param("vmid", "property is missing"));
    }
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    super::check_node(&st, &node)?;
    let selection = Selection {
        all,
        pool: ctx.p("pool").map(str::to_string),
        vmid: ctx.p("vmid").map(str::to_string),
        exclude: ctx.p("exclude").map(str::to_string),
    };
    let per_node = selection.per_node(&st);
    let mut local: Vec<u32> = per_node.get(node.as_str()).cloned().unwrap_or_default();
    local.extend(per_node.get("").cloned().unwrap_or_default());
    local.sort_unstable();
    local.dedup();
    // "silent exit if specified VMs run on other nodes"
    if local.is_empty() && !all {
        return Ok(json!("OK"));
    }
    let storage = ctx.p("storage").unwrap_or("local").to_string();
    ctx.require(&format!("/storage/{storage}"), "Datastore.AllocateSpace")?;
    let may_back_up: BTreeMap<u32, bool> = local
        .iter()
        .map(|v| (*v, ctx.allowed(&format!("/vms/{v}"), "VM.Backup")))
        .collect();
    let task_id = match local.as_slice() {
        [one] => one.to_string(),
        _ => String::new(),
    };
    let slice = crate::server::lock(&shared.durations).of("vzdump") / (local.len().max(1) as u32);
    let run = BackupRun {
        shared: shared.clone(),
        node: node.clone(),
        storage,
        vmids: local,
        may_back_up,
        all,
        slice,
    };
    let work: tasks::Work = Box::pin(run.exec());
    let job: tasks::Job = Box::new(move |_: &mut State, fail| {
        if fail {
            return Err(INJECTED.into());
        }
        Ok(Vec::new())
    });
    let user = ctx.who().task_user();
    Ok(tasks::spawn(
        &shared,
        &mut st,
        &node,
        "vzdump",
        &task_id,
        &user,
        Some(work),
        job,
    )
    .into())
}

/// Which guests a backup run or job names (`get_included_guests`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Selection {
    pub all: bool,
    pub pool: Option<String>,
    pub vmid: Option<String>,
    pub exclude: Option<String>,
}

impl Selection {
    /// A job's selection, `exclude` without `pool` meaning `all` (`verify_vzdump_parameters`).
    fn of_job(opts: &BTreeMap<String, String>) -> Selection {
        let get = |k: &str| opts.get(k).filter(|v| !v.is_empty()).cloned();
        Selection {
            all: opts.get("all").is_some_and(|a| a != "0")
                || (opts.contains_key("exclude") && !opts.contains_key("pool")),
            pool: get("pool"),
            vmid: get("vmid"),
            exclude: get("exclude"),
        }
    }

    fn ids(list: Option<&String>) -> Vec<u32> {
        list.map(|v| split_list(v))
            .unwrap_or_default()
            .iter()
            .filter_map(|i| i.parse().ok())
            .collect()
    }

    /// The named vmids by the node they are on; `""` for those no node has.
    pub(crate) fn per_node(&self, st: &State) -> BTreeMap<String, Vec<u32>> {
        let ids: Vec<u32> = if let Some(pool) = &self.pool {
            st.guests
                .values()
                .filter(|g| g.pool.as_deref() == Some(pool.as_str()))
                .map(|g| g.vmid)
                .collect()
        } else if self.vmid.is_some() {
            Self::ids(self.vmid.as_ref())
        } else if self.all {
            let exclude = Self::ids(self.exclude.as_ref());
            st.guests
                .keys()
                .filter(|v| !exclude.contains(v))
                .copied()
                .collect()
        } else {
            Vec::new()
        };
        let mut out: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        for vmid in ids {
            let node = st
                .guests
                .get(&vmid)
                .map(|g| g.node.clone())
                .unwrap_or_default();
            out.entry(node).or_default().push(vmid);
        }
        out
    }
}

/// A backup worker's run: `PVE::VZDump->new` (the storage) and `exec_backup`.
struct BackupRun {
    shared: std::sync::Arc<crate::server::Shared>,
    node: String,
    storage: String,
    vmids: Vec<u32>,
    may_back_up: BTreeMap<u32, bool>,
    all: bool,
    slice: std::time::Duration,
}

impl BackupRun {
    async fn exec(self) -> Result<Vec<String>, String> {
        use crate::server::lock;
        let mut log = vec![format!(
            "INFO: starting new backup job: vzdump {} --storage {}",
            self.vmids
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(" "),
            self.storage
        )];
        {
            let st = lock(&self.shared.state);
            let problem = match st.storage(&self.node, &self.storage) {
                None => Some(format!("storage '{}' does not exist", self.storage)),
                Some(s) if !s.has_content("backup") => Some(format!(
                    "can't use storage '{}' for backups - wrong content type",
                    self.storage
                )),
                Some(_) => None,
            };
            if let Some(p) = problem {
                return Err(format!(
                    "could not get storage information for '{}': {p}",
                    self.storage
                ));
            }
        }
        let mut errors = 0usize;
        for vmid in &self.vmids {
            let exists = lock(&self.shared.state).guests.contains_key(vmid);
            if exists && !self.may_back_up.get(vmid).copied().unwrap_or(false) {
                if self.all {
                    continue;
                }
                log.push(format!("Permission check failed (/vms/{vmid}, VM.Backup)"));
                return Err(log.join("\n"));
            }
            let taken = {
                let mut st = lock(&self.shared.state);
                let taken = if exists {
                    super::locks::take(&mut st, *vmid, "backup")
                } else {
                    Err(format!("unable to find VM '{vmid}'"))
                };
                self.shared.persist(&st);
                taken
            };
            if let Err(e) = taken {
                log.push(format!("ERROR: Backup of VM {vmid} failed - {e}"));
                errors += 1;
                continue;
            }
            log.push(format!("INFO: Starting Backup of VM {vmid}"));
            tokio::time::sleep(self.slice).await;
            let mut st = lock(&self.shared.state);
            super::locks::release(&mut st, *vmid, "backup");
            if let Some(line) = archive(&mut st, &self.node, &self.storage, *vmid) {
                log.push(line);
                log.push(format!("INFO: Finished Backup of VM {vmid} (00:00:01)"));
            }
            self.shared.persist(&st);
        }
        if errors > 0 {
            log.push("INFO: Backup job finished with errors".into());
            log.push("job errors".into());
            return Err(log.join("\n"));
        }
        log.push("INFO: Backup job finished successfully".into());
        Ok(log)
    }
}

/// Writes the archive of one guest; its log line.
fn archive(st: &mut State, node: &str, storage: &str, vmid: u32) -> Option<String> {
    let g = st.guests.get(&vmid)?;
    let (kind, ext) = match g.kind {
        GuestType::Qemu => ("qemu", "vma.zst"),
        GuestType::Lxc => ("lxc", "tar.zst"),
    };
    let size = super::cluster::guest_maxdisk(g) / 4;
    let stamp = archive_time(crate::auth::now());
    let volid = format!("{storage}:backup/vzdump-{kind}-{vmid}-{stamp}.{ext}");
    st.volumes.push(Volume {
        node: node.to_owned(),
        storage: storage.to_owned(),
        volid: volid.clone(),
        content: "backup".into(),
        format: ext.into(),
        size,
        ctime: crate::auth::now(),
        vmid: Some(vmid),
    });
    Some(format!("INFO: creating vzdump archive '{volid}'"))
}

/// `YYYY_MM_DD-HH_MM_SS` in UTC, as vzdump names its archives (`strftime("%Y_%m_%d-%H_%M_%S")`).
pub(crate) fn archive_time(secs: u64) -> String {
    let ts = i64::try_from(secs)
        .ok()
        .and_then(|s| jiff::Timestamp::from_second(s).ok())
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    ts.strftime("%Y_%m_%d-%H_%M_%S").to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn archive_names_carry_the_utc_time() {
        assert_eq!(super::archive_time(0), "1970_01_01-00_00_00");
        assert_eq!(super::archive_time(1_796_127_316), "2026_12_01-12_15_16");
        assert_eq!(super::archive_time(951_782_400), "2000_02_29-00_00_00");
    }
}
