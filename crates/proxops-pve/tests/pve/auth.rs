//! Auth: ticket login with the CSRF token on writes and renewal before expiry; token auth; and
//! secrets that never show in Debug, Display or errors.

use crate::support::{PASSWORD, Sim, fast_retry, map, wait};
use proxops_pve::{Credentials, ErrorKind, GuestRef, PveClient, Secret, TlsVerification};
use std::time::Duration;

fn ticket_client(sim: &Sim, password: &str, renew: Duration) -> PveClient {
    PveClient::builder(
        sim.h.base_url(),
        Credentials::password("root@pam", password),
    )
    .tls(TlsVerification::Fingerprint(
        sim.h.fingerprint.parse().unwrap(),
    ))
    .retry(fast_retry())
    .ticket_renew_after(renew)
    .build()
    .unwrap()
}

#[tokio::test]
async fn ticket_auth_reads_and_writes() {
    let sim = Sim::start().await;
    let c = ticket_client(&sim, PASSWORD, Duration::from_secs(3600));
    c.version().await.unwrap();
    c.nodes().await.unwrap();
    // A write needs the CSRF token; the task is owned by the user, not a token.
    let u = c
        .create_guest(&GuestRef::qemu("pve1", 100), &map(&[]))
        .await
        .unwrap();
    assert_eq!(u.user, "root@pam");
    c.wait_task(&u, &wait()).await.unwrap();
    assert_eq!(
        sim.h.count("POST", "/access/ticket"),
        1,
        "one login for all"
    );
}

#[tokio::test]
async fn ticket_is_renewed_before_expiry() {
    let sim = Sim::start().await;
    let c = ticket_client(&sim, PASSWORD, Duration::from_millis(150));
    c.version().await.unwrap();
    c.version().await.unwrap();
    assert_eq!(sim.h.count("POST", "/access/ticket"), 1);
    tokio::time::sleep(Duration::from_millis(200)).await;
    c.version().await.unwrap();
    assert_eq!(sim.h.count("POST", "/access/ticket"), 2);
}

#[tokio::test]
async fn concurrent_requests_share_one_login() {
    let sim = Sim::start().await;
    let c = ticket_client(&sim, PASSWORD, Duration::from_secs(3600));
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let c = c.clone();
        set.spawn(async move { c.version().await.map(|_| ()) });
    }
    while let Some(r) = set.join_next().await {
        r.unwrap().unwrap();
    }
    assert_eq!(sim.h.count("POST", "/access/ticket"), 1);
}

#[tokio::test]
async fn wrong_password_is_permanent_and_secret_free() {
    let sim = Sim::start().await;
    let c = ticket_client(&sim, "not-the-password", Duration::from_secs(3600));
    let e = c.version().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unauthorized, "{e}");
    assert!(!e.is_retryable());
    assert!(!format!("{e} {e:?}").contains("not-the-password"));
    // One login, then one fresh login after the 401: never a retry loop.
    assert!(sim.h.count("POST", "/access/ticket") <= 2);
    assert_eq!(sim.h.count("GET", "/version"), 0);
}

#[test]
fn secrets_are_redacted() {
    let s = Secret::new("hunter2");
    assert_eq!(format!("{s}"), proxops_secrets::REDACTED);
    assert!(!format!("{s:?}").contains("hunter2"));
    assert_eq!(s.expose(), "hunter2");
    let t = Credentials::parse_token("root@pam!ci=6f1c-secret").unwrap();
    assert!(!format!("{t:?}").contains("6f1c-secret"));
    assert_eq!(t.user(), "root@pam");
    let p = Credentials::password("root@pam", "pw-secret");
    assert!(!format!("{p:?}").contains("pw-secret"));
    let e = Credentials::parse_token("root@pam=only-secret").unwrap_err();
    assert!(!e.to_string().contains("only-secret"), "{e}");
    let builder = PveClient::builder("https://pve:8006", t);
    assert!(!format!("{builder:?}").contains("6f1c-secret"));
}
