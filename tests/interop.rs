//! Third-party PVE software against our simulator: the proxmoxer client drives it through a VM
//! lifecycle with token and with ticket auth and reads back every cluster object the homelab
//! declares in PVE's shapes, and one scripted request sequence sent to it and to the independent
//! fake `fakepve` differs only as `docs/simulator-vs-fakepve.md` documents.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::{
    ChildGuard, example, free_port, python, python_script, shared, wait_for_port,
};
use proxops_engine::backend::{Backend, connect};
use proxops_engine::cycle::{converge, plan_options};
use proxops_engine::execute::ExecOptions;
use proxops_graph::check_repository;
use proxops_model::{FsSource, LoadOptions, Registry, load_repository};
use proxops_pve_sim::{ApiToken, SimConfig, SimHandle, State, User, start};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const PASSWORD: &str = "interop-secret";

/// Node pve1 with `local` and `local-lvm`, and template VM 9000 with its base disk.
const SEED: &str = r#"{
  "cluster_name": "sim",
  "nodes": [{"node": "pve1", "storages": [
    {"storage": "local", "type": "dir", "content": ["iso", "vztmpl", "import", "backup", "snippets"]},
    {"storage": "local-lvm", "type": "lvmthin", "content": ["images", "rootdir"]}]}],
  "guests": {"9000": {"vmid": 9000, "type": "qemu", "node": "pve1", "status": "stopped",
    "config": {"name": "tpl", "template": "1", "memory": "2048",
      "scsi0": "local-lvm:base-9000-disk-0,size=8G",
      "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0"}}},
  "volumes": [{"node": "pve1", "storage": "local-lvm", "volid": "local-lvm:base-9000-disk-0",
    "content": "images", "format": "raw", "size": 8589934592, "vmid": 9000}]
}"#;

/// The same template for fakepve (it has node pve1 and its storages built in).
const FAKEPVE_GUESTS: &str = r#"{"guests": [{"vmid": 9000, "name": "tpl", "status": "stopped",
  "template": 1, "config": {"memory": "2048", "scsi0": "local-lvm:base-9000-disk-0,size=8G",
  "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0"}}]}"#;

async fn simulator(token: &str) -> SimHandle {
    let config = SimConfig::default()
        .with_state(State::from_json(SEED).unwrap())
        .with_token(token.parse::<ApiToken>().unwrap())
        .with_users(vec![User {
            userid: "root@pam".into(),
            password: PASSWORD.into(),
        }]);
    start(config).await.unwrap()
}

