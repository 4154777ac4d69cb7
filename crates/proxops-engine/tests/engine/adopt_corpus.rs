//! The corpus of real QEMU configs (`../shared/pve-configs/qemu/*/config`), seeded into a
//! simulator as vmid 1000 + its number: every VM adopts clean (its manifest loads, the plan is
//! one `adopt` writing only the tags, then nothing), the report accounts for every key of its
//! config file, drift behind ProxOps's back is restored to the adopted values, and no edit of an
//! adopted manifest makes the planner delete, re-create or shrink anything.

use crate::support::{graph_of, one_node, simulator};
use proxops_engine::adopt::{AdoptContext, Adopted, LiveGuest, Outcome, Placement, Selection};
use proxops_engine::desired::{Context, guest};
use proxops_engine::execute::{ExecOptions, execute};
use proxops_engine::plan::{ClusterPlan, Verb};
use proxops_engine::planner::{PlanOptions, plan_cluster};
use proxops_model::kind::GuestType;
use proxops_pve::props::canonical_value;
use proxops_pve::{ConfigChange, GuestRef, PveClient};
use proxops_pve_sim::{SimHandle, parse_guest_config};
use std::collections::BTreeMap;
use std::path::PathBuf;

const CLUSTER: &str = "t";

/// How many corpus VMs adopt clean; the totals of where their keys went. Pinned so that a
/// regression (or an improvement) shows.
const CLEAN: usize = 33;
const TYPED: usize = 676;
const PVE_CONFIG: usize = 74;
const REPORTED: usize = 63;

/// The corpus directory, or `None` (test skipped) when ../shared is absent and not required.
fn corpus() -> Option<PathBuf> {
    proxops_test_support::shared("pve-configs")
}

/// One corpus VM: its vmid, config text, and its manifest as adopted through the simulator.
struct Vm {
    vmid: u32,
    text: String,
    adopted: Adopted,
}

struct Seeded {
    sim: SimHandle,
    client: PveClient,
    vms: Vec<Vm>,
}

/// Seeds every corpus VM and adopts them all (`adopt --all`), or `None` when the corpus is
/// absent.
async fn seeded() -> Option<Seeded> {
    let corpus = corpus()?;
    let dir = tempfile::tempdir().unwrap();
    let qs = dir.path().join("nodes/pve1/qemu-server");
    std::fs::create_dir_all(&qs).unwrap();
    let mut texts = BTreeMap::new();
    for e in std::fs::read_dir(corpus.join("qemu")).unwrap() {
        let d = e.unwrap().path();
        let n: u32 = d.file_name().unwrap().to_str().unwrap().parse().unwrap();
        let text = std::fs::read_to_string(d.join("config")).unwrap();
        std::fs::write(qs.join(format!("{}.conf", 1000 + n)), &text).unwrap();
        texts.insert(1000 + n, text);
    }
    let mut state = one_node();
    proxops_pve_sim::seed_guest_configs(&mut state, dir.path()).unwrap();
    let (sim, client) = simulator(state).await;
    let outcomes = proxops_engine::adopt::adopt_live(&client, &ctx(), &Selection::All)
        .await
        .unwrap();
    assert_eq!(outcomes.len(), texts.len());
    let vms = outcomes
        .into_iter()
        .map(|(vmid, o)| match o {
            Outcome::Adopted(a) => Vm {
                vmid,
                text: texts[&vmid].clone(),
                adopted: *a,
            },
            Outcome::Refused(r) => panic!("{vmid} refused: {r}"),
            other => panic!("{vmid}: {other:?}"),
        })
        .collect();
    Some(Seeded { sim, client, vms })
}

fn ctx() -> AdoptContext {
    AdoptContext::new(CLUSTER).with_nodes(vec!["pve1".into()])
}

async fn plan(client: &PveClient, texts: &[String]) -> ClusterPlan {
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    plan_cluster(client, CLUSTER, &graph_of(&texts), &PlanOptions::default())
        .await
        .unwrap()
}

async fn config(client: &PveClient, vmid: u32) -> BTreeMap<String, String> {
    client
        .guest_config(&GuestRef::qemu("pve1", vmid))
        .await
        .unwrap()
        .values
}

