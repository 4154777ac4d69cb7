//! A guest's addresses: the QEMU guest agent's `network-get-interfaces` (qemu-server
//! `API2/Qemu/Agent.pm`, `PVE::QemuServer::Agent::assert_agent_available`) and a container's
//! `GET .../interfaces` (pve-container `API2/LXC.pm` `ip`, `PVE::LXC::get_interfaces`).

use crate::support::{Auth, Sim, config, config_of};
use proxops_pve_sim::{AclEntry, ApiToken, PveVersion, SimConfig, TaskDurations, Volume};
use serde_json::Value;
use std::time::{Duration, Instant};

const TEMPLATE: &str = "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst";
const AGENT_START: Duration = Duration::from_millis(400);
const AGENT: &str = "/nodes/pve1/qemu/100/agent/network-get-interfaces";

/// Fast tasks, and a guest agent that answers 400 ms after its VM started.
fn slow_agent(cfg: SimConfig) -> SimConfig {
    cfg.with_task_durations(
        TaskDurations::uniform(Duration::from_millis(20)).with_agent_start(AGENT_START),
    )
}

async fn start(sim: &Sim, kind: &str, vmid: &str) -> Instant {
    let upid = sim
        .post(&format!("/nodes/pve1/{kind}/{vmid}/status/start"), &[])
        .await
        .ok();
    let started = Instant::now();
    sim.wait_ok(&upid).await;
    started
}

