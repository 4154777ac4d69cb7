//! Taking over containers ProxOps did not create. A container adopted has no `template` (PVE
//! does not record one): it can be taken over but never created, so a declared container
//! without `template` whose vmid is not live is a plan error and nothing is sent for it; and a
//! container taken over is never deleted, re-created or replaced, whatever the manifest says.

use crate::support::{
    CT_TEMPLATE, graph_of, one_node, one_node_with_ct_template, root_simulator, simulator,
};
use proxops_engine::adopt::{AdoptContext, Adopted, Outcome, Placement, Selection, adopt_live};
use proxops_engine::execute::{ExecOptions, execute};
use proxops_engine::plan::{ClusterPlan, Verb};
use proxops_engine::planner::{PlanOptions, plan_cluster};
use proxops_pve::{ConfigChange, DestroyOptions, GuestRef, PveClient, WaitOptions};
use proxops_pve_sim::{GuestType, SimHandle, parse_guest_config};
use std::collections::BTreeMap;

const CLUSTER: &str = "t";

/// The root filesystem as the adopted manifest has it.
const ROOT: &str = "size: \"8GiB\"\n    storage: local-lvm\n    volume: local-lvm:vm-300-disk-0";

fn ct(name: &str, vmid: u32, template: bool) -> String {
    let template = if template { "  template: debian\n" } else { "" };
    format!(
        "apiVersion: proxops/v1alpha1\nkind: LXC\nmetadata:\n  name: {name}\nspec:\n  node: pve1\n  vmid: {vmid}\n{template}  memory: 512MiB\n  cpu:\n    cores: 1\n  root:\n    storage: local-lvm\n    size: 4GiB\n"
    )
}

/// A hand-made container: a root volume, a volume mount point, a bind mount, raw `lxc.*` lines
/// and a snapshot.
const FILES: &str = "#File server\narch: amd64\ncores: 2\nfeatures: nesting=1\nhostname: files\nmemory: 1024\nmp0: local-lvm:vm-300-disk-1,mp=/srv/data,backup=1,size=16G\nmp1: /mnt/share,mp=/mnt/share,ro=1\nnet0: name=eth0,bridge=vmbr0,firewall=1,hwaddr=BC:24:11:00:03:00,ip=192.168.1.30/24,gw=192.168.1.1,type=veth\nonboot: 1\nostype: debian\nrootfs: local-lvm:vm-300-disk-0,size=8G\nswap: 512\ntags: files\nunprivileged: 1\nlxc.apparmor.profile: unconfined\nlxc.cgroup2.devices.allow: c 10:200 rwm\n\n[before-upgrade]\narch: amd64\nhostname: files\nmemory: 512\nrootfs: local-lvm:vm-300-disk-0,size=8G\nsnaptime: 1700000000\n";

async fn seeded(files: &[(u32, &str)]) -> (SimHandle, PveClient) {
    let dir = tempfile::tempdir().unwrap();
    let lxc = dir.path().join("nodes/pve1/lxc");
    std::fs::create_dir_all(&lxc).unwrap();
    for (vmid, text) in files {
        std::fs::write(lxc.join(format!("{vmid}.conf")), text).unwrap();
    }
    let mut state = one_node();
    proxops_pve_sim::seed_guest_configs(&mut state, dir.path()).unwrap();
    root_simulator(state).await
}

fn ctx() -> AdoptContext {
    AdoptContext::new(CLUSTER).with_nodes(vec!["pve1".into()])
}

async fn adopt_all(client: &PveClient) -> Vec<(u32, Adopted)> {
    adopt_live(client, &ctx(), &Selection::All)
        .await
        .unwrap()
        .into_iter()
        .map(|(vmid, o)| match o {
            Outcome::Adopted(a) => (vmid, *a),
            Outcome::Refused(r) => panic!("{vmid}: {r}"),
            other => panic!("{vmid}: {other:?}"),
        })
        .collect()
}

async fn plan(client: &PveClient, texts: &[&str]) -> ClusterPlan {
    plan_cluster(client, CLUSTER, &graph_of(texts), &PlanOptions::default())
        .await
        .unwrap()
}