/// Runs a Python script (bounded by its own request and task timeouts) and returns its output.
async fn run_python(python: &Path, args: Vec<String>) -> Output {
    let python = python.to_path_buf();
    tokio::task::spawn_blocking(move || {
        Command::new(python)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

fn assert_success(what: &str, out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxmoxer_drives_the_simulator_with_token_and_ticket_auth() {
    let Some(python) = python() else { return };
    for auth in ["--token", "--password"] {
        let sim = simulator("root@pam!ci=interop-token").await;
        let secret = if auth == "--token" {
            "root@pam!ci=interop-token"
        } else {
            PASSWORD
        };
        let args = vec![
            python_script("proxmoxer_drive.py").display().to_string(),
            "127.0.0.1".into(),
            sim.addr.port().to_string(),
            auth.into(),
            secret.into(),
        ];
        let out = run_python(&python, args).await;
        let stdout = assert_success(&format!("proxmoxer ({auth})"), &out);
        assert!(stdout.contains(r#""vms": [9000]"#), "{stdout}");
        // What the client did reached the simulator's own state and counters.
        let state = sim.state();
        assert_eq!(state.guests.keys().copied().collect::<Vec<_>>(), [9000]);
        assert!(
            state
                .volumes
                .iter()
                .any(|v| v.volid == "local:iso/tiny.iso")
        );
        assert_eq!(sim.count("POST", "/nodes/{node}/qemu/{vmid}/clone"), 1);
        assert_eq!(
            sim.count("POST", "/nodes/{node}/storage/{storage}/download-url"),
            1
        );
        let logins = sim.count("POST", "/access/ticket");
        assert_eq!(logins, u64::from(auth == "--password"), "{auth}");
        sim.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_requests_to_fakepve_differ_only_as_documented() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let guests = dir.path().join("guests.json");
    std::fs::write(&guests, FAKEPVE_GUESTS).unwrap();
    let port = free_port();
    let fakepve = python.with_file_name("fakepve");
    let child = Command::new(&fakepve)
        .arg(&guests)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--password", PASSWORD, "--time-scale", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", fakepve.display()));
    let _fakepve = ChildGuard(child);
    assert!(
        wait_for_port(port, Duration::from_secs(30)),
        "fakepve did not listen on {port}"
    );
    let sim = simulator("root@pam!ci=interop-token").await;
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/simulator-vs-fakepve.md");
    let args = vec![
        python_script("side_by_side.py").display().to_string(),
        sim.base_url(),
        format!("https://127.0.0.1:{port}/api2/json"),
        PASSWORD.into(),
        doc.display().to_string(),
    ];
    let out = run_python(&python, args).await;
    let stdout = assert_success("the side-by-side comparison", &out);
    assert!(stdout.contains(r#""steps": 31"#), "{stdout}");
    sim.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_pve_exporter_scrapes_the_simulator_with_its_default_collectors() {
    let Some(python) = python() else { return };
    let token = "root@pam!exporter=scrape-secret";
    let sim = simulator(token).await;
    // A running VM and a stopped container besides the template.
    sim.with_state(|st| {
        let mut vm = st.guests[&9000].clone();
        vm.vmid = 100;
        vm.status = "running".into();
        vm.config.remove("template");
        vm.config.insert("name".into(), "web".into());
        vm.config.insert("onboot".into(), "1".into());
        st.guests.insert(100, vm);
    });
    let (id, secret) = token.split_once('=').unwrap();
    let args = vec![
        python_script("exporter_scrape.py").display().to_string(),
        "127.0.0.1".into(),
        sim.addr.port().to_string(),
        id.into(),
        secret.into(),
        "pve1".into(),
    ];
    let out = run_python(&python, args).await;
    let metrics = assert_success("prometheus-pve-exporter", &out);
    for series in [
        r#"pve_up{id="qemu/100"} 1.0"#,
        r#"pve_up{id="qemu/9000"} 0.0"#,
        r#"pve_up{id="node/pve1"} 1.0"#,
        r#"pve_onboot_status{id="qemu/100",node="pve1",type="qemu"} 1.0"#,
        "pve_not_backed_up_total",
        "pve_subscription_info",
        "pve_version_info",
    ] {
        assert!(metrics.contains(series), "no `{series}` in\n{metrics}");
    }
}

/// Issue 32's acceptance: the homelab's `home` cluster applied by ProxOps to a simulator, then
/// proxmoxer reads every cluster object back through the ordinary API
/// (`tests/python/proxmoxer_objects.py`): each answer has the shape of PVE 9.1.3's schema
/// `returns` (the fields PVE sends beyond it are the script's listed exceptions) and the values
/// the manifests declare, marks included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxmoxer_reads_back_every_homelab_object_in_pve_shapes() {
    let Some(python) = python() else { return };
    let Some(schema) = shared("pve-api/pve-api-9.1.3.tree.json") else {
        return;
    };
    let registry = Registry::builtin();
    let mut repo = load_repository(
        &FsSource::new(example("homelab")).unwrap(),
        &registry,
        &LoadOptions::default(),
    )
    .unwrap();
    let graph = check_repository(&registry, &mut repo)
        .into_iter()
        .find(|c| c.name == "home")
        .and_then(|c| c.graph)
        .expect("cluster home is valid");
    let cluster = repo.cluster("home").unwrap();
    let backend = Backend::Sim {
        state_file: None,
        task_time: Duration::from_millis(10),
    };
    let conn = connect(&registry, cluster, &backend).await.unwrap();
    // The exporter's API token: its secret encrypted to the example's recipient, in a file.
    let tokens = tempfile::tempdir().unwrap();
    let options = plan_options(cluster, None)
        .with_secrets(Some(proxops_engine::secrets::ClusterSecrets::load(
            Some(&example("homelab")),
            cluster,
        )))
        .with_token_files(Some(tokens.path().to_path_buf()));
    let cycles = converge(
        &conn.client,
        "home",
        &graph,
        &options,
        &ExecOptions::default(),
        3,
    )
    .await
    .unwrap();
    // Converged: what ProxOps reads back (a backup job's `prune-backups` as the object PVE
    // decodes it into) matches what it wrote.
    let last = &cycles.last().unwrap().plan;
    assert!(last.is_empty() && last.errors.is_empty(), "{last:#?}");
    let sim = conn.sim.as_ref().unwrap();
    let args = vec![
        python_script("proxmoxer_objects.py").display().to_string(),
        schema.display().to_string(),
        "127.0.0.1".into(),
        sim.addr.port().to_string(),
        sim.token.to_string(),
    ];
    let out = run_python(&python, args).await;
    let stdout = assert_success("proxmoxer reading the homelab's objects", &out);
    assert!(stdout.contains(r#""read": 31"#), "{stdout}");
    conn.sim.unwrap().shutdown().await.unwrap();
}
