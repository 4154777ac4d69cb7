//! A property test over placement: random runs of node changes (a pinned `node:` moved, a
//! `nodes:` list changed) with injected migration failures (simulator faults). After every
//! converge no ProxOps identity is on two guests and no declared guest was deleted.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::placement::{plan, sim, vm};
use proptest::prelude::*;
use proxops_engine::execute::{ExecOptions, execute};
use proxops_pve::PveClient;
use std::collections::BTreeMap;

const NODES: [&str; 3] = ["pve1", "pve2", "pve3"];

/// One step: where `web` is declared, and whether its migrations fail this step.
#[derive(Debug, Clone)]
enum Place {
    Pinned(usize),
    Placed(Vec<usize>),
}

fn place() -> impl Strategy<Value = Place> {
    prop_oneof![
        (0..NODES.len()).prop_map(Place::Pinned),
        proptest::sample::subsequence(vec![0, 1, 2], 1..=3)
            .prop_shuffle()
            .prop_map(Place::Placed),
    ]
}

fn spec(p: &Place) -> String {
    match p {
        Place::Pinned(i) => format!("node: {}", NODES[*i]),
        Place::Placed(list) => {
            let names: Vec<&str> = list.iter().map(|i| NODES[*i]).collect();
            format!("nodes: [{}]", names.join(", "))
        }
    }
}

/// The identity tags of every guest, by vmid.
async fn identities(client: &PveClient) -> BTreeMap<String, Vec<u32>> {
    let inv = client.inventory().await.unwrap();
    let mut out: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for g in inv.guests.values() {
        for t in g.tags.iter().filter(|t| t.starts_with("proxops.")) {
            out.entry(t.clone()).or_default().push(g.vmid);
        }
    }
    out
}

async fn run(steps: Vec<(Place, bool, bool)>) {
    let (sim, client) = sim().await;
    // `keep` never moves: it must survive every step.
    let keep = vm("keep", 110, "node: pve2", "ceph", "  state: stopped\n");
    for (i, (p, running, fail)) in steps.iter().enumerate() {
        let state = if *running { "started" } else { "stopped" };
        let web = vm("web", 100, &spec(p), "ceph", &format!("  state: {state}\n"));
        sim.set_faults(
            proxops_pve_sim::FaultConfig::default()
                .with_seed(i as u64)
                .with_failing_tasks(if *fail {
                    vec!["qmigrate".into()]
                } else {
                    Vec::new()
                }),
        );
        // A converge: a bounded number of cycles, until one plans nothing.
        for _ in 0..3 {
            let texts = [keep.clone(), web.clone()];
            let planned = plan(&client, &texts).await;
            if planned.actions.is_empty() {
                break;
            }
            let _ = execute(&client, &planned, &ExecOptions::default()).await;
        }
        sim.set_faults(proxops_pve_sim::FaultConfig::default());
        let ids = identities(&client).await;
        for (tag, vmids) in &ids {
            assert!(vmids.len() <= 1, "step {i} ({p:?}): {tag} on {vmids:?}");
        }
        let inv = client.inventory().await.unwrap();
        for vmid in [100, 110] {
            assert!(
                inv.guest(vmid).is_some(),
                "step {i} ({p:?}): vmid {vmid} is gone"
            );
        }
    }
    sim.shutdown().await.unwrap();
}

proptest! {
    // Each case starts a simulator and runs a few converges: few cases keep CI fast.
    #![proptest_config(ProptestConfig { cases: 8, failure_persistence: None, ..ProptestConfig::default() })]
    #[test]
    fn node_changes_with_failing_migrations_never_duplicate_or_delete_a_guest(
        steps in proptest::collection::vec((place(), any::<bool>(), any::<bool>()), 1..5)
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(run(steps));
    }
}
