//! The check qemu-server runs on `sshkeys` before it creates or updates a VM: pve-common
//! `src/PVE/Tools.pm` `validate_ssh_public_keys` writes each non-blank line to a file and runs
//! `ssh-keygen -l -f` on it, dying "SSH public key validation error" when that fails
//! (called from qemu-server `src/PVE/API2/Qemu.pm`, `create_vm` and `update_vm_api`, after
//! `uri_unescape`). This is what `ssh-keygen -l` accepts of a public key line: optional
//! authorized_keys options, a key type, and a base64 blob that decodes to a key of that type
//! with nothing left over (OpenSSH `sshkey_from_blob`); the comment is free.

use base64::Engine as _;

/// PVE's message for any bad line.
pub const SSH_KEY_ERROR: &str = "SSH public key validation error";

/// Checks every non-blank line of an already unescaped `sshkeys` value.
pub fn validate_ssh_public_keys(raw: &str) -> Result<(), &'static str> {
    raw.split('\n')
        .filter(|l| !l.trim().is_empty())
        .try_for_each(|line| {
            if key_line_is_valid(line) {
                Ok(())
            } else {
                Err(SSH_KEY_ERROR)
            }
        })
}

/// Whether `ssh-keygen -l` reads the line as a public key, as OpenSSH's
/// `ssh-keygen.c::do_fingerprint` reads it: leading blanks skipped, a bare key tried first, else
/// one leading field skipped (authorized_keys options, `"` quoting blanks, `\"` escaped; or a
/// known_hosts host) unless it is a non-zero number, and the key read right after one blank.
fn key_line_is_valid(line: &str) -> bool {
    let line = line.trim_start_matches([' ', '\t']);
    if line.starts_with('#') || bare_key_is_valid(line) {
        return !line.starts_with('#');
    }
    let first = line.split([' ', '\t']).next().unwrap_or_default();
    let number = first.trim_start_matches(['+', '-']);
    let digits = number.len()
        - number
            .trim_start_matches(|c: char| c.is_ascii_digit())
            .len();
    // `strtol` then a cast to `int`: a non-zero bits field followed by a blank is not skipped.
    if digits > 0 && digits == number.len() && first.len() < line.len() {
        let value = number.parse::<i64>().unwrap_or(i64::MAX);
        if value as i32 != 0 {
            return false;
        }
    }
    let bytes = line.as_bytes();
    let (mut i, mut quoted) = (0, false);
    while let Some(&b) = bytes.get(i) {
        if !quoted && (b == b' ' || b == b'\t') {
            break;
        }
        if b == b'\\' && bytes.get(i + 1) == Some(&b'"') {
            i += 1;
        } else if b == b'"' {
            quoted = !quoted;
        }
        i += 1;
    }
    i < bytes.len() && bare_key_is_valid(&line[i + 1..])
}

/// `sshkey.c::sshkey_read`: the type at once, blanks, a base64 blob of a key of that type.
fn bare_key_is_valid(text: &str) -> bool {
    let mut words = text.split([' ', '\t']);
    let Some(kind) = words.next().filter(|k| KEY_TYPES.contains(k)) else {
        return false;
    };
    let Some(blob) = words.find(|w| !w.is_empty()).and_then(decode) else {
        return false;
    };
    blob_is_key(kind, &blob)
}

const KEY_TYPES: &[&str] = &[
    "ssh-ed25519",
    "ssh-rsa",
    "ssh-dss",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
];

/// OpenSSH's `b64_pton` wants the padding: `ssh-keygen -l` (9.2) refuses a blob without it.
fn decode(text: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::STANDARD.decode(text).ok()
}

/// Reads SSH wire-format fields (RFC 4251 `string`/`mpint`: a u32 length, then the bytes).
struct Wire<'a>(&'a [u8]);

impl<'a> Wire<'a> {
    fn field(&mut self) -> Option<&'a [u8]> {
        let (len, rest) = self.0.split_first_chunk::<4>()?;
        let len = u32::from_be_bytes(*len) as usize;
        if rest.len() < len {
            return None;
        }
        let (value, rest) = rest.split_at(len);
        self.0 = rest;
        Some(value)
    }

    fn fields(&mut self, n: usize) -> Option<Vec<&'a [u8]>> {
        (0..n).map(|_| self.field()).collect()
    }
}

