//! Cluster-wide endpoints: `/version`, `/nodes`, `/nodes/{node}/status`, `/cluster/resources`,
//! `/cluster/nextid`, `/cluster/status` and the login `POST /access/ticket`.

use serde_json::{Value, json};

use super::{Ctx, check_node};
use crate::auth;
use crate::error::ApiError;
use crate::state::{Guest, GuestStats, GuestType, State, Stats};
use crate::version::PveVersion;

/// pve-manager `PVE/API2.pm` `version`: the pve-manager version, the point release and the
/// build's `repoid`, the same three fields in 8.4 and 9.1.
pub(crate) fn version(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let v = ctx.state().pve_version;
    Ok(json!({ "version": v.manager_version(), "release": v.release(), "repoid": v.repoid() }))
}

fn uptime(ctx: &Ctx) -> u64 {
    3600 + ctx.shared.started.elapsed().as_secs()
}

/// Memory the host itself uses, besides its guests.
const HOST_USED: u64 = 2 << 30;

/// A node's used memory: the host's plus each running guest's (the `mem` its stats report, half
/// its configured memory here), as /proc/meminfo counts it on a real node (pve-manager
/// `PVE/API2/Nodes.pm` `status` reads `PVE::ProcFSTools::read_meminfo`; `/cluster/resources`
/// serves the same numbers from pvestatd's node status).
fn node_used(st: &State, node: &str) -> u64 {
    HOST_USED
        + st.guests
            .values()
            .filter(|g| g.node == node && g.running())
            .map(|g| guest_maxmem(g) / 2)
            .sum::<u64>()
}

fn node_row(ctx: &Ctx, st: &State, n: &crate::state::Node) -> Value {
    let used = node_used(st, &n.node).min(n.maxmem);
    json!({
        "node": n.node, "id": format!("node/{}", n.node), "type": "node",
        "status": if n.online { "online" } else { "offline" },
        "cpu": 0.02, "maxcpu": n.maxcpu, "mem": used, "maxmem": n.maxmem,
        "disk": 4u64 << 30, "maxdisk": 100u64 << 30, "uptime": uptime(ctx), "level": "",
        "ssl_fingerprint": ctx.shared.fingerprint,
    })
}

pub(crate) fn nodes(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let st = ctx.state();
    Ok(Value::Array(
        st.nodes.iter().map(|n| node_row(ctx, &st, n)).collect(),
    ))
}

pub(crate) fn node_status(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let node = ctx.node();
    ctx.require(&format!("/nodes/{node}"), "Sys.Audit")?;
    let st = ctx.state();
    check_node(&st, &node)?;
    let n = st
        .node(&node)
        .ok_or_else(|| ApiError::fail("no such node"))?;
    let v = st.pve_version;
    let kernel = v.kernel();
    let used = node_used(&st, &node).min(n.maxmem);
    let free = n.maxmem - used;
    let mut memory = json!({ "total": n.maxmem, "used": used, "free": free });
    if v >= PveVersion::V9_1 {
        // pve-manager 9 `PVE/API2/Nodes.pm` `status`: `available` from /proc/meminfo's
        // MemAvailable (the 9.1 schema requires it).
        memory["available"] = free.into();
    }
    Ok(json!({
        "uptime": uptime(ctx), "cpu": 0.02, "wait": 0, "idle": 0,
        "loadavg": ["0.10", "0.05", "0.01"],
        "memory": memory,
        "swap": { "total": 0, "used": 0, "free": 0 },
        "rootfs": { "total": 100u64 << 30, "used": 4u64 << 30, "free": 96u64 << 30, "avail": 96u64 << 30 },
        "cpuinfo": { "cpus": n.maxcpu, "sockets": 1, "cores": n.maxcpu, "model": "QEMU Virtual CPU" },
        "kversion": format!("Linux {kernel} #1 SMP PREEMPT_DYNAMIC PMX {}", kernel.trim_end_matches("-pve")),
        "pveversion": format!("pve-manager/{}/{}", v.manager_version(), v.repoid()),
        "current-kernel": { "sysname": "Linux", "release": kernel, "version": format!("#1 SMP PREEMPT_DYNAMIC PMX {}", kernel.trim_end_matches("-pve")), "machine": "x86_64" },
        "boot-info": { "mode": "efi", "secureboot": 0 },
        "ksm": { "shared": 0 },
    }))
}