async fn config(client: &PveClient, vmid: u32) -> proxops_pve::GuestConfig {
    client
        .guest_config(&GuestRef::lxc("pve1", vmid))
        .await
        .unwrap()
}

fn no_create_delete_or_replace(p: &ClusterPlan) {
    assert!(
        p.actions
            .iter()
            .all(|a| !matches!(a.verb, Verb::Create | Verb::Delete | Verb::Replace)),
        "{p:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_without_template_is_never_created_and_the_rest_still_plans() {
    let state = one_node_with_ct_template();
    let (sim, client) = simulator(state).await;
    let orphan = ct("orphan", 300, false);
    let made = ct("made", 301, true);
    let p = plan(&client, &[CT_TEMPLATE, &orphan, &made]).await;
    assert_eq!(p.errors.len(), 1, "{p:#?}");
    assert_eq!(p.errors[0].subject, "LXC/orphan");
    assert_eq!(p.errors[0].code, "proxops::no_template");
    assert!(p.errors[0].reason.contains("declare `template`"), "{p:#?}");
    assert!(p.actions.iter().all(|a| a.vmid != Some(300)), "{p:#?}");
    let created: Vec<_> = p
        .actions
        .iter()
        .filter(|a| a.verb == Verb::Create)
        .map(|a| a.vmid)
        .collect();
    assert_eq!(created, [Some(301)], "{p:#?}");
    let report = execute(&client, &p, &ExecOptions::default()).await;
    assert!(report.all_succeeded(), "{report:#?}");
    assert!(!client.inventory().await.unwrap().guests.contains_key(&300));
    sim.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adopted_container_is_never_deleted_recreated_or_replaced_when_it_differs() {
    let (sim, client) = seeded(&[(300, FILES)]).await;
    let mut all = adopt_all(&client).await;
    let (_, adopted) = all.remove(0);
    let manifest = adopted.to_yaml();
    assert!(!manifest.contains("template:"), "{manifest}");
    let before = config(&client, 300).await;
    // Untagged and different: an anomaly, nothing written.
    for differs in [
        manifest.replace("memory: \"1024MiB\"", "memory: \"2048MiB\""),
        manifest.replace("size: \"8GiB\"", "size: \"4GiB\""),
        manifest.replace(
            ROOT,
            "size: \"8GiB\"\n    storage: other\n    volume: other:vm-300-disk-0",
        ),
    ] {
        let p = plan(&client, &[&differs]).await;
        no_create_delete_or_replace(&p);
        assert!(p.actions.is_empty(), "{differs}\n{p:#?}");
        assert!(p.errors.is_empty(), "{p:#?}");
        assert_eq!(p.anomalies.len(), 1, "{p:#?}");
    }
    // Adopted: the tags and nothing else.
    let p = plan(&client, &[&manifest]).await;
    assert_eq!(p.actions.len(), 1, "{p:#?}");
    assert_eq!(p.actions[0].verb, Verb::Adopt);
    let keys: Vec<&str> = p.actions[0]
        .changes
        .iter()
        .map(|c| c.key.as_str())
        .collect();
    assert_eq!(keys, ["tags"], "{p:#?}");
    assert!(
        execute(&client, &p, &ExecOptions::default())
            .await
            .all_succeeded()
    );
    // Taken over, the manifest now says a smaller root, another storage, no mount point, more
    // memory: never a create, delete or replace; the volumes stay.
    let shrunk = manifest
        .replace("size: \"8GiB\"", "size: \"4GiB\"")
        .replace("memory: \"1024MiB\"", "memory: \"2048MiB\"");
    let p = plan(&client, &[&shrunk]).await;
    no_create_delete_or_replace(&p);
    assert!(p.errors.is_empty(), "{p:#?}");
    assert!(
        p.anomalies
            .iter()
            .any(|a| a.message.contains("never shrunk")),
        "{p:#?}"
    );
    let moved = manifest.replace(
        ROOT,
        "size: \"8GiB\"\n    storage: other\n    volume: other:vm-300-disk-0",
    );
    let p = plan(&client, &[&moved]).await;
    no_create_delete_or_replace(&p);
    assert!(
        p.anomalies
            .iter()
            .any(|a| a.message.contains("moving a volume")),
        "{p:#?}"
    );
    let p = plan(&client, &[&shrunk]).await;
    assert!(
        execute(&client, &p, &ExecOptions::default())
            .await
            .all_succeeded()
    );
    let after = config(&client, 300).await;
    assert_eq!(after.values["memory"], "2048");
    for key in ["rootfs", "mp0", "mp1"] {
        assert_eq!(after.values.get(key), before.values.get(key), "{key}");
    }
    // Raw lxc lines are never removed from a guest ProxOps manages.
    assert_eq!(after.raw_lxc, before.raw_lxc);
    assert_eq!(after.raw_lxc.len(), 2);
    // Deleted by hand: the manifest without `template` cannot bring it back; a plan error,
    // nothing sent.
    let upid = client
        .destroy(&GuestRef::lxc("pve1", 300), &DestroyOptions::default())
        .await
        .unwrap();
    client
        .wait_task(&upid, &WaitOptions::default())
        .await
        .unwrap();
    let p = plan(&client, &[&shrunk]).await;
    assert!(p.actions.is_empty(), "{p:#?}");
    assert_eq!(p.errors.len(), 1, "{p:#?}");
    assert_eq!(p.errors[0].code, "proxops::no_template");
    sim.shutdown().await.unwrap();
}

/// The report of adopting `FILES`: the raw lines and the snapshot (read with `GET .../snapshot`)
/// reported, the volumes typed as the volumes they are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adopt_reads_raw_lxc_lines_and_snapshots_and_keeps_the_volumes() {
    let (sim, client) = seeded(&[(300, FILES)]).await;
    let (_, a) = adopt_all(&client).await.remove(0);
    let spec = &a.manifest["spec"];
    assert_eq!(a.manifest["kind"], "LXC");
    assert_eq!(
        spec["root"],
        serde_json::json!({"storage": "local-lvm", "volume": "local-lvm:vm-300-disk-0", "size": "8GiB"})
    );
    assert_eq!(
        spec["mount-points"],
        serde_json::json!([{"storage": "local-lvm", "volume": "local-lvm:vm-300-disk-1", "size": "16GiB", "mount-point": "/srv/data", "slot": "mp0", "options": {"backup": true}}])
    );
    assert_eq!(
        spec["bind-mounts"],
        serde_json::json!([{"host-path": "/mnt/share", "mount-point": "/mnt/share", "read-only": true, "slot": "mp1"}])
    );
    let reported: BTreeMap<_, _> = a.report.reported().collect();
    assert!(
        reported.contains_key("snapshot:before-upgrade"),
        "{reported:?}"
    );
    assert!(
        reported.contains_key("lxc.apparmor.profile"),
        "{reported:?}"
    );
    assert!(
        reported.contains_key("lxc.cgroup2.devices.allow"),
        "{reported:?}"
    );
    // PVE records the current state's parent snapshot.
    assert!(reported.contains_key("parent"), "{reported:?}");
    assert_eq!(reported.len(), 4, "{reported:?}");
    let text = a.to_yaml();
    assert!(
        text.contains("# not declared: lxc.apparmor.profile:"),
        "{text}"
    );
    sim.shutdown().await.unwrap();
}

/// The corpus directory, or `None` (test skipped) when ../shared is absent and not required.
fn corpus() -> Option<std::path::PathBuf> {
    proxops_test_support::shared("pve-configs/lxc")
}

/// Every container of the corpus as (vmid 2000 + its number, config text).
fn corpus_configs(dir: &std::path::Path) -> Vec<(u32, String)> {
    let mut dirs: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    dirs.sort();
    dirs.iter()
        .map(|d| {
            let n: u32 = d.file_name().unwrap().to_str().unwrap().parse().unwrap();
            (2000 + n, std::fs::read_to_string(d.join("config")).unwrap())
        })
        .collect()
}

/// The 22 corpus containers seeded (as root@pam, which may write what they hold), adopted with
/// `--all`; each manifest loads and validates, plans one `adopt` changing only `tags`, and
/// nothing after it. Then drift: the adopted keys changed in PVE are restored, exactly those.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_containers_adopt_with_one_tagging_action_then_nothing_and_drift_is_restored() {
    let Some(dir) = corpus() else { return };
    let configs = corpus_configs(&dir);
    assert_eq!(configs.len(), 22);
    let files: Vec<(u32, &str)> = configs.iter().map(|(v, t)| (*v, t.as_str())).collect();
    let (sim, client) = seeded(&files).await;
    let adopted = adopt_all(&client).await;
    assert_eq!(adopted.len(), 22);
    // Two `jellyfin` and two `ollama` host names: the second of each is named after its vmid.
    let names: std::collections::BTreeSet<&str> = adopted
        .iter()
        .map(|(_, a)| a.report.name.as_str())
        .collect();
    assert_eq!(names.len(), 22, "{names:?}");
    for name in ["jellyfin", "jellyfin-2035", "ollama", "ollama-2041"] {
        assert!(names.contains(name), "{names:?}");
    }
    let mut declared: Vec<String> = Vec::new();
    let mut problems = Vec::new();
    for (vmid, a) in &adopted {
        let text = a.to_yaml();
        let file = proxops_model::diagnostic::SourceFile::new("m.yaml", text.clone());
        let loaded = proxops_model::manifest::load_manifest(
            &file,
            &proxops_model::Registry::builtin(),
            None,
        );
        let errors: Vec<_> = loaded
            .diagnostics
            .iter()
            .filter(|d| d.severity == proxops_model::diagnostic::Severity::Error)
            .map(|d| d.message.clone())
            .collect();
        assert!(
            loaded.resource.is_some() && errors.is_empty(),
            "{vmid}: {errors:?}\n{text}"
        );
        let mut texts: Vec<&str> = declared.iter().map(String::as_str).collect();
        texts.push(&text);
        let p = plan(&client, &texts).await;
        no_create_delete_or_replace(&p);
        let only_tags = p.errors.is_empty()
            && p.anomalies.is_empty()
            && p.actions.len() == 1
            && p.actions[0].verb == Verb::Adopt
            && p.actions[0].changes.iter().all(|c| c.key == "tags");
        if !only_tags {
            problems.push(format!(
                "{vmid}: {:?} {:?} {:?}",
                p.actions
                    .iter()
                    .map(|a| (a.verb, &a.reason))
                    .collect::<Vec<_>>(),
                p.anomalies.iter().map(|a| &a.message).collect::<Vec<_>>(),
                p.errors
            ));
            continue;
        }
        let report = execute(&client, &p, &ExecOptions::default()).await;
        assert!(report.all_succeeded(), "{vmid}: {report:#?}");
        let again = plan(&client, &texts).await;
        assert!(again.actions.is_empty(), "{vmid}: {again:#?}");
        declared.push(text);
    }
    eprintln!(
        "corpus containers: 22 adopted, {} tagged clean",
        declared.len()
    );
    assert!(problems.is_empty(), "{problems:#?}");
    assert_eq!(declared.len(), 22);
    // Drift: memory, swap, host name, and cores, start at boot and the first NIC's firewall
    // where the container sets them, changed by hand on every container; the next plan
    // restores exactly those keys, then nothing.
    let texts: Vec<&str> = declared.iter().map(String::as_str).collect();
    let mut drifted: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for (vmid, _) in &adopted {
        let live = config(&client, *vmid).await;
        let bump = |key: &str, by: u64| (live.values[key].parse::<u64>().unwrap() + by).to_string();
        let mut change = ConfigChange::default()
            .set("memory", bump("memory", 256))
            .set("swap", bump("swap", 128))
            .set("hostname", "drifted");
        if live.values.contains_key("cores") {
            change = change.set("cores", bump("cores", 1));
        }
        if let Some(on) = live.values.get("onboot") {
            change = change.set("onboot", if on == "1" { "0" } else { "1" });
        }
        if let Some(net0) = live.values.get("net0")
            && net0.contains("firewall=1")
        {
            change = change.set("net0", net0.replace("firewall=1", "firewall=0"));
        }
        drifted.insert(*vmid, change.set.keys().cloned().collect());
        client
            .set_config(&GuestRef::lxc("pve1", *vmid), &change)
            .await
            .unwrap();
    }
    let p = plan(&client, &texts).await;
    no_create_delete_or_replace(&p);
    assert!(p.anomalies.is_empty() && p.errors.is_empty(), "{p:#?}");
    assert_eq!(p.actions.len(), 22, "{p:#?}");
    let mut restored = 0;
    for a in &p.actions {
        assert_eq!(a.verb, Verb::Update, "{a:#?}");
        let keys: Vec<String> = a.changes.iter().map(|c| c.key.clone()).collect();
        let vmid = a.vmid.unwrap();
        assert_eq!(keys, drifted[&vmid], "{a:#?}");
        restored += keys.len();
    }
    eprintln!("corpus containers: {restored} drifted keys restored");
    let report = execute(&client, &p, &ExecOptions::default()).await;
    assert!(report.all_succeeded(), "{report:#?}");
    for (vmid, text) in &configs {
        let parsed = parse_guest_config(GuestType::Lxc, text);
        let live = config(&client, *vmid).await;
        for key in &drifted[vmid] {
            assert_eq!(live.values.get(key), parsed.config.get(key), "{vmid} {key}");
        }
        assert_eq!(live.raw_lxc, parsed.raw_lxc, "{vmid}: raw lxc lines kept");
    }
    let p = plan(&client, &texts).await;
    assert!(p.actions.is_empty() && p.anomalies.is_empty(), "{p:#?}");
    sim.shutdown().await.unwrap();
}

