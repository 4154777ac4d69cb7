//! The presented certificate is the one whose fingerprint the handle reports, in PVE's form.

use crate::support::{Sim, read};
use proxops_test_support::sim::https_client;
use sha2::{Digest, Sha256};

#[tokio::test]
async fn presented_certificate_matches_fingerprint() {
    let sim = Sim::start().await;
    let fp = &sim.h.fingerprint;
    assert_eq!(fp.len(), 32 * 3 - 1);
    assert!(fp.split(':').all(|p| {
        p.len() == 2
            && p.chars()
                .all(|c| c.is_ascii_digit() || c.is_ascii_uppercase())
    }));
    let resp = https_client(fp)
        .get(format!("{}/version", sim.h.base_url()))
        .header("Authorization", sim.h.token.header())
        .send()
        .await
        .unwrap();
    let der = resp
        .extensions()
        .get::<reqwest::tls::TlsInfo>()
        .and_then(|tls| tls.peer_certificate())
        .expect("a certificate was presented")
        .to_vec();
    assert_eq!(read(resp).await.status, 200);
    let digest: Vec<String> = Sha256::digest(&der)
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect();
    assert_eq!(digest.join(":"), *fp);
    assert_eq!(der, sim.h.cert_der);
    assert!(sim.h.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
    assert!(sim.h.base_url().starts_with("https://127.0.0.1:"));
    assert!(sim.h.base_url().ends_with("/api2/json"));
}

#[tokio::test]
async fn a_wrong_pin_is_refused_by_the_client() {
    let sim = Sim::start().await;
    // A well-formed pin of another certificate.
    let other: Vec<String> = Sha256::digest(b"another certificate")
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect();
    let err = https_client(&other.join(":"))
        .get(format!("{}/version", sim.h.base_url()))
        .send()
        .await;
    assert!(err.is_err());
}

#[tokio::test]
async fn shutdown_is_graceful_and_frees_the_port() {
    let sim = Sim::start().await;
    let addr = sim.h.addr;
    assert_eq!(sim.get("/version").await.status, 200);
    sim.h.shutdown().await.unwrap();
    assert!(
        std::net::TcpStream::connect(addr).is_err()
            || tokio::net::TcpListener::bind(addr).await.is_ok()
    );
}
