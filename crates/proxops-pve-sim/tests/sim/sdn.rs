//! SDN written through the API, as pve-network defines it (`src/PVE/API2/Network/SDN.pm`,
//! `SDN/Zones.pm`, `SDN/Vnets.pm`, `SDN/Subnets.pm`, `src/PVE/Network/SDN.pm`
//! `pending_config`): writes go to the section config files, reads show them, the running
//! configuration or the pending difference, and `PUT /cluster/sdn` applies them with a
//! `reloadnetworkall` worker, after which guests can use the VNets.

use crate::support::{Auth, Sim, config};
use proxops_pve_sim::{AclEntry, ApiToken};
use serde_json::json;

/// A simple zone `zs` and a VLAN zone `zv` on `vmbr0`.
async fn zones(sim: &Sim) {
    sim.post("/cluster/sdn/zones", &[("zone", "zs"), ("type", "simple")])
        .await
        .ok();
    sim.post(
        "/cluster/sdn/zones",
        &[("zone", "zv"), ("type", "vlan"), ("bridge", "vmbr0")],
    )
    .await
    .ok();
}

#[tokio::test]
async fn writes_are_pending_until_applied_and_guests_wait_for_the_apply() {
    let sim = Sim::start().await;
    zones(&sim).await;
    sim.post(
        "/cluster/sdn/vnets",
        &[("vnet", "v100"), ("zone", "zv"), ("tag", "100")],
    )
    .await
    .ok();

    // The files have it; the running configuration does not; pending=1 says it is new.
    let files = sim.get("/cluster/sdn/vnets/v100").await.ok();
    assert_eq!(files["zone"], "zv");
    assert_eq!(files["tag"], 100);
    assert_eq!(files["type"], "vnet");
    assert!(files["digest"].is_string(), "{files}");
    let running = sim
        .req("GET", "/cluster/sdn/vnets", &[("running", "1")])
        .await
        .ok();
    assert_eq!(running, json!([]));
    let pending = sim
        .req("GET", "/cluster/sdn/vnets", &[("pending", "1")])
        .await
        .ok();
    assert_eq!(pending[0]["vnet"], "v100");
    assert_eq!(pending[0]["state"], "new");
    assert_eq!(pending[0]["type"], "vnet");
    assert_eq!(pending[0]["pending"], json!({"zone": "zv", "tag": 100}));
    let zone = sim
        .req("GET", "/cluster/sdn/zones/zv", &[("pending", "1")])
        .await
        .ok();
    assert_eq!(zone["state"], "new");
    assert_eq!(zone["pending"]["bridge"], "vmbr0");

    // A guest on the VNet cannot start before the apply: the node has no such bridge.
    sim.create_vm("100", &[("net0", "virtio,bridge=v100")])
        .await;
    let upid = sim
        .post("/nodes/pve1/qemu/100/status/start", &[])
        .await
        .ok();
    let st = sim.wait(&upid).await;
    assert_eq!(st["exitstatus"], "start failed: QEMU exited with code 1");

    // The apply: a `reloadnetworkall` worker on the node answering.
    let upid = sim.put("/cluster/sdn", &[]).await.ok();
    let text = upid.as_str().unwrap();
    assert!(text.contains(":reloadnetworkall::root@pam!"), "{text}");
    // The running configuration is the files at once.
    let running = sim
        .req("GET", "/cluster/sdn/vnets", &[("running", "1")])
        .await
        .ok();
    assert_eq!(running[0]["vnet"], "v100");
    assert!(running[0]["digest"].is_null());
    sim.wait_ok(&upid).await;
    assert_eq!(
        sim.log(&upid).await,
        ["pve1: reloading network config", "TASK OK"]
    );
    let upid = sim
        .post("/nodes/pve1/qemu/100/status/start", &[])
        .await
        .ok();
    sim.wait_ok(&upid).await;
    let pending = sim
        .req("GET", "/cluster/sdn/vnets", &[("pending", "1")])
        .await
        .ok();
    assert!(pending[0].get("state").is_none(), "{pending}");
    assert!(pending[0].get("pending").is_none(), "{pending}");

    // A change, then a deletion, show as pending until the next apply.
    sim.put(
        "/cluster/sdn/vnets/v100",
        &[("tag", "200"), ("alias", "web")],
    )
    .await
    .ok();
    let v = sim
        .req("GET", "/cluster/sdn/vnets/v100", &[("pending", "1")])
        .await
        .ok();
    assert_eq!(v["state"], "changed");
    assert_eq!(v["tag"], 100);
    assert_eq!(v["pending"], json!({"tag": 200, "alias": "web"}));
    sim.put("/cluster/sdn/vnets/v100", &[("delete", "alias")])
        .await
        .ok();
    sim.delete("/cluster/sdn/vnets/v100", &[]).await.ok();
    let v = sim
        .req("GET", "/cluster/sdn/vnets", &[("pending", "1")])
        .await
        .ok();
    assert_eq!(v[0]["state"], "deleted");
    assert_eq!(v[0]["pending"], json!({}));
    // The files no longer have it: reads by id say so, even of the running configuration.
    assert_eq!(
        sim.req("GET", "/cluster/sdn/vnets/v100", &[("running", "1")])
            .await
            .fail(500),
        "sdn vnet 'v100' does not exist"
    );
    let upid = sim.put("/cluster/sdn", &[]).await.ok();
    sim.wait_ok(&upid).await;
    let running = sim
        .req("GET", "/cluster/sdn/vnets", &[("running", "1")])
        .await
        .ok();
    assert_eq!(running, json!([]));
    // The node no longer has the bridge.
    let upid = sim.post("/nodes/pve1/qemu/100/status/stop", &[]).await.ok();
    sim.wait_ok(&upid).await;
    let upid = sim
        .post("/nodes/pve1/qemu/100/status/start", &[])
        .await
        .ok();
    assert_eq!(
        sim.wait(&upid).await["exitstatus"],
        "start failed: QEMU exited with code 1"
    );
}

