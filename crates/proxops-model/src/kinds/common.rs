//! Types and checks shared by several kinds.

use crate::Code;
use crate::kind::context::SpecContext;
use crate::names::GuestType;
pub use crate::names::{is_valid_name, is_valid_node, is_valid_storage};
use crate::quantity::Quantity;
use crate::yaml::PathSeg;
use proxops_pve_schema::{PveRelease, allowed_values};

pub use super::basics::PowerState;
pub(crate) use super::basics::check_node;

/// Whether `text` is an IPv4 or IPv6 address with a prefix length.
pub fn is_cidr(text: &str) -> bool {
    let Some((ip, prefix)) = text.split_once('/') else {
        return false;
    };
    let Ok(prefix) = prefix.parse::<u8>() else {
        return false;
    };
    match ip.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(_)) => prefix <= 32,
        Ok(std::net::IpAddr::V6(_)) => prefix <= 128,
        Err(_) => false,
    }
}

pub(crate) fn check_vmid(cx: &SpecContext<'_>, vmid: u32) {
    if !(100..=999_999_999).contains(&vmid) {
        cx.invalid(
            &path!["vmid"],
            format!("vmid {vmid} is outside PVE's range 100-999999999"),
            None,
        );
    }
}

pub(crate) fn check_memory(
    cx: &SpecContext<'_>,
    q: &Quantity,
    at: &[PathSeg],
    what: &str,
    nonzero: bool,
) {
    if q.whole_mib().is_none() {
        cx.invalid(
            at,
            format!("{what} `{q}` is not a whole number of MiB"),
            Some("PVE sets memory in MiB: use binary units such as `512MiB` or `8GiB`".into()),
        );
    } else if nonzero && q.bytes() == 0 {
        cx.invalid(at, format!("{what} must be greater than zero"), None);
    }
}

pub(crate) fn check_storage_id(cx: &SpecContext<'_>, id: &str, at: &[PathSeg]) {
    if !is_valid_storage(id) {
        cx.invalid(at, format!("`{id}` is not a valid PVE storage id"), None);
    }
}

/// What every guest's spec is checked for first: its node, its vmid, that a template (`template`
/// names its kind) is not asked to run, and its memory.
pub(crate) fn check_guest_basics(
    cx: &SpecContext<'_>,
    (node, nodes): (Option<&str>, &[String]),
    vmid: u32,
    (kind, template): (&str, Option<&str>),
    (state, ha): (Option<PowerState>, Option<&super::placement::HaSpec>),
    memory: &Quantity,
) {
    let what = template.unwrap_or(kind);
    super::placement::check_placement(cx, node, nodes, what, template.is_some());
    super::placement::check_ha(cx, ha, state, what, template.is_some());
    check_vmid(cx, vmid);
    if let Some(kind) = template
        && state == Some(PowerState::Started)
    {
        cx.invalid(
            &path!["state"],
            format!("a {kind} cannot be started"),
            Some("PVE refuses to start templates: remove `state` or set it to `stopped`".into()),
        );
    }
    check_memory(cx, memory, &path!["memory"], "memory", true);
}

/// The fields a guest NIC of either type has, under the names its kind gives them (a VM's
/// `vlan` and `mac` are a container's `tag` and `hwaddr`).
pub(crate) struct Nic<'a> {
    /// `slot`, when given; else `net<i>`.
    pub slot: Option<&'a str>,
    /// `bridge`.
    pub bridge: &'a str,
    /// The VLAN tag and its field's name.
    pub vlan: (Option<u16>, &'static str),
    /// The MAC address and its field's name.
    pub mac: (Option<&'a str>, &'static str),
    /// The device type (a VM's `model`, a container's `type`), its field's name, the values
    /// PVE takes and what they are called in a message.
    pub kind: (
        Option<&'a str>,
        &'static str,
        &'static [&'static str],
        &'static str,
    ),
}

