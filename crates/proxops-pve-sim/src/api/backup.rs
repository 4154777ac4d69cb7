//! Backups: vzdump jobs (pve-manager `PVE/API2/Backup.pm`: `/cluster/backup` index, create,
//! read, update, delete, kept in `jobs.cfg`) and a backup run (`PVE/API2/VZDump.pm`: `POST
//! /nodes/{node}/vzdump`, a `vzdump` worker writing one archive per guest to a storage that
//! holds `backup` content). [`included`] is `PVE::VZDump::get_included_guests` for
//! `/cluster/backup-info/not-backed-up`.

use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

use super::Ctx;
use crate::error::ApiError;
use crate::schema::split_list;
use crate::state::{GuestKind, State, Volume};
use crate::tasks::{self, INJECTED};

/// Parameters that are not job options.
const CONTROL: &[&str] = &["id", "delete", "digest"];

fn no_job(id: &str) -> ApiError {
    ApiError::param("id", format!("No such job '{id}'"))
}

fn job_json(id: &str, opts: &BTreeMap<String, String>) -> Value {
    let mut out = json!({ "id": id, "type": "vzdump" });
    for (k, v) in opts {
        out[k] = match v.parse::<i64>() {
            Ok(n) if matches!(k.as_str(), "enabled" | "all" | "repeat-missed") => json!(n),
            _ => json!(v),
        };
    }
    out
}

pub(crate) fn index(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/", "Sys.Audit")?;
    let st = ctx.state();
    Ok(Value::Array(
        st.backup_jobs
            .iter()
            .map(|(id, o)| job_json(id, o))
            .collect(),
    ))
}