/// Whether the manifest text loads and validates.
fn loads(text: &str) -> Result<(), String> {
    let file = proxops_model::diagnostic::SourceFile::new("m.yaml", text.to_owned());
    let loaded =
        proxops_model::manifest::load_manifest(&file, &proxops_model::Registry::builtin(), None);
    match loaded.resource {
        Some(_) if loaded.diagnostics.is_empty() => Ok(()),
        _ => Err(format!("{:?}", loaded.diagnostics)),
    }
}

fn no_create_delete_or_shrink(p: &ClusterPlan) {
    for a in &p.actions {
        assert!(
            !matches!(a.verb, Verb::Create | Verb::Delete | Verb::Replace),
            "{p:#?}"
        );
        for r in &a.resizes {
            assert!(r.to > r.from, "{p:#?}");
        }
    }
}

/// Tags every corpus VM by planning and applying its adopted manifest (the ones adopted before
/// stay declared: a tagged guest whose manifest is gone would be pruned). Returns the declared
/// manifests and the problems of the guests that did not adopt clean.
async fn tag_all(s: &Seeded) -> (Vec<String>, Vec<String>) {
    let mut declared = Vec::new();
    let mut problems = Vec::new();
    for vm in &s.vms {
        let text = vm.adopted.to_yaml();
        if let Err(e) = loads(&text) {
            problems.push(format!("{}: does not load: {e}", vm.vmid));
            continue;
        }
        let mut texts = declared.clone();
        texts.push(text.clone());
        let p = plan(&s.client, &texts).await;
        // Whatever the plan, an adopted guest is never deleted or re-created.
        no_create_delete_or_shrink(&p);
        let only_tags = p.actions.len() == 1
            && p.actions[0].verb == Verb::Adopt
            && p.actions[0].changes.iter().all(|c| c.key == "tags")
            && p.anomalies.is_empty();
        if !only_tags {
            problems.push(format!(
                "{}: {:?} {:?} {:?}",
                vm.vmid,
                p.actions.iter().map(|a| a.verb).collect::<Vec<_>>(),
                p.actions
                    .iter()
                    .flat_map(|a| a.changes.iter().map(|c| (&c.key, &c.from, &c.to)))
                    .collect::<Vec<_>>(),
                p.anomalies.iter().map(|a| &a.message).collect::<Vec<_>>()
            ));
            continue;
        }
        let report = execute(&s.client, &p, &ExecOptions::default()).await;
        assert!(report.all_succeeded(), "{}: {report:#?}", vm.vmid);
        let again = plan(&s.client, &texts).await;
        assert!(
            again.actions.is_empty() && again.anomalies.is_empty(),
            "{}: {again:#?}",
            vm.vmid
        );
        declared.push(text);
    }
    (declared, problems)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_vms_adopt_clean_and_the_report_accounts_for_every_key() {
    let Some(s) = seeded().await else { return };
    let (declared, problems) = tag_all(&s).await;
    let (mut typed, mut via_pve_config, mut reported) = (0, 0, 0);
    for vm in &s.vms {
        // The report of the config file as it is (snapshot sections included) ...
        let parsed = parse_guest_config(GuestType::Qemu, &vm.text);
        let mut expected: Vec<String> = parsed.config.keys().cloned().collect();
        expected.extend(parsed.snapshots.iter().map(|n| format!("snapshot:{n}")));
        expected.sort();
        let live = LiveGuest::new(vm.vmid, "pve1", GuestType::Qemu)
            .with_config(parsed.config.clone())
            .with_raw_lxc(parsed.raw_lxc.clone())
            .with_snapshots(parsed.snapshots.clone());
        let a = proxops_engine::adopt::adopt(&ctx(), &live).unwrap();
        // ... writes the manifest adopt wrote from the simulator's reads.
        assert_eq!(a.manifest, vm.adopted.manifest, "{}", vm.vmid);
        let mut keys: Vec<String> = a.report.keys.iter().map(|k| k.key.clone()).collect();
        keys.sort();
        assert_eq!(keys, expected, "{}: every key exactly once", vm.vmid);
        // The `#` lines of the main section are its description.
        let main = vm.text.split("\n[").next().unwrap_or("");
        if main.lines().any(|l| l.starts_with('#')) {
            assert!(expected.contains(&"description".to_owned()), "{}", vm.vmid);
        }
        // Each key placed in the manifest is one the manifest writes.
        let text = a.to_yaml();
        if loads(&text).is_err() {
            continue;
        }
        let graph = graph_of(&[&text]);
        let id = graph.resources().next().unwrap();
        let desired = guest(&Context::new(CLUSTER, &graph), graph.resource(id)).unwrap();
        for k in &a.report.keys {
            match &k.placement {
                Placement::Typed { field } if k.key == "template" => {
                    assert_eq!(field, "kind");
                    let template = parsed.config["template"] == "1";
                    assert_eq!(a.report.kind == "TemplateVM", template, "{}", vm.vmid);
                    typed += 1;
                }
                Placement::Typed { .. } => {
                    assert!(
                        desired.owned(&k.key).is_some(),
                        "{}: {} is placed as typed but the manifest does not write it",
                        vm.vmid,
                        k.key
                    );
                    typed += 1;
                }
                Placement::PveConfig => {
                    assert!(
                        a.manifest["spec"]["pve-config"].get(&k.key).is_some()
                            && desired.owned(&k.key).is_some(),
                        "{}: {} is placed in pve-config but is not there",
                        vm.vmid,
                        k.key
                    );
                    via_pve_config += 1;
                }
                Placement::Reported { .. } => reported += 1,
                other => panic!("a placement this test does not know: {other:?}"),
            }
        }
    }
    eprintln!(
        "corpus VMs: {} adopted, {} clean; keys: {typed} typed, {via_pve_config} via pve-config, {reported} reported",
        s.vms.len(),
        declared.len()
    );
    for p in &problems {
        eprintln!("  not clean: {p}");
    }
    for vm in &s.vms {
        for (k, why) in vm.adopted.report.reported() {
            eprintln!("  reported {} {k}: {why}", vm.vmid);
        }
    }
    assert_eq!(
        (declared.len(), typed, via_pve_config, reported),
        (CLEAN, TYPED, PVE_CONFIG, REPORTED),
        "{problems:#?}"
    );
    s.sim.shutdown().await.unwrap();
}

/// A new value for a key of the drift test, or `None` when the test does not change that key.
fn drifted(key: &str, live: &str) -> Option<String> {
    match key {
        "memory" => live.parse::<u64>().ok().map(|m| (m * 2).to_string()),
        "cores" => live.parse::<u64>().ok().map(|c| (c + 1).to_string()),
        "onboot" => Some(if live == "1" { "0" } else { "1" }.into()),
        // A NIC option (the firewall flag) behind ProxOps's back.
        "net0" if live.contains("firewall=1") => Some(live.replace("firewall=1", "firewall=0")),
        "net0" if live.contains("firewall=0") => Some(live.replace("firewall=0", "firewall=1")),
        // `pve-config` keys.
        "smbios1" => Some("uuid=00000000-1111-4222-8333-444444444444".into()),
        "keyboard" => Some(if live == "de" { "fr" } else { "de" }.into()),
        _ => None,
    }
}

/// For each clean VM, a typed key and a `pve-config` key (and a NIC option where it has one)
/// changed in the simulator behind ProxOps's back: the next plan is one Update restoring exactly
/// those keys to the adopted values, and after it the plan is empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_of_adopted_corpus_vms_is_restored_to_the_adopted_values() {
    let Some(s) = seeded().await else { return };
    let (declared, _) = tag_all(&s).await;
    assert_eq!(declared.len(), CLEAN);
    let mut restored = 0;
    for vm in &s.vms {
        let before = config(&s.client, vm.vmid).await;
        let Some(typed) = ["memory", "cores", "onboot"]
            .into_iter()
            .find(|k| before.contains_key(*k))
        else {
            continue;
        };
        let pve_config = vm.adopted.manifest["spec"]["pve-config"]
            .as_object()
            .and_then(|m| {
                // `vmgenid` is root@pam's to set (qemu-server `API2/Qemu.pm`).
                ["smbios1", "keyboard"]
                    .into_iter()
                    .find(|k| m.contains_key(*k))
            });
        let mut change = ConfigChange::default();
        for key in [Some(typed), pve_config, Some("net0")]
            .into_iter()
            .flatten()
        {
            if let Some(v) = before.get(key).and_then(|live| drifted(key, live)) {
                change = change.set(key, v);
            }
        }
        let keys: Vec<String> = change.set.keys().cloned().collect();
        s.client
            .set_config(&GuestRef::qemu("pve1", vm.vmid), &change)
            .await
            .unwrap();
        let p = plan(&s.client, &declared).await;
        no_create_delete_or_shrink(&p);
        assert!(p.anomalies.is_empty(), "{}: {p:#?}", vm.vmid);
        assert_eq!(p.actions.len(), 1, "{}: {p:#?}", vm.vmid);
        let a = &p.actions[0];
        assert_eq!((a.verb, a.vmid), (Verb::Update, Some(vm.vmid)), "{p:#?}");
        let changed: Vec<String> = a.changes.iter().map(|c| c.key.clone()).collect();
        assert_eq!(changed, keys, "{}: {p:#?}", vm.vmid);
        let report = execute(&s.client, &p, &ExecOptions::default()).await;
        assert!(report.all_succeeded(), "{}: {report:#?}", vm.vmid);
        let after = config(&s.client, vm.vmid).await;
        // Restored in PVE's canonical form (a property string may come back re-ordered).
        let canonical = |m: &BTreeMap<String, String>, k: &str| {
            m.get(k)
                .map(|v| canonical_value(proxops_pve::GuestType::Qemu, k, v))
        };
        for k in &keys {
            assert_eq!(
                canonical(&after, k),
                canonical(&before, k),
                "{}: {k} not restored",
                vm.vmid
            );
        }
        let again = plan(&s.client, &declared).await;
        assert!(
            again.actions.is_empty() && again.anomalies.is_empty(),
            "{}: {again:#?}",
            vm.vmid
        );
        restored += 1;
    }
    eprintln!("drift restored on {restored} corpus VMs");
    assert_eq!(restored, CLEAN);
    s.sim.shutdown().await.unwrap();
}