/// Memory of a guest in bytes, from its config.
pub(crate) fn guest_maxmem(g: &Guest) -> u64 {
    let default = if g.kind == GuestType::Qemu { 2048 } else { 512 };
    let mb = g
        .config
        .get("memory")
        .and_then(|m| m.split(',').next())
        .and_then(|m| m.trim_start_matches("current=").parse::<u64>().ok())
        .unwrap_or(default);
    mb << 20
}

/// Sum of a guest's disk sizes in bytes.
pub(crate) fn guest_maxdisk(g: &Guest) -> u64 {
    g.config
        .iter()
        .filter(|(k, _)| super::disks::is_volume(g.kind, k))
        .filter_map(|(_, v)| super::disks::size_of(v))
        .max()
        .unwrap_or(0)
}

/// CPUs of a guest, from its config.
fn guest_cpus(g: &Guest) -> u64 {
    let get = |k: &str, d: u64| g.config.get(k).and_then(|v| v.parse().ok()).unwrap_or(d);
    match g.kind {
        GuestType::Qemu => get("cores", 1) * get("sockets", 1),
        GuestType::Lxc => get("cores", 1),
    }
}

/// A guest's stats as they are now (what pvestatd would broadcast at this moment).
fn current_stats(g: &Guest, uptime_now: u64) -> GuestStats {
    let running = g.running();
    GuestStats {
        name: g.name(),
        status: g.status.clone(),
        template: g.is_template(),
        uptime: if running {
            uptime_now.saturating_sub(g.started_at.unwrap_or(uptime_now))
        } else {
            0
        },
        maxcpu: guest_cpus(g),
        maxmem: guest_maxmem(g),
        mem: if running { guest_maxmem(g) / 2 } else { 0 },
        maxdisk: guest_maxdisk(g),
    }
}

/// A guest row from its stats, with `lock`, `tags` and `pool` read live (pve-manager
/// `PVE/API2/Cluster.pm` `resources`: `get_guest_config_properties([lock tags])` and the
/// user config's pools). Without stats the row is what `extract_vm_stats` gives a guest the
/// RRD does not know yet: identity and `status: unknown`. From PVE 9 the stats carry `memhost`
/// too (`extract_vm_stats`: `$entry->{memhost}` from the `pve-vm-9.0` RRD format, where
/// pvestatd's `update_lxc_status` leaves it undefined: 0 for containers).
fn row(version: PveVersion, g: &Guest, stats: Option<&GuestStats>) -> Value {
    let mut row = json!({
        "id": format!("{}/{}", g.kind.as_str(), g.vmid), "type": g.kind.as_str(),
        "vmid": g.vmid, "node": g.node, "status": "unknown",
    });
    if let Some(s) = stats {
        let more = json!({
            "name": s.name, "status": s.status, "template": u8::from(s.template),
            "maxmem": s.maxmem, "maxcpu": s.maxcpu, "maxdisk": s.maxdisk, "cpu": 0, "mem": s.mem,
            "disk": 0, "uptime": s.uptime, "netin": 0, "netout": 0, "diskread": 0, "diskwrite": 0,
        });
        if let (Some(obj), Value::Object(more)) = (row.as_object_mut(), more) {
            obj.extend(more);
        }
        if version >= PveVersion::V9_1 {
            let memhost = if g.kind == GuestType::Qemu { s.mem } else { 0 };
            row["memhost"] = memhost.into();
        }
    }
    if let Some(l) = g.lock() {
        row["lock"] = l.into();
    }
    if let Some(t) = g.config.get("tags") {
        row["tags"] = t.clone().into();
    }
    if let Some(p) = &g.pool {
        row["pool"] = p.clone().into();
    }
    row
}