/// Every key of each corpus container (main section, raw `lxc.*` lines, snapshots) appears in
/// its report exactly once; typed and `pve-config` keys are in the manifest. The totals are
/// pinned, so that a regression (or an improvement) shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_containers_every_key_is_accounted_for() {
    let Some(dir) = corpus() else { return };
    let configs = corpus_configs(&dir);
    let files: Vec<(u32, &str)> = configs.iter().map(|(v, t)| (*v, t.as_str())).collect();
    let (sim, client) = seeded(&files).await;
    let adopted: BTreeMap<u32, Adopted> = adopt_all(&client).await.into_iter().collect();
    let (mut typed, mut via, mut reported) = (0, 0, 0);
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    for (vmid, text) in &configs {
        let parsed = parse_guest_config(GuestType::Lxc, text);
        let mut want: Vec<String> = parsed.config.keys().cloned().collect();
        want.extend(parsed.raw_lxc.iter().map(|(k, _)| k.clone()));
        want.extend(parsed.snapshots.iter().map(|s| format!("snapshot:{s}")));
        want.sort();
        let a = &adopted[vmid];
        let mut got: Vec<String> = a.report.keys.iter().map(|k| k.key.clone()).collect();
        got.sort();
        assert_eq!(got, want, "{vmid}");
        let spec = &a.manifest["spec"];
        for k in &a.report.keys {
            match &k.placement {
                Placement::Typed { field } => {
                    typed += 1;
                    if field != "kind" {
                        let mut at = spec;
                        for part in field.split('.') {
                            at = &at[part];
                        }
                        assert!(!at.is_null(), "{vmid}: {} -> {field} missing", k.key);
                    }
                }
                Placement::PveConfig => {
                    via += 1;
                    assert!(!spec["pve-config"][&k.key].is_null(), "{vmid}: {}", k.key);
                }
                Placement::Reported { reason } => {
                    reported += 1;
                    let family = if k.key.starts_with("snapshot:") {
                        "snapshot".to_owned()
                    } else {
                        k.key.clone()
                    };
                    *reasons.entry(family).or_default() += 1;
                    assert!(!reason.is_empty());
                }
                other => panic!("a placement this test does not know: {other:?}"),
            }
        }
    }
    eprintln!(
        "corpus containers: {} guests, {typed} keys typed, {via} via pve-config, {reported} reported: {reasons:?}",
        configs.len()
    );
    // Every key a typed field or `pve-config` could take is in the manifest: what is reported
    // is raw `lxc.*` lines, snapshots and PVE's snapshot bookkeeping (`parent`) alone.
    assert!(
        reasons
            .keys()
            .all(|k| k.starts_with("lxc.") || k == "snapshot" || k == "parent"),
        "{reasons:?}"
    );
    assert_eq!((typed, via, reported), (284, 0, 87), "{reasons:?}");
    sim.shutdown().await.unwrap();
}
