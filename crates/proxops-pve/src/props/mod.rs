//! PVE property strings (`scsi0`, `net0`, `ide2`, `ipconfig0`, `efidisk0`, `rootfs`, `mp0`, ...):
//! one codec, [`PropertyString`], driven by the [`Format`]s of the official schemas' property-string
//! keys ([`formats`], built from `proxops-pve-schema`'s table). Parsing follows PVE's `parse_property_string`: comma-separated `key=value` parts,
//! a part without `=` is the default key's value (the volume of a disk, the model of a NIC),
//! aliases map to their target (`volume=` → `file`), and a key alias combines two keys
//! (`virtio=MAC` is model `virtio` with `macaddr` `MAC`). Rendering follows PVE's
//! `print_property_string`, which is what PVE writes into configs: the default key's bare value
//! first (or `model=MAC`), then required keys, then the rest sorted by name; disk sizes in PVE's
//! largest exact unit (`1024M` → `1G`), booleans as `0`/`1`. So parse-then-render yields PVE's
//! canonical form for the keys PVE re-prints (disks, NICs, mount points). Other property strings
//! (`ipconfig0`, `agent`, `features`, ...) PVE stores as given, so compare those by their parsed
//! entries (`PropertyString` equality) rather than by text.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::LazyLock;

use proxops_pve_schema::{SubKeys, UnknownKeys, split_property_string};

use crate::error::PveError;
use crate::lenient::parse_bool;
use crate::types::GuestType;

/// How a sub-key's value is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyKind {
    /// Kept as written.
    Plain,
    /// A boolean, rendered `0`/`1`.
    Bool,
    /// A size (`32G`, `512M`, bytes), rendered in the largest exact unit.
    DiskSize,
    /// Another name of the key it names.
    Alias(&'static str),
    /// `NAME=VALUE` means `key=NAME` and `value=VALUE` (`virtio=MAC` for NICs).
    KeyAlias {
        /// The key receiving this key's name (`model`).
        key: &'static str,
        /// The key receiving the value (`macaddr`).
        value: &'static str,
    },
}

/// One sub-key of a format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyDef {
    /// Name.
    pub name: &'static str,
    /// Treatment.
    pub kind: KeyKind,
    /// Whether PVE requires it (rendered right after the default key).
    pub required: bool,
}

/// A property-string format: the sub-keys of one parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Format {
    /// `qemu` or `lxc`.
    pub guest: &'static str,
    /// The parameter as the schema spells it: `scsi[n]`, `efidisk0`, `rootfs`.
    pub param: &'static str,
    /// The key a bare value belongs to.
    pub default_key: Option<&'static str>,
    /// The sub-keys, sorted by name.
    pub keys: Vec<KeyDef>,
}

impl Format {
    /// A sub-key by name.
    pub fn key(&self, name: &str) -> Option<&KeyDef> {
        self.keys.iter().find(|k| k.name == name)
    }
}

impl SubKeys for Format {
    fn default_key(&self) -> Option<&str> {
        self.default_key
    }

    fn knows(&self, key: &str) -> bool {
        self.key(key).is_some()
    }

    fn alias(&self, key: &str) -> Option<(&str, Option<&str>)> {
        match self.key(key)?.kind {
            KeyKind::Alias(target) => Some((target, None)),
            KeyKind::KeyAlias { key, value } => Some((value, Some(key))),
            KeyKind::Plain | KeyKind::Bool | KeyKind::DiskSize => None,
        }
    }
}

/// How the codec treats a sub-key of the schema.
fn key_def(sub: &proxops_pve_schema::Sub) -> KeyDef {
    let kind = match (sub.alias, sub.key_alias) {
        (Some(value), Some(key)) => KeyKind::KeyAlias { key, value },
        (Some(target), None) => KeyKind::Alias(target),
        (None, _) if sub.ty == proxops_pve_schema::Ty::Bool => KeyKind::Bool,
        (None, _) if sub.format == Some("disk-size") => KeyKind::DiskSize,
        (None, _) => KeyKind::Plain,
    };
    KeyDef {
        name: sub.name,
        kind,
        required: sub.alias.is_none() && !sub.optional && !sub.default_key,
    }
}

