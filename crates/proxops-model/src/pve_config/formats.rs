//! Named formats (pve-common `PVE::JSONSchema::register_format` and the guests' own) and the
//! schema's patterns (Perl regular expressions, matched whole as `check_prop` does:
//! `$value =~ m/^$pattern$/`).

use regex::Regex;
use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

/// The Perl pattern in Rust's syntax, anchored: `(?^:...)` (a group with default flags) is
/// `(?:...)`, `\0` is NUL.
pub(crate) fn rust_pattern(perl: &str) -> String {
    let body = perl.replace("(?^:", "(?:").replace("\\0", "\\x00");
    format!("^(?:{body})$")
}

fn compiled(perl: &str) -> Option<Regex> {
    static CACHE: OnceLock<Mutex<BTreeMap<String, Option<Regex>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(BTreeMap::new()));
    let mut map = cache.lock().unwrap_or_else(|p| p.into_inner());
    map.entry(perl.to_owned())
        .or_insert_with(|| Regex::new(&rust_pattern(perl)).ok())
        .clone()
}

/// Whether `value` matches a schema pattern. Every pattern of the table compiles (a test says
/// so); one that would not is not held against the value.
pub(crate) fn matches_pattern(perl: &str, value: &str) -> bool {
    compiled(perl).is_none_or(|re| re.is_match(value))
}

fn storage_id(v: &str) -> bool {
    // pve-common `parse_storage_id`: `^[a-z][a-z0-9\-\_\.]*[a-z0-9]$`, case-insensitively.
    let mut chars = v.chars();
    v.len() >= 2
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && v.ends_with(|c: char| c.is_ascii_alphanumeric())
}

fn volume_id(v: &str) -> bool {
    v.split_once(':')
        .is_some_and(|(s, name)| storage_id(s) && !name.is_empty())
}

fn config_id(v: &str) -> bool {
    let mut chars = v.chars();
    v.len() >= 2
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
}

fn dns_label(v: &str) -> bool {
    !v.is_empty()
        && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        && !v.starts_with('-')
        && !v.ends_with('-')
}

fn split_list(v: &str) -> impl Iterator<Item = &str> {
    v.split([',', ';', ' ', '\0']).filter(|s| !s.is_empty())
}

/// pve-common `pve-cpuset`: `N`, `N-M`, comma-separated.
fn cpuset(v: &str) -> bool {
    !v.is_empty()
        && v.split(',').all(|part| {
            let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
            match part.split_once('-') {
                Some((a, b)) => {
                    digits(a) && digits(b) && a.parse::<u32>().ok() <= b.parse::<u32>().ok()
                }
                None => digits(part),
            }
        })
}

/// pve-common `pve-startup-order`: `[order=]N[,up=N][,down=N]`.
fn startup_order(v: &str) -> bool {
    v.split(',').filter(|p| !p.is_empty()).all(|part| {
        let (k, n) = part.split_once('=').unwrap_or(("order", part));
        matches!(k, "order" | "up" | "down")
            && !n.is_empty()
            && n.bytes().all(|b| b.is_ascii_digit())
    })
}

fn is_ipv4(v: &str) -> bool {
    v.parse::<std::net::Ipv4Addr>().is_ok()
}

fn is_ipv6(v: &str) -> bool {
    v.parse::<std::net::Ipv6Addr>().is_ok()
}

fn cidr(v: &str, v6: bool) -> bool {
    let Some((ip, prefix)) = v.split_once('/') else {
        return false;
    };
    let max = if v6 { 128 } else { 32 };
    prefix.parse::<u8>().is_ok_and(|p| p <= max) && if v6 { is_ipv6(ip) } else { is_ipv4(ip) }
}

/// pve-access-control `PVE/Auth/Plugin.pm` `verify_username`: `name@realm`, the name without
/// white space, `:` or `/`, the realm `[A-Za-z][A-Za-z0-9\.\-_]+`, 3 to 64 characters in all.
fn userid(v: &str) -> bool {
    let Some((name, realm)) = v.rsplit_once('@') else {
        return false;
    };
    let mut r = realm.chars();
    (3..=64).contains(&v.len())
        && !name.is_empty()
        && !name
            .chars()
            .any(|c| c.is_whitespace() || matches!(c, ':' | '/'))
        && realm.len() >= 2
        && r.next().is_some_and(|c| c.is_ascii_alphabetic())
        && r.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}

