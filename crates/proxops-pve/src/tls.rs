//! How the server's certificate is checked ([`TlsVerification`]): system roots, a CA file or PEM,
//! a SHA-256 [`Fingerprint`] pin (PVE's convention for self-signed node certificates), or — only
//! when asked — nothing. Every mode still verifies the handshake signature against the presented
//! certificate, so a pin cannot be satisfied by replaying a certificate without its key.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use sha2::{Digest, Sha256};
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use crate::error::PveError;

/// The SHA-256 of a certificate's DER encoding, written by PVE as `AA:BB:...` (32 pairs).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint([u8; 32]);

impl Fingerprint {
    /// The fingerprint of DER bytes.
    pub fn of_der(der: &[u8]) -> Fingerprint {
        Fingerprint(Sha256::digest(der).into())
    }

    /// The raw digest.
    pub fn bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl FromStr for Fingerprint {
    type Err = PveError;

    /// Accepts `AA:BB:..` in either case, and also the bare 64 hex digits.
    fn from_str(s: &str) -> Result<Fingerprint, PveError> {
        let hex: String = s.trim().chars().filter(|c| *c != ':').collect();
        let bad = || PveError::Config(format!("invalid SHA-256 fingerprint '{s}'"));
        if hex.len() != 64 || (s.contains(':') && s.trim().split(':').any(|p| p.len() != 2)) {
            return Err(bad());
        }
        let mut out = [0u8; 32];
        for (i, byte) in out.iter_mut().enumerate() {
            let pair = hex.get(i * 2..i * 2 + 2).ok_or_else(bad)?;
            *byte = u8::from_str_radix(pair, 16).map_err(|_| bad())?;
        }
        Ok(Fingerprint(out))
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{b:02X}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({self})")
    }
}

/// How the server certificate is verified.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TlsVerification {
    /// The platform's trust store (what browsers trust), with host name checks.
    System,
    /// Roots from a PEM file (e.g. the cluster's `/etc/pve/pve-root-ca.pem`), with host name checks.
    CaFile(PathBuf),
    /// Roots given as PEM text, with host name checks.
    CaPem(String),
    /// Exactly the certificate with this SHA-256; name and validity dates are not checked, as
    /// with PVE's own fingerprint pinning.
    Fingerprint(Fingerprint),
    /// No certificate check at all. The client reports it through its warning callback and
    /// [`crate::PveClient::is_insecure`].
    Insecure,
}

impl TlsVerification {
    /// Builds the rustls client configuration (ring provider, HTTP/1.1 as PVE speaks it); also
    /// what other HTTPS clients of ProxOps (the agent's control client) use.
    pub fn client_config(&self) -> Result<rustls::ClientConfig, PveError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls_err = |e: rustls::Error| PveError::Config(format!("TLS setup failed: {e}"));
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(tls_err)?;
        let mut config = match self {
            TlsVerification::System => {
                use rustls_platform_verifier::BuilderVerifierExt;
                builder
                    .with_platform_verifier()
                    .map_err(tls_err)?
                    .with_no_client_auth()
            }
            TlsVerification::CaFile(path) => {
                let text = std::fs::read(path).map_err(|e| {
                    PveError::Config(format!("cannot read CA file {}: {e}", path.display()))
                })?;
                let roots = roots_from_pem(&text, &path.display().to_string())?;
                builder.with_root_certificates(roots).with_no_client_auth()
            }
            TlsVerification::CaPem(text) => {
                let roots = roots_from_pem(text.as_bytes(), "the CA PEM")?;
                builder.with_root_certificates(roots).with_no_client_auth()
            }
            TlsVerification::Fingerprint(pin) => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(PinVerifier {
                    pin: Some(*pin),
                    provider,
                }))
                .with_no_client_auth(),
            TlsVerification::Insecure => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(PinVerifier {
                    pin: None,
                    provider,
                }))
                .with_no_client_auth(),
        };
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }
}

fn roots_from_pem(pem: &[u8], what: &str) -> Result<rustls::RootCertStore, PveError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert = cert.map_err(|e| PveError::Config(format!("{what}: invalid PEM: {e}")))?;
        roots
            .add(cert)
            .map_err(|e| PveError::Config(format!("{what}: unusable certificate: {e}")))?;
    }
    if roots.is_empty() {
        return Err(PveError::Config(format!("{what}: no certificate found")));
    }
    Ok(roots)
}

/// Accepts the leaf certificate whose SHA-256 equals the pin (or any, when `pin` is `None`:
/// insecure mode); handshake signatures are always verified.
#[derive(Debug)]
struct PinVerifier {
    pin: Option<Fingerprint>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for PinVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(pin) = self.pin else {
            return Ok(ServerCertVerified::assertion());
        };
        let seen = Fingerprint::of_der(end_entity);
        // Compare all bytes regardless of where they differ.
        let diff = seen
            .bytes()
            .iter()
            .zip(pin.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        if diff == 0 {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General(format!(
                "certificate fingerprint {seen} does not match the pinned {pin}"
            )))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_forms() {
        let fp = Fingerprint::of_der(b"x");
        let text = fp.to_string();
        assert_eq!(text.len(), 95);
        assert_eq!(text.parse::<Fingerprint>().ok(), Some(fp));
        assert_eq!(text.to_lowercase().parse::<Fingerprint>().ok(), Some(fp));
        assert_eq!(text.replace(':', "").parse::<Fingerprint>().ok(), Some(fp));
        assert!("AA:BB".parse::<Fingerprint>().is_err());
        assert!(text.replacen("A", "G", 1).parse::<Fingerprint>().is_err() || !text.contains('A'));
    }
}
