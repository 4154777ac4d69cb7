//! How each forge proves a delivery is its own, checked in constant time: an HMAC-SHA256 of
//! the body (GitHub, Gitea and Forgejo, the generic receiver) or the shared token itself
//! (GitLab, which signs nothing).

use super::super::auth::constant_time_eq;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::fmt;

/// A receiver's shared secret. `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct HookSecret(Vec<u8>);

impl HookSecret {
    /// A secret from its text, surrounding whitespace (a file's final newline) removed; `None`
    /// when nothing is left.
    pub fn new(text: &str) -> Option<HookSecret> {
        let t = text.trim();
        (!t.is_empty()).then(|| HookSecret(t.as_bytes().to_vec()))
    }

    fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for HookSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HookSecret([redacted])")
    }
}

/// HMAC-SHA256 of `body` under `key`.
pub(crate) fn hmac_sha256(key: &[u8], body: &[u8]) -> [u8; 32] {
    // HMAC takes keys of any length: `new_from_slice` cannot fail for it.
    match Hmac::<Sha256>::new_from_slice(key) {
        Ok(mut mac) => {
            mac.update(body);
            mac.finalize().into_bytes().into()
        }
        Err(_) => [0; 32],
    }
}

/// Lower-case hex.
pub(crate) fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn from_hex(text: &str) -> Option<Vec<u8>> {
    let text = text.trim();
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Whether `signature` (hex, optionally after `prefix`) is the HMAC-SHA256 of `body` under
/// `secret`; the comparison takes the same time however much of a forgery matches.
pub(crate) fn hmac_matches(
    secret: &HookSecret,
    body: &[u8],
    signature: &str,
    prefix: Option<&str>,
) -> bool {
    let hex = match prefix {
        Some(p) => match signature.trim().strip_prefix(p) {
            Some(rest) => rest,
            None => return false,
        },
        None => signature,
    };
    let Some(presented) = from_hex(hex) else {
        return false;
    };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.bytes()) else {
        return false;
    };
    mac.update(body);
    // `verify_slice` compares in constant time.
    mac.verify_slice(&presented).is_ok()
}

/// Whether `presented` is the secret itself (GitLab's `X-Gitlab-Token`).
pub(crate) fn token_matches(secret: &HookSecret, presented: &str) -> bool {
    constant_time_eq(secret.bytes(), presented.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(text: &str) -> HookSecret {
        HookSecret::new(text).unwrap_or(HookSecret(Vec::new()))
    }

    /// GitHub's documented example ("Validating webhook deliveries").
    #[test]
    fn githubs_documented_signature_verifies() {
        let s = secret("It's a Secret to Everybody");
        let sig = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        assert!(hmac_matches(&s, b"Hello, World!", sig, Some("sha256=")));
        assert_eq!(
            format!(
                "sha256={}",
                to_hex(&hmac_sha256(
                    b"It's a Secret to Everybody",
                    b"Hello, World!"
                ))
            ),
            sig
        );
        assert!(!hmac_matches(&s, b"Hello, World?", sig, Some("sha256=")));
        assert!(!hmac_matches(
            &secret("another"),
            b"Hello, World!",
            sig,
            Some("sha256=")
        ));
        // The prefix is required where the forge sends one; a bare or truncated digest fails.
        assert!(!hmac_matches(
            &s,
            b"Hello, World!",
            &sig[7..],
            Some("sha256=")
        ));
        assert!(!hmac_matches(
            &s,
            b"Hello, World!",
            &sig[..60],
            Some("sha256=")
        ));
        assert!(!hmac_matches(
            &s,
            b"Hello, World!",
            "sha256=zz",
            Some("sha256=")
        ));
        // Gitea sends the bare hex digest.
        assert!(hmac_matches(&s, b"Hello, World!", &sig[7..], None));
    }

    #[test]
    fn tokens_compare_whole_and_never_show() {
        let s = secret(" gl-token\n");
        assert!(token_matches(&s, "gl-token"));
        assert!(!token_matches(&s, "gl-toke"));
        assert!(!token_matches(&s, "gl-token2"));
        assert!(!format!("{s:?}").contains("gl-token"));
        assert_eq!(HookSecret::new(" \n"), None);
    }
}
