//! sops's value cipher: `ENC[AES256_GCM,data:<b64>,iv:<b64>,tag:<b64>,type:<t>]`, AES-256-GCM with
//! a 32-byte nonce (sops's choice, not GCM's usual 12), the value's key path as additional data.

use aes_gcm::aead::consts::{U12, U32};
use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::aes::Aes256;
use aes_gcm::{AesGcm, Key, Nonce};
use zeroize::Zeroizing;

/// The type sops recorded for an encrypted value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ValueType {
    Str,
    Int,
    Float,
    Bool,
    Bytes,
    Time,
    Comment,
}

/// The parts of an `ENC[...]` value.
pub(crate) struct EncValue {
    data: Vec<u8>,
    iv: Vec<u8>,
    tag: Vec<u8>,
    pub(crate) kind: ValueType,
}

/// Why an `ENC[...]` value could not be used. Never carries the value.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum CipherError {
    /// Not of the `ENC[AES256_GCM,...]` form, or a part is not base64.
    Malformed(String),
    /// The tag does not authenticate: wrong key, wrong path, or changed bytes.
    Unauthentic,
}

const PREFIX: &str = "ENC[AES256_GCM,data:";

/// Whether `s` looks like an encrypted value at all.
pub(crate) fn is_enc(s: &str) -> bool {
    s.starts_with("ENC[")
}

/// Splits an `ENC[AES256_GCM,...]` string into its parts.
pub(crate) fn parse_enc(s: &str) -> Result<EncValue, CipherError> {
    let malformed = |what: &str| CipherError::Malformed(what.to_owned());
    let body = s.strip_prefix(PREFIX).ok_or_else(|| {
        malformed("not of the form ENC[AES256_GCM,data:...,iv:...,tag:...,type:...]")
    })?;
    let body = body
        .strip_suffix(']')
        .ok_or_else(|| malformed("no closing `]`"))?;
    let (data, rest) = body
        .split_once(",iv:")
        .ok_or_else(|| malformed("no `iv:` part"))?;
    let (iv, rest) = rest
        .split_once(",tag:")
        .ok_or_else(|| malformed("no `tag:` part"))?;
    let (tag, kind) = rest
        .split_once(",type:")
        .ok_or_else(|| malformed("no `type:` part"))?;
    let kind = match kind {
        "str" => ValueType::Str,
        "int" => ValueType::Int,
        "float" => ValueType::Float,
        "bool" => ValueType::Bool,
        "bytes" => ValueType::Bytes,
        "time" => ValueType::Time,
        "comment" => ValueType::Comment,
        other => return Err(CipherError::Malformed(format!("unknown type `{other}`"))),
    };
    let b64 = |part: &str, name: &str| {
        base64_decode(part).ok_or_else(|| CipherError::Malformed(format!("`{name}` is not base64")))
    };
    let value = EncValue {
        data: b64(data, "data")?,
        iv: b64(iv, "iv")?,
        tag: b64(tag, "tag")?,
        kind,
    };
    if value.tag.len() != 16 {
        return Err(malformed("the tag is not 16 bytes"));
    }
    Ok(value)
}

/// Decrypts `value` with the data `key`, authenticating `aad` (the key path, or for the MAC the
/// `lastmodified` time). The plaintext is zeroized when dropped.
pub(crate) fn decrypt(
    value: &EncValue,
    key: &[u8; 32],
    aad: &str,
) -> Result<Zeroizing<Vec<u8>>, CipherError> {
    let mut msg = Vec::with_capacity(value.data.len() + value.tag.len());
    msg.extend_from_slice(&value.data);
    msg.extend_from_slice(&value.tag);
    let payload = Payload {
        msg: &msg,
        aad: aad.as_bytes(),
    };
    let key = Key::<AesGcm<Aes256, U32>>::from_slice(key);
    let plain = match value.iv.len() {
        32 => AesGcm::<Aes256, U32>::new(key).decrypt(Nonce::<U32>::from_slice(&value.iv), payload),
        // Not written by sops, but accepted by its decrypter (it takes the IV's length as is).
        12 => AesGcm::<Aes256, U12>::new(key).decrypt(Nonce::<U12>::from_slice(&value.iv), payload),
        n => {
            return Err(CipherError::Malformed(format!(
                "an iv of {n} bytes (32 expected)"
            )));
        }
    };
    plain
        .map(Zeroizing::new)
        .map_err(|_| CipherError::Unauthentic)
}