/// Whether the blob is a whole key of the declared type.
fn blob_is_key(kind: &str, blob: &[u8]) -> bool {
    let mut wire = Wire(blob);
    if wire.field() != Some(kind.as_bytes()) {
        return false;
    }
    let curve_ok = |curve: &[u8], point: &[u8]| {
        let expected = kind
            .trim_start_matches("sk-")
            .trim_end_matches("@openssh.com")
            .strip_prefix("ecdsa-sha2-");
        // An uncompressed point: 0x04, then both coordinates.
        expected.is_some_and(|e| e.as_bytes() == curve) && point.first() == Some(&4)
    };
    let whole = match kind {
        "ssh-ed25519" => wire.field().is_some_and(|k| k.len() == 32),
        "sk-ssh-ed25519@openssh.com" => wire
            .fields(2)
            .is_some_and(|f| f[0].len() == 32 && !f[1].is_empty()),
        "ssh-rsa" => wire
            .fields(2)
            .is_some_and(|f| !f[0].is_empty() && !f[1].is_empty()),
        "ssh-dss" => wire
            .fields(4)
            .is_some_and(|f| f.iter().all(|x| !x.is_empty())),
        "sk-ecdsa-sha2-nistp256@openssh.com" => wire
            .fields(3)
            .is_some_and(|f| curve_ok(f[0], f[1]) && !f[2].is_empty()),
        _ => wire.fields(2).is_some_and(|f| curve_ok(f[0], f[1])),
    };
    // OpenSSH refuses trailing data after the key.
    whole && wire.0.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ED25519: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICgk/uYqyivLPEvfGtyhotPwJ2+41CwEtBONZXjx6jCp admin@workstation";

    #[test]
    fn a_real_key_passes_with_or_without_options_and_comment() {
        assert_eq!(validate_ssh_public_keys(ED25519), Ok(()));
        let bare = ED25519.rsplit_once(' ').map(|(k, _)| k).unwrap_or(ED25519);
        assert_eq!(validate_ssh_public_keys(bare), Ok(()));
        for options in [
            "no-pty,from=\"10.0.0.0/8\"",
            "command=\"echo hi;exit\",no-pty",
            "command=\"a \\\"q\\\" b, c\"",
            "environment=\"A=b\"",
            "restrict",
            "cert-authority",
        ] {
            let line = format!("{options} {ED25519}");
            assert_eq!(validate_ssh_public_keys(&line), Ok(()), "{line}");
        }
        assert_eq!(
            validate_ssh_public_keys(&format!("\n{ED25519}\n\n")),
            Ok(())
        );
    }

    #[test]
    fn truncated_wrong_type_and_garbage_keys_fail_with_pves_message() {
        for bad in [
            // The compat example's placeholder: the blob ends after the type.
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA you@yourhost",
            // An ed25519 blob declared as RSA.
            &ED25519.replace("ssh-ed25519", "ssh-rsa"),
            "ssh-ed25519 not-base64!",
            "just a comment",
            "ssh-ed25519",
            // Options then two blanks, a stray word, an open quote, a bits field.
            &format!("no-pty  {ED25519}"),
            &format!("a b {ED25519}"),
            &format!("command=\"x {ED25519}"),
            &format!("1024 {ED25519}"),
        ] {
            assert_eq!(validate_ssh_public_keys(bad), Err(SSH_KEY_ERROR), "{bad}");
        }
        // One bad line spoils the value.
        let two = format!("{ED25519}\nssh-ed25519 AAAA");
        assert_eq!(validate_ssh_public_keys(&two), Err(SSH_KEY_ERROR));
    }

    #[test]
    fn rsa_and_ecdsa_structures_are_read() {
        let field = |b: &[u8]| {
            let mut v = (b.len() as u32).to_be_bytes().to_vec();
            v.extend_from_slice(b);
            v
        };
        let b64 = |v: Vec<u8>| base64::engine::general_purpose::STANDARD.encode(v);
        let rsa = [field(b"ssh-rsa"), field(&[1, 0, 1]), field(&[0xc0; 257])].concat();
        assert_eq!(
            validate_ssh_public_keys(&format!("ssh-rsa {} x", b64(rsa.clone()))),
            Ok(())
        );
        let trailing = [rsa, vec![0]].concat();
        assert!(validate_ssh_public_keys(&format!("ssh-rsa {}", b64(trailing))).is_err());
        let point = [vec![4], vec![7; 64]].concat();
        let ecdsa = [
            field(b"ecdsa-sha2-nistp256"),
            field(b"nistp256"),
            field(&point),
        ]
        .concat();
        assert_eq!(
            validate_ssh_public_keys(&format!("ecdsa-sha2-nistp256 {}", b64(ecdsa))),
            Ok(())
        );
        let wrong_curve = [
            field(b"ecdsa-sha2-nistp256"),
            field(b"nistp384"),
            field(&point),
        ]
        .concat();
        assert!(
            validate_ssh_public_keys(&format!("ecdsa-sha2-nistp256 {}", b64(wrong_curve))).is_err()
        );
    }
}