/// An edit of an adopted manifest's `spec`.
type Edit = fn(&mut serde_json::Value);

/// The adopted manifests edited to ask for what adopt must never lead to: every disk shrunk,
/// moved to another storage, or left out, and the EFI and TPM volumes moved. The plan reports
/// anomalies; it never deletes, re-creates or shrinks anything, and writes no volume key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edited_adopted_manifests_never_delete_recreate_or_shrink() {
    let Some(s) = seeded().await else { return };
    let (declared, _) = tag_all(&s).await;
    assert_eq!(declared.len(), CLEAN);
    let edits: [(&str, Edit); 3] = [
        ("shrunk", |spec| {
            for d in spec["disks"].as_array_mut().into_iter().flatten() {
                d["size"] = "1MiB".into();
            }
        }),
        ("moved", |spec| {
            for d in spec["disks"].as_array_mut().into_iter().flatten() {
                d["storage"] = "elsewhere".into();
            }
            for k in ["efi-disk", "tpm", "cloud-init"] {
                if let Some(v) = spec["hardware"].get_mut(k) {
                    v["storage"] = "elsewhere".into();
                }
            }
        }),
        ("dropped", |spec| {
            if let Some(m) = spec.as_object_mut() {
                m.remove("disks");
            }
            if let Some(h) = spec["hardware"].as_object_mut() {
                h.remove("efi-disk");
                h.remove("tpm");
            }
        }),
    ];
    let volume_key = |k: &str| {
        [
            "scsi", "virtio", "sata", "ide", "efidisk", "tpmstate", "unused",
        ]
        .iter()
        .any(|f| k.starts_with(f))
    };
    for (what, edit) in edits {
        let mut texts = Vec::new();
        for vm in &s.vms {
            let mut doc = vm.adopted.manifest.clone();
            edit(&mut doc["spec"]);
            // A VM left without disks does not validate: the edit is kept only where it loads.
            let text = proxops_store::canonical::to_yaml(&doc);
            texts.push(if loads(&text).is_ok() {
                text
            } else {
                vm.adopted.to_yaml()
            });
        }
        let p = plan(&s.client, &texts).await;
        no_create_delete_or_shrink(&p);
        for a in &p.actions {
            assert!(a.resizes.is_empty(), "{what}: {p:#?}");
            for c in &a.changes {
                assert!(
                    !volume_key(&c.key)
                        || c.key.starts_with("ide")
                            && c.to.as_deref().is_some_and(|v| v.contains("media=cdrom")),
                    "{what}: writes {}: {p:#?}",
                    c.key
                );
            }
        }
        if what != "dropped" {
            assert!(!p.anomalies.is_empty(), "{what}: {p:#?}");
        }
        let live: Vec<_> = s.vms.iter().map(|v| v.vmid).collect();
        let inventory = s.client.inventory().await.unwrap();
        for v in live {
            assert!(inventory.guests.contains_key(&v), "{what}: {v} is gone");
        }
    }
    s.sim.shutdown().await.unwrap();
}
