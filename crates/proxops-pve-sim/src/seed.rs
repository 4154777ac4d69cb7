//! Guests seeded from PVE config files laid out as `/etc/pve` holds them:
//! `DIR/nodes/<node>/qemu-server/<vmid>.conf` and `DIR/nodes/<node>/lxc/<vmid>.conf`; a file
//! directly in `DIR/qemu-server/` or `DIR/lxc/` goes to the state's first node.
//!
//! A file is read as qemu-server `src/PVE/QemuServer.pm` `parse_vm_config` and pve-container
//! `src/PVE/LXC/Config.pm` `parse_pct_config` read it: `#` lines are the description
//! (`decode_text`), `[PENDING]` / `[pve:pending]` hold pending values and `delete:`,
//! `[special:...]` sections are skipped, other `[name]` sections are snapshots (kept by name),
//! `key: value` lines (and `lxc.*` raw keys) are kept verbatim, `cdrom` is `ide2`. The volumes
//! the config names are created on the storages they name, with the sizes given; a storage the
//! node lacks is added (and reported), since the guest proves the real cluster has it.

use crate::error::SimError;
use crate::state::{Guest, GuestType, Node, State, Storage, Volume};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What seeding from a directory of config files did.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct ConfigSeed {
    /// The guests created, by vmid, with their node and type.
    pub guests: Vec<(u32, String, GuestType)>,
    /// Storages added to a node because a config names them (`node/storage`).
    pub storages_added: Vec<String>,
    /// Lines PVE's parser would warn about and skip, with the file.
    pub warnings: Vec<String>,
}

/// One guest config file, parsed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParsedConfig {
    /// The main section's keys and values.
    pub config: BTreeMap<String, String>,
    /// Pending values.
    pub pending: BTreeMap<String, String>,
    /// Keys pending deletion.
    pub pending_delete: Vec<String>,
    /// Snapshot names, in file order.
    pub snapshots: Vec<String>,
    /// A container's raw `lxc.*` lines of the main section, in order.
    pub raw_lxc: Vec<(String, String)>,
    /// Lines that are not config (PVE warns and skips them).
    pub skipped: Vec<String>,
}

/// Seeds `state` with every config file under `dir`.
pub fn seed_guest_configs(state: &mut State, dir: &Path) -> Result<ConfigSeed, SimError> {
    let mut files = Vec::new();
    for (sub, kind) in [("qemu-server", GuestType::Qemu), ("lxc", GuestType::Lxc)] {
        for file in conf_files(&dir.join(sub))? {
            files.push((None, kind, file));
        }
    }
    let nodes_dir = dir.join("nodes");
    if nodes_dir.is_dir() {
        for node in sorted_entries(&nodes_dir)? {
            let name = node.file_name().map(|n| n.to_string_lossy().into_owned());
            for (sub, kind) in [("qemu-server", GuestType::Qemu), ("lxc", GuestType::Lxc)] {
                for file in conf_files(&node.join(sub))? {
                    files.push((name.clone(), kind, file));
                }
            }
        }
    }
    let mut seed = ConfigSeed::default();
    for (node, kind, file) in files {
        let Some(vmid) = file
            .file_stem()
            .and_then(|s| s.to_str())
            .and_then(|s| s.parse::<u32>().ok())
        else {
            seed.warnings
                .push(format!("{}: not `<vmid>.conf`", file.display()));
            continue;
        };
        let node = match node.or_else(|| state.nodes.first().map(|n| n.node.clone())) {
            Some(n) => n,
            None => {
                return Err(SimError::Seed(format!(
                    "{}: the state has no node to put it on",
                    file.display()
                )));
            }
        };
        if let Some(g) = state.guests.get(&vmid) {
            return Err(SimError::Seed(format!(
                "{}: vmid {vmid} is already {} {vmid} on {}",
                file.display(),
                g.kind.word(),
                g.node
            )));
        }
        let text = std::fs::read_to_string(&file).map_err(|e| SimError::Io(file.clone(), e))?;
        let parsed = parse_guest_config(kind, &text);
        for line in &parsed.skipped {
            seed.warnings.push(format!(
                "{}: unable to parse config: {line}",
                file.display()
            ));
        }
        ensure_node(state, &node);
        for (storage, volume) in volumes(kind, vmid, &parsed.config) {
            add_volume(state, &node, &storage, volume, &mut seed.storages_added);
        }
        // The bridges its NICs name existed on the node the config came from.
        let bridges = parsed
            .config
            .iter()
            .filter(|(k, _)| k.starts_with("net"))
            .filter_map(|(_, v)| v.split(',').find_map(|p| p.strip_prefix("bridge=")));
        if let Some(n) = state.nodes.iter_mut().find(|n| n.node == node) {
            for b in bridges {
                if !n.bridges.iter().any(|x| x == b) {
                    n.bridges.push(b.to_string());
                }
            }
        }
        state.guests.insert(
            vmid,
            Guest {
                vmid,
                kind,
                node: node.clone(),
                status: "stopped".into(),
                config: parsed.config,
                pending: parsed.pending,
                pending_delete: parsed.pending_delete,
                snapshots: parsed.snapshots,
                raw_lxc: parsed.raw_lxc,
                ..Guest::default()
            },
        );
        seed.guests.push((vmid, node, kind));
    }
    Ok(seed)
}

