//! The firewall configuration written through the API, as pve-firewall
//! `src/PVE/API2/Firewall/{Cluster,Rules,Aliases,IPSet,Groups,VM}.pm` and `src/PVE/Firewall.pm`
//! (`verify_rule`, `copy_rule_data`, the loaders and savers) define it: positions and digests,
//! the refusals in PVE's words, what the file keeps, privileges, a destroyed guest's file
//! removed, and the shapes of the 9.1 schema's `returns`.

use crate::support::{Auth, Sim};
use proxops_pve_sim::{AclEntry, ApiToken, PveVersion, State};
use serde_json::{Value, json};

const RULES: &str = "/cluster/firewall/rules";
const STALE: &str = "detected modified configuration - file changed by other user? Try again.";

fn actions(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|r| format!("{}:{}", r["pos"], r["action"].as_str().unwrap()))
        .collect()
}

#[tokio::test]
async fn cluster_rules_are_created_first_updated_moved_and_deleted_by_position() {
    let sim = Sim::start().await;
    sim.post(
        RULES,
        &[
            ("type", "in"),
            ("action", "ACCEPT"),
            ("proto", "tcp"),
            ("dport", "22"),
        ],
    )
    .await
    .ok();
    sim.post(
        RULES,
        &[
            ("type", "in"),
            ("action", "DROP"),
            ("source", "10.0.0.0/8"),
            ("enable", "1"),
            ("comment", " lan "),
        ],
    )
    .await
    .ok();
    let list = sim.get(RULES).await.ok();
    // `create_rule` puts the new rule first; `enable` is 0 unless given.
    assert_eq!(actions(&list), ["0:DROP", "1:ACCEPT"]);
    assert_eq!(list[0]["enable"], 1);
    assert_eq!(list[0]["ipversion"], 4);
    assert_eq!(list[0]["comment"], "lan");
    assert_eq!(list[1]["enable"], 0);
    assert_eq!(list[1]["dport"], "22");
    assert!(list[1].get("ipversion").is_none(), "{list}");
    let digest = list[0]["digest"].as_str().unwrap().to_owned();
    assert_eq!(list[1]["digest"], digest.as_str());
    let one = sim.get(&format!("{RULES}/1")).await.ok();
    assert_eq!(
        (one["pos"].clone(), one["action"].clone()),
        (json!(1), json!("ACCEPT"))
    );
    assert_eq!(
        sim.get(&format!("{RULES}/2")).await.fail(500),
        "no rule at position 2"
    );

    // An update with the digest read; the same digest no longer matches after it.
    sim.put(
        &format!("{RULES}/1"),
        &[("enable", "1"), ("dport", "2222"), ("digest", &digest)],
    )
    .await
    .ok();
    let stale = sim
        .put(
            &format!("{RULES}/1"),
            &[("enable", "0"), ("digest", &digest)],
        )
        .await;
    assert_eq!(stale.fail(500), STALE);
    let moved = sim.get(&format!("{RULES}/1")).await.ok();
    assert_eq!(
        (moved["enable"].clone(), moved["dport"].clone()),
        (json!(1), json!("2222"))
    );

    // `moveto` moves and ignores the other arguments; an empty value removes a property.
    sim.put(&format!("{RULES}/1"), &[("moveto", "0"), ("comment", "x")])
        .await
        .ok();
    let list = sim.get(RULES).await.ok();
    assert_eq!(actions(&list), ["0:ACCEPT", "1:DROP"]);
    assert!(list[0].get("comment").is_none());
    sim.put(
        &format!("{RULES}/1"),
        &[("source", ""), ("delete", "comment")],
    )
    .await
    .ok();
    let one = sim.get(&format!("{RULES}/1")).await.ok();
    assert!(
        one.get("source").is_none() && one.get("comment").is_none(),
        "{one}"
    );
    let required = sim
        .put(&format!("{RULES}/1"), &[("delete", "action")])
        .await
        .errors();
    assert_eq!(
        required["delete"],
        "unable to delete required property 'action'"
    );

    sim.delete(&format!("{RULES}/0"), &[]).await.ok();
    assert_eq!(actions(&sim.get(RULES).await.ok()), ["0:DROP"]);
    assert_eq!(
        sim.delete(&format!("{RULES}/3"), &[]).await.fail(500),
        "no rule at position 3"
    );
}

