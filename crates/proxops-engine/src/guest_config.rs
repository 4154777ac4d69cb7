//! What a guest's PVE config says, key by key and value by value: which keys hold volumes,
//! whether the QEMU guest agent is on, what a MAC address looks like. It imports nothing from
//! the engine, so that the planner, the executor, the privileges and the planes read a config
//! the same way without importing one another.

/// The config key without its index (`net0` -> `net`).
pub(crate) fn family(key: &str) -> &str {
    key.trim_end_matches(|c: char| c.is_ascii_digit())
}

/// Whether `key` is of the indexed family `fam` (`net0` of `net`, not `net` itself).
pub(crate) fn indexed(key: &str, fam: &str) -> bool {
    family(key) == fam && key.len() > fam.len()
}

/// Whether a key holds a volume (`proxops-pve-schema`'s one definition).
pub(crate) use proxops_pve_schema::is_volume;

/// Whether a guest's `agent` config value enables the QEMU guest agent (qemu-server
/// `PVE/QemuServer/Agent.pm` `parse_guest_agent`: `enabled` is the default key, off by default).
pub fn agent_enabled(value: &str) -> bool {
    value.split(',').any(|p| {
        let v = match p.split_once('=') {
            Some(("enabled", v)) => v,
            Some(_) => return false,
            None => p,
        };
        proxops_pve::lenient::parse_bool(v) == Some(true)
    })
}

/// Whether `text` is a MAC address (`BC:24:11:0A:0B:0C`, either case).
pub(crate) fn is_mac(text: &str) -> bool {
    let parts: Vec<&str> = text.split(':').collect();
    parts.len() == 6
        && parts
            .iter()
            .all(|p| p.len() == 2 && p.bytes().all(|b| b.is_ascii_hexdigit()))
}