/// A guest row with its stats as they are now: what the per-node lists show (qemu-server
/// `PVE/QemuServer.pm` `vmstatus` and pve-container `PVE/LXC.pm` `vmstatus` read the running
/// state and the config live). PVE 9's `vmstatus` adds the cgroup's pressure stall averages of
/// a running guest (`pressurecpusome`, ..., `read_cgroup_pressure`); qemu's also `memhost`
/// (0 when stopped), which [`row`] gives every guest with stats.
pub(crate) fn guest_row(version: PveVersion, g: &Guest, uptime_now: u64) -> Value {
    let mut r = row(version, g, Some(&current_stats(g, uptime_now)));
    if g.kind == GuestType::Lxc
        && let Some(obj) = r.as_object_mut()
    {
        obj.remove("memhost");
    }
    if version >= PveVersion::V9_1 && g.running() {
        for key in [
            "pressurecpusome",
            "pressurecpufull",
            "pressureiosome",
            "pressureiofull",
            "pressurememorysome",
            "pressurememoryfull",
        ] {
            r[key] = 0.0.into();
        }
    }
    r
}

/// Milliseconds since the epoch.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Takes a new stats snapshot when the last one is at least `interval` old (or in the future:
/// a clock step back); returns whether it did. pvestatd refreshes on a timer; refreshing when
/// read serves the same ages (at most `interval`) and keeps a quiet simulator deterministic.
pub(crate) fn refresh_stats(st: &mut State, interval: std::time::Duration, now_ms: u64) -> bool {
    let interval_ms = u64::try_from(interval.as_millis()).unwrap_or(u64::MAX);
    let taken = st.stats.taken_ms;
    if taken != 0 && taken <= now_ms && now_ms - taken < interval_ms {
        return false;
    }
    let now = now_ms / 1000;
    st.stats = Stats {
        taken_ms: now_ms.max(1),
        guests: st
            .guests
            .iter()
            .map(|(vmid, g)| (*vmid, current_stats(g, now)))
            .collect(),
    };
    true
}

pub(crate) fn resources(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let filter = ctx.p("type").map(str::to_string);
    let want = |t: &str| filter.as_deref().is_none_or(|f| f == t);
    let mut st = ctx.state();
    if want("vm") && refresh_stats(&mut st, ctx.shared.config.stats_interval, now_ms()) {
        ctx.shared.persist(&st);
    }
    let mut rows = Vec::new();
    if want("node") {
        rows.extend(st.nodes.iter().map(|n| {
            let mut row = node_row(ctx, &st, n);
            // The certificate fingerprint is a /nodes field only.
            if let Some(obj) = row.as_object_mut() {
                obj.remove("ssl_fingerprint");
            }
            row
        }));
    }
    if want("vm") {
        // The guest list itself is live (pmxcfs's vmlist); only the stats are cached.
        rows.extend(
            st.guests
                .values()
                .filter(|g| ctx.allowed(&format!("/vms/{}", g.vmid), "VM.Audit"))
                .map(|g| {
                    let mut r = row(st.pve_version, g, st.stats.guests.get(&g.vmid));
                    // pve-manager `PVE/API2/Cluster.pm` `resources`: `hastate` from the manager
                    // status, else the resource config's state (an ignored resource's).
                    let sid = crate::state::ha_sid(g.kind, g.vmid);
                    if let Some(crm) = super::ha_status::crm_state(&st, &sid) {
                        r["hastate"] = crm.into();
                    } else if let Some(h) = st.ha_resources.get(&sid) {
                        r["hastate"] = h.state.clone().into();
                    }
                    r
                }),
        );
    }
    if want("storage") {
        for n in &st.nodes {
            // pve-manager `PVE/API2/Cluster.pm` `resources`: a storage row only with
            // `Datastore.Audit` on it.
            for s in n
                .storages
                .iter()
                .filter(|s| ctx.allowed(&format!("/storage/{}", s.storage), "Datastore.Audit"))
            {
                let used: u64 = st.volumes_on(&n.node, s).map(|v| v.size).sum();
                rows.push(json!({
                    "id": format!("storage/{}/{}", n.node, s.storage), "type": "storage",
                    "storage": s.storage, "node": n.node, "status": "available",
                    "plugintype": s.kind, "content": s.content.join(","), "shared": u8::from(s.shared),
                    "disk": used, "maxdisk": s.total,
                }));
            }
        }
    }
    Ok(Value::Array(rows))
}