#[tokio::test]
async fn verify_rule_refuses_in_pves_words() {
    let sim = Sim::start().await;
    let refused = |params: Vec<(&'static str, &'static str)>| {
        let sim = &sim;
        async move {
            let mut p = vec![("type", "in"), ("action", "ACCEPT")];
            p.extend(params);
            sim.post(RULES, &p).await.errors()
        }
    };
    let e = refused(vec![("dport", "80")]).await;
    assert_eq!(
        e["proto"],
        "missing property - 'dport' requires this property"
    );
    let e = refused(vec![("macro", "nope")]).await;
    assert_eq!(e["macro"], "unknown macro 'nope'");
    // `dport` asks for `proto` before the macro is applied.
    let e = refused(vec![("macro", "ssh"), ("dport", "2222")]).await;
    assert_eq!(
        e["proto"],
        "missing property - 'dport' requires this property"
    );
    let e = refused(vec![("macro", "ssh"), ("proto", "tcp"), ("dport", "2222")]).await;
    assert_eq!(
        e["dport"],
        "parameter 'dport' already define in macro (value = '22')"
    );
    let e = refused(vec![("source", "nope")]).await;
    assert_eq!(e["source"], "no such alias 'nope'");
    let e = refused(vec![("dest", "+nope")]).await;
    assert_eq!(e["dest"], "no such ipset 'nope'");
    let e = refused(vec![("proto", "icmp"), ("icmp-type", "packet-too-big")]).await;
    assert_eq!(
        e["icmp-type"],
        "invalid icmp-type 'packet-too-big' for proto 'icmp'"
    );
    let e = refused(vec![("proto", "gre"), ("dport", "80")]).await;
    assert_eq!(e["dport"], "protocol 'gre' does not support ports");
    // The parameter formats refuse before the handler runs.
    let e = refused(vec![("source", "192.168.1.5/24")]).await;
    assert_eq!(
        e["source"].as_str().unwrap().trim_end(),
        "invalid format - invalid IP address: Invalid prefix 11000000101010000000000100000101/24"
    );
    let e = refused(vec![("proto", "tcp"), ("dport", "90:80")]).await;
    assert!(
        e["dport"]
            .as_str()
            .unwrap()
            .contains("backwards range '90:80' not allowed"),
        "{e}"
    );
    let e = sim
        .post(RULES, &[("type", "forward"), ("action", "REJECT")])
        .await
        .errors();
    assert_eq!(e["action"], "cannot define REJECT rules on forward chain");
    let e = sim
        .post(
            "/nodes/pve1/qemu/100/firewall/rules",
            &[("type", "forward"), ("action", "ACCEPT")],
        )
        .await
        .errors();
    assert_eq!(e["type"], "invalid rule type 'forward' for rule_env 'vm'");
    let e = sim
        .post(
            "/nodes/pve1/lxc/100/firewall/rules",
            &[("type", "in"), ("action", "ACCEPT"), ("iface", "eth0")],
        )
        .await
        .errors();
    assert_eq!(
        e["iface"],
        r"value does not match the regex pattern 'net\d+'"
    );
    // A macro's name is stored as PVE spells it.
    sim.post(
        RULES,
        &[("type", "in"), ("action", "ACCEPT"), ("macro", "ssh")],
    )
    .await
    .ok();
    assert_eq!(sim.get(&format!("{RULES}/0")).await.ok()["macro"], "SSH");
    assert_eq!(sim.get(RULES).await.ok().as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn aliases_are_named_case_blind_and_rules_see_them_go() {
    let sim = Sim::start().await;
    let aliases = "/cluster/firewall/aliases";
    sim.post(
        aliases,
        &[
            ("name", "LanNet"),
            ("cidr", "10.1.0.0/16"),
            ("comment", "lan"),
        ],
    )
    .await
    .ok();
    sim.post(aliases, &[("name", "gw"), ("cidr", "10.1.0.1/32")])
        .await
        .ok();
    let list = sim.get(aliases).await.ok();
    assert_eq!(list[0]["name"], "gw");
    // `parse_alias` drops a host's /32 and knows the version.
    assert_eq!(list[0]["cidr"], "10.1.0.1");
    assert_eq!(list[1]["ipversion"], 4);
    let again = sim
        .post(aliases, &[("name", "lannet"), ("cidr", "10.2.0.0/16")])
        .await
        .errors();
    assert_eq!(again["name"], "alias 'lannet' already exists");
    let read = sim.get(&format!("{aliases}/LANNET")).await.ok();
    assert_eq!(
        read,
        json!({"name": "LanNet", "cidr": "10.1.0.0/16", "ipversion": 4, "comment": "lan"})
    );
    assert_eq!(
        sim.get(&format!("{aliases}/nope")).await.errors()["name"],
        "no such alias"
    );

    // A rule naming the alias; the alias renamed away, the rule loads with its error.
    sim.post(
        RULES,
        &[("type", "in"), ("action", "ACCEPT"), ("source", "lannet")],
    )
    .await
    .ok();
    assert_eq!(sim.get(RULES).await.ok()[0]["ipversion"], 4);
    sim.put(
        &format!("{aliases}/lannet"),
        &[("cidr", "10.1.0.0/16"), ("rename", "office")],
    )
    .await
    .ok();
    let rule = &sim.get(RULES).await.ok()[0];
    assert_eq!(rule["errors"]["source"], "no such alias 'lannet'");
    let names: Vec<Value> = sim
        .get(aliases)
        .await
        .ok()
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].clone())
        .collect();
    assert_eq!(names, [json!("gw"), json!("office")]);
    // The update replaced the comment it was not given.
    assert!(
        sim.get(&format!("{aliases}/office"))
            .await
            .ok()
            .get("comment")
            .is_none()
    );
    sim.delete(&format!("{aliases}/office"), &[]).await.ok();
    sim.delete(&format!("{aliases}/office"), &[]).await.ok();
    assert_eq!(sim.get(aliases).await.ok().as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn ip_sets_hold_cleaned_sorted_entries() {
    let sim = Sim::start().await;
    let sets = "/cluster/firewall/ipset";
    sim.post(sets, &[("name", "Web"), ("comment", "front")])
        .await
        .ok();
    // The file's parser lower-cases set names.
    assert_eq!(sim.get(sets).await.ok()[0]["name"], "web");
    assert_eq!(
        sim.get(&format!("{sets}/Web")).await.fail(500),
        "no such IPSet 'Web'"
    );
    let web = format!("{sets}/web");
    sim.post(&web, &[("cidr", "192.168.1.77/24")]).await.ok();
    sim.post(&web, &[("cidr", "10.0.0.5/32"), ("nomatch", "1")])
        .await
        .ok();
    let entries = sim.get(&web).await.ok();
    assert_eq!(entries[0]["cidr"], "10.0.0.5");
    assert_eq!(entries[0]["nomatch"], 1);
    assert_eq!(entries[1]["cidr"], "192.168.1.0/24");
    let dup = sim.post(&web, &[("cidr", "10.0.0.5")]).await.errors();
    assert_eq!(dup["cidr"], "address '10.0.0.5' already exists");
    let zero = sim.post(&web, &[("cidr", "0.0.0.0/0")]).await.errors();
    assert_eq!(
        zero["cidr"],
        "a zero prefix is not allowed in ipset entries"
    );
    assert_eq!(
        sim.post(&web, &[("cidr", "nope")]).await.fail(500),
        "no such alias 'nope'"
    );
    // An entry's path may carry its CIDR's slash unescaped.
    let entry = sim.get(&format!("{web}/192.168.1.0/24")).await.ok();
    assert_eq!(entry["cidr"], "192.168.1.0/24");
    assert_eq!(entry["digest"], entries[0]["digest"]);
    sim.put(&format!("{web}/192.168.1.0%2F24"), &[("comment", "office")])
        .await
        .ok();
    assert_eq!(
        sim.get(&format!("{web}/192.168.1.0/24")).await.ok()["comment"],
        "office"
    );
    assert_eq!(
        sim.get(&format!("{web}/10.9.9.9")).await.errors()["cidr"],
        "no such IP/Network"
    );
    assert_eq!(
        sim.delete(&web, &[]).await.fail(500),
        "IPSet 'web' is not empty"
    );
    // Rules may name the set.
    sim.post(
        RULES,
        &[("type", "in"), ("action", "ACCEPT"), ("source", "+web")],
    )
    .await
    .ok();
    sim.post(sets, &[("name", "front"), ("rename", "web")])
        .await
        .ok();
    assert_eq!(sim.get(sets).await.ok()[0]["comment"], "front");
    assert_eq!(
        sim.get(RULES).await.ok()[0]["errors"]["source"],
        "no such ipset 'web'"
    );
    sim.delete(&format!("{sets}/front"), &[("force", "1")])
        .await
        .ok();
    assert_eq!(sim.get(sets).await.ok(), json!([]));
}

#[tokio::test]
async fn security_groups_hold_rules_and_renames_follow_into_guests() {
    let sim = Sim::start().await;
    sim.create_vm("100", &[]).await;
    let groups = "/cluster/firewall/groups";
    sim.post(groups, &[("group", "web"), ("comment", "http")])
        .await
        .ok();
    let again = sim.post(groups, &[("group", "web")]).await.errors();
    assert_eq!(again["group"], "Security group 'web' already exists");
    sim.post(
        &format!("{groups}/web"),
        &[
            ("type", "in"),
            ("action", "ACCEPT"),
            ("macro", "HTTP"),
            ("enable", "1"),
        ],
    )
    .await
    .ok();
    let e = sim
        .post(
            &format!("{groups}/web"),
            &[("type", "group"), ("action", "web")],
        )
        .await
        .errors();
    assert_eq!(e["type"], "invalid rule type 'group' for rule_env 'group'");
    assert_eq!(
        sim.get(&format!("{groups}/nope")).await.fail(500),
        "no such security group 'nope'"
    );
    let vm_rules = "/nodes/pve1/qemu/100/firewall/rules";
    sim.post(
        vm_rules,
        &[("type", "group"), ("action", "web"), ("iface", "net0")],
    )
    .await
    .ok();
    let list = sim.get(groups).await.ok();
    let digest = list[0]["digest"].as_str().unwrap().to_owned();
    assert_eq!(
        list,
        json!([{"group": "web", "comment": "http", "digest": digest}])
    );
    sim.post(
        groups,
        &[("group", "www"), ("rename", "web"), ("digest", &digest)],
    )
    .await
    .ok();
    assert_eq!(sim.get(vm_rules).await.ok()[0]["action"], "www");
    let rule = sim.get(&format!("{groups}/www/0")).await.ok();
    assert_eq!(
        (rule["macro"].clone(), rule["enable"].clone()),
        (json!("HTTP"), json!(1))
    );
    assert_eq!(
        sim.delete(&format!("{groups}/www"), &[]).await.fail(500),
        "Security group 'www' is not empty"
    );
    sim.delete(&format!("{groups}/www/0"), &[]).await.ok();
    sim.delete(&format!("{groups}/www"), &[]).await.ok();
    assert_eq!(sim.get(groups).await.ok(), json!([]));
}

#[tokio::test]
async fn guest_files_keep_options_and_go_with_the_guest() {
    let sim = Sim::start().await;
    sim.create_vm("100", &[]).await;
    let opts = "/nodes/pve1/qemu/100/firewall/options";
    sim.put(
        opts,
        &[("enable", "true"), ("policy_in", "DROP"), ("dhcp", "0")],
    )
    .await
    .ok();
    let got = sim.get(opts).await.ok();
    assert_eq!(
        (got["enable"].clone(), got["dhcp"].clone()),
        (json!(1), json!(0))
    );
    assert_eq!(got["policy_in"], "DROP");
    // The same file through the container path (PVE keys it by VMID only).
    assert_eq!(
        sim.get("/nodes/pve1/lxc/100/firewall/options").await.ok(),
        got
    );
    let digest = got["digest"].as_str().unwrap().to_owned();
    let unknown = sim.put(opts, &[("delete", "ebtables")]).await.errors();
    assert_eq!(unknown["delete"], "no such option 'ebtables'");
    sim.put(opts, &[("delete", "dhcp"), ("digest", &digest)])
        .await
        .ok();
    assert_eq!(
        sim.put(opts, &[("ndp", "1"), ("digest", &digest)])
            .await
            .fail(500),
        STALE
    );
    sim.post(
        "/nodes/pve1/qemu/100/firewall/aliases",
        &[("name", "db"), ("cidr", "fd00::5")],
    )
    .await
    .ok();
    sim.post(
        "/nodes/pve1/qemu/100/firewall/rules",
        &[("type", "in"), ("action", "ACCEPT"), ("dest", "guest/db")],
    )
    .await
    .ok();
    assert_eq!(
        sim.get("/nodes/pve1/qemu/100/firewall/rules").await.ok()[0]["ipversion"],
        6
    );
    assert!(sim.h.state().firewall.guests.contains_key(&100));

    // A clone gets a copy of the file (`clone_vmfw_conf`).
    let upid = sim
        .post("/nodes/pve1/qemu/100/clone", &[("newid", "101")])
        .await
        .ok();
    sim.wait_ok(&upid).await;
    let cloned = sim.get("/nodes/pve1/qemu/101/firewall/rules").await.ok();
    assert_eq!(cloned[0]["dest"], "guest/db");
    assert_eq!(
        sim.get("/nodes/pve1/qemu/101/firewall/options").await.ok()["policy_in"],
        "DROP"
    );

    // qemu-server `destroy_vm` calls `PVE::Firewall::remove_vmfw_conf`.
    let upid = sim.delete("/nodes/pve1/qemu/100", &[]).await.ok();
    sim.wait_ok(&upid).await;
    assert_eq!(
        sim.h.state().firewall.guests.keys().collect::<Vec<_>>(),
        [&101]
    );
    assert_eq!(
        sim.get(opts).await.ok(),
        json!({"digest": "da39a3ee5e6b4b0d3255bfef95601890afd80709"})
    );

    // The cluster's `enable` above 1 is the anti-lockout timestamp.
    sim.put(
        "/cluster/firewall/options",
        &[("enable", "1"), ("ebtables", "no")],
    )
    .await
    .ok();
    let cluster = sim.get("/cluster/firewall/options").await.ok();
    assert_eq!(
        (cluster["enable"].clone(), cluster["ebtables"].clone()),
        (json!(1), json!(0))
    );
}

#[tokio::test]
async fn writing_needs_the_modify_privileges() {
    let mut cfg = crate::support::config();
    let auditor = ApiToken::new("audit@pve!fw", "s");
    cfg.extra_tokens.push(auditor.clone());
    cfg.acl = proxops_pve_sim::acl_with_token_users(vec![
        AclEntry {
            principal: auditor.id.clone(),
            path: "/".into(),
            privs: vec!["Sys.Audit".into()],
            propagate: true,
        },
        AclEntry {
            principal: auditor.id.clone(),
            path: "/vms/100".into(),
            privs: vec!["VM.Audit".into()],
            propagate: true,
        },
    ]);
    let sim = Sim::with(cfg).await;
    let auth = Auth::Header(auditor.header());
    let rule = [("type", "in"), ("action", "ACCEPT")];
    for path in [
        RULES,
        "/nodes/pve1/qemu/100/firewall/rules",
        "/cluster/firewall/groups",
    ] {
        let params: &[(&str, &str)] = if path.ends_with("groups") {
            &[("group", "web")]
        } else {
            &rule
        };
        assert_eq!(
            sim.send("POST", path, params, &auth).await.status,
            403,
            "{path}"
        );
    }
    let opts = [("enable", "1")];
    let refused = sim
        .send("PUT", "/nodes/pve1/lxc/100/firewall/options", &opts, &auth)
        .await;
    assert_eq!(refused.status, 403);
    // Reading is what the audit privileges allow; another guest's file is not.
    sim.post(RULES, &rule).await.ok();
    let list = sim.send("GET", RULES, &[], &auth).await.ok();
    assert_eq!(list.as_array().unwrap().len(), 1);
    let own = sim
        .send("GET", "/nodes/pve1/qemu/100/firewall/ipset", &[], &auth)
        .await;
    assert_eq!(own.ok(), json!([]));
    let other = sim
        .send("GET", "/nodes/pve1/qemu/101/firewall/rules", &[], &auth)
        .await;
    assert_eq!(other.status, 403);
    assert!(sim.h.state().firewall.guests.is_empty());
}

#[tokio::test]
async fn the_configuration_survives_the_state_file() {
    let sim = Sim::start().await;
    sim.post("/cluster/firewall/ipset", &[("name", "blocked")])
        .await
        .ok();
    sim.post(
        "/cluster/firewall/ipset/blocked",
        &[("cidr", "203.0.113.0/24"), ("comment", "bad")],
    )
    .await
    .ok();
    sim.post(
        RULES,
        &[("type", "in"), ("action", "DROP"), ("source", "+blocked")],
    )
    .await
    .ok();
    sim.put("/nodes/pve1/qemu/100/firewall/options", &[("enable", "1")])
        .await
        .ok();
    let st = sim.h.state();
    let back = State::from_json(&st.to_json()).unwrap();
    assert_eq!(back.firewall, st.firewall);
    assert_eq!(back.firewall.cluster.rules.len(), 1);
    // A state written before the firewall was kept still loads.
    let old = State::from_json(r#"{"nodes":[{"node":"pve1"}]}"#).unwrap();
    assert!(old.firewall.is_empty());
    assert!(!st.to_json().is_empty() && !State::default().to_json().contains("firewall"));
}

/// The reads proxmoxer and the Ansible modules make, against the 9.1 schema's `returns`. PVE
/// sends more than its schema lists: `digest` on rules and options (`copy_list_with_digest`,
/// `copy_opject_with_digest`), `ipversion` on aliases (`parse_alias`).
#[tokio::test]
async fn reads_keep_the_shapes_of_the_schema() {
    let Some(tree) = crate::conformance::schema(PveVersion::V9_1) else {
        return;
    };
    let idx = crate::conformance::index(&tree);
    let sim = Sim::start().await;
    sim.create_vm("100", &[]).await;
    let vm = "/nodes/pve1/qemu/100/firewall";
    sim.post(
        "/cluster/firewall/groups",
        &[("group", "web"), ("comment", "c")],
    )
    .await
    .ok();
    sim.post(
        &format!("{vm}/aliases"),
        &[("name", "db"), ("cidr", "10.0.0.5")],
    )
    .await
    .ok();
    sim.post(&format!("{vm}/ipset"), &[("name", "admins")])
        .await
        .ok();
    sim.post(
        &format!("{vm}/ipset/admins"),
        &[("cidr", "10.0.0.0/24"), ("nomatch", "1")],
    )
    .await
    .ok();
    sim.post(
        &format!("{vm}/rules"),
        &[
            ("type", "in"),
            ("action", "ACCEPT"),
            ("proto", "tcp"),
            ("dport", "443"),
            ("source", "db"),
            ("log", "info"),
        ],
    )
    .await
    .ok();
    sim.post(
        &format!("{vm}/rules"),
        &[("type", "group"), ("action", "web")],
    )
    .await
    .ok();
    sim.put(
        &format!("{vm}/options"),
        &[("enable", "1"), ("log_level_in", "info")],
    )
    .await
    .ok();
    sim.put(
        "/cluster/firewall/options",
        &[("enable", "1"), ("policy_in", "DROP")],
    )
    .await
    .ok();
    let reads = [
        (
            "/nodes/{node}/qemu/{vmid}/firewall/rules",
            format!("{vm}/rules"),
            &["digest"][..],
        ),
        (
            "/nodes/{node}/qemu/{vmid}/firewall/rules/{pos}",
            format!("{vm}/rules/0"),
            &["digest"][..],
        ),
        (
            "/nodes/{node}/qemu/{vmid}/firewall/aliases",
            format!("{vm}/aliases"),
            &["ipversion"][..],
        ),
        (
            "/nodes/{node}/qemu/{vmid}/firewall/ipset",
            format!("{vm}/ipset"),
            &[][..],
        ),
        (
            "/nodes/{node}/qemu/{vmid}/firewall/ipset/{name}",
            format!("{vm}/ipset/admins"),
            &[][..],
        ),
        (
            "/nodes/{node}/qemu/{vmid}/firewall/options",
            format!("{vm}/options"),
            &["digest"][..],
        ),
        (
            "/cluster/firewall/options",
            "/cluster/firewall/options".to_owned(),
            &["digest"][..],
        ),
        (
            "/cluster/firewall/groups",
            "/cluster/firewall/groups".to_owned(),
            &[][..],
        ),
    ];
    let mut errs = Vec::new();
    for (t, p, extra) in &reads {
        let data = sim.get(p).await.ok();
        assert!(!data.as_array().is_some_and(Vec::is_empty), "{p} is empty");
        crate::conformance::check_value(&idx[*t]["GET"]["returns"], &data, t, extra, &mut errs);
    }
    assert!(errs.is_empty(), "{}", errs.join("\n"));
}