/// `$schedule_param_check`: one of `schedule` and `starttime`, not both.
fn schedule_check(opts: &BTreeMap<String, String>) -> Result<(), ApiError> {
    match (
        opts.contains_key("schedule"),
        opts.contains_key("starttime"),
    ) {
        (true, true) => Err(ApiError::param(
            "starttime",
            "'starttime' and 'schedule' cannot both be set",
        )),
        (false, false) => Err(ApiError::param(
            "schedule",
            "neither 'starttime' nor 'schedule' were set",
        )),
        _ => Ok(()),
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
    schedule_check(&opts)?;
    opts.entry("enabled".into()).or_insert_with(|| "1".into());
    let mut st = ctx.state();
    if let Some(pool) = opts.get("pool") {
        super::pool::check_pool_exists(&st, pool)?;
    }
    // Without an id PVE makes up a UUID (kept "for api compatibility").
    let id = ctx
        .p("id")
        .map(str::to_string)
        .unwrap_or_else(crate::rng::uuid);
    if st.backup_jobs.contains_key(&id) {
        return Err(ApiError::fail(format!("Job '{id}' already exists")));
    }
    st.backup_jobs.insert(id, opts);
    Ok(Value::Null)
}

pub(crate) fn read(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/", "Sys.Audit")?;
    let id = ctx.req("id")?;
    let st = ctx.state();
    let opts = st.backup_jobs.get(&id).ok_or_else(|| no_job(&id))?;
    Ok(job_json(&id, opts))
}

pub(crate) fn update(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/", "Sys.Modify")?;
    let id = ctx.req("id")?;
    let deletes = ctx.p("delete").map(split_list).unwrap_or_default();
    let sets: BTreeMap<String, String> = ctx
        .params
        .iter()
        .filter(|(k, _)| !CONTROL.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if sets.is_empty() && deletes.is_empty() {
        return Err(ApiError::fail("no options specified"));
    }
    let mut st = ctx.state();
    let Some(opts) = st.backup_jobs.get(&id) else {
        return Err(ApiError::fail("no such vzdump job"));
    };
    let mut next = opts.clone();
    for k in &deletes {
        next.remove(k);
    }
    next.extend(sets);
    schedule_check(&next)?;
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

/// The vmids an enabled job covers: its `vmid` list, or with `all` every guest but `exclude`,
/// or its `pool`'s members.
pub(crate) fn included(st: &State) -> BTreeSet<u32> {
    let mut out = BTreeSet::new();
    for opts in st.backup_jobs.values() {
        if opts.get("enabled").is_some_and(|e| e == "0") {
            continue;
        }
        let ids = |k: &str| -> BTreeSet<u32> {
            opts.get(k)
                .map(|v| {
                    split_list(v)
                        .iter()
                        .filter_map(|i| i.parse().ok())
                        .collect()
                })
                .unwrap_or_default()
        };
        if opts.get("all").is_some_and(|a| a == "1") {
            let exclude = ids("exclude");
            out.extend(st.guests.keys().filter(|v| !exclude.contains(v)));
        } else if let Some(pool) = opts.get("pool") {
            out.extend(
                st.guests
                    .values()
                    .filter(|g| g.pool.as_deref() == Some(pool.as_str()))
                    .map(|g| g.vmid),
            );
        } else {
            out.extend(ids("vmid"));
        }
    }
    out
}

/// `POST /nodes/{node}/vzdump`: one archive per guest of this node the request names.
pub(crate) fn vzdump(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let node = ctx.node();
    let storage = ctx.p("storage").unwrap_or("local").to_string();
    let all = ctx.flag("all").unwrap_or(false);
    let listed: Vec<u32> = ctx
        .p("vmid")
        .map(split_list)
        .unwrap_or_default()
        .iter()
        .filter_map(|v| v.parse().ok())
        .collect();
    if !all && listed.is_empty() {
        return Err(ApiError::fail("no VMs selected"));
    }
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    super::check_node(&st, &node)?;
    let on_node: Vec<u32> = st
        .guests
        .values()
        .filter(|g| g.node == node && (all || listed.contains(&g.vmid)))
        .map(|g| g.vmid)
        .collect();
    for vmid in &on_node {
        ctx.require(&format!("/vms/{vmid}"), "VM.Backup")?;
    }
    ctx.require(&format!("/storage/{storage}"), "Datastore.AllocateSpace")?;
    let target = st
        .storage(&node, &storage)
        .ok_or_else(|| ApiError::fail(format!("storage '{storage}' does not exist")))?;
    if !target.has_content("backup") {
        return Err(ApiError::fail(format!(
            "storage '{storage}' does not support backups"
        )));
    }
    // `vzdump` names its task after the guest when it backs up one.
    let task_id = match on_node.as_slice() {
        [one] => one.to_string(),
        _ => String::new(),
    };
    let job: tasks::Job = Box::new(move |st: &mut State, fail| {
        if fail {
            return Err(INJECTED.into());
        }
        let mut log = Vec::new();
        let stamp = archive_time(crate::auth::now());
        for vmid in &on_node {
            let Some(g) = st.guests.get(vmid) else {
                continue;
            };
            let (kind, ext) = match g.kind {
                GuestKind::Qemu => ("qemu", "vma.zst"),
                GuestKind::Lxc => ("lxc", "tar.zst"),
            };
            let size = super::cluster::guest_maxdisk(g) / 4;
            let volid = format!("{storage}:backup/vzdump-{kind}-{vmid}-{stamp}.{ext}");
            log.push(format!("INFO: creating vzdump archive '{volid}'"));
            st.volumes.push(Volume {
                node: node.clone(),
                storage: storage.clone(),
                volid,
                content: "backup".into(),
                format: ext.into(),
                size,
                ctime: crate::auth::now(),
                vmid: Some(*vmid),
            });
        }
        Ok(log)
    });
    let user = ctx.who().task_user();
    Ok(tasks::spawn(
        &shared,
        &mut st,
        &ctx.node(),
        "vzdump",
        &task_id,
        &user,
        None,
        job,
    )
    .into())
}

/// `YYYY_MM_DD-HH_MM_SS` in UTC, as vzdump names its archives (`strftime("%Y_%m_%d-%H_%M_%S")`).
fn archive_time(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}_{month:02}_{day:02}-{:02}_{:02}_{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
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