/// Polls `path` (bounded: 3 s) until it answers 200.
async fn until_ok(sim: &Sim, path: &str, auth: &Auth) -> Value {
    for _ in 0..300 {
        let r = sim.send("GET", path, &[], auth).await;
        if r.status == 200 {
            return r.ok();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{path} did not answer in time");
}

/// `address/prefix` of each address of the interface at `i`.
fn addrs(nics: &Value, i: usize) -> Vec<String> {
    nics[i]["ip-addresses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| format!("{}/{}", a["ip-address"].as_str().unwrap(), a["prefix"]))
        .collect()
}

async fn vm_with_agent(sim: &Sim, agent: &str) {
    sim.create_vm(
        "100",
        &[
            ("net0", "virtio=BC:24:11:00:00:01,bridge=vmbr0"),
            ("net1", "virtio=BC:24:11:12:34:56,bridge=vmbr0"),
            ("ipconfig0", "ip=192.168.7.10/24,gw=192.168.7.1"),
            ("ipconfig1", "ip=dhcp,ip6=auto"),
            ("agent", agent),
        ],
    )
    .await;
}

#[tokio::test]
async fn the_agent_answers_only_after_the_vm_ran_for_a_while_then_reports_static_and_leased_addresses()
 {
    let sim = Sim::with(slow_agent(config())).await;
    vm_with_agent(&sim, "enabled=1,fstrim_cloned_disks=1").await;
    let started = start(&sim, "qemu", "100").await;
    let early = sim.get(AGENT).await.fail(500);
    assert_eq!(early, "QEMU guest agent is not running");
    let answer = until_ok(&sim, AGENT, &sim.auth).await;
    assert!(
        started.elapsed() >= AGENT_START,
        "answered after {:?}",
        started.elapsed()
    );
    let nics = &answer["result"];
    assert_eq!(nics.as_array().unwrap().len(), 3);
    assert_eq!(nics[0]["name"], "lo");
    assert_eq!(addrs(nics, 0), ["127.0.0.1/8", "::1/128"]);
    assert_eq!(nics[1]["name"], "eth0");
    assert_eq!(nics[1]["hardware-address"], "bc:24:11:00:00:01");
    assert_eq!(nics[1]["ip-addresses"][0]["ip-address-type"], "ipv4");
    assert_eq!(
        addrs(nics, 1),
        ["192.168.7.10/24", "fe80::be24:11ff:fe00:1/64"]
    );
    // The lease and the SLAAC address follow from the MAC: the same on every run.
    assert_eq!(
        addrs(nics, 2),
        [
            "10.18.52.86/8",
            "fd00::be24:11ff:fe12:3456/64",
            "fe80::be24:11ff:fe12:3456/64"
        ]
    );
    assert_eq!(nics[2]["statistics"]["rx-bytes"], 0);
    // A reboot starts the wait again.
    let upid = sim
        .post("/nodes/pve1/qemu/100/status/reboot", &[])
        .await
        .ok();
    sim.wait_ok(&upid).await;
    assert_eq!(
        sim.get(AGENT).await.fail(500),
        "QEMU guest agent is not running"
    );
    assert_eq!(until_ok(&sim, AGENT, &sim.auth).await, answer);
}

#[tokio::test]
async fn assert_agent_available_refuses_in_its_order() {
    let sim = Sim::with(slow_agent(config())).await;
    sim.create_vm("100", &[("net0", "virtio=BC:24:11:00:00:01,bridge=vmbr0")])
        .await;
    // No `agent` key at all, whatever the power state.
    assert_eq!(
        sim.get(AGENT).await.fail(500),
        "No QEMU guest agent configured"
    );
    // `agent: 0` is a key: the VM must run, and then no agent answers on a missing channel.
    sim.put("/nodes/pve1/qemu/100/config", &[("agent", "0")])
        .await
        .ok();
    assert_eq!(sim.get(AGENT).await.fail(500), "VM 100 is not running");
    start(&sim, "qemu", "100").await;
    tokio::time::sleep(AGENT_START + Duration::from_millis(100)).await;
    assert_eq!(
        sim.get(AGENT).await.fail(500),
        "QEMU guest agent is not running"
    );
    let missing = sim
        .get("/nodes/pve1/qemu/999/agent/network-get-interfaces")
        .await
        .fail(500);
    assert_eq!(
        missing,
        "Configuration file 'nodes/pve1/qemu-server/999.conf' does not exist"
    );
}

#[tokio::test]
async fn a_stopped_or_paused_vm_gets_no_answer() {
    let sim = Sim::with(slow_agent(config())).await;
    vm_with_agent(&sim, "1").await;
    start(&sim, "qemu", "100").await;
    until_ok(&sim, AGENT, &sim.auth).await;
    let upid = sim
        .post("/nodes/pve1/qemu/100/status/suspend", &[])
        .await
        .ok();
    sim.wait_ok(&upid).await;
    assert_eq!(
        sim.get(AGENT).await.fail(500),
        "QEMU guest agent is not running"
    );
    let upid = sim.post("/nodes/pve1/qemu/100/status/stop", &[]).await.ok();
    sim.wait_ok(&upid).await;
    assert_eq!(sim.get(AGENT).await.fail(500), "VM 100 is not running");
}

/// Two tokens: `ops@pve!denied` and `ops@pve!allowed`, with these privileges on `/vms/100`.
fn tokens(cfg: &mut SimConfig, denied: &[&str], allowed: &[&str]) -> (Auth, Auth) {
    let mut auth = Vec::new();
    for (name, privs) in [("denied", denied), ("allowed", allowed)] {
        let t = ApiToken::new(format!("ops@pve!{name}"), "s");
        cfg.extra_tokens.push(t.clone());
        cfg.acl.push(AclEntry {
            principal: t.id.clone(),
            path: "/vms/100".into(),
            privs: privs.iter().map(|p| (*p).to_owned()).collect(),
            propagate: true,
        });
        auth.push(Auth::Header(t.header()));
    }
    // Both tokens are privilege-separated: their user holds the union.
    cfg.acl = proxops_pve_sim::acl_with_token_users(std::mem::take(&mut cfg.acl));
    let allowed = auth.pop().unwrap();
    (auth.pop().unwrap(), allowed)
}

#[tokio::test]
async fn the_agent_needs_vm_monitor_on_8_4_and_a_guest_agent_privilege_on_9_1() {
    for (version, refused, allowed, wording) in [
        (
            PveVersion::V8_4,
            "VM.GuestAgent.Audit",
            "VM.Monitor",
            "Permission check failed (/vms/100, VM.Monitor)",
        ),
        (
            PveVersion::V9_1,
            "VM.Monitor",
            "VM.GuestAgent.Unrestricted",
            "Permission check failed (/vms/100, VM.GuestAgent.Audit|VM.GuestAgent.Unrestricted)",
        ),
    ] {
        let mut cfg = slow_agent(config_of(version));
        let (denied, allowed) = tokens(&mut cfg, &["VM.Audit", refused], &[allowed]);
        let sim = Sim::with(cfg).await;
        vm_with_agent(&sim, "1").await;
        start(&sim, "qemu", "100").await;
        until_ok(&sim, AGENT, &sim.auth).await;
        let refusal = sim.send("GET", AGENT, &[], &denied).await.fail(403);
        assert_eq!(refusal, wording, "{version:?}");
        let ok = sim.send("GET", AGENT, &[], &allowed).await.ok();
        assert_eq!(ok["result"][1]["name"], "eth0", "{version:?}");
    }
}

async fn ct(sim: &Sim, net0: &str) {
    sim.h.with_state(|st| {
        st.volumes.push(Volume {
            node: "pve1".into(),
            storage: "local".into(),
            volid: TEMPLATE.into(),
            content: "vztmpl".into(),
            format: "tzst".into(),
            size: 120 << 20,
            ..Default::default()
        })
    });
    let upid = sim
        .post(
            "/nodes/pve1/lxc",
            &[
                ("vmid", "100"),
                ("ostemplate", TEMPLATE),
                ("rootfs", "local-lvm:4"),
                ("net0", net0),
                (
                    "net1",
                    "name=lan,bridge=vmbr0,hwaddr=BC:24:11:AB:CD:EF,ip=dhcp,ip6=dhcp",
                ),
            ],
        )
        .await
        .ok();
    sim.wait_ok(&upid).await;
}

const CT: &str = "/nodes/pve1/lxc/100/interfaces";

#[tokio::test]
async fn a_container_lists_its_interfaces_while_running_static_at_once_leases_later() {
    let sim = Sim::with(slow_agent(config())).await;
    ct(
        &sim,
        "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:00:00:07,ip=10.20.0.7/16,ip6=fd20::7/64",
    )
    .await;
    // Stopped: `find_lxc_pid` fails and the call returns nothing.
    assert_eq!(sim.get(CT).await.ok(), Value::Null);
    assert_eq!(
        sim.get("/nodes/pve1/lxc/555/interfaces").await.ok(),
        Value::Null
    );
    let started = start(&sim, "lxc", "100").await;
    let early = sim.get(CT).await.ok();
    if started.elapsed() < AGENT_START {
        assert_eq!(
            addrs(&early, 2),
            ["fe80::be24:11ff:feab:cdef/64"],
            "{early}"
        );
    }
    assert_eq!(
        addrs(&early, 1),
        ["10.20.0.7/16", "fd20::7/64", "fe80::be24:11ff:fe00:7/64"]
    );
    tokio::time::sleep(AGENT_START).await;
    let nics = sim.get(CT).await.ok();
    assert_eq!(nics[0]["name"], "lo");
    assert_eq!(nics[0]["hwaddr"], "00:00:00:00:00:00");
    assert_eq!(nics[1]["name"], "eth0");
    assert_eq!(nics[1]["hwaddr"], "bc:24:11:00:00:07");
    assert_eq!(nics[1]["hardware-address"], "bc:24:11:00:00:07");
    assert_eq!(nics[1]["inet"], "10.20.0.7/16");
    // The deprecated `inet6` is the last address of the family, as `get_interfaces` leaves it.
    assert_eq!(nics[1]["inet6"], "fe80::be24:11ff:fe00:7/64");
    assert_eq!(nics[1]["ip-addresses"][0]["ip-address-type"], "inet");
    assert_eq!(nics[2]["name"], "lan");
    assert_eq!(
        addrs(&nics, 2),
        [
            "10.171.205.239/8",
            "fd00::be24:11ff:feab:cdef/64",
            "fe80::be24:11ff:feab:cdef/64"
        ]
    );
}

#[tokio::test]
async fn container_interfaces_need_vm_audit() {
    let mut cfg = slow_agent(config());
    let (denied, allowed) = tokens(
        &mut cfg,
        &["VM.Monitor", "VM.GuestAgent.Audit"],
        &["VM.Audit"],
    );
    let sim = Sim::with(cfg).await;
    ct(
        &sim,
        "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:00:00:07,ip=dhcp",
    )
    .await;
    let refusal = sim.send("GET", CT, &[], &denied).await.fail(403);
    assert_eq!(refusal, "Permission check failed (/vms/100, VM.Audit)");
    // Stopped: allowed, and nothing to list.
    assert_eq!(sim.send("GET", CT, &[], &allowed).await.ok(), Value::Null);
    start(&sim, "lxc", "100").await;
    let nics = sim.send("GET", CT, &[], &allowed).await.ok();
    assert_eq!(nics[1]["name"], "eth0");
}

/// A guest OS without an agent (`Guest::agent_missing`): `agent` enabled, the VM running for
/// long enough, and still no answer to `ping` or any other command, as when qemu-guest-agent
/// is not installed or the OS did not come up.
#[tokio::test]
async fn a_guest_without_an_agent_never_answers() {
    let sim = Sim::with(slow_agent(config())).await;
    vm_with_agent(&sim, "1").await;
    start(&sim, "qemu", "100").await;
    let ping = "/nodes/pve1/qemu/100/agent/ping";
    let answer = sim.post(ping, &[]).await;
    assert_eq!(answer.fail(500), "QEMU guest agent is not running");
    tokio::time::sleep(AGENT_START + Duration::from_millis(100)).await;
    sim.post(ping, &[]).await.ok();
    sim.h.with_state(|st| {
        if let Some(g) = st.guests.get_mut(&100) {
            g.agent_missing = true;
        }
    });
    tokio::time::sleep(AGENT_START + Duration::from_millis(100)).await;
    assert_eq!(
        sim.post(ping, &[]).await.fail(500),
        "QEMU guest agent is not running"
    );
    assert_eq!(
        sim.get(AGENT).await.fail(500),
        "QEMU guest agent is not running"
    );
}