/// Checks a named format; formats ProxOps does not know are left to PVE (which checks them
/// when the value is written).
pub(crate) fn check_named(format: &str, v: &str) -> Result<(), String> {
    let ok = match format {
        "pve-storage-id" => storage_id(v),
        "pve-volume-id" => volume_id(v),
        "pve-volume-id-or-qm-path" => {
            volume_id(v) || v.starts_with('/') || v == "none" || v == "cdrom"
        }
        "pve-volume-id-or-absolute-path" | "pve-qm-ide" => {
            volume_id(v) || v.starts_with('/') || v == "none" || v == "cdrom"
        }
        "pve-configid" => config_id(v),
        "pve-userid" => userid(v),
        "pve-configid-list" => split_list(v).all(config_id),
        "mac-addr" => {
            let parts: Vec<&str> = v.split(':').collect();
            parts.len() == 6
                && parts
                    .iter()
                    .all(|p| p.len() == 2 && p.bytes().all(|b| b.is_ascii_hexdigit()))
        }
        "ipv4" => is_ipv4(v),
        "ipv6" => is_ipv6(v),
        "ip" => is_ipv4(v) || is_ipv6(v),
        "address-list" => split_list(v).all(|a| is_ipv4(a) || is_ipv6(a)),
        "pve-ipv4-config" => matches!(v, "dhcp" | "manual") || cidr(v, false),
        "pve-ipv6-config" => matches!(v, "auto" | "dhcp" | "manual") || cidr(v, true),
        "pve-bridge-id" => {
            !v.is_empty()
                && v.chars()
                    .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.'))
        }
        "dns-name" => v.split('.').all(dns_label),
        "dns-name-list" => split_list(v).all(|n| n.split('.').all(dns_label)),
        "pve-cpuset" => cpuset(v),
        "pve-startup-order" => startup_order(v),
        "pve-tag-list" => split_list(v).all(|t| {
            let mut cs = t.chars();
            cs.next()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                && cs.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '+' | '.' | '-'))
        }),
        "disk-size" => {
            let t = v.trim_end_matches(['K', 'M', 'G', 'T']);
            !t.is_empty() && t.parse::<f64>().is_ok_and(|n| n >= 0.0)
        }
        "pve-lxc-mp-string" | "pve-lxc-dev-string" => {
            v.starts_with('/') || (format == "pve-lxc-mp-string" && volume_id(v))
        }
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err(format!("`{v}` is not a valid `{format}`"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perl_patterns_translate() {
        assert!(matches_pattern("(?^:[a-zA-Z0-9_; ]+)", "nfs;cifs"));
        assert!(!matches_pattern("(?^:[a-zA-Z0-9_; ]+)", "nfs,cifs"));
        assert!(matches_pattern("(/dev/.+|socket)", "socket"));
        assert!(!matches_pattern("(/dev/.+|socket)", "sockets"));
        assert!(matches_pattern(
            "(?^:(?:\\w+=[^\\x00-\\x08\\x10-\\x1F\\x7F]*)(?:\\0\\w+=[^\\x00-\\x08\\x10-\\x1F\\x7F]*)*)",
            "A=1\0B=2"
        ));
    }

    #[test]
    fn named_formats() {
        assert!(check_named("pve-cpuset", "0-7,9").is_ok());
        assert!(check_named("pve-cpuset", "7-0").is_err());
        assert!(check_named("pve-volume-id", "local:snippets/hook.pl").is_ok());
        assert!(check_named("pve-volume-id", "hook.pl").is_err());
        assert!(check_named("pve-startup-order", "order=1,up=15").is_ok());
        assert!(check_named("pve-startup-order", "first").is_err());
        assert!(check_named("pve-ipv6-config", "auto").is_ok());
        assert!(check_named("pve-ipv4-config", "2001:db8::1/64").is_err());
        assert!(check_named("some-format-of-pve", "anything").is_ok());
    }
}
