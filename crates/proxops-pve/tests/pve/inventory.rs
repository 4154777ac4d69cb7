//! Inventory costs (counted by the simulator), storage contents on demand, bounded config reads,
//! and the per-node / per-guest mutation limits.

use crate::support::{Sim, config};
use proxops_pve::{GuestRef, GuestType};
use proxops_pve_sim::{FaultConfig, Guest, Node, State, Storage};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const NODES: usize = 4;
const GUESTS: u32 = 1000;

/// 1,000 guests (qemu and lxc) on 4 nodes, some templates, locked or tagged.
fn big_state() -> State {
    let mut st = State::demo();
    let template = st.nodes[0].storages.clone();
    st.nodes = (1..=NODES)
        .map(|i| Node {
            node: format!("pve{i}"),
            storages: template.clone(),
            ..Node::default()
        })
        .collect();
    st.nodes[0].storages.push(Storage {
        storage: "nfs".into(),
        kind: "nfs".into(),
        shared: true,
        content: vec!["iso".into(), "images".into()],
        ..Storage::default()
    });
    for i in 0..GUESTS {
        let vmid = 1000 + i;
        let kind = if i % 5 == 0 {
            GuestType::Lxc
        } else {
            GuestType::Qemu
        };
        let name_key = if kind == GuestType::Lxc {
            "hostname"
        } else {
            "name"
        };
        let mut config = BTreeMap::from([
            (name_key.to_string(), format!("g{vmid}")),
            ("memory".to_string(), "512".to_string()),
            ("tags".to_string(), format!("proxops;team-{}", i % 3)),
        ]);
        if i % 50 == 0 {
            config.insert("template".into(), "1".into());
        }
        if i % 97 == 0 {
            config.insert("lock".into(), "backup".into());
        }
        st.guests.insert(
            vmid,
            Guest {
                vmid,
                kind,
                node: format!("pve{}", 1 + (i as usize % NODES)),
                status: if i % 2 == 0 { "running" } else { "stopped" }.into(),
                config,
                ..Guest::default()
            },
        );
    }
    st
}

#[tokio::test]
async fn inventory_of_1000_guests_costs_one_request_and_configs_cost_one_each() {
    let mut cfg = config();
    cfg.state = big_state();
    let sim = Sim::with(cfg).await;

    let t = Instant::now();
    let inv = sim.c.inventory().await.unwrap();
    let listing = t.elapsed();
    assert_eq!(sim.h.count("GET", "/cluster/resources"), 1);
    assert_eq!(sim.h.total_requests(), 1);
    assert_eq!(sim.c.counters().total(), 1);

    assert_eq!(inv.guests.len(), GUESTS as usize);
    assert_eq!(inv.nodes.len(), NODES);
    assert!(inv.nodes.iter().all(|n| n.status == "online"));
    for n in 1..=NODES {
        let on = inv
            .guests
            .values()
            .filter(|g| g.node == format!("pve{n}"))
            .count();
        assert_eq!(on, GUESTS as usize / NODES);
    }
    let g = inv.guest(1000).unwrap();
    assert_eq!(g.kind, GuestType::Lxc);
    assert!(g.template);
    assert_eq!(g.lock.as_deref(), Some("backup"));
    assert_eq!(g.tags, ["proxops", "team-0"]);
    assert_eq!(g.status, "running");
    assert_eq!(inv.guest(1001).unwrap().kind, GuestType::Qemu);
    assert_eq!(inv.guest(1001).unwrap().name.as_deref(), Some("g1001"));
    assert_eq!(inv.tagged("team-1").count(), 333);
    assert_eq!(inv.storages.len(), NODES * 2 + 1);
    let nfs = inv.storage("pve1", "nfs").unwrap();
    assert!(nfs.shared);
    assert_eq!(nfs.content, ["iso", "images"]);

    // Configs of N guests: N requests, at most `concurrency` in flight.
    sim.h.reset_counters();
    let n = 200usize;
    let refs: Vec<GuestRef> = inv.guests.values().take(n).map(|g| g.guest_ref()).collect();
    let t = Instant::now();
    let configs = sim.c.guest_configs(refs, 8).await;
    let reading = t.elapsed();
    assert_eq!(configs.len(), n);
    assert!(configs.values().all(|c| c.is_ok()));
    assert_eq!(configs[&1001].as_ref().unwrap().get("memory"), Some("512"));
    let reads = sim.h.count("GET", "/nodes/{node}/qemu/{vmid}/config")
        + sim.h.count("GET", "/nodes/{node}/lxc/{vmid}/config");
    assert_eq!(reads, n as u64);
    assert_eq!(sim.h.total_requests(), n as u64);
    eprintln!(
        "inventory of {GUESTS} guests on {NODES} nodes: 1 request in {listing:?}; \
         configs of {n} guests: {reads} requests in {reading:?} (concurrency 8)"
    );
}

