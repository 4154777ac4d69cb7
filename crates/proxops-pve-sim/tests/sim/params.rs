//! Parameter checking before handlers run: PVE's 400 shape and messages; form and JSON bodies.

use crate::support::Sim;

#[tokio::test]
async fn types_enums_limits_and_unknown_parameters() {
    let sim = Sim::start().await;
    let e = sim
        .post(
            "/nodes/pve1/qemu",
            &[
                ("vmid", "5"),
                ("cores", "abc"),
                ("ostype", "beos"),
                ("bogus", "1"),
                ("onboot", "maybe"),
            ],
        )
        .await
        .errors();
    assert_eq!(e["vmid"], "value must have a minimum value of 100");
    assert_eq!(e["cores"], "type check ('integer') failed - got 'abc'");
    assert!(
        e["ostype"]
            .as_str()
            .unwrap()
            .starts_with("value 'beos' does not have a value in the enumeration 'other, wxp")
    );
    assert_eq!(
        e["bogus"],
        "property is not defined in schema and the schema does not allow additional properties"
    );
    assert_eq!(e["onboot"], "type check ('boolean') failed - got 'maybe'");
    let e = sim.post("/nodes/pve1/qemu", &[]).await.errors();
    assert_eq!(e["vmid"], "property is missing and it is not optional");
    let e = sim
        .post("/nodes/bad_node/qemu", &[("vmid", "100")])
        .await
        .errors();
    assert_eq!(
        e["node"],
        "invalid format - value does not look like a valid node name\n"
    );
    let long = "x".repeat(8193);
    let e = sim
        .post(
            "/nodes/pve1/qemu",
            &[
                ("vmid", "100"),
                ("description", &long),
                ("name", "bad name!"),
            ],
        )
        .await
        .errors();
    assert_eq!(e["description"], "value may only be 8192 characters long");
    assert_eq!(
        e["name"],
        "invalid format - value does not look like a valid DNS name\n"
    );
    let e = sim
        .post(
            "/nodes/pve1/qemu",
            &[("vmid", "100"), ("scsi0", "local-lvm:8,bogus=1")],
        )
        .await
        .errors();
    assert_eq!(
        e["scsi0"],
        "invalid key in comma-separated list property: bogus\n"
    );
    let e = sim
        .post(
            "/nodes/pve1/qemu",
            &[("vmid", "100"), ("scsi0", "local-lvm:8,cache=fast")],
        )
        .await
        .errors();
    assert!(
        e["scsi0"]
            .as_str()
            .unwrap()
            .contains("cache: value 'fast' does not have a value in the enumeration")
    );
    let e = sim
        .post(
            "/nodes/pve1/qemu",
            &[("vmid", "100"), ("scsi99", "local-lvm:8")],
        )
        .await
        .errors();
    assert!(
        e["scsi99"]
            .as_str()
            .unwrap()
            .starts_with("property is not defined")
    );
    let e = sim
        .post(
            "/nodes/pve1/qemu",
            &[("vmid", "100"), ("tags", "ok;bad tag!")],
        )
        .await
        .errors();
    assert!(
        e["tags"]
            .as_str()
            .unwrap()
            .starts_with("invalid format - invalid tag")
    );
    let e = sim
        .req("GET", "/nodes/pve1/qemu/abc/config", &[])
        .await
        .errors();
    assert_eq!(e["vmid"], "type check ('integer') failed - got 'abc'");
    // Nothing was created by any of these.
    assert!(sim.h.state().guests.is_empty());
}

#[tokio::test]
async fn json_bodies_and_booleans() {
    let sim = Sim::start().await;
    let resp = sim
        .client
        .post(sim.url("/nodes/pve1/qemu"))
        .header("Authorization", sim.h.token.header())
        .json(&serde_json::json!({ "vmid": 100, "onboot": true, "cores": 2, "name": "j" }))
        .send()
        .await
        .unwrap();
    let upid = crate::support::read(resp).await.ok();
    sim.wait_ok(&upid).await;
    let c = sim.get("/nodes/pve1/qemu/100/config").await.ok();
    assert_eq!(c["onboot"], 1);
    assert_eq!(c["cores"], 2);
    sim.put(
        "/nodes/pve1/qemu/100/config",
        &[("onboot", "false"), ("protection", "yes")],
    )
    .await
    .ok();
    let c = sim.get("/nodes/pve1/qemu/100/config").await.ok();
    assert_eq!(c["onboot"], 0);
    assert_eq!(c["protection"], 1);
}

#[tokio::test]
async fn a_repeated_parameter_keeps_every_value_of_a_list_and_is_refused_elsewhere() {
    // pve-http-server `decode_urlencoded` collects repeated keys into a list; pve-common
    // `RESTHandler` joins it for a `-list` format (proxmoxer sends LXC `tags` so) and
    // `JSONSchema::check_type` refuses it for any other string or number.
    let sim = Sim::start().await;
    sim.create_vm("100", &[]).await;
    sim.put(
        "/nodes/pve1/qemu/100/config",
        &[("tags", "web"), ("tags", "prod"), ("tags", "eu")],
    )
    .await
    .ok();
    let config = sim.get("/nodes/pve1/qemu/100/config").await.ok();
    let mut tags: Vec<&str> = config["tags"].as_str().unwrap().split(';').collect();
    tags.sort_unstable();
    assert_eq!(tags, ["eu", "prod", "web"]);
    let e = sim
        .put(
            "/nodes/pve1/qemu/100/config",
            &[("cores", "1"), ("cores", "2"), ("name", "a"), ("name", "b")],
        )
        .await
        .errors();
    assert_eq!(e["cores"], "type check ('integer') failed - got ARRAY");
    assert_eq!(e["name"], "type check ('string') failed - got ARRAY");
    // A query parameter replaces the body's (`extract_params`).
    let url = format!("{}?cores=3", "/nodes/pve1/qemu/100/config");
    sim.put(&url, &[("cores", "2")]).await.ok();
    let config = sim.get("/nodes/pve1/qemu/100/config").await.ok();
    assert_eq!(config["cores"], 3);
}