fn sorted_entries(dir: &Path) -> Result<Vec<PathBuf>, SimError> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| SimError::Io(dir.to_path_buf(), e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    out.sort();
    Ok(out)
}

fn conf_files(dir: &Path) -> Result<Vec<PathBuf>, SimError> {
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    Ok(sorted_entries(dir)?
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "conf") && p.is_file())
        .collect())
}

/// Parses a config file's text (never fails: what PVE would skip is in `skipped`).
pub fn parse_guest_config(kind: GuestType, text: &str) -> ParsedConfig {
    #[derive(PartialEq)]
    enum Section {
        Main,
        Pending,
        Skipped,
    }
    let mut out = ParsedConfig::default();
    let mut section = Section::Main;
    let mut description: Option<String> = None;
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        let header = line.trim_end();
        if let Some(name) = header.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            let pending = match kind {
                GuestType::Qemu => name.eq_ignore_ascii_case("PENDING"),
                GuestType::Lxc => name.eq_ignore_ascii_case("pve:pending"),
            };
            section = if pending {
                Section::Pending
            } else if is_snapshot_name(name) {
                out.snapshots.push(name.to_owned());
                Section::Skipped
            } else {
                // `[special:cloudinit]`, `[special:fleecing]` and unknown sections.
                Section::Skipped
            };
            continue;
        }
        if section == Section::Skipped {
            continue;
        }
        if let Some(text) = line.strip_prefix('#') {
            if section == Section::Main {
                let d = description.get_or_insert_with(String::new);
                d.push_str(&decode_text(text));
                d.push('\n');
            }
            continue;
        }
        let target = if section == Section::Main {
            &mut out.config
        } else {
            &mut out.pending
        };
        if kind == GuestType::Lxc
            && let Some(pair) = raw_lxc_line(line)
        {
            if section == Section::Main {
                out.raw_lxc.push(pair);
            }
            continue;
        }
        let Some((key, value)) = key_value(kind, line) else {
            out.skipped.push(line.to_owned());
            continue;
        };
        match key.as_str() {
            "description" if section == Section::Main => {
                description
                    .get_or_insert_with(String::new)
                    .push_str(&decode_text(&value));
            }
            "delete" if section == Section::Pending => {
                out.pending_delete.extend(
                    value
                        .split([',', ';', ' '])
                        .filter(|k| !k.is_empty())
                        .map(str::to_owned),
                );
            }
            "snapstate" => {}
            "cdrom" if kind == GuestType::Qemu => {
                target.insert("ide2".into(), value);
            }
            _ => {
                target.insert(key, value);
            }
        }
    }
    // qemu-server's `$finish_description` strips trailing whitespace (`s/\s+$//`) and keeps an
    // empty description; pve-container keeps the text as read, the newline after each `#`
    // line included, when it is not empty (`$conf->{description} = $descr if $descr`).
    if let Some(d) = description {
        match kind {
            GuestType::Qemu => {
                out.config
                    .insert("description".into(), d.trim_end().to_owned());
            }
            GuestType::Lxc if !d.is_empty() => {
                out.config.insert("description".into(), d);
            }
            GuestType::Lxc => {}
        }
    }
    out
}

fn is_snapshot_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// `key: value` as qemu-server reads it (`^([a-z][a-z_\-]*\d*):\s*(.+?)\s*$`) and
/// pve-container (`^([a-z][a-z_]*\d*):\s*(.+?)\s*$`, no `-` in a key).
fn key_value(kind: GuestType, line: &str) -> Option<(String, String)> {
    let (key, rest) = line.split_once(':')?;
    let mut chars = key.chars();
    let starts = chars.next().is_some_and(|c| c.is_ascii_lowercase());
    let name_end = key.find(|c: char| c.is_ascii_digit()).unwrap_or(key.len());
    let name_char =
        |c: char| c.is_ascii_lowercase() || c == '_' || (c == '-' && kind == GuestType::Qemu);
    let well_formed = starts
        && key[..name_end].chars().all(name_char)
        && key[name_end..].chars().all(|c| c.is_ascii_digit());
    // `(.+?)` needs one character after the colon: a bare `boot:` is a line PVE cannot parse
    // (it warns and skips it), while `boot: ` keeps the one blank the pattern must take.
    let value = match rest.trim() {
        "" => rest.get(..1)?,
        v => v,
    };
    well_formed.then(|| (key.to_owned(), value.to_owned()))
}

