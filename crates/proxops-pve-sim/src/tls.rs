//! The self-signed certificate generated at start and the rustls server configuration (ring
//! provider, HTTP/1.1 only: PVE's API server speaks HTTP/1.1 and puts errors in reason phrases).

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use sha2::{Digest, Sha256};
use std::sync::Arc;

use crate::error::SimError;

/// A generated certificate with its key.
pub(crate) struct Identity {
    pub cert_der: Vec<u8>,
    pub cert_pem: String,
    pub config: Arc<rustls::ServerConfig>,
}

/// SHA-256 of DER bytes in PVE's form: uppercase hex pairs joined by colons.
pub fn fingerprint(der: &[u8]) -> String {
    Sha256::digest(der)
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

pub(crate) fn generate(names: Vec<String>) -> Result<Identity, SimError> {
    let certified =
        rcgen::generate_simple_self_signed(names).map_err(|e| SimError::Tls(e.to_string()))?;
    let cert_der = certified.cert.der().to_vec();
    let cert_pem = certified.cert.pem();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        certified.signing_key.serialize_der(),
    ));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| SimError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(vec![CertificateDer::from(cert_der.clone())], key)
        .map_err(|e| SimError::Tls(e.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Identity {
        cert_der,
        cert_pem,
        config: Arc::new(config),
    })
}