/// The checks that qemu-server and pve-container share for `networks[i]`: a slot net0-net31
/// used once (`seen` holds the slots of the NICs before it), a bridge, a VLAN tag in range and a
/// unicast MAC, a device type PVE knows.
pub(crate) fn check_nic(
    cx: &SpecContext<'_>,
    i: usize,
    nic: &Nic<'_>,
    seen: &mut std::collections::BTreeSet<String>,
) {
    let slot = nic.slot.map_or_else(|| format!("net{i}"), str::to_owned);
    if !super::basics::slot_in(&slot, "net", 31) {
        cx.invalid(
            &path!["networks", i, "slot"],
            format!("`{slot}` is not a NIC slot (net0-net31)"),
            None,
        );
    } else if !seen.insert(slot.clone()) {
        cx.invalid(
            &path!["networks", i, "slot"],
            format!("NIC slot `{slot}` is used twice"),
            None,
        );
    }
    if nic.bridge.trim().is_empty() {
        cx.invalid(
            &path!["networks", i, "bridge"],
            "`bridge` must not be empty",
            None,
        );
    }
    if let (Some(vlan), field) = nic.vlan {
        check_vlan(cx, vlan, &path!["networks", i, field]);
    }
    if let (Some(mac), field) = nic.mac {
        check_mac(cx, mac, &path!["networks", i, field]);
    }
    if let (Some(kind), field, known, what) = nic.kind {
        check_pve_enum(cx, kind, known, what, &path!["networks", i, field]);
    }
}

pub(crate) fn check_vlan(cx: &SpecContext<'_>, vlan: u16, at: &[PathSeg]) {
    if !(1..=4094).contains(&vlan) {
        cx.invalid(at, format!("VLAN tag {vlan} is outside 1-4094"), None);
    }
}

pub(crate) fn check_mac(cx: &SpecContext<'_>, mac: &str, at: &[PathSeg]) {
    let ok = mac.split(':').count() == 6
        && mac
            .split(':')
            .all(|p| p.len() == 2 && p.bytes().all(|b| b.is_ascii_hexdigit()));
    let multicast = u8::from_str_radix(mac.get(..2).unwrap_or("00"), 16).is_ok_and(|b| b & 1 == 1);
    if !ok {
        cx.invalid(
            at,
            format!("`{mac}` is not a MAC address"),
            Some("e.g. `bc:24:11:12:34:56`".into()),
        );
    } else if multicast {
        cx.invalid(
            at,
            format!("`{mac}` is a multicast address, which PVE refuses for a NIC"),
            None,
        );
    }
}

pub(crate) fn check_tag(cx: &SpecContext<'_>, tag: &str, at: &[PathSeg]) {
    let mut bytes = tag.bytes();
    let ok = bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'+' | b'.' | b'-'));
    if !ok {
        cx.invalid(
            at,
            format!("`{tag}` is not a valid PVE tag"),
            Some(
                "tags are letters, digits and `_+.-`, starting with a letter, digit or `_`".into(),
            ),
        );
    } else if tag.eq_ignore_ascii_case("proxops") || tag.starts_with("proxops-") {
        cx.invalid(
            at,
            format!("tag `{tag}` is reserved for ProxOps's ownership tags"),
            None,
        );
    }
}

/// Reports every key of the retired `extra:` map with where it goes now: the typed field that
/// manages it, or `pve-config`, or nowhere (a key PVE's API cannot set).
pub(crate) fn check_retired_extra(
    cx: &SpecContext<'_>,
    guest: GuestType,
    extra: &crate::pve_config::PveConfig,
) {
    use crate::pve_config::{KeyClass, classify};
    for key in extra.keys() {
        let at = cx.key_path(&path!["extra"], key);
        let help = match classify(guest, key) {
            KeyClass::Typed(field) => format!("`{key}` is set by {field} now"),
            KeyClass::PveConfig => format!(
                "move it to `pve-config:` (`pve-config.{key}`), which checks it against PVE's schema and keeps it reconciled"
            ),
            KeyClass::Unmanaged(why) => format!("ProxOps cannot set `{key}`, {why}"),
            KeyClass::Unknown => format!(
                "`{key}` is not a config key of PVE's API; the other keys of PVE's guest config go in `pve-config:`"
            ),
        };
        cx.report(
            Code::ExtraRetired,
            &at,
            format!("`extra` is retired: `extra.{key}` is no longer read"),
            "retired field",
            Some(help),
        );
    }
}

pub(crate) fn check_name_ref(cx: &SpecContext<'_>, target: &str, at: &[PathSeg], kind: &str) {
    if !is_valid_name(target) {
        cx.invalid(at, format!("`{target}` is not a valid {kind} name"), None);
    }
}

pub(crate) fn check_secret_ref(
    cx: &SpecContext<'_>,
    reference: &str,
    prefix: &str,
    at: &[PathSeg],
) {
    // SOPS cloud-init names: lowercase letters, digits and hyphens, not starting with a hyphen.
    let ok = reference.strip_prefix(prefix).is_some_and(|name| {
        (1..=64).contains(&name.len())
            && !name.starts_with('-')
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    });
    if !ok {
        cx.invalid(
            at,
            format!("`{reference}` is not a reference of the form `{prefix}<name>`"),
            None,
        );
    }
}

