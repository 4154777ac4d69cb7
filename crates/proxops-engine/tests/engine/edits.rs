//! A property of the safety contract: over random sequences of manifest edits (rename, kind
//! change, vmid change, node change, removal, new guests, clones) with injected PVE failures,
//! after every cycle no guest at a declared vmid was deleted and no identity is carried by two
//! guests that ProxOps would treat as that resource.

use super::support::manifest;
use proptest::prelude::*;
use proxops_engine::execute::{ExecOptions, execute};
use proxops_engine::identity::identities;
use proxops_engine::plan::Verb;
use proxops_engine::planner::{PlanOptions, plan_cluster};
use proxops_graph::Graph;
use proxops_model::Registry;
use proxops_pve_sim::{FaultConfig, SimConfig, State, TaskDurations};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

const CLUSTER: &str = "t";

/// One declared guest.
#[derive(Debug, Clone, PartialEq)]
struct Declared {
    name: String,
    template: bool,
    vmid: u32,
    node: &'static str,
    memory: u32,
    /// The name of the template it clones.
    clone: Option<String>,
}

impl Declared {
    fn text(&self) -> String {
        let kind = if self.template { "TemplateVM" } else { "VM" };
        let body = match &self.clone {
            Some(t) => format!("  clone: {t}\n"),
            None => "  disks:\n    - storage: local-lvm\n      size: 1GiB\n  networks:\n    - model: virtio\n      bridge: vmbr0\n".to_owned(),
        };
        format!(
            "apiVersion: proxops/v1alpha1\nkind: {kind}\nmetadata:\n  name: {}\nspec:\n  node: {}\n  vmid: {}\n  memory: {}MiB\n  cpu:\n    cores: 1\n    type: host\n{body}",
            self.name, self.node, self.vmid, self.memory
        )
    }
}

#[derive(Debug, Clone)]
enum Edit {
    Add { template: bool },
    AddClone,
    Rename(usize),
    KindChange(usize),
    VmidChange(usize),
    NodeChange(usize),
    Memory(usize),
    Remove(usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        any::<bool>().prop_map(|template| Edit::Add { template }),
        Just(Edit::AddClone),
        (0usize..8).prop_map(Edit::Rename),
        (0usize..8).prop_map(Edit::KindChange),
        (0usize..8).prop_map(Edit::VmidChange),
        (0usize..8).prop_map(Edit::NodeChange),
        (0usize..8).prop_map(Edit::Memory),
        (0usize..8).prop_map(Edit::Remove),
    ]
}

/// The manifests after `edit`, kept valid as an operator would (a clone's reference is dropped
/// with its template; a clone sits on its template's node).
fn applied(mut set: Vec<Declared>, edit: &Edit, fresh: &mut u32) -> Vec<Declared> {
    let mut next = || {
        *fresh += 1;
        *fresh
    };
    let pick = |set: &Vec<Declared>, i: usize| (!set.is_empty()).then(|| i % set.len());
    match edit {
        Edit::Add { template } => {
            let n = next();
            set.push(Declared {
                name: format!("g{n}"),
                template: *template,
                vmid: 100 + n,
                node: "pve1",
                memory: 512,
                clone: None,
            });
        }
        Edit::AddClone => {
            if let Some(t) = set
                .iter()
                .find(|d| d.template && d.clone.is_none())
                .cloned()
            {
                let n = next();
                set.push(Declared {
                    name: format!("c{n}"),
                    template: false,
                    vmid: 100 + n,
                    node: t.node,
                    memory: 1024,
                    clone: Some(t.name),
                });
            }
        }
        Edit::Rename(i) => {
            if let Some(i) = pick(&set, *i) {
                let old = set[i].name.clone();
                let new = format!("{old}r");
                set[i].name = new.clone();
                for d in &mut set {
                    if d.clone.as_deref() == Some(old.as_str()) {
                        d.clone = Some(new.clone());
                    }
                }
            }
        }
        Edit::KindChange(i) => {
            if let Some(i) = pick(&set, *i) {
                let name = set[i].name.clone();
                set[i].template = !set[i].template;
                set[i].clone = None;
                if !set[i].template {
                    drop_clones_of(&mut set, &name);
                }
            }
        }
        Edit::VmidChange(i) => {
            if let Some(i) = pick(&set, *i) {
                set[i].vmid = 100 + next();
            }
        }
        Edit::NodeChange(i) => {
            if let Some(i) = pick(&set, *i) {
                set[i].node = if set[i].node == "pve1" {
                    "pve2"
                } else {
                    "pve1"
                };
                let name = set[i].name.clone();
                drop_clones_of(&mut set, &name);
                set[i].clone = None;
            }
        }
        Edit::Memory(i) => {
            if let Some(i) = pick(&set, *i) {
                set[i].memory += 256;
            }
        }
        Edit::Remove(i) => {
            if let Some(i) = pick(&set, *i) {
                let gone = set.remove(i);
                drop_clones_of(&mut set, &gone.name);
            }
        }
    }
    set
}

