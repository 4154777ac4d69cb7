//! TLS: the right fingerprint pin is accepted, a wrong one refused (permanently, no retry); the
//! simulator's certificate works as a CA file; the system roots refuse a self-signed
//! certificate; insecure mode works only when asked and warns.

use crate::support::{Sim, config, fast_retry};
use proxops_pve::{Credentials, ErrorKind, Fingerprint, PveClient, TlsVerification};
use std::sync::{Arc, Mutex};

fn client(sim: &Sim, tls: TlsVerification) -> Result<PveClient, proxops_pve::PveError> {
    PveClient::builder(
        sim.h.base_url(),
        Credentials::parse_token(&sim.h.token.to_string()).unwrap(),
    )
    .tls(tls)
    .retry(fast_retry())
    .build()
}

#[tokio::test]
async fn right_pin_accepted_wrong_pin_refused() {
    let sim = Sim::start().await;
    let pin: Fingerprint = sim.h.fingerprint.parse().unwrap();
    assert_eq!(pin.to_string(), sim.h.fingerprint);
    assert_eq!(pin, Fingerprint::of_der(&sim.h.cert_der));
    let ok = client(&sim, TlsVerification::Fingerprint(pin)).unwrap();
    ok.version().await.unwrap();
    // Lower case, as some tools print it, is the same pin.
    let lower = sim.h.fingerprint.to_lowercase().parse().unwrap();
    client(&sim, TlsVerification::Fingerprint(lower))
        .unwrap()
        .version()
        .await
        .unwrap();

    let wrong = client(
        &sim,
        TlsVerification::Fingerprint(Fingerprint::of_der(b"other")),
    )
    .unwrap();
    let before = sim.h.total_requests();
    let e = wrong.version().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Tls, "{e}");
    assert!(!e.is_retryable());
    assert!(e.to_string().contains("does not match the pinned"), "{e}");
    assert_eq!(
        wrong.counters().total(),
        1,
        "a refused certificate is not retried"
    );
    assert_eq!(
        sim.h.total_requests(),
        before,
        "no request reached the server"
    );
}

#[tokio::test]
async fn ca_file_works_and_a_foreign_ca_is_refused() {
    let sim = Sim::start().await;
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("pve-root-ca.pem");
    std::fs::write(&ca, &sim.h.cert_pem).unwrap();
    client(&sim, TlsVerification::CaFile(ca.clone()))
        .unwrap()
        .version()
        .await
        .unwrap();
    client(&sim, TlsVerification::CaPem(sim.h.cert_pem.clone()))
        .unwrap()
        .nodes()
        .await
        .unwrap();

    let other = Sim::with(config()).await;
    let foreign = client(&sim, TlsVerification::CaPem(other.h.cert_pem.clone())).unwrap();
    let e = foreign.version().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Tls, "{e}");
    assert!(!e.is_retryable());

    let missing = client(&sim, TlsVerification::CaFile(dir.path().join("nope.pem"))).unwrap_err();
    assert_eq!(missing.kind(), ErrorKind::Invalid);
    let empty = client(&sim, TlsVerification::CaPem("no pem here".into())).unwrap_err();
    assert!(empty.to_string().contains("no certificate"), "{empty}");
}

#[tokio::test]
async fn system_roots_refuse_a_self_signed_certificate() {
    let sim = Sim::start().await;
    match client(&sim, TlsVerification::System) {
        // A host without a trust store cannot even build the verifier: also a refusal.
        Err(e) => assert_eq!(e.kind(), ErrorKind::Invalid),
        Ok(c) => {
            let e = c.version().await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Tls, "{e}");
        }
    }
}

#[tokio::test]
async fn insecure_only_when_asked_and_warned() {
    let sim = Sim::start().await;
    let warnings = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = warnings.clone();
    let c = PveClient::builder(
        sim.h.base_url(),
        Credentials::parse_token(&sim.h.token.to_string()).unwrap(),
    )
    .tls(TlsVerification::Insecure)
    .on_warning(move |w| sink.lock().unwrap().push(w.to_string()))
    .build()
    .unwrap();
    assert!(c.is_insecure());
    c.version().await.unwrap();
    let w = warnings.lock().unwrap();
    assert_eq!(w.len(), 1);
    assert!(w[0].contains("verification is disabled"), "{w:?}");
    assert!(!sim.c.is_insecure());
}