/// The format of every property-string config key of both guest types, in the table's order:
/// a key's sub-keys over every release, so that a sub-key one release dropped still parses and
/// renders. The newest release's definition of a sub-key wins, except that a key one release
/// has as a real key stays one: PVE 9.1 made the agent's `freeze-fs-on-backup` an alias of
/// `freeze-fs`, which 8.4 does not know, so resolving the alias would write a key 8.4 refuses.
fn build_formats() -> Vec<Format> {
    let mut out: Vec<Format> = Vec::new();
    for guest in [GuestType::Qemu, GuestType::Lxc] {
        for row in proxops_pve_schema::keys(guest) {
            let Some(subs) = row.format.sub_keys() else {
                continue;
            };
            let at = match out
                .iter()
                .position(|f| f.guest == guest.as_str() && f.param == row.name)
            {
                Some(at) => at,
                None => {
                    out.push(Format {
                        guest: guest.as_str(),
                        param: row.name,
                        default_key: None,
                        keys: Vec::new(),
                    });
                    out.len() - 1
                }
            };
            let format = &mut out[at];
            for sub in subs {
                if sub.default_key {
                    format.default_key = Some(sub.name);
                }
                let def = key_def(sub);
                let is_alias =
                    |k: &KeyDef| matches!(k.kind, KeyKind::Alias(_) | KeyKind::KeyAlias { .. });
                match format.keys.iter_mut().find(|k| k.name == sub.name) {
                    Some(have) if is_alias(&def) && !is_alias(have) => {}
                    Some(have) => *have = def,
                    None => format.keys.push(def),
                }
            }
            format.keys.sort_by_key(|k| k.name);
        }
    }
    out
}

static FORMATS: LazyLock<Vec<Format>> = LazyLock::new(build_formats);

/// The formats of the property-string config keys of both guest types.
pub fn formats() -> &'static [Format] {
    &FORMATS
}

/// The format of a config key (`scsi0` → `scsi[n]`, `efidisk0`, `rootfs`), if it is a property
/// string ProxOps knows.
pub fn format_for(guest: GuestType, key: &str) -> Option<&'static Format> {
    let stem = key.trim_end_matches(|c: char| c.is_ascii_digit());
    let indexed = (stem.len() < key.len()).then(|| format!("{stem}[n]"));
    formats()
        .iter()
        .filter(|f| f.guest == guest.as_str())
        .find(|f| f.param == key || indexed.as_deref() == Some(f.param))
}

/// A parsed property string: canonical key → value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PropertyString {
    format: &'static Format,
    entries: BTreeMap<String, String>,
}

fn invalid(format: &Format, text: &str, why: String) -> PveError {
    PveError::Config(format!(
        "invalid {} {} property string '{text}': {why}",
        format.guest, format.param
    ))
}

impl PropertyString {
    /// An empty value of a format.
    pub fn new(format: &'static Format) -> PropertyString {
        PropertyString {
            format,
            entries: BTreeMap::new(),
        }
    }

    /// Parses a value of a config key (`scsi0`, `net1`, `rootfs`, ...).
    pub fn parse_key(guest: GuestType, key: &str, text: &str) -> Result<PropertyString, PveError> {
        let format = format_for(guest, key).ok_or_else(|| {
            PveError::Config(format!(
                "'{key}' is not a known {} property string",
                guest.as_str()
            ))
        })?;
        PropertyString::parse(format, text)
    }

    /// Parses as PVE does (`proxops_pve_schema::split_property_string`). Keys the format does
    /// not know are kept (a newer PVE may add some) and listed by
    /// [`PropertyString::unknown_keys`].
    pub fn parse(format: &'static Format, text: &str) -> Result<PropertyString, PveError> {
        let pairs = split_property_string(format, text, UnknownKeys::Keep)
            .map_err(|e| invalid(format, text, e.to_string()))?;
        let mut out = PropertyString::new(format);
        for (key, value) in pairs {
            let value = out.normalize(&key, value);
            out.entries.insert(key, value);
        }
        Ok(out)
    }

    fn normalize(&self, key: &str, value: String) -> String {
        match self.format.key(key).map(|k| k.kind) {
            Some(KeyKind::Bool) => match parse_bool(&value) {
                Some(b) => u8::from(b).to_string(),
                None => value,
            },
            Some(KeyKind::DiskSize) => parse_size(&value).map_or(value, format_size),
            _ => value,
        }
    }

