//! The same client against the third-party `fakepve` (PyPI, a separate fake PVE used as an
//! external oracle): read, create, wait, change, power and delete, with token and ticket auth,
//! a fingerprint pin and its certificate as a CA file. Skipped (with a message) without the
//! Python venv of `scripts/pyenv`, except under `CI=true`.

use crate::support::{fast_retry, map, wait};
use proxops_pve::{
    CloneRequest, ConfigChange, Credentials, DestroyOptions, ErrorKind, GuestRef, PveClient,
    TlsVerification,
};
use proxops_test_support::python;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const LAUNCHER: &str = r#"
import asyncio, hashlib, json, os, sys, threading
from fakepve import FakePve
from fakepve.certs import make_cert

def watch_parent():
    # The test closes stdin (or dies): stop at once.
    sys.stdin.read()
    os._exit(0)

async def main():
    cert, key, der = make_cert(sys.argv[1], hosts=('127.0.0.1',))
    pve = FakePve(host='127.0.0.1', port=0)
    pve.time_scale = 0.05
    pve.apitokens['root@pam!ci'] = 'SECRET'
    pve.add_vm(100, 'existing', node='pve1', config={'memory': '2048', 'cores': '2', 'tags': 'a;b'})
    await pve.start(cert, key)
    fp = ':'.join('%02X' % b for b in hashlib.sha256(der).digest())
    print(json.dumps({'port': pve.port, 'fingerprint': fp, 'cert': cert}), flush=True)
    await asyncio.Event().wait()

threading.Thread(target=watch_parent, daemon=True).start()
asyncio.run(main())
"#;

/// A running fakepve; the process is killed on drop.
struct Fake {
    _child: Child,
    _dir: tempfile::TempDir,
    url: String,
    fingerprint: String,
    cert: std::path::PathBuf,
}

