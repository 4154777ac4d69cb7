//! Each injected fault is handled as its class says: retryable ones are retried (and surface,
//! still classified retryable, when retries are off); permanent ones are surfaced at once.

use crate::support::{Sim, client_with, config, fast_retry, map, wait};
use proxops_pve::{
    ConfigChange, Credentials, ErrorKind, GuestRef, PveClient, RetryPolicy, TlsVerification,
};
use proxops_pve_sim::{AclEntry, ApiToken, EndpointClass, FaultConfig};
use std::time::Duration;

fn many_retries() -> RetryPolicy {
    fast_retry().with_max_attempts(12)
}

async fn with_faults(faults: FaultConfig) -> Sim {
    let mut cfg = config();
    cfg.faults = faults;
    Sim::with(cfg).await
}

#[tokio::test]
async fn server_errors_are_retried() {
    let sim = with_faults(
        FaultConfig::default()
            .with_seed(7)
            .with_error_rate([(EndpointClass::Read, 0.4), (EndpointClass::Write, 0.4)].into()),
    )
    .await;
    let c = client_with(&sim.h, many_retries());
    for _ in 0..20 {
        c.version().await.unwrap();
    }
    let sent = sim.h.count("GET", "/version");
    assert!(sent > 20, "some requests were retried: {sent}");
    assert_eq!(c.counters().count("GET", "/version"), sent);
    // Writes too (the fault hits before the handler, so nothing was half-done).
    let u = c
        .create_guest(&GuestRef::qemu("pve1", 100), &map(&[]))
        .await
        .unwrap();
    c.wait_task(&u, &wait()).await.unwrap();

    // Without retries the same fault surfaces, classified retryable.
    let once = client_with(&sim.h, RetryPolicy::none());
    let mut seen = None;
    for _ in 0..20 {
        if let Err(e) = once.version().await {
            seen = Some(e);
            break;
        }
    }
    let e = seen.expect("a 500 within 20 requests at rate 0.4");
    assert_eq!(e.kind(), ErrorKind::Server);
    assert_eq!(e.status(), Some(500));
    assert!(e.is_retryable());
    assert_eq!(e.message(), "internal error (injected fault)");
}

#[tokio::test]
async fn lock_contention_is_retried() {
    let sim = Sim::start().await;
    let g = sim.create_vm(100, &[]).await;
    sim.h.set_faults(
        FaultConfig::default()
            .with_seed(3)
            .with_lock_contention_rate(0.5),
    );
    let c = client_with(&sim.h, many_retries());
    for cores in 1..=8 {
        c.set_config(&g, &ConfigChange::default().set("cores", cores.to_string()))
            .await
            .unwrap();
    }
    assert_eq!(
        sim.c.guest_config(&g).await.unwrap().get("cores"),
        Some("8")
    );
    let puts = sim.h.count("PUT", "/nodes/{node}/qemu/{vmid}/config");
    assert!(puts > 8, "lock errors were retried: {puts}");

    let once = client_with(&sim.h, RetryPolicy::none());
    let mut kinds = Vec::new();
    for _ in 0..20 {
        if let Err(e) = once
            .set_config(&g, &ConfigChange::default().set("cores", "2"))
            .await
        {
            assert_eq!(e.kind(), ErrorKind::Locked, "{e}");
            assert!(e.is_retryable());
            kinds.push(e.message());
        }
    }
    assert!(kinds.iter().any(|m| m.contains("is locked")), "{kinds:?}");
    assert!(kinds.iter().any(|m| m.contains("got timeout")), "{kinds:?}");
}

#[tokio::test]
async fn connection_resets_are_retried() {
    let sim = with_faults(FaultConfig::default().with_seed(11).with_reset_rate(0.3)).await;
    let c = client_with(&sim.h, many_retries());
    for _ in 0..15 {
        c.nodes().await.unwrap();
    }
    assert!(c.counters().count("GET", "/nodes") > 15);
    let once = client_with(&sim.h, RetryPolicy::none());
    let mut seen = None;
    for _ in 0..30 {
        if let Err(e) = once.nodes().await {
            seen = Some(e);
            break;
        }
    }
    let e = seen.expect("a reset within 30 requests at rate 0.3");
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    assert!(e.is_retryable());
}

#[tokio::test]
async fn proxy_errors_are_retried() {
    let sim = with_faults(
        FaultConfig::default()
            .with_seed(5)
            .with_proxy_error_rate(0.4),
    )
    .await;
    let c = client_with(&sim.h, many_retries());
    for _ in 0..15 {
        c.cluster_resources(None).await.unwrap();
    }
    let once = client_with(&sim.h, RetryPolicy::none());
    let mut statuses = std::collections::BTreeSet::new();
    for _ in 0..40 {
        if let Err(e) = once.cluster_resources(None).await {
            assert_eq!(e.kind(), ErrorKind::Proxy, "{e}");
            assert!(e.is_retryable());
            statuses.insert(e.status().unwrap());
        }
    }
    assert_eq!(statuses, [595, 596].into());
}