#[tokio::test]
async fn zone_plugins_check_their_options_and_vnets() {
    let sim = Sim::start().await;
    assert_eq!(
        sim.post("/cluster/sdn/zones", &[("zone", "zv"), ("type", "vlan")])
            .await
            .fail(500),
        "missing value for required option 'bridge'"
    );
    assert_eq!(
        sim.post(
            "/cluster/sdn/zones",
            &[("zone", "zs"), ("type", "simple"), ("bridge", "vmbr0")]
        )
        .await
        .fail(500),
        "unexpected property 'bridge'"
    );
    let bad = sim
        .post("/cluster/sdn/zones", &[("zone", "z-1"), ("type", "simple")])
        .await
        .errors();
    assert_eq!(
        bad["zone"],
        "invalid format - zone ID 'z-1' contains illegal characters\n"
    );
    zones(&sim).await;
    assert_eq!(
        sim.post("/cluster/sdn/zones", &[("zone", "zs"), ("type", "simple")])
            .await
            .fail(500),
        "create sdn zone object failed: sdn zone object ID 'zs' already defined"
    );
    assert_eq!(
        sim.post(
            "/cluster/sdn/zones",
            &[("zone", "zi"), ("type", "simple"), ("ipam", "phpipam")]
        )
        .await
        .fail(500),
        "create sdn zone object failed: 400 Parameter verification failed.\nipam: phpipam not existing"
    );

    // VLAN zone VNets need a tag, unique in the zone; simple zone VNets take none.
    assert_eq!(
        sim.post("/cluster/sdn/vnets", &[("vnet", "a"), ("zone", "zv")])
            .await
            .errors()["vnet"],
        "invalid format - vnet ID 'a' contains illegal characters\n"
    );
    assert_eq!(
        sim.post("/cluster/sdn/vnets", &[("vnet", "va"), ("zone", "zv")])
            .await
            .fail(500),
        "create sdn vnet object failed: 400 Parameter verification failed.\ntag: missing vlan tag"
    );
    sim.post(
        "/cluster/sdn/vnets",
        &[("vnet", "va"), ("zone", "zv"), ("tag", "10")],
    )
    .await
    .ok();
    assert_eq!(
        sim.post(
            "/cluster/sdn/vnets",
            &[("vnet", "vb"), ("zone", "zv"), ("tag", "10")]
        )
        .await
        .fail(500),
        "create sdn vnet object failed: 400 Parameter verification failed.\ntag: tag 10 already exist in vnet va"
    );
    assert_eq!(
        sim.post(
            "/cluster/sdn/vnets",
            &[("vnet", "vs"), ("zone", "zs"), ("tag", "10")]
        )
        .await
        .fail(500),
        "create sdn vnet object failed: 400 Parameter verification failed.\ntag: vlan tag is not allowed on simple zone"
    );
    assert_eq!(
        sim.post("/cluster/sdn/vnets", &[("vnet", "vx"), ("zone", "nozone")])
            .await
            .fail(500),
        "create sdn vnet object failed: unknown section type ''"
    );
    // Zones the simulator does not model are refused as an unknown plugin.
    assert_eq!(
        sim.post("/cluster/sdn/zones", &[("zone", "ze"), ("type", "evpn")])
            .await
            .fail(500),
        "unknown section type 'evpn'"
    );
    // A zone in use stays; the list filters by type.
    assert_eq!(
        sim.delete("/cluster/sdn/zones/zv", &[]).await.fail(500),
        "delete sdn zone object failed: zone zv is used by vnet va"
    );
    let vlan = sim
        .req("GET", "/cluster/sdn/zones", &[("type", "vlan")])
        .await
        .ok();
    assert_eq!(vlan.as_array().unwrap().len(), 1);
    assert_eq!(vlan[0]["zone"], "zv");
    assert_eq!(vlan[0]["bridge"], "vmbr0");

    // Zone updates: the digest, delete of required and unknown options.
    let zs = sim.get("/cluster/sdn/zones/zs").await.ok();
    let digest = zs["digest"].as_str().unwrap().to_owned();
    sim.put(
        "/cluster/sdn/zones/zs",
        &[("mtu", "1450"), ("nodes", "pve1"), ("digest", &digest)],
    )
    .await
    .ok();
    assert_eq!(
        sim.put(
            "/cluster/sdn/zones/zs",
            &[("mtu", "1400"), ("digest", &digest)]
        )
        .await
        .fail(500),
        "update sdn zone object failed: detected modified configuration - file changed by other user? Try again."
    );
    assert_eq!(
        sim.put("/cluster/sdn/zones/zv", &[("delete", "bridge")])
            .await
            .fail(500),
        "update sdn zone object failed: unable to delete required option 'bridge'"
    );
    assert_eq!(
        sim.put("/cluster/sdn/zones/zs", &[("bridge", "vmbr0")])
            .await
            .fail(500),
        "update sdn zone object failed: unexpected property 'bridge'"
    );
    sim.put("/cluster/sdn/zones/zs", &[("delete", "mtu")])
        .await
        .ok();
    let zs = sim.get("/cluster/sdn/zones/zs").await.ok();
    assert!(zs.get("mtu").is_none(), "{zs}");
    assert_eq!(zs["nodes"], "pve1");
    assert_eq!(
        sim.get("/cluster/sdn/zones/nope").await.fail(500),
        "sdn 'nope' does not exist"
    );
    sim.delete("/cluster/sdn/zones/zs", &[]).await.ok();
    let ids: Vec<_> = sim
        .get("/cluster/sdn/zones")
        .await
        .ok()
        .as_array()
        .unwrap()
        .iter()
        .map(|z| z["zone"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, ["zv"]);
}

#[tokio::test]
async fn subnets_are_named_after_zone_and_cidr_and_checked() {
    let sim = Sim::start().await;
    zones(&sim).await;
    sim.post("/cluster/sdn/vnets", &[("vnet", "lan"), ("zone", "zs")])
        .await
        .ok();
    let path = "/cluster/sdn/vnets/lan/subnets";
    assert_eq!(
        sim.post(
            path,
            &[
                ("subnet", "10.1.0.0/24"),
                ("type", "subnet"),
                ("gateway", "10.2.0.1")
            ]
        )
        .await
        .fail(500),
        "create sdn subnet object failed: 400 Parameter verification failed.\ngateway: 10.2.0.1 is not in subnet 10.1.0.0/24"
    );
    assert_eq!(
        sim.post(
            path,
            &[
                ("subnet", "10.1.0.0/24"),
                ("type", "subnet"),
                (
                    "dhcp-range",
                    "start-address=10.1.0.50,end-address=10.1.0.10"
                ),
            ]
        )
        .await
        .fail(500),
        "create sdn subnet object failed: 400 Parameter verification failed.\ndhcp-range: start-address 10.1.0.50 must be smaller than end-address 10.1.0.10"
    );
    sim.post(
        path,
        &[
            ("subnet", "10.1.0.0/24"),
            ("type", "subnet"),
            ("gateway", "10.1.0.1"),
            ("snat", "1"),
            (
                "dhcp-range",
                "start-address=10.1.0.10,end-address=10.1.0.50",
            ),
        ],
    )
    .await
    .ok();
    let s = sim
        .get("/cluster/sdn/vnets/lan/subnets/zs-10.1.0.0-24")
        .await
        .ok();
    assert_eq!(s["subnet"], "zs-10.1.0.0-24");
    assert_eq!(s["id"], "zs-10.1.0.0-24");
    assert_eq!(s["cidr"], "10.1.0.0/24");
    assert_eq!(s["network"], "10.1.0.0");
    assert_eq!(s["mask"], "24");
    assert_eq!(s["zone"], "zs");
    assert_eq!(s["vnet"], "lan");
    assert_eq!(s["type"], "subnet");
    assert_eq!(s["gateway"], "10.1.0.1");
    assert_eq!(s["snat"], 1);
    assert_eq!(
        s["dhcp-range"],
        json!([{"start-address": "10.1.0.10", "end-address": "10.1.0.50"}])
    );
    let list = sim.get(path).await.ok();
    assert_eq!(list.as_array().unwrap().len(), 1);
    let pending = sim.req("GET", path, &[("pending", "1")]).await.ok();
    assert_eq!(pending[0]["state"], "new");
    assert_eq!(pending[0]["vnet"], "lan");
    assert_eq!(
        pending[0]["pending"]["dhcp-range"],
        json!(["start-address=10.1.0.10,end-address=10.1.0.50"])
    );
    assert_eq!(
        sim.post(path, &[("subnet", "10.1.0.0/24"), ("type", "subnet")])
            .await
            .fail(500),
        "create sdn subnet object failed: sdn subnet object ID 'zs-10.1.0.0-24' already defined"
    );
    // A VNet with subnets keeps its zone and stays.
    assert_eq!(
        sim.delete("/cluster/sdn/vnets/lan", &[]).await.fail(500),
        "delete sdn vnet object failed: 400 Parameter verification failed.\nvnet: Can't delete vnet if subnets exists"
    );
    sim.put(
        "/cluster/sdn/vnets/lan/subnets/zs-10.1.0.0-24",
        &[("delete", "gateway,snat")],
    )
    .await
    .ok();
    let s = sim
        .get("/cluster/sdn/vnets/lan/subnets/zs-10.1.0.0-24")
        .await
        .ok();
    assert!(s.get("gateway").is_none() && s.get("snat").is_none(), "{s}");
    assert_eq!(
        sim.get("/cluster/sdn/vnets/nope/subnets").await.fail(500),
        "sdn vnet 'nope' does not exist"
    );
    sim.delete("/cluster/sdn/vnets/lan/subnets/zs-10.1.0.0-24", &[])
        .await
        .ok();
    sim.delete("/cluster/sdn/vnets/lan", &[]).await.ok();
}

#[tokio::test]
async fn sdn_privileges_are_pves() {
    let mut cfg = config();
    let ops = ApiToken::new("ops@pve!ci", "s");
    cfg.extra_tokens.push(ops.clone());
    cfg.acl = proxops_pve_sim::acl_with_token_users(vec![
        AclEntry {
            principal: "ops@pve!ci".into(),
            path: "/sdn/zones/zs".into(),
            privs: vec!["SDN.Allocate".into()],
            propagate: true,
        },
        AclEntry {
            principal: "ops@pve!ci".into(),
            path: "/sdn/zones/zv".into(),
            privs: vec!["SDN.Audit".into()],
            propagate: true,
        },
    ]);
    let sim = Sim::with(cfg).await;
    zones(&sim).await;
    let ops = Auth::Header(ops.header());
    let send = |m: &'static str, p: &'static str, params: &'static [(&str, &str)]| {
        let (sim, ops) = (&sim, &ops);
        async move { sim.send(m, p, params, ops).await }
    };
    assert_eq!(
        send(
            "POST",
            "/cluster/sdn/zones",
            &[("zone", "zn"), ("type", "simple")]
        )
        .await
        .fail(403),
        "Permission check failed (/sdn/zones, SDN.Allocate)"
    );
    send(
        "POST",
        "/cluster/sdn/vnets",
        &[("vnet", "mine"), ("zone", "zs")],
    )
    .await
    .ok();
    assert_eq!(
        send(
            "POST",
            "/cluster/sdn/vnets",
            &[("vnet", "theirs"), ("zone", "zv"), ("tag", "5")]
        )
        .await
        .fail(403),
        "Permission check failed (/sdn/zones/zv, SDN.Allocate)"
    );
    sim.post(
        "/cluster/sdn/vnets",
        &[("vnet", "theirs"), ("zone", "zv"), ("tag", "5")],
    )
    .await
    .ok();
    // Lists show what the caller may audit; zone reads need SDN.Allocate.
    let zones = send("GET", "/cluster/sdn/zones", &[]).await.ok();
    assert_eq!(zones.as_array().unwrap().len(), 2);
    assert_eq!(
        send("GET", "/cluster/sdn/zones/zv", &[]).await.fail(403),
        "Permission check failed (/sdn/zones/zv, SDN.Allocate)"
    );
    send("GET", "/cluster/sdn/vnets/theirs", &[]).await.ok();
    assert_eq!(
        send("DELETE", "/cluster/sdn/vnets/theirs", &[])
            .await
            .fail(403),
        "Permission check failed (/sdn/zones/zv/theirs, SDN.Allocate)"
    );
    // The apply and the index need their privileges on /sdn.
    assert_eq!(
        send("PUT", "/cluster/sdn", &[]).await.fail(403),
        "Permission check failed (/sdn, SDN.Allocate)"
    );
    assert_eq!(
        send("GET", "/cluster/sdn", &[]).await.fail(403),
        "Permission check failed (/sdn, SDN.Audit)"
    );
    let index = sim.get("/cluster/sdn").await.ok();
    assert_eq!(index[5]["id"], "fabrics");
}