async fn launch() -> Option<Fake> {
    let python = python()?;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("launch.py");
    std::fs::write(&script, LAUNCHER).unwrap();
    let mut child = Command::new(python)
        .arg(&script)
        .arg(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("fakepve did not start within 30 s")
        .unwrap()
        .expect("fakepve exited before listening");
    let info: serde_json::Value = serde_json::from_str(&line).unwrap();
    Some(Fake {
        _child: child,
        url: format!("https://127.0.0.1:{}", info["port"]),
        fingerprint: info["fingerprint"].as_str().unwrap().to_string(),
        cert: info["cert"].as_str().unwrap().into(),
        _dir: dir,
    })
}

fn client(f: &Fake, credentials: Credentials, tls: TlsVerification) -> PveClient {
    PveClient::builder(&f.url, credentials)
        .tls(tls)
        .retry(fast_retry())
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

fn token_client(f: &Fake) -> PveClient {
    client(
        f,
        Credentials::parse_token("root@pam!ci=SECRET").unwrap(),
        TlsVerification::Fingerprint(f.fingerprint.parse().unwrap()),
    )
}

#[tokio::test]
async fn read_create_wait_delete() {
    let Some(f) = launch().await else { return };
    let c = token_client(&f);

    // Read.
    assert!(!c.version().await.unwrap().version.is_empty());
    assert!(c.nodes().await.unwrap().iter().any(|n| n.node == "pve1"));
    let inv = c.inventory().await.unwrap();
    let existing = inv.guest(100).unwrap();
    assert_eq!(existing.tags, ["a", "b"]);
    assert_eq!(existing.node, "pve1");
    let g100 = existing.guest_ref();
    let cfg = c.guest_config(&g100).await.unwrap();
    assert_eq!(cfg.get("memory"), Some("2048"));
    assert!(cfg.digest.is_some());
    assert_eq!(c.guest_status(&g100).await.unwrap().status, "stopped");
    let next = c.next_id(None).await.unwrap();
    assert!(next >= 101, "{next}");

    // Create and wait.
    let g = GuestRef::qemu("pve1", next);
    let u = c
        .create_guest(
            &g,
            &map(&[
                ("name", "made-by-proxops"),
                ("memory", "1024"),
                ("scsi0", "local-lvm:1"),
                ("net0", "virtio,bridge=vmbr0"),
                ("tags", "proxops"),
            ]),
        )
        .await
        .unwrap();
    assert_eq!(u.kind, "qmcreate");
    c.wait_task(&u, &wait()).await.unwrap();
    let cfg = c.guest_config(&g).await.unwrap();
    assert_eq!(cfg.get("name"), Some("made-by-proxops"));
    let scsi0 = proxops_pve::props::PropertyString::parse_key(
        proxops_pve::GuestType::Qemu,
        "scsi0",
        cfg.get("scsi0").unwrap(),
    )
    .unwrap();
    assert_eq!(scsi0.get("size"), Some("1G"));
    let net0 = proxops_pve::props::PropertyString::parse_key(
        proxops_pve::GuestType::Qemu,
        "net0",
        cfg.get("net0").unwrap(),
    )
    .unwrap();
    assert_eq!(net0.get("model"), Some("virtio"));
    assert!(net0.get("macaddr").is_some(), "a MAC was assigned");

    // Change with digest and delete=.
    c.set_config(
        &g,
        &ConfigChange::default()
            .set("cores", "2")
            .delete("tags")
            .digest(cfg.digest.clone().unwrap()),
    )
    .await
    .unwrap();
    let cfg2 = c.guest_config(&g).await.unwrap();
    assert_eq!(cfg2.get("cores"), Some("2"));
    assert_eq!(cfg2.get("tags"), None);

    // Power.
    let u = c.start(&g).await.unwrap();
    c.wait_task(&u, &wait()).await.unwrap();
    assert!(c.guest_status(&g).await.unwrap().running());
    let refused = c.destroy(&g, &DestroyOptions::default()).await;
    match refused {
        Err(e) => assert!(!e.is_retryable(), "{e}"),
        // Some fakes refuse in the task instead of the request.
        Ok(u) => assert!(c.wait_task(&u, &wait()).await.is_err()),
    }
    let u = c.stop(&g).await.unwrap();
    c.wait_task(&u, &wait()).await.unwrap();

    // Template and a clone of it.
    if let Some(u) = c.make_template(&g).await.unwrap() {
        c.wait_task(&u, &wait()).await.unwrap();
    }
    let clone_id = next + 1;
    let u = c
        .clone_guest(
            &g,
            &CloneRequest::new(clone_id).with_name(Some("clone".into())),
        )
        .await
        .unwrap();
    c.wait_task(&u, &wait()).await.unwrap();

    // Delete.
    for vmid in [clone_id, next] {
        let u = c
            .destroy(
                &GuestRef::qemu("pve1", vmid),
                &DestroyOptions::default().with_purge(Some(true)),
            )
            .await
            .unwrap();
        c.wait_task(&u, &wait()).await.unwrap();
    }
    let gone = c.guest_config(&g).await.unwrap_err();
    assert!(!gone.is_retryable(), "{gone}");
    let inv = c.inventory().await.unwrap();
    assert!(inv.guest(next).is_none() && inv.guest(clone_id).is_none());
    assert!(inv.guest(100).is_some());
}

#[tokio::test]
async fn ticket_auth_ca_file_and_refusals() {
    let Some(f) = launch().await else { return };
    // Ticket auth with the certificate as CA file: a write needs the CSRF token.
    let c = client(
        &f,
        Credentials::password("root@pam", "secret"),
        TlsVerification::CaFile(f.cert.clone()),
    );
    let g = GuestRef::qemu("pve1", 100);
    c.set_config(&g, &ConfigChange::default().set("cores", "4"))
        .await
        .unwrap();
    assert_eq!(c.guest_config(&g).await.unwrap().get("cores"), Some("4"));
    assert_eq!(c.counters().count("POST", "/access/ticket"), 1);

    let wrong_pw = client(
        &f,
        Credentials::password("root@pam", "nope"),
        TlsVerification::Fingerprint(f.fingerprint.parse().unwrap()),
    );
    assert_eq!(
        wrong_pw.version().await.unwrap_err().kind(),
        ErrorKind::Unauthorized
    );
    let wrong_pin = client(
        &f,
        Credentials::parse_token("root@pam!ci=SECRET").unwrap(),
        TlsVerification::Fingerprint(proxops_pve::Fingerprint::of_der(b"x")),
    );
    assert_eq!(
        wrong_pin.version().await.unwrap_err().kind(),
        ErrorKind::Tls
    );
    // A parameter error is a 400 with per-parameter messages.
    let t = token_client(&f);
    let e = t
        .create_guest(&GuestRef::qemu("pve1", 300), &map(&[("cores", "many")]))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BadRequest, "{e}");
    assert!(e.api().unwrap().errors.contains_key("cores"), "{e}");
}