/// Clones of `template` become guests of their own (their manifests lose `clone:`).
fn drop_clones_of(set: &mut [Declared], template: &str) {
    for d in set.iter_mut() {
        if d.clone.as_deref() == Some(template) {
            d.clone = None;
        }
    }
}

fn two_nodes() -> State {
    let mut state = super::support::one_node();
    let mut second = state.nodes[0].clone();
    second.node = "pve2".into();
    state.nodes.push(second);
    state
}

/// Checks the contract after a cycle.
fn check(
    declared: &[Declared],
    graph: &Graph,
    before: &State,
    after: &State,
    deleted: &[u32],
) -> Result<(), TestCaseError> {
    let vmids: BTreeSet<u32> = declared.iter().map(|d| d.vmid).collect();
    for vmid in deleted {
        prop_assert!(
            !vmids.contains(vmid),
            "a delete of declared vmid {vmid} was planned"
        );
    }
    for vmid in before.guests.keys() {
        if vmids.contains(vmid) {
            prop_assert!(
                after.guests.contains_key(vmid),
                "the guest at declared vmid {vmid} was deleted"
            );
        }
    }
    // Guests at vmids declared as clones of a template are that clone's, whatever identity
    // PVE copied onto them: their own step repairs them.
    let clone_vmids: BTreeMap<u32, &str> = declared
        .iter()
        .filter_map(|d| d.clone.as_deref().map(|t| (d.vmid, t)))
        .collect();
    let mut carriers: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for g in after.guests.values() {
        let tags: Vec<String> = g
            .config
            .get("tags")
            .map(|t| t.split(';').map(str::to_owned).collect())
            .unwrap_or_default();
        for key in identities(CLUSTER, graph, &tags) {
            if clone_vmids.get(&g.vmid) == Some(&key.name.as_str()) {
                continue;
            }
            carriers.entry(key.to_string()).or_default().push(g.vmid);
        }
    }
    for (key, vmids) in carriers {
        prop_assert!(vmids.len() <= 1, "{key} is carried by vmids {vmids:?}");
    }
    Ok(())
}

async fn run(edits: Vec<(Edit, bool)>, seed: u64) -> Result<(), TestCaseError> {
    let sim = proxops_pve_sim::start(
        SimConfig::default()
            .with_state(two_nodes())
            .with_task_durations(TaskDurations::uniform(Duration::from_millis(2))),
    )
    .await
    .unwrap();
    let client = proxops_test_support::sim::client(&sim);
    let options = PlanOptions::default()
        .with_prune_budget(0)
        .with_allowed_nodes(vec!["pve1".into(), "pve2".into()]);
    let registry = Registry::builtin();
    let (mut set, mut fresh) = (Vec::new(), 0);
    // Two clean cycles at the end let failed steps be retried and repaired.
    let steps = edits
        .into_iter()
        .map(Some)
        .chain([None, None])
        .collect::<Vec<_>>();
    for (n, step) in steps.into_iter().enumerate() {
        let failing = match &step {
            Some((e, failing)) => {
                set = applied(set, e, &mut fresh);
                *failing
            }
            None => false,
        };
        sim.set_faults(
            FaultConfig::default()
                .with_seed(seed.wrapping_add(n as u64))
                .with_task_failure_rate(if failing { 0.35 } else { 0.0 }),
        );
        let resources: Vec<_> = set.iter().map(|d| manifest(&d.text())).collect();
        let graph = Graph::build(&registry, &resources).unwrap();
        let before = sim.state();
        let plan = plan_cluster(&client, CLUSTER, &graph, &options)
            .await
            .unwrap();
        let deleted: Vec<u32> = plan
            .actions
            .iter()
            .filter(|a| a.verb == Verb::Delete)
            .filter_map(|a| a.vmid)
            .collect();
        if !plan.is_empty() {
            execute(&client, &plan, &ExecOptions::default()).await;
        }
        check(&set, &graph, &before, &sim.state(), &deleted)?;
    }
    sim.shutdown().await.unwrap();
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn no_declared_guest_is_deleted_and_no_identity_is_on_two_guests(
        edits in prop::collection::vec((edit(), any::<bool>()), 1..8),
        seed in any::<u64>(),
    ) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(run(edits, seed))?;
    }
}