/// `lxc.key: value` or `lxc.key = value` (pve-container keeps them as raw keys).
fn raw_lxc_line(line: &str) -> Option<(String, String)> {
    if !line.starts_with("lxc.") {
        return None;
    }
    let end = line.find([':', '=', ' '])?;
    let key = &line[..end];
    let value = line[end..].trim_start_matches([' ', '\t']);
    let value = value.strip_prefix([':', '=']).unwrap_or(value).trim();
    Some((key.to_owned(), value.to_owned()))
}

/// pve-common `PVE::ParseUtils::decode_text`: percent-decoding.
fn decode_text(text: &str) -> String {
    crate::dispatch::percent_decode(text, false)
}

/// The keys naming volumes, and what they hold.
fn volume_key(kind: GuestType, key: &str) -> bool {
    let family = key.trim_end_matches(|c: char| c.is_ascii_digit());
    let indexed = family.len() < key.len();
    match kind {
        GuestType::Qemu => {
            indexed
                && matches!(
                    family,
                    "ide" | "sata" | "scsi" | "virtio" | "efidisk" | "tpmstate" | "unused"
                )
        }
        GuestType::Lxc => key == "rootfs" || (indexed && matches!(family, "mp" | "unused")),
    }
}

/// The volumes a config names: `(storage, volume)`.
fn volumes(kind: GuestType, vmid: u32, config: &BTreeMap<String, String>) -> Vec<(String, Volume)> {
    let mut out = Vec::new();
    for (_, value) in config.iter().filter(|(k, _)| volume_key(kind, k)) {
        let mut parts = value.split(',');
        let first = parts.next().unwrap_or_default();
        let first = first.strip_prefix("file=").unwrap_or(first);
        let opts: BTreeMap<&str, &str> = parts.filter_map(|p| p.split_once('=')).collect();
        // `none`, `cdrom`, a bind mount (`/srv/x`) or a device (`/dev/sdb`): no volume.
        let Some((storage, name)) = first.split_once(':') else {
            continue;
        };
        if storage.is_empty() || name.is_empty() || first.starts_with('/') {
            continue;
        }
        let iso = opts.get("media") == Some(&"cdrom") || name.starts_with("iso/");
        let content = if iso {
            "iso"
        } else if kind == GuestType::Lxc {
            "rootdir"
        } else {
            "images"
        };
        let format = if iso {
            "iso"
        } else if name.contains("subvol-") {
            "subvol"
        } else {
            name.rsplit_once('.').map_or("raw", |(_, ext)| match ext {
                "qcow2" | "vmdk" => ext,
                _ => "raw",
            })
        };
        out.push((
            storage.to_owned(),
            Volume {
                storage: storage.to_owned(),
                volid: first.to_owned(),
                content: content.to_owned(),
                format: format.to_owned(),
                size: opts.get("size").and_then(|s| parse_size(s)).unwrap_or(0),
                vmid: (!iso).then_some(vmid),
                ..Volume::default()
            },
        ));
    }
    out
}

/// `32G`, `512M`, `4M`, `1T`, plain bytes: PVE's disk size notation.
fn parse_size(text: &str) -> Option<u64> {
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let n: f64 = digits.parse().ok()?;
    let factor: u64 = match unit {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        "T" => 1 << 40,
        _ => return None,
    };
    Some((n * factor as f64) as u64)
}

fn ensure_node(state: &mut State, node: &str) {
    if state.nodes.iter().any(|n| n.node == node) {
        return;
    }
    let storages = state
        .nodes
        .first()
        .map(|n| n.storages.clone())
        .unwrap_or_default();
    state.nodes.push(Node {
        node: node.to_owned(),
        storages,
        ..Node::default()
    });
}