    /// The format.
    pub fn format(&self) -> &'static Format {
        self.format
    }

    /// A value by canonical key (`file`, `size`, `model`, `macaddr`, `bridge`, ...).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries.get(key).map(String::as_str)
    }

    /// The default key's value (a disk's volume, a NIC's model), if any.
    pub fn default_value(&self) -> Option<&str> {
        self.format.default_key.and_then(|k| self.get(k))
    }

    /// Sets a value (aliases resolved, booleans and sizes normalized).
    pub fn set(&mut self, key: &str, value: impl Into<String>) {
        let key = match self.format.key(key).map(|k| k.kind) {
            Some(KeyKind::Alias(target)) => target,
            _ => key,
        };
        let value = self.normalize(key, value.into());
        self.entries.insert(key.to_string(), value);
    }

    /// Removes a key, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        self.entries.remove(key)
    }

    /// The entries by canonical key.
    pub fn entries(&self) -> &BTreeMap<String, String> {
        &self.entries
    }

    /// Keys the format does not define.
    pub fn unknown_keys(&self) -> Vec<&str> {
        self.entries
            .keys()
            .filter(|k| self.format.key(k).is_none())
            .map(String::as_str)
            .collect()
    }

    /// PVE's canonical text.
    pub fn render(&self) -> String {
        let mut parts: Vec<String> = Vec::with_capacity(self.entries.len());
        let mut done: Vec<&str> = Vec::new();
        if let Some(dk) = self.format.default_key
            && let Some(v) = self.entries.get(dk)
        {
            done.push(dk);
            // A key alias targeting the default key combines it with its value: `virtio=MAC`.
            let combine = self.format.keys.iter().find_map(|k| match k.kind {
                KeyKind::KeyAlias { key, value } if key == dk => Some(value),
                _ => None,
            });
            match combine.and_then(|c| self.entries.get(c).map(|cv| (c, cv))) {
                Some((c, cv)) => {
                    parts.push(format!("{v}={cv}"));
                    done.push(c);
                }
                None => parts.push(v.clone()),
            }
        }
        let required = self
            .entries
            .iter()
            .filter(|(k, _)| self.format.key(k).is_some_and(|d| d.required));
        let rest = self.entries.iter();
        for (k, v) in required.chain(rest) {
            if done.contains(&k.as_str()) {
                continue;
            }
            done.push(k);
            parts.push(format!("{k}={v}"));
        }
        parts.join(",")
    }
}

impl fmt::Display for PropertyString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render())
    }
}

/// PVE's canonical form of a config value: parsed and rendered when the key is a known property
/// string, unchanged otherwise (or when it does not parse). A description's trailing whitespace
/// does not survive a write: PVE stores it as `#` lines, which qemu-server's `parse_vm_config`
/// reads back trimmed and pve-container's `parse_pct_config` with a newline after each.
pub fn canonical_value(guest: GuestType, key: &str, value: &str) -> String {
    if key == "description" {
        return value.trim_end().to_string();
    }
    match PropertyString::parse_key(guest, key, value) {
        Ok(p) => p.render(),
        Err(_) => value.to_string(),
    }
}

/// Parses a size as PVE does (`^\d+(\.\d+)?[KMGT]?$`, bytes without a unit).
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let (num, unit) = match t.chars().last()? {
        'K' => (&t[..t.len() - 1], 1u64 << 10),
        'M' => (&t[..t.len() - 1], 1 << 20),
        'G' => (&t[..t.len() - 1], 1 << 30),
        'T' => (&t[..t.len() - 1], 1 << 40),
        _ => (t, 1),
    };
    let valid = !num.is_empty()
        && num.chars().all(|c| c.is_ascii_digit() || c == '.')
        && num.matches('.').count() <= 1
        && !num.starts_with('.')
        && !num.ends_with('.');
    if !valid {
        return None;
    }
    match num.split_once('.') {
        None => num.parse::<u64>().ok()?.checked_mul(unit),
        Some(_) => {
            let v: f64 = num.parse().ok()?;
            Some((v * unit as f64) as u64)
        }
    }
}