/// PVE 8.4's spellings of the NIC model (`net<n>` `model`), from the schema table; PVE
/// compares them case-sensitively.
pub fn pve_nic_models() -> &'static [&'static str] {
    allowed_values(
        GuestType::Qemu,
        "net0",
        Some("model"),
        Some(PveRelease::V8_4),
    )
}

/// PVE 8.4's display types (`vga` `type`).
pub fn pve_vga_types() -> &'static [&'static str] {
    allowed_values(GuestType::Qemu, "vga", Some("type"), Some(PveRelease::V8_4))
}

/// PVE 8.4's SCSI controller models (`scsihw`).
pub fn pve_scsi_controllers() -> &'static [&'static str] {
    allowed_values(GuestType::Qemu, "scsihw", None, Some(PveRelease::V8_4))
}

/// PVE 8.4's container interface types (LXC `net<n>` `type`).
pub fn pve_lxc_net_types() -> &'static [&'static str] {
    allowed_values(GuestType::Lxc, "net0", Some("type"), Some(PveRelease::V8_4))
}

/// Reports `value` at `at` unless it is one of PVE's `accepted` spellings of `what`; the help
/// lists them, with "did you mean" when only the case differs (PVE would refuse it at apply).
pub(crate) fn check_pve_enum(
    cx: &SpecContext<'_>,
    value: &str,
    accepted: &[&str],
    what: &str,
    at: &[PathSeg],
) {
    if accepted.contains(&value) {
        return;
    }
    let list = accepted
        .iter()
        .map(|a| format!("`{a}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let near = accepted
        .iter()
        .find(|a| a.eq_ignore_ascii_case(value))
        .copied()
        .or_else(|| crate::diagnostic::did_you_mean(value, accepted.iter().copied()));
    let help = match near {
        Some(n) => format!("did you mean `{n}`? PVE accepts (case-sensitive): {list}"),
        None => format!("PVE accepts (case-sensitive): {list}"),
    };
    cx.report(
        crate::Code::PveEnum,
        at,
        format!("`{value}` is not a {what} PVE accepts"),
        "not a PVE value",
        Some(help),
    );
}

/// Whether an OpenSSH public key line holds a key `ssh-keygen -l` can read, which is what PVE
/// checks per line (pve-common `PVE::Tools::validate_ssh_public_keys`). The line is read as
/// OpenSSH's `ssh-keygen.c::do_fingerprint` reads it: leading blanks skipped; a bare key
/// (`<type> <base64> [comment]`) tried first; else one leading field is skipped — authorized_keys
/// options such as `command="echo hi;exit",no-pty` (double quotes may hold blanks and commas,
/// `\"` is an escaped quote) or a known_hosts host — and the key must follow after exactly one
/// space or tab.
pub fn check_ssh_public_key(line: &str) -> Result<(), String> {
    let line = line.trim_start_matches([' ', '\t']);
    if line.is_empty() || line.starts_with('#') {
        return Err("the line is empty or a comment, not a key".into());
    }
    let bare = read_public_key(line);
    if bare.is_ok() || ssh_key_fields(first_field(line)).is_some() {
        // A line that starts with a key type is a bare key: its own error is the useful one.
        return bare;
    }
    if leading_nonzero_integer(line) {
        return Err("a leading number (the SSH1 key-bits field) is not a key type".into());
    }
    let after = skip_key_options(line)?;
    if after.starts_with([' ', '\t']) {
        return Err(format!(
            "more than one blank after `{}`: ssh-keygen reads the key right after one space or tab",
            &line[..line.len() - after.len() - 1]
        ));
    }
    read_public_key(after).map_err(|why| {
        if ssh_key_fields(first_field(after)).is_some() {
            why
        } else {
            format!(
                "`{}` is not an SSH key type ssh-keygen knows, nor options followed by a key",
                first_field(line)
            )
        }
    })
}

fn first_field(line: &str) -> &str {
    line.split([' ', '\t']).next().unwrap_or_default()
}

/// `ssh-keygen` parses the first field with `strtol`; a non-zero number followed by a blank is
/// the SSH1 bits field and is not skipped as options (the cast to `int` is kept: it decides).
fn leading_nonzero_integer(line: &str) -> bool {
    let bytes = line.as_bytes();
    let mut i = usize::from(matches!(bytes.first(), Some(b'+' | b'-')));
    let digits_start = i;
    let mut value: i64 = 0;
    while let Some(d) = bytes.get(i).filter(|b| b.is_ascii_digit()) {
        value = value.saturating_mul(10).saturating_add(i64::from(d - b'0'));
        i += 1;
    }
    if i == digits_start {
        return false;
    }
    if bytes[0] == b'-' {
        value = value.saturating_neg();
    }
    // C's `(int) strtol(...)` keeps the low 32 bits.
    let as_int = value as i32;
    as_int != 0 && matches!(bytes.get(i), Some(b' ' | b'\t'))
}

/// The rest of the line after the options field and the one blank that ends it.
fn skip_key_options(line: &str) -> Result<&str, String> {
    let bytes = line.as_bytes();
    let mut quoted = false;
    let mut i = 0;
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
    if i >= bytes.len() {
        return Err(if quoted {
            "a double quote in the key's options is not closed".into()
        } else {
            format!(
                "`{}` is not an SSH key type ssh-keygen knows",
                first_field(line)
            )
        });
    }
    // Both delimiters are ASCII, so `i + 1` is a char boundary.
    Ok(&line[i + 1..])
}

/// The number of length-prefixed fields after the type name in a key blob (RFC 4253, RFC 5656,
/// RFC 8709, OpenSSH's PROTOCOL.u2f for the `sk-` types).
fn ssh_key_fields(kind: &str) -> Option<usize> {
    Some(match kind {
        "ssh-ed25519" => 1,
        "ssh-rsa" => 2,
        "ssh-dss" => 4,
        "ecdsa-sha2-nistp256" | "ecdsa-sha2-nistp384" | "ecdsa-sha2-nistp521" => 2,
        "sk-ssh-ed25519@openssh.com" => 2,
        "sk-ecdsa-sha2-nistp256@openssh.com" => 3,
        _ => return None,
    })
}

/// `sshkey.c::sshkey_read` on a bare key: the type, blanks, the base64 blob; the blob decodes,
/// names the same key type, and carries the fields that type has.
fn read_public_key(text: &str) -> Result<(), String> {
    use base64::Engine;
    let kind = first_field(text);
    let Some(fields) = ssh_key_fields(kind) else {
        return Err(format!("`{kind}` is not an SSH key type ssh-keygen knows"));
    };
    let blob = first_field(text[kind.len()..].trim_start_matches([' ', '\t']));
    if blob.is_empty() {
        return Err(format!("expected the base64 key after `{kind}`"));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(blob)
        .map_err(|_| "the key is not valid base64 (truncated?)".to_owned())?;
    let mut rest = bytes.as_slice();
    let mut next = || -> Option<&[u8]> {
        let len = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
        let field = rest.get(4..4usize.checked_add(len)?)?;
        rest = &rest[4 + len..];
        Some(field)
    };
    match next() {
        Some(name) if name == kind.as_bytes() => {}
        Some(_) => return Err(format!("the key's blob is not a `{kind}` key")),
        None => return Err("the key's blob is truncated".into()),
    }
    let mut last = None;
    for _ in 0..fields {
        last = Some(next().ok_or("the key's blob is truncated")?);
    }
    if kind == "ssh-ed25519" && last.is_some_and(|k| k.len() != 32) {
        return Err("an Ed25519 key is 32 bytes".into());
    }
    if !rest.is_empty() {
        return Err("the key's blob has trailing bytes".into());
    }
    Ok(())
}

/// A `volume:` that keeps an existing volume (`disks[].volume`, `root.volume`,
/// `mount-points[].volume`): `STORAGE:NAME` on the entry's own `storage`, naming a volume (not
/// PVE's `STORAGE:SIZE` allocation form).
pub(crate) fn check_existing_volume(
    cx: &SpecContext<'_>,
    volume: &str,
    storage: &str,
    at: &[PathSeg],
) {
    let Some((on, name)) = volume.split_once(':') else {
        cx.invalid(
            at,
            format!("`{volume}` is not a volume id: expected `STORAGE:NAME`, e.g. `local-lvm:vm-101-disk-0`"),
            None,
        );
        return;
    };
    if name.is_empty() || name.parse::<f64>().is_ok() || name.contains([',', '=', ' ', '\t']) {
        cx.invalid(
            at,
            format!("`{volume}` names no volume: `{name}` is not a volume name"),
            Some(
                "a volume name such as `vm-101-disk-0`; to allocate a new one, leave `volume` out"
                    .into(),
            ),
        );
    } else if on != storage {
        cx.invalid(
            at,
            format!("the volume is on storage `{on}`, the entry's `storage` is `{storage}`"),
            Some(format!("set `storage: {on}`")),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A real Ed25519 key (generated for these tests; no private half kept anywhere).
    const ED25519: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGCVGKQpK+nImjuu+rzahjyW0WbUv35sPq644v4hkcVp";

    /// authorized_keys lines and whether `ssh-keygen -l` reads them (OpenSSH 9.2, checked by
    /// `ssh_keygen_agrees` below wherever the binary exists).
    pub(crate) fn authorized_keys_lines() -> Vec<(String, bool)> {
        let k = ED25519;
        [
            (format!("{k} user@host"), true),
            (k.to_owned(), true),
            (format!("  {k}  with a comment"), true),
            (
                format!("command=\"echo hi;exit\",no-pty {k} user@host"),
                true,
            ),
            (format!("command=\"a \\\"quoted\\\" b, c\" {k}"), true),
            (format!("from=\"a,b\" {k} c"), true),
            (format!("no-pty {k}"), true),
            (format!("no-pty\t{k}"), true),
            (format!("environment=\"A=b\" {k}"), true),
            (format!("cert-authority {k} ca"), true),
            (format!("restrict {k}"), true),
            (format!("restrict,pty,command=\"x y\" {k}"), true),
            (format!("0 {k}"), true),
            (format!("command=\"unterminated {k}"), false),
            (format!("no-pty  {k}"), false),
            (format!("a b {k}"), false),
            (format!("1024 {k}"), false),
            (format!("# {k}"), false),
            ("no-pty".to_owned(), false),
            (
                "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA you@yourhost".to_owned(),
                false,
            ),
            ("no-pty ssh-ed25519 not-base64!".to_owned(), false),
            (format!("ssh-foo AAAA {k}"), false),
            ("no-pty ssh-foo AAAA".to_owned(), false),
            (String::new(), false),
        ]
        .into_iter()
        .collect()
    }

    #[test]
    fn authorized_keys_options_are_read_as_ssh_keygen_reads_them() {
        for (line, accepted) in authorized_keys_lines() {
            let verdict = check_ssh_public_key(&line);
            assert_eq!(verdict.is_ok(), accepted, "{line:?}: {verdict:?}");
        }
    }

    #[test]
    fn refusals_say_why() {
        let k = ED25519;
        for (line, why) in [
            (format!("command=\"x {k}"), "not closed"),
            (format!("no-pty  {k}"), "more than one blank after `no-pty`"),
            (format!("1024 {k}"), "SSH1"),
            ("no-pty ssh-ed25519 AAAA".to_owned(), "truncated"),
            (
                format!("ssh-foo AAAA {k}"),
                "`ssh-foo` is not an SSH key type",
            ),
            (
                "no-pty ssh-foo AAAA".to_owned(),
                "`no-pty` is not an SSH key type",
            ),
        ] {
            let err = check_ssh_public_key(&line).expect_err(&line);
            assert!(err.contains(why), "{line:?}: {err}");
        }
    }

    /// Runs OpenSSH's own reader on every line, one file per line as PVE does.
    #[test]
    fn ssh_keygen_agrees() {
        let probe = std::process::Command::new("ssh-keygen").arg("-?").output();
        if probe.is_err() {
            eprintln!("skipped: no `ssh-keygen` binary on PATH");
            return;
        }
        let dir = std::env::temp_dir().join(format!("proxops-sshkeys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        for (i, (line, _)) in authorized_keys_lines().into_iter().enumerate() {
            let file = dir.join(format!("key-{i}"));
            std::fs::write(&file, format!("{line}\n")).expect("write key");
            let status = std::process::Command::new("ssh-keygen")
                .arg("-l")
                .arg("-f")
                .arg(&file)
                .output()
                .expect("run ssh-keygen");
            assert_eq!(
                check_ssh_public_key(&line).is_ok(),
                status.status.success(),
                "{line:?}: ssh-keygen says {}",
                String::from_utf8_lossy(&status.stderr)
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn names() {
        assert!(is_valid_name("app-vm") && is_valid_name("a") && is_valid_name("talos-1-8-0"));
        assert!(
            !is_valid_name("App")
                && !is_valid_name("a--b")
                && !is_valid_name("-a")
                && !is_valid_name("a-")
                && !is_valid_name("")
        );
        assert!(!is_valid_name(&"a".repeat(64)));
        assert!(is_valid_node("pve01") && !is_valid_node("pve 01") && !is_valid_node("a/b"));
        assert!(
            is_valid_storage("local-lvm")
                && is_valid_storage("vm_disks")
                && !is_valid_storage("1x")
                && !is_valid_storage("a b")
        );
        assert!(
            is_cidr("10.0.0.1/24")
                && is_cidr("fd00::1/64")
                && !is_cidr("10.0.0.1")
                && !is_cidr("10.0.0.1/33")
        );
    }
}