#[tokio::test]
async fn timeouts_are_retryable() {
    let sim = with_faults(FaultConfig::default().with_latency(Some((
        Duration::from_millis(400),
        Duration::from_millis(400),
    ))))
    .await;
    let c = PveClient::builder(
        sim.h.base_url(),
        Credentials::parse_token(&sim.h.token.to_string()).unwrap(),
    )
    .tls(TlsVerification::Fingerprint(
        sim.h.fingerprint.parse().unwrap(),
    ))
    .timeout(Duration::from_millis(100))
    .retry(fast_retry().with_max_attempts(2))
    .build()
    .unwrap();
    let e = c.version().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    assert!(e.is_retryable());
    assert_eq!(
        c.counters().count("GET", "/version"),
        2,
        "bounded: 2 attempts"
    );
}

#[tokio::test]
async fn permanent_errors_are_not_retried() {
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

    // 400 with per-parameter messages.
    let e = sim
        .c
        .create_guest(
            &GuestRef::qemu("pve1", 101),
            &map(&[("cores", "many"), ("bogus", "1")]),
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BadRequest);
    let f = e.api().unwrap();
    assert!(
        f.errors.contains_key("cores") && f.errors.contains_key("bogus"),
        "{e}"
    );
    assert!(e.to_string().contains("cores: "), "{e}");
    assert_eq!(
        sim.h.count("POST", "/nodes/{node}/qemu"),
        2,
        "the create above plus one"
    );

    // 403 naming the privilege.
    let ci = PveClient::builder(
        sim.h.base_url(),
        Credentials::token(&limited.id, limited.secret.as_str()),
    )
    .tls(TlsVerification::Fingerprint(
        sim.h.fingerprint.parse().unwrap(),
    ))
    .retry(fast_retry())
    .build()
    .unwrap();
    let e = ci
        .set_config(&g, &ConfigChange::default().set("memory", "4096"))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Forbidden);
    assert_eq!(
        e.missing_privilege(),
        Some(("/vms/100".to_string(), "VM.Config.Memory".to_string()))
    );
    assert_eq!(ci.counters().total(), 1);

    // 401.
    let bad = PveClient::builder(
        sim.h.base_url(),
        Credentials::token(&sim.h.token.id, "wrong-secret"),
    )
    .tls(TlsVerification::Fingerprint(
        sim.h.fingerprint.parse().unwrap(),
    ))
    .retry(fast_retry())
    .build()
    .unwrap();
    let e = bad.version().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unauthorized);
    assert_eq!(bad.counters().total(), 1);
    assert!(!e.to_string().contains("wrong-secret"));

    // A missing guest: PVE's 500 refusal, not retried.
    let before = sim.h.total_requests();
    let e = sim
        .c
        .guest_config(&GuestRef::qemu("pve1", 999))
        .await
        .unwrap_err();
    assert!(!e.is_retryable(), "{e}");
    assert_eq!(sim.h.total_requests(), before + 1);
}

// pveproxy cuts a proxied call after 30 s (pve-http-server `AnyEvent.pm` `proxy_request`) while
// pvedaemon finishes it: a synchronous write that ran into that limit is not sent again, as a
// second `scsi1: local-lvm:2` would allocate a second disk. The caller reads back instead.
#[tokio::test]
async fn a_write_cut_by_the_proxy_is_not_retried_blindly() {
    let mut cfg = config();
    cfg.task_durations.proxy_timeout = Duration::from_millis(200);
    cfg.task_durations
        .sync_work
        .insert("alloc".into(), Duration::from_millis(500));
    let sim = Sim::with(cfg).await;
    let g = sim.create_vm(100, &[("scsi0", "local-lvm:4")]).await;
    let c = client_with(&sim.h, many_retries());
    let e = c
        .set_config(&g, &ConfigChange::default().set("scsi1", "local-lvm:2"))
        .await
        .unwrap_err();
    assert_eq!(e.status(), Some(596), "{e}");
    assert_eq!(e.message(), "Connection timed out");
    assert!(e.outcome_unknown() && !e.not_delivered(), "{e}");
    assert_eq!(sim.h.count("PUT", "/nodes/{node}/qemu/{vmid}/config"), 1);
    // The work goes on and lands once.
    let mut landed = None;
    for _ in 0..100 {
        let cfg = c.guest_config(&g).await.unwrap();
        if let Some(v) = cfg.get("scsi1") {
            landed = Some(v.to_string());
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(landed.as_deref(), Some("local-lvm:vm-100-disk-1,size=2G"));
    let disks = sim
        .h
        .state()
        .volumes
        .iter()
        .filter(|v| v.vmid == Some(100))
        .count();
    assert_eq!(disks, 2, "scsi0 and scsi1, nothing more");
    assert_eq!(sim.h.count("PUT", "/nodes/{node}/qemu/{vmid}/config"), 1);
}