/// Renders bytes in the largest exact unit, as PVE's `format_size` (`1073741824` → `1G`).
pub fn format_size(bytes: u64) -> String {
    let units = [
        (1u64 << 40, "T"),
        (1 << 30, "G"),
        (1 << 20, "M"),
        (1 << 10, "K"),
    ];
    for (size, unit) in units {
        if bytes >= size && bytes.is_multiple_of(size) {
            return format!("{}{unit}", bytes / size);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(kind: GuestType, key: &str, text: &str) -> String {
        PropertyString::parse_key(kind, key, text)
            .map(|p| p.render())
            .unwrap_or_else(|e| format!("ERR {e}"))
    }

    #[test]
    fn canonical_forms() {
        use GuestType::*;
        let cases = [
            (
                Qemu,
                "scsi0",
                "local-lvm:vm-100-disk-0,size=32G",
                "local-lvm:vm-100-disk-0,size=32G",
            ),
            (
                Qemu,
                "scsi0",
                "size=32768M,iothread=on,file=local-lvm:vm-100-disk-0",
                "local-lvm:vm-100-disk-0,iothread=1,size=32G",
            ),
            (
                Qemu,
                "scsi1",
                "volume=local-lvm:4,ssd=1,discard=on",
                "local-lvm:4,discard=on,ssd=1",
            ),
            (Qemu, "ide2", "none,media=cdrom", "none,media=cdrom"),
            (
                Qemu,
                "net0",
                "virtio=BC:24:11:00:00:01,bridge=vmbr0,firewall=1",
                "virtio=BC:24:11:00:00:01,bridge=vmbr0,firewall=1",
            ),
            (
                Qemu,
                "net0",
                "bridge=vmbr0,model=virtio,macaddr=BC:24:11:00:00:01",
                "virtio=BC:24:11:00:00:01,bridge=vmbr0",
            ),
            (Qemu, "net1", "virtio,bridge=vmbr0", "virtio,bridge=vmbr0"),
            (
                Qemu,
                "ipconfig0",
                "ip=10.0.0.5/24,gw=10.0.0.1",
                "gw=10.0.0.1,ip=10.0.0.5/24",
            ),
            (
                Qemu,
                "efidisk0",
                "local-lvm:1,efitype=4m,pre-enrolled-keys=1",
                "local-lvm:1,efitype=4m,pre-enrolled-keys=1",
            ),
            (
                Qemu,
                "tpmstate0",
                "local-lvm:1,version=v2.0",
                "local-lvm:1,version=v2.0",
            ),
            (
                Qemu,
                "agent",
                "1,fstrim_cloned_disks=1",
                "1,fstrim_cloned_disks=1",
            ),
            (
                Lxc,
                "net0",
                "bridge=vmbr0,name=eth0,ip=dhcp,type=veth",
                "name=eth0,bridge=vmbr0,ip=dhcp,type=veth",
            ),
            (Lxc, "rootfs", "local-lvm:8", "local-lvm:8"),
            (
                Lxc,
                "mp0",
                "local-lvm:vm-100-disk-1,size=8G,mp=/mnt/data,backup=1",
                "local-lvm:vm-100-disk-1,mp=/mnt/data,backup=1,size=8G",
            ),
            (Lxc, "features", "nesting=1,keyctl=1", "keyctl=1,nesting=1"),
        ];
        for (kind, key, input, want) in cases {
            assert_eq!(canon(kind, key, input), want, "{key}={input}");
            assert_eq!(
                canon(kind, key, want),
                want,
                "{key}={want} is not a fixed point"
            );
        }
    }

    #[test]
    fn errors_and_unknown_keys() {
        assert!(PropertyString::parse_key(GuestType::Qemu, "ipconfig0", "dhcp").is_err());
        assert!(PropertyString::parse_key(GuestType::Qemu, "scsi0", "a,b").is_err());
        assert!(PropertyString::parse_key(GuestType::Qemu, "cores", "1").is_err());
        let p = PropertyString::parse_key(GuestType::Qemu, "scsi0", "x:1,future=1");
        assert_eq!(p.map(|p| p.unknown_keys().len()).ok(), Some(1));
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("32G"), Some(32 << 30));
        assert_eq!(parse_size("1.5G"), Some(1536 << 20));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("G"), None);
        assert_eq!(parse_size("-1G"), None);
        assert_eq!(format_size(32 << 30), "32G");
        assert_eq!(format_size(1536 << 20), "1536M");
        assert_eq!(format_size(4 << 40), "4T");
        assert_eq!(format_size(1000), "1000");
        assert_eq!(format_size(0), "0");
    }
}
