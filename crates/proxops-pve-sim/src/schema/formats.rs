//! Named formats of PVE's schema (`pve-node`, `pve-vmid`, `pve-storage-id`, ...), checked with
//! the messages `PVE::JSONSchema` dies with. A format the simulator does not know is accepted.

fn is_ident(v: &str, first: impl Fn(char) -> bool, rest: impl Fn(char) -> bool) -> bool {
    let mut chars = v.chars();
    chars.next().is_some_and(first) && chars.all(rest)
}

/// Splits a PVE list value (`a,b`, `a;b` or `a b`, any mix), dropping empty items.
pub(crate) fn split_list(v: &str) -> Vec<String> {
    v.split([',', ';', ' ', '\0'])
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

fn node_name(v: &str) -> bool {
    is_ident(
        v,
        |c| c.is_ascii_alphanumeric(),
        |c| c.is_ascii_alphanumeric() || c == '-',
    ) && !v.ends_with('-')
}

fn storage_id(v: &str) -> bool {
    v.len() >= 2
        && is_ident(
            v,
            |c| c.is_ascii_lowercase(),
            |c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_.".contains(c),
        )
        && v.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
}

fn config_id(v: &str) -> bool {
    v.len() >= 2
        && is_ident(
            v,
            |c| c.is_ascii_lowercase(),
            |c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-',
        )
}

/// Whether a tag is valid: `[a-z0-9_][a-z0-9_+.-]*`, any case on input.
pub(crate) fn tag(v: &str) -> bool {
    is_ident(
        v,
        |c| c.is_ascii_alphanumeric() || c == '_',
        |c| c.is_ascii_alphanumeric() || "_+.-".contains(c),
    )
}

fn mac(v: &str) -> bool {
    let parts: Vec<&str> = v.split(':').collect();
    parts.len() == 6
        && parts
            .iter()
            .all(|p| p.len() == 2 && p.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn volume_id(v: &str) -> bool {
    v.split_once(':')
        .is_some_and(|(s, name)| storage_id(s) && !name.is_empty())
}

fn user_id(v: &str) -> bool {
    v.rsplit_once('@')
        .is_some_and(|(u, realm)| !u.is_empty() && !realm.is_empty() && !u.contains(':'))
}

const CONTENT: &[&str] = &[
    "images", "rootdir", "vztmpl", "iso", "backup", "snippets", "import", "none",
];

/// Checks a value against a named format; the error is the text after `invalid format - `.
pub(crate) fn check_named_format(format: &str, v: &str) -> Result<(), String> {
    let bad = |msg: String| Err(msg);
    match format {
        "pve-node" if !node_name(v) => bad("value does not look like a valid node name".into()),
        "pve-node-list" if !split_list(v).iter().all(|n| node_name(n)) => {
            bad("value does not look like a valid node name".into())
        }
        "dns-name" if !v.split('.').all(node_name) => {
            bad("value does not look like a valid DNS name".into())
        }
        "pve-vmid" if !v.bytes().all(|b| b.is_ascii_digit()) || v.is_empty() => {
            bad("value does not look like a valid VM ID".into())
        }
        "pve-storage-id" if !storage_id(v) => {
            bad(format!("storage ID '{v}' contains illegal characters"))
        }
        "pve-storage-id-list" => match split_list(v).iter().find(|s| !storage_id(s)) {
            Some(s) => bad(format!("storage ID '{s}' contains illegal characters")),
            None => Ok(()),
        },
        "pve-configid" if !config_id(v) => bad(format!("invalid configuration ID '{v}'")),
        "pve-configid-list" => match split_list(v).iter().find(|s| !config_id(s)) {
            Some(s) => bad(format!("invalid configuration ID '{s}'")),
            None => Ok(()),
        },
        "pve-tag-list" => match split_list(v).iter().find(|t| !tag(t)) {
            Some(t) => bad(format!("invalid tag '{t}'")),
            None => Ok(()),
        },
        "mac-addr" if !mac(v) => bad(format!(
            "value '{v}' does not look like a valid MAC address"
        )),
        "pve-volume-id" if !volume_id(v) => bad(format!("unable to parse volume ID '{v}'")),
        "pve-volume-id-or-qm-path" | "pve-volume-id-or-absolute-path"
            if !(volume_id(v) || v.starts_with('/') || v == "none" || v == "cdrom") =>
        {
            bad(format!("unable to parse volume ID '{v}'"))
        }
        "pve-userid" if !user_id(v) => {
            bad(format!("value '{v}' does not look like a valid user name"))
        }
        "pve-storage-content" if !CONTENT.contains(&v) => {
            bad(format!("invalid content type '{v}'"))
        }
        "pve-storage-content-list" => match split_list(v)
            .iter()
            .find(|c| !CONTENT.contains(&c.as_str()))
        {
            Some(c) => bad(format!("invalid content type '{c}'")),
            None => Ok(()),
        },
        "pve-bridge-id"
            if !is_ident(
                v,
                |c| c.is_alphanumeric() || "-_.".contains(c),
                |c| c.is_alphanumeric() || "-_.".contains(c),
            ) =>
        {
            bad(format!("invalid bridge ID '{v}'"))
        }
        // pve-access-control `PVE::AccessControl::verify_poolname`: up to three levels.
        "pve-poolid" if v.split('/').count() > 3 => bad(format!(
            "pool name '{v}' nested too deeply (max levels = 3)"
        )),
        "pve-poolid"
            if !v.split('/').all(|level| {
                !level.is_empty()
                    && level
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || ".-_".contains(c))
            }) =>
        {
            bad(format!("pool name '{v}' contains invalid characters"))
        }
        // pve-network `Zones/Plugin.pm` `parse_sdn_zone_id`, `VnetPlugin.pm`
        // `parse_sdn_vnet_id`, `SubnetPlugin.pm` `parse_sdn_subnet_id`.
        "pve-sdn-zone-id" | "pve-sdn-vnet-id" => {
            let what = if format == "pve-sdn-zone-id" {
                "zone"
            } else {
                "vnet"
            };
            if !is_ident(
                v,
                |c| c.is_ascii_alphabetic(),
                |c| c.is_ascii_alphanumeric(),
            ) || v.len() < 2
            {
                bad(format!("{what} ID '{v}' contains illegal characters"))
            } else if v.len() > 8 {
                bad(format!(
                    "{what} ID '{v}' can't be more length than 8 characters"
                ))
            } else {
                Ok(())
            }
        }
        "pve-sdn-subnet-id" => {
            let cidr = if v.contains('/') {
                v.to_owned()
            } else {
                let mut parts = v.split('-').skip(1);
                format!(
                    "{}/{}",
                    parts.next().unwrap_or_default(),
                    parts.next().unwrap_or_default()
                )
            };
            if crate::api::sdn_subnets::parse_cidr(&cidr).is_some() {
                Ok(())
            } else {
                bad("value does not look like a valid CIDR network".into())
            }
        }
        // pve-common `PVE::JSONSchema::pve_verify_calendar_event`.
        "pve-calendar-event" => match crate::calendar::CalendarEvent::parse(v) {
            Ok(_) => Ok(()),
            Err(e) => bad(format!("invalid calendar event '{v}' - {e}")),
        },
        // pve-firewall's formats (`pve-fw-addr-spec`, `IPorCIDR`, ...) and `pve-iface`.
        _ => crate::firewall::verify::check_format(format, v).unwrap_or(Ok(())),
    }
}

/// Checks the few schema patterns that matter to the implemented endpoints; others pass.
pub(crate) fn matches_known_pattern(pattern: &str, v: &str) -> bool {
    match pattern {
        "https?://.*" => v.starts_with("http://") || v.starts_with("https://"),
        // A user or API token id (`/access/permissions`'s `userid`).
        r"(?^:^(?^:[^\s:/]+)\@(?^:[A-Za-z][A-Za-z0-9\.\-_]+)(?:!(?^:[A-Za-z][A-Za-z0-9\.\-_]+))?$)" => {
            is_userid(v)
        }
        // pve-firewall's alias, IP set and security group names.
        r"[A-Za-z][A-Za-z0-9\-\_]+" => crate::firewall::verify::is_name(v),
        _ => true,
    }
}

/// `user@realm` or `user@realm!tokenid`, as PVE's userid and token id patterns say.
fn is_userid(v: &str) -> bool {
    let word = |w: &str| {
        w.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && w.len() > 1
            && w.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
    };
    let (userid, token) = match v.split_once('!') {
        Some((u, t)) => (u, Some(t)),
        None => (v, None),
    };
    let Some((user, realm)) = userid.rsplit_once('@') else {
        return false;
    };
    !user.is_empty()
        && !user
            .chars()
            .any(|c| c.is_whitespace() || c == ':' || c == '/')
        && word(realm)
        && token.is_none_or(word)
}