/// Standard base64 with padding, as Go's `base64.StdEncoding` (which also rejects a missing pad).
pub(crate) fn base64_decode(s: &str) -> Option<Vec<u8>> {
    fn sextet(c: u8) -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    }
    let bytes = s.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    let chunks = bytes.len() / 4;
    for (i, chunk) in bytes.chunks(4).enumerate() {
        let pad = chunk.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && i + 1 != chunks) {
            return None;
        }
        let mut n = 0u32;
        for &c in &chunk[..4 - pad] {
            n = (n << 6) | sextet(c)?;
        }
        n <<= 6 * pad as u32;
        let three = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&three[..3 - pad]);
    }
    Some(out)
}

/// Go's `strconv.FormatFloat(f, 'f', -1, 64)`: the shortest digits that read back the same,
/// never in exponent form. Rust's `Display` for `f64` is exactly that, except for infinities.
pub(crate) fn format_float(f: f64) -> String {
    if f == f64::INFINITY {
        "+Inf".to_owned()
    } else if f == f64::NEG_INFINITY {
        "-Inf".to_owned()
    } else {
        f.to_string()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use aes_gcm::aead::AeadCore;

    #[test]
    fn base64_like_go() {
        assert_eq!(base64_decode("").unwrap(), b"");
        assert_eq!(base64_decode("Zg==").unwrap(), b"f");
        assert_eq!(base64_decode("Zm8=").unwrap(), b"fo");
        assert_eq!(base64_decode("Zm9v").unwrap(), b"foo");
        assert_eq!(base64_decode("+/+/").unwrap(), [0xfb, 0xff, 0xbf]);
        assert!(base64_decode("Zg").is_none());
        assert!(base64_decode("Zg=a").is_none());
        assert!(base64_decode("Zg==Zm9v").is_none());
        assert!(base64_decode("Z===").is_none());
        assert!(base64_decode("Zm9*").is_none());
    }

    #[test]
    fn floats_like_go() {
        assert_eq!(format_float(1.5), "1.5");
        assert_eq!(format_float(1000.0), "1000");
        assert_eq!(format_float(1e21), "1000000000000000000000");
        assert_eq!(format_float(0.1), "0.1");
        assert_eq!(format_float(f64::NEG_INFINITY), "-Inf");
        assert_eq!(format_float(f64::NAN), "NaN");
    }

    fn b64(bytes: &[u8]) -> String {
        const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let n = chunk.iter().fold(0u32, |n, &b| (n << 8) | b as u32) << (8 * (3 - chunk.len()));
            for i in 0..4 {
                if i <= chunk.len() {
                    out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
                } else {
                    out.push('=');
                }
            }
        }
        out
    }

    /// Builds a value as sops's `aes.Cipher.Encrypt` does.
    pub(crate) fn seal(plain: &str, key: &[u8; 32], aad: &str, kind: &str) -> String {
        let cipher = AesGcm::<Aes256, U32>::new(Key::<AesGcm<Aes256, U32>>::from_slice(key));
        let nonce = AesGcm::<Aes256, U32>::generate_nonce(&mut aes_gcm::aead::OsRng);
        let out = cipher
            .encrypt(
                &nonce,
                Payload {
                    msg: plain.as_bytes(),
                    aad: aad.as_bytes(),
                },
            )
            .unwrap();
        let (data, tag) = out.split_at(out.len() - 16);
        format!(
            "ENC[AES256_GCM,data:{},iv:{},tag:{},type:{kind}]",
            b64(data),
            b64(&nonce),
            b64(tag)
        )
    }

    #[test]
    fn round_trip_and_authentication() {
        let key = [7u8; 32];
        let enc = seal("s3cret", &key, "a:b:", "str");
        let v = parse_enc(&enc).unwrap();
        assert_eq!(v.kind, ValueType::Str);
        assert_eq!(decrypt(&v, &key, "a:b:").unwrap().as_slice(), b"s3cret");
        assert_eq!(
            decrypt(&v, &key, "a:c:").unwrap_err(),
            CipherError::Unauthentic
        );
        assert_eq!(
            decrypt(&v, &[8u8; 32], "a:b:").unwrap_err(),
            CipherError::Unauthentic
        );
    }

    #[test]
    fn malformed_values() {
        for bad in [
            "ENC[AES256_GCM,data:Zm9v,iv:Zm9v,tag:Zm9v,type:str",
            "ENC[AES256_GCM,data:Zm9v,tag:Zm9v,type:str]",
            "ENC[AES256_GCM,data:Zm9v,iv:Zm9v,tag:AAAAAAAAAAAAAAAAAAAAAA==,type:map]",
            "ENC[AES256_GCM,data:Zm9v,iv:Zm9v,tag:Zm9v,type:str]",
            "ENC[AES256_GCM,data:Zm9,iv:Zm9v,tag:AAAAAAAAAAAAAAAAAAAAAA==,type:str]",
            "ENC[PGP,data:Zm9v]",
        ] {
            assert!(
                matches!(parse_enc(bad), Err(CipherError::Malformed(_))),
                "{bad}"
            );
        }
    }
}