#[tokio::test]
async fn config_reads_are_bounded() {
    let mut cfg = config();
    cfg.state = big_state();
    cfg.faults = FaultConfig::default()
        .with_latency(Some((Duration::from_millis(30), Duration::from_millis(30))));
    let sim = Sim::with(cfg).await;
    let refs: Vec<GuestRef> = (0..16)
        .map(|i| GuestRef::qemu(&format!("pve{}", 1 + (i % 4)), 1001 + i))
        .filter(|g| g.vmid % 5 != 0)
        .collect();
    let n = refs.len();
    let t = Instant::now();
    let out = sim.c.guest_configs(refs, 4).await;
    assert_eq!(out.len(), n);
    // ceil(n / 4) rounds of 30 ms at least: the bound holds; far less than n rounds: it is parallel.
    let rounds = n.div_ceil(4) as u32;
    assert!(
        t.elapsed() >= Duration::from_millis(30) * rounds,
        "{:?}",
        t.elapsed()
    );
    assert!(
        t.elapsed() < Duration::from_millis(30) * n as u32,
        "{:?}",
        t.elapsed()
    );
}

#[tokio::test]
async fn storage_contents_on_demand_once() {
    let sim = Sim::start().await;
    sim.add_ct_template();
    let inv = sim.c.inventory().await.unwrap();
    assert_eq!(
        sim.h
            .count("GET", "/nodes/{node}/storage/{storage}/content"),
        0
    );
    let a = inv.contents(&sim.c, "pve1", "local").await.unwrap();
    let b = inv.contents(&sim.c, "pve1", "local").await.unwrap();
    assert_eq!(a.len(), 1);
    assert!(Arc::ptr_eq(&a, &b));
    assert_eq!(
        sim.h
            .count("GET", "/nodes/{node}/storage/{storage}/content"),
        1
    );
    inv.contents(&sim.c, "pve1", "local-lvm").await.unwrap();
    assert_eq!(
        sim.h
            .count("GET", "/nodes/{node}/storage/{storage}/content"),
        2
    );
}

async fn max_concurrency(sim: &Sim, targets: Vec<(String, u32)>) -> usize {
    let current = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let mut set = tokio::task::JoinSet::new();
    for (node, vmid) in targets {
        let c = sim.c.clone();
        let (current, peak) = (current.clone(), peak.clone());
        set.spawn(async move {
            let _permit = c.mutation_permit(&node, vmid).await;
            let now = current.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(20)).await;
            current.fetch_sub(1, Ordering::SeqCst);
        });
    }
    while set.join_next().await.is_some() {}
    peak.load(Ordering::SeqCst)
}

#[tokio::test]
async fn mutation_limits_per_node_and_per_guest() {
    let sim = Sim::start().await;
    assert_eq!(sim.c.limits().per_node(), 4);
    // 12 guests on one node: at most 4 at once.
    let one_node = (0..12).map(|i| ("pve1".to_string(), 100 + i)).collect();
    assert_eq!(max_concurrency(&sim, one_node).await, 4);
    // Two nodes: 4 each.
    let two_nodes = (0..16)
        .map(|i| (format!("pve{}", 1 + i % 2), 100 + i))
        .collect();
    assert_eq!(max_concurrency(&sim, two_nodes).await, 8);
    // One guest: one at a time.
    let one_guest = (0..6).map(|_| ("pve1".to_string(), 100)).collect();
    assert_eq!(max_concurrency(&sim, one_guest).await, 1);
    assert_eq!(sim.c.limits().in_flight("pve1"), 0);
}

#[tokio::test]
async fn live_power_replaces_the_stats_cache_one_request_per_list() {
    let mut cfg = crate::support::config();
    // An hour: the snapshot cannot refresh during the test.
    cfg.stats_interval = Duration::from_secs(3600);
    let sim = Sim::with(cfg).await;
    let g = sim.create_vm(100, &[]).await;
    sim.create_vm(101, &[]).await;
    let stale = sim.c.inventory().await.unwrap();
    assert_eq!(stale.guest(100).unwrap().status, "stopped");
    let u = sim.c.start(&g).await.unwrap();
    sim.c.wait_task(&u, &crate::support::wait()).await.unwrap();
    // A guest moved away behind the cache's back: its list no longer shows it.
    sim.h
        .with_state(|st| st.guests.get_mut(&101).unwrap().node = "elsewhere".into());
    let mut inv = sim.c.inventory().await.unwrap();
    assert_eq!(
        inv.guest(100).unwrap().status,
        "stopped",
        "the cache is stale"
    );
    sim.h.reset_counters();
    let lists = [("pve1".to_string(), proxops_pve::GuestType::Qemu)].into();
    let failed = inv.read_live_power(&sim.c, lists, 4).await;
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(inv.guest(100).unwrap().status, "running");
    assert_eq!(sim.h.count("GET", "/nodes/{node}/qemu"), 1);
    assert_eq!(sim.h.total_requests(), 1);
    // 101 is listed by the cache on "elsewhere", a list not asked for: left as the cache says.
    assert_eq!(inv.guest(101).unwrap().status, "stopped");
    let lists = [("elsewhere".to_string(), proxops_pve::GuestType::Qemu)].into();
    let failed = inv.read_live_power(&sim.c, lists, 4).await;
    assert_eq!(failed.len(), 1, "no such node");
    assert_eq!(inv.guest(101).unwrap().status, "unknown");
}
