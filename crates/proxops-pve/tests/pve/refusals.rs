//! Refusals PVE words as final are sent once, never retried: each against the simulator, which
//! counts the requests it received (the client's retry policy would allow six attempts).

use crate::support::{CT_TEMPLATE, Sim, config, map, wait};
use proxops_pve::{CloneRequest, ConfigChange, ErrorKind, GuestRef};
use proxops_pve_sim::{AclEntry, ApiToken, Node, Storage};

/// Runs `call` and asserts it failed permanently with `expect` in the message, after exactly
/// one request to `method template`.
async fn once<T: std::fmt::Debug>(
    sim: &Sim,
    method: &str,
    template: &str,
    expect: &str,
    call: impl std::future::Future<Output = Result<T, proxops_pve::PveError>>,
) -> proxops_pve::PveError {
    let before = sim.h.count(method, template);
    let e = call.await.unwrap_err();
    assert!(e.message().contains(expect), "{e}");
    assert!(!e.is_retryable(), "{e}");
    assert_eq!(
        sim.h.count(method, template) - before,
        1,
        "exactly one attempt: {e}"
    );
    e
}

#[tokio::test]
async fn qemu_digest_mismatch_is_final() {
    let sim = Sim::start().await;
    let g = sim.create_vm(100, &[("cores", "1")]).await;
    let stale = sim.c.guest_config(&g).await.unwrap().digest.unwrap();
    sim.c
        .set_config(&g, &ConfigChange::default().set("cores", "2"))
        .await
        .unwrap();
    let change = ConfigChange::default().set("cores", "3").digest(stale);
    let e = once(
        &sim,
        "PUT",
        "/nodes/{node}/qemu/{vmid}/config",
        "checksum mismatch (file change by other user?)",
        sim.c.set_config(&g, &change),
    )
    .await;
    assert_eq!(e.kind(), ErrorKind::Refused);
}

#[tokio::test]
async fn starting_a_running_ct_is_final() {
    let sim = Sim::start().await;
    sim.add_ct_template();
    let g = GuestRef::lxc("pve1", 200);
    let upid = sim
        .c
        .create_guest(
            &g,
            &map(&[("ostemplate", CT_TEMPLATE), ("rootfs", "local-lvm:4")]),
        )
        .await
        .unwrap();
    sim.c.wait_task(&upid, &wait()).await.unwrap();
    let upid = sim.c.start(&g).await.unwrap();
    sim.c.wait_task(&upid, &wait()).await.unwrap();
    once(
        &sim,
        "POST",
        "/nodes/{node}/lxc/{vmid}/status/start",
        "CT 200 already running",
        sim.c.start(&g),
    )
    .await;
}

#[tokio::test]
async fn clone_of_a_local_storage_vm_to_another_node_is_final() {
    let mut cfg = config();
    cfg.state.nodes.push(Node {
        node: "pve2".into(),
        storages: vec![Storage {
            storage: "local-lvm".into(),
            kind: "lvmthin".into(),
            content: vec!["images".into(), "rootdir".into()],
            ..Storage::default()
        }],
        ..Node::default()
    });
    let sim = Sim::with(cfg).await;
    let g = sim.create_vm(100, &[("scsi0", "local-lvm:4")]).await;
    let request = CloneRequest::new(101)
        .with_full(Some(true))
        .with_target(Some("pve2".into()));
    once(
        &sim,
        "POST",
        "/nodes/{node}/qemu/{vmid}/clone",
        "can't clone VM to node 'pve2' (VM uses local storage)",
        sim.c.clone_guest(&g, &request),
    )
    .await;
}

#[tokio::test]
async fn root_only_keys_are_final() {
    let sim = Sim::start().await;
    let g = sim.create_vm(100, &[]).await;
    // The simulator's token is root@pam's, which qemu-server does not treat as root@pam.
    once(
        &sim,
        "PUT",
        "/nodes/{node}/qemu/{vmid}/config",
        "only root can set 'args' config",
        sim.c
            .set_config(&g, &ConfigChange::default().set("args", "-no-reboot")),
    )
    .await;
}

#[tokio::test]
async fn permission_errors_are_final() {
    let mut cfg = config();
    let limited = ApiToken::new("ops@pve!ci", "limited-secret");
    cfg.extra_tokens.push(limited.clone());
    cfg.acl = proxops_pve_sim::acl_with_token_users(vec![AclEntry {
        principal: "ops@pve!ci".into(),
        path: "/vms/100".into(),
        privs: vec!["VM.Audit".into()],
        propagate: true,
    }]);
    let sim = Sim::with(cfg).await;
    let g = sim.create_vm(100, &[]).await;
    let ci = proxops_pve::PveClient::builder(
        sim.h.base_url(),
        proxops_pve::Credentials::token(&limited.id, limited.secret.as_str()),
    )
    .tls(proxops_pve::TlsVerification::Fingerprint(
        sim.h.fingerprint.parse().unwrap(),
    ))
    .retry(crate::support::fast_retry())
    .build()
    .unwrap();
    let e = once(
        &sim,
        "PUT",
        "/nodes/{node}/qemu/{vmid}/config",
        "Permission check failed",
        ci.set_config(&g, &ConfigChange::default().set("memory", "4096")),
    )
    .await;
    assert_eq!(e.kind(), ErrorKind::Forbidden);
}

#[tokio::test]
async fn an_ssh_key_pve_cannot_read_is_final_on_create_and_update() {
    // pve-common `PVE::Tools::validate_ssh_public_keys` (ssh-keygen -l on each line), called
    // by qemu-server `create_vm` and `update_vm_api`: the compat example's placeholder key,
    // whose blob stops after the key type.
    let placeholder = "ssh-ed25519%20AAAAC3NzaC1lZDI1NTE5AAAA%20you%40yourhost";
    let sim = Sim::start().await;
    let g = GuestRef::qemu("pve1", 100);
    once(
        &sim,
        "POST",
        "/nodes/{node}/qemu",
        "SSH public key validation error",
        sim.c.create_guest(&g, &map(&[("sshkeys", placeholder)])),
    )
    .await;
    assert!(sim.h.state().guests.is_empty(), "nothing was created");
    let g = sim.create_vm(100, &[]).await;
    once(
        &sim,
        "PUT",
        "/nodes/{node}/qemu/{vmid}/config",
        "SSH public key validation error",
        sim.c
            .set_config(&g, &ConfigChange::default().set("sshkeys", placeholder)),
    )
    .await;
    let real = "ssh-ed25519%20AAAAC3NzaC1lZDI1NTE5AAAAICgk%2FuYqyivLPEvfGtyhotPwJ2%2B41CwEtBONZXjx6jCp%20admin%40workstation";
    sim.c
        .set_config(&g, &ConfigChange::default().set("sshkeys", real))
        .await
        .unwrap();
}