pub(crate) fn nextid(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let st = ctx.state();
    if let Some(v) = ctx.p("vmid") {
        let id: u32 = v.parse().unwrap_or(0);
        if st.guests.contains_key(&id) {
            return Err(ApiError::param("vmid", format!("VM {id} already exists")));
        }
        return Ok(Value::String(id.to_string()));
    }
    let id = (100u32..)
        .find(|i| !st.guests.contains_key(i))
        .unwrap_or(100);
    // PVE answers the integer as a string.
    Ok(Value::String(id.to_string()))
}

pub(crate) fn status(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let st = ctx.state();
    let mut rows = vec![json!({
        "type": "cluster", "id": "cluster", "name": st.cluster_name,
        "nodes": st.nodes.len(), "quorate": 1, "version": 1 + st.nodes.len(),
    })];
    for (i, n) in st.nodes.iter().enumerate() {
        rows.push(json!({
            "type": "node", "id": format!("node/{}", n.node), "name": n.node, "nodeid": i + 1,
            "ip": format!("127.0.0.{}", i + 1), "online": u8::from(n.online), "local": u8::from(i == 0),
            "level": "",
        }));
    }
    Ok(Value::Array(rows))
}

pub(crate) fn ticket(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let mut username = ctx.req("username")?;
    let password = ctx.req("password")?;
    if let Some(realm) = ctx.p("realm")
        && !username.contains('@')
    {
        username = format!("{username}@{realm}");
    }
    if !auth::login(&ctx.shared, &username, &password) {
        return Err(ApiError::Status(401, "authentication failure".into()));
    }
    let (ticket, csrf) = auth::issue_ticket(&ctx.shared, &username);
    let (cluster, cap) = {
        let st = ctx.state();
        let who = auth::Principal {
            userid: username.clone(),
            tokenid: None,
        };
        let access = auth::Access::of(&st);
        let cap = auth::capabilities(&ctx.shared, &access, st.pve_version, &who);
        (st.cluster_name.clone(), cap)
    };
    Ok(json!({
        "username": username, "ticket": ticket, "CSRFPreventionToken": csrf, "clustername": cluster,
        "cap": cap,
    }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use std::time::Duration;

    #[test]
    fn stats_refresh_once_the_interval_has_passed() {
        let mut st = State::demo();
        st.guests.insert(
            100,
            Guest {
                vmid: 100,
                node: "pve1".into(),
                status: "stopped".into(),
                ..Guest::default()
            },
        );
        let ten = Duration::from_secs(10);
        assert!(refresh_stats(&mut st, ten, 1_000_000), "never taken");
        st.guests.get_mut(&100).unwrap().status = "running".into();
        assert!(!refresh_stats(&mut st, ten, 1_009_999));
        assert_eq!(st.stats.guests[&100].status, "stopped");
        assert!(refresh_stats(&mut st, ten, 1_010_000));
        assert_eq!(st.stats.guests[&100].status, "running");
        // A clock stepped back does not pin a snapshot from the future.
        assert!(refresh_stats(&mut st, ten, 999_000));
        assert_eq!(st.stats.taken_ms, 999_000);
    }
}