fn add_volume(
    state: &mut State,
    node: &str,
    storage: &str,
    mut volume: Volume,
    added: &mut Vec<String>,
) {
    volume.node = node.to_owned();
    if let Some(n) = state.nodes.iter_mut().find(|n| n.node == node) {
        match n.storages.iter_mut().find(|s| s.storage == storage) {
            Some(s) => {
                if !s.content.contains(&volume.content) {
                    s.content.push(volume.content.clone());
                    added.push(format!("{node}/{storage} (+{})", volume.content));
                }
            }
            None => {
                // A file path in the volume name (`100/vm-100-disk-0.qcow2`) means a directory
                // storage; a bare name a block one.
                let dir = volume.volid.contains('/') || volume.format == "qcow2";
                n.storages.push(Storage {
                    storage: storage.to_owned(),
                    kind: if dir { "dir" } else { "lvmthin" }.into(),
                    content: vec![volume.content.clone()],
                    ..Storage::default()
                });
                added.push(format!("{node}/{storage}"));
            }
        }
    }
    if !state.volumes.iter().any(|v| v.volid == volume.volid) {
        state.volumes.push(volume);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VM: &str = "#first line%3A with a colon\n#second\nagent: 1\nboot: order=scsi0\ncdrom: none,media=cdrom\nmemory: 2048\nparent: before\nscsi0: local-lvm:vm-100-disk-0,size=32G\nunused0: local-lvm:vm-100-disk-9\n\n[PENDING]\nmemory: 4096\ndelete: agent\n\n[before]\n#snapshot text\nmemory: 1024\nsnaptime: 1700000000\n\n[special:cloudinit]\nciuser: x\n";

    #[test]
    fn a_qemu_file_reads_as_parse_vm_config_reads_it() {
        let p = parse_guest_config(GuestType::Qemu, VM);
        assert_eq!(p.config["description"], "first line: with a colon\nsecond");
        assert_eq!(p.config["memory"], "2048");
        assert_eq!(p.config["ide2"], "none,media=cdrom");
        assert!(!p.config.contains_key("cdrom") && !p.config.contains_key("ciuser"));
        assert_eq!(p.pending["memory"], "4096");
        assert_eq!(p.pending_delete, ["agent"]);
        assert_eq!(p.snapshots, ["before"]);
        assert!(p.skipped.is_empty(), "{:?}", p.skipped);
        let vols = volumes(GuestType::Qemu, 100, &p.config);
        let ids: Vec<&str> = vols.iter().map(|(_, v)| v.volid.as_str()).collect();
        assert_eq!(ids, ["local-lvm:vm-100-disk-0", "local-lvm:vm-100-disk-9"]);
        assert_eq!(vols[0].1.size, 32 << 30);
    }

    #[test]
    fn an_lxc_file_keeps_raw_keys_bind_mounts_and_its_pending_section() {
        let text = "arch: amd64\nhostname: ct\nmp0: /srv/data,mp=/data\nrootfs: local-lvm:vm-200-disk-0,size=8G\nlxc.cgroup2.devices.allow: c 226:* rwm\nlxc.mount.entry = /dev/dri dev/dri none bind,optional,create=dir\n[pve:pending]\nmemory: 1024\n";
        let p = parse_guest_config(GuestType::Lxc, text);
        assert_eq!(
            p.raw_lxc,
            [
                (
                    "lxc.cgroup2.devices.allow".to_owned(),
                    "c 226:* rwm".to_owned()
                ),
                (
                    "lxc.mount.entry".to_owned(),
                    "/dev/dri dev/dri none bind,optional,create=dir".to_owned()
                )
            ]
        );
        assert_eq!(p.pending["memory"], "1024");
        let vols = volumes(GuestType::Lxc, 200, &p.config);
        assert_eq!(vols.len(), 1, "the bind mount is no volume");
        assert_eq!(vols[0].1.content, "rootdir");
    }

    #[test]
    fn descriptions_and_blank_values_read_as_each_parser_reads_them() {
        let text = "# GATEWAY 192.168.6.1/24\n#WAN%3A ETH1 -> vmbr0 \nboot:\nmemory: 512\n";
        let ct = parse_guest_config(GuestType::Lxc, text);
        assert_eq!(
            ct.config["description"],
            " GATEWAY 192.168.6.1/24\nWAN: ETH1 -> vmbr0 \n"
        );
        let vm = parse_guest_config(GuestType::Qemu, text);
        assert_eq!(
            vm.config["description"],
            " GATEWAY 192.168.6.1/24\nWAN: ETH1 -> vmbr0"
        );
        // A bare `boot:` does not match PVE's pattern: skipped, with the warning.
        for p in [&ct, &vm] {
            assert!(!p.config.contains_key("boot"));
            assert_eq!(p.skipped, ["boot:"]);
        }
        let blank = parse_guest_config(GuestType::Qemu, "boot: \n");
        assert_eq!(blank.config["boot"], " ");
        // A `-` in a key is qemu-server's only.
        let ct = parse_guest_config(GuestType::Lxc, "cpu-units: 2\n");
        assert_eq!(ct.skipped, ["cpu-units: 2"]);
    }

    #[test]
    fn sizes_and_bad_lines() {
        assert_eq!(parse_size("4M"), Some(4 << 20));
        assert_eq!(parse_size("1.5G"), Some(3 << 29));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("x"), None);
        let p = parse_guest_config(GuestType::Qemu, "memory 2048\nCores: 2\n");
        assert_eq!(p.skipped, ["memory 2048", "Cores: 2"]);
    }
}
