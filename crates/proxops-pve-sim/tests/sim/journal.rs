//! The journal of write requests: what a client sent, in order, parameter by parameter, with
//! the status answered; reads and requests refused before a handler stay out, secrets masked.
//! (The 10,000-entry bound is tested in `src/journal.rs`.)

use crate::support::{Auth, PASSWORD, Sim, read};
use proxops_pve_sim::JournalEntry;
use std::collections::BTreeMap;

fn params(entry: &JournalEntry) -> Vec<(&str, &str)> {
    entry
        .params
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

#[tokio::test]
async fn create_and_config_writes_are_journaled_in_order_reads_are_not() {
    let sim = Sim::start().await;
    sim.create_vm("101", &[("name", "web"), ("cores", "1")])
        .await;
    sim.get("/nodes/pve1/qemu/101/config").await.ok();
    // A repeated `-list` key reaches the handler joined with `,`, and is journaled so.
    sim.put(
        "/nodes/pve1/qemu/101/config",
        &[("cores", "2"), ("delete", "tags"), ("delete", "onboot")],
    )
    .await
    .ok();

    let journal = sim.h.journal();
    assert_eq!(journal.len(), 2, "{journal:#?}");
    let (create, config) = (&journal[0], &journal[1]);
    assert_eq!(
        (
            create.method.as_str(),
            create.path.as_str(),
            create.template.as_str()
        ),
        ("POST", "/nodes/pve1/qemu", "/nodes/{node}/qemu")
    );
    assert_eq!(create.status, 200);
    assert_eq!(
        params(create),
        [("cores", "1"), ("name", "web"), ("vmid", "101")]
    );
    assert_eq!(
        (
            config.method.as_str(),
            config.path.as_str(),
            config.template.as_str()
        ),
        (
            "PUT",
            "/nodes/pve1/qemu/101/config",
            "/nodes/{node}/qemu/{vmid}/config"
        )
    );
    assert_eq!(config.status, 200);
    // The path's variables (node, vmid) are in the path, not among the parameters.
    assert_eq!(params(config), [("cores", "2"), ("delete", "tags,onboot")]);
    assert!(journal.iter().all(|e| e.method != "GET"));

    // The debug endpoint answers the same entries; DELETE /_sim/counters clears them.
    let resp = sim
        .client
        .get(format!("{}/_sim/journal", sim.h.root_url()))
        .send()
        .await
        .unwrap();
    let data = read(resp).await.ok();
    assert_eq!(data.as_array().unwrap().len(), 2);
    assert_eq!(data[1]["method"], "PUT");
    assert_eq!(data[1]["path"], "/nodes/pve1/qemu/101/config");
    assert_eq!(data[1]["template"], "/nodes/{node}/qemu/{vmid}/config");
    assert_eq!(data[1]["status"], 200);
    assert_eq!(data[1]["params"]["delete"], "tags,onboot");
    let resp = sim
        .client
        .delete(format!("{}/_sim/counters", sim.h.root_url()))
        .send()
        .await
        .unwrap();
    read(resp).await.ok();
    assert!(sim.h.journal().is_empty());
    assert_eq!(sim.h.total_requests(), 0);
}

#[tokio::test]
async fn a_write_the_handler_refuses_is_journaled_with_its_status() {
    let sim = Sim::start().await;
    let missing = sim
        .put("/nodes/pve1/qemu/999/config", &[("cores", "2")])
        .await
        .fail(500);
    // Refused before any handler: a parameter the schema rejects is not journaled.
    sim.put("/nodes/pve1/qemu/999/config", &[("cores", "zero")])
        .await
        .errors();
    let journal = sim.h.journal();
    assert_eq!(journal.len(), 1, "{journal:#?} ({missing})");
    assert_eq!(journal[0].method, "PUT");
    assert_eq!(journal[0].path, "/nodes/pve1/qemu/999/config");
    assert_eq!(journal[0].status, 500);
    assert_eq!(
        journal[0].params,
        BTreeMap::from([("cores".to_string(), "2".to_string())])
    );
    sim.h.clear_journal();
    assert!(sim.h.journal().is_empty());
}

#[tokio::test]
async fn passwords_are_masked() {
    let sim = Sim::start().await;
    let login = |password: &'static str| {
        let sim = &sim;
        async move {
            sim.send(
                "POST",
                "/access/ticket",
                &[("username", "root@pam"), ("password", password)],
                &Auth::None,
            )
            .await
        }
    };
    login(PASSWORD).await.ok();
    login("wrong").await.fail(401);
    let journal = sim.h.journal();
    assert_eq!(
        journal.iter().map(|e| e.status).collect::<Vec<_>>(),
        [200, 401]
    );
    for e in &journal {
        assert_eq!(e.params["username"], "root@pam");
        assert_eq!(e.params["password"], "**********");
    }
    let dump = format!("{journal:?}");
    assert!(!dump.contains(PASSWORD) && !dump.contains(&sim.h.token.secret));
}
