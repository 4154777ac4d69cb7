//! Disks and NICs as qemu-server and pve-container write them: `STORAGE:SIZE` allocates
//! `vm-<id>-disk-<n>` and stores `STORAGE:vm-<id>-disk-<n>,size=<n>G`; `STORAGE:0,import-from=VOLID`
//! copies a volume; an existing volid must exist; a NIC without a MAC gets `BC:24:11:..:..:..`.

use crate::auth::now;
use crate::error::ApiError;
use crate::rng;
use crate::schema::{self, PropMap, Sub};
use crate::state::{GuestType, State, Volume};
use crate::version::PveVersion;

/// Whether a key holds a volume (`proxops-pve-schema`'s one definition).
pub(crate) use proxops_pve_schema::is_volume;

/// Parses a PVE size (`32G`, `512M`, `1.5T`, bytes when bare).
pub(crate) fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = match s.chars().last()? {
        'K' | 'k' => (&s[..s.len() - 1], 1u64 << 10),
        'M' | 'm' => (&s[..s.len() - 1], 1 << 20),
        'G' | 'g' => (&s[..s.len() - 1], 1 << 30),
        'T' | 't' => (&s[..s.len() - 1], 1 << 40),
        _ => (s, 1),
    };
    let v: f64 = num.parse().ok()?;
    (v >= 0.0 && v.is_finite()).then_some((v * mult as f64) as u64)
}

/// Formats a size in the largest unit that divides it, as PVE writes `size=`.
pub(crate) fn format_size(bytes: u64) -> String {
    for (unit, m) in [
        ("T", 1u64 << 40),
        ("G", 1 << 30),
        ("M", 1 << 20),
        ("K", 1 << 10),
    ] {
        if bytes >= m && bytes.is_multiple_of(m) {
            return format!("{}{unit}", bytes / m);
        }
    }
    bytes.to_string()
}

/// The `size=` of a drive value, in bytes.
pub(crate) fn size_of(value: &str) -> Option<u64> {
    value
        .split(',')
        .find_map(|p| p.strip_prefix("size="))
        .and_then(parse_size)
}

/// The volume id of a drive value (its first field), if it is a volume.
pub(crate) fn volid_of(value: &str) -> Option<&str> {
    let first = value.split(',').next()?;
    (first.contains(':') && !first.starts_with('/')).then_some(first)
}

fn keys(version: PveVersion, kind: GuestType, key: &str) -> &'static [Sub] {
    let path = match kind {
        GuestType::Qemu => "/nodes/{node}/qemu",
        GuestType::Lxc => "/nodes/{node}/lxc",
    };
    schema::prop_keys(version, "POST", path, key).unwrap_or(&[])
}

fn get<'a>(map: &'a PropMap, k: &str) -> Option<&'a str> {
    map.iter()
        .find(|(key, _)| key == k)
        .map(|(_, v)| v.as_str())
}

fn set(map: &mut PropMap, k: &str, v: String) {
    match map.iter_mut().find(|(key, _)| key == k) {
        Some(e) => e.1 = v,
        None => map.push((k.to_string(), v)),
    }
}

/// Whether a volid names a volume (`local:100/vm-100-disk-0.raw`, `base-1-disk-0/vm-2-disk-0`).
fn names_in(volid: &str, name: &str) -> bool {
    let path = volid.split_once(':').map_or(volid, |(_, p)| p);
    path.split('/')
        .any(|part| part.split('.').next() == Some(name))
}

/// Allocates a new image volume; returns its volid.
pub(crate) fn allocate(
    st: &mut State,
    node: &str,
    sid: &str,
    vmid: u32,
    size: u64,
    format: Option<&str>,
    kind: GuestType,
) -> Result<String, ApiError> {
    allocate_named(st, node, sid, vmid, size, format, kind, None)
}

/// Allocates an image volume with a fixed name (`vm-N-cloudinit`) or the next free disk name.
// The arguments are the volume's properties; a struct would only rename them.
#[allow(clippy::too_many_arguments)]
pub(crate) fn allocate_named(
    st: &mut State,
    node: &str,
    sid: &str,
    vmid: u32,
    size: u64,
    format: Option<&str>,
    kind: GuestType,
    fixed: Option<&str>,
) -> Result<String, ApiError> {
    let storage = st
        .storage(node, sid)
        .ok_or_else(|| ApiError::fail(format!("storage '{sid}' does not exist")))?
        .clone();
    let (content, what) = match kind {
        GuestType::Qemu => ("images", "vm images"),
        GuestType::Lxc => ("rootdir", "container directories"),
    };
    // A cloud-init drive (a fixed name) is allocated whatever the storage's content types:
    // qemu-server `API2/Qemu.pm` `create_disks` calls `PVE::Storage::vdisk_alloc`, which checks
    // none, and `$check_storage_access` has "nothing to check" for `cloudinit`.
    if fixed.is_none() && !storage.has_content(content) {
        return Err(ApiError::fail(format!(
            "storage '{sid}' does not support {what}"
        )));
    }
    let file = storage.file_based();
    let fmt = match (format, storage.kind.as_str(), kind) {
        (_, "zfspool", GuestType::Lxc) => "subvol",
        (Some(f), _, _) if file => f,
        _ => "raw",
    }
    .to_string();
    let prefix = if fmt == "subvol" { "subvol" } else { "vm" };
    let used: Vec<String> = st
        .volumes_on(node, &storage)
        .map(|v| v.volid.clone())
        .collect();
    let name = match fixed {
        Some(n) if used.iter().any(|v| names_in(v, n)) => {
            return Err(ApiError::fail(format!("volume '{sid}:{n}' already exists")));
        }
        Some(n) => n.to_string(),
        None => (0u32..)
            .map(|i| format!("{prefix}-{vmid}-disk-{i}"))
            .find(|n| !used.iter().any(|v| names_in(v, n)))
            .unwrap_or_default(),
    };
    let volid = if file && fmt != "subvol" {
        format!("{sid}:{vmid}/{name}.{fmt}")
    } else {
        format!("{sid}:{name}")
    };
    st.volumes.push(Volume {
        node: node.into(),
        storage: sid.into(),
        volid: volid.clone(),
        content: "images".into(),
        format: fmt,
        size,
        ctime: now(),
        vmid: Some(vmid),
    });
    Ok(volid)
}

/// The synchronous work a drive value makes PVE do (see [`crate::TaskDurations::sync_of`]):
/// `alloc` for a new volume (`STORAGE:SIZE`, qemu's `STORAGE:cloudinit`), `import` for
/// `STORAGE:0,import-from=VOLID` (a copy), nothing for an existing volume or a path. The same
/// cases as [`process_drive`].
pub(crate) fn work_of(
    version: PveVersion,
    kind: GuestType,
    key: &str,
    value: &str,
) -> Option<&'static str> {
    if !is_volume(kind, key) || key.starts_with("unused") {
        return None;
    }
    let map = schema::parse_property_string(keys(version, kind, key), value).ok()?;
    let file = get(&map, "file").or_else(|| get(&map, "volume"))?;
    if file.starts_with('/') {
        return None;
    }
    let (_, rest) = file.split_once(':')?;
    if get(&map, "import-from").is_some() {
        return Some("import");
    }
    if rest == "cloudinit" && kind == GuestType::Qemu {
        return Some("alloc");
    }
    let cdrom = get(&map, "media") == Some("cdrom");
    let new = !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit() || b == b'.') && !cdrom;
    new.then_some("alloc")
}

/// Turns a requested drive value into the stored one, allocating or importing volumes.
pub(crate) fn process_drive(
    st: &mut State,
    node: &str,
    vmid: u32,
    kind: GuestType,
    key: &str,
    value: &str,
) -> Result<String, ApiError> {
    let subs = keys(st.pve_version, kind, key);
    let mut map =
        schema::parse_property_string(subs, value).map_err(|e| ApiError::param(key, e))?;
    let file = get(&map, "file")
        .or_else(|| get(&map, "volume"))
        .unwrap_or("")
        .to_string();
    let file_key = if kind == GuestType::Lxc {
        "volume"
    } else {
        "file"
    };
    let import = get(&map, "import-from").map(str::to_string);
    let cdrom = get(&map, "media") == Some("cdrom");
    if file == "none" || file == "cdrom" || file.starts_with('/') {
        return Ok(schema::print_property_string(subs, &map));
    }
    let (sid, rest) = file.split_once(':').unwrap_or(("", &file));
    // `STORAGE:cloudinit` makes the cloud-init drive `vm-N-cloudinit`, a 4 MiB cdrom.
    if rest == "cloudinit" && kind == GuestType::Qemu {
        let name = format!("vm-{vmid}-cloudinit");
        let volid = allocate_named(st, node, sid, vmid, 4 << 20, Some("raw"), kind, Some(&name))?;
        set(&mut map, file_key, volid);
        set(&mut map, "media", "cdrom".into());
        return Ok(schema::print_property_string(subs, &map));
    }
    let is_new =
        !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit() || b == b'.') && !cdrom;
    if is_new {
        let gib: f64 = rest.parse().unwrap_or(0.0);
        let fmt = get(&map, "format").map(str::to_string);
        let (size, volfmt) = if let Some(src) = &import {
            if gib != 0.0 {
                return Err(ApiError::param(
                    key,
                    "'import-from' requires special syntax - use <storage ID>:0,import-from=<source>",
                ));
            }
            let source = st
                .volume(node, src)
                .ok_or_else(|| ApiError::fail(format!("volume '{src}' does not exist")))?;
            // qemu-server `API2/Qemu.pm` `$check_storage_access`: an import source must be an
            // image or (since 8.3) an import volume, and a whole OVA is an appliance, not a disk
            // (only its `x.ova/disk.vmdk` members need extraction and import).
            let import_ok = st.pve_version.import_content() && source.content == "import";
            if source.content != "images" && !import_ok {
                return Err(ApiError::param(
                    key,
                    format!(
                        "{src} has wrong type '{}' - needs to be 'images' or 'import'",
                        source.content
                    ),
                ));
            }
            if source.format == "ova" || src.ends_with(".ova") {
                return Err(ApiError::param(
                    key,
                    format!(
                        "{src}: a whole OVA cannot be imported as a disk; import one of its disks (<file>.ova/<disk>)"
                    ),
                ));
            }
            (source.size, fmt.or_else(|| Some(source.format.clone())))
        } else if key == "efidisk0" || key == "tpmstate0" {
            // OVMF variables: 528 KiB for the 2m type, 4 MiB for 4m; the TPM state is 4 MiB.
            let small = key == "efidisk0" && get(&map, "efitype") != Some("4m");
            (if small { 528 << 10 } else { 4 << 20 }, fmt)
        } else {
            ((gib * (1u64 << 30) as f64) as u64, fmt)
        };
        let volid = allocate(st, node, sid, vmid, size, volfmt.as_deref(), kind)?;
        map.retain(|(k, _)| k != "import-from" && k != "format");
        set(&mut map, file_key, volid);
        set(&mut map, "size", format_size(size));
        return Ok(schema::print_property_string(subs, &map));
    }
    if import.is_some() {
        return Err(ApiError::param(
            key,
            "'import-from' requires special syntax - use <storage ID>:0,import-from=<source>",
        ));
    }
    let vol = st
        .volume(node, &file)
        .ok_or_else(|| ApiError::fail(format!("volume '{file}' does not exist")))?;
    if get(&map, "size").is_none() && !cdrom {
        let size = format_size(vol.size);
        set(&mut map, "size", size);
    }
    Ok(schema::print_property_string(subs, &map))
}

fn random_mac() -> String {
    let b = rng::random_bytes(3);
    format!("BC:24:11:{:02X}:{:02X}:{:02X}", b[0], b[1], b[2])
}

/// Completes a NIC value: a MAC when missing; qemu writes `model=MAC` first, lxc `type=veth`.
pub(crate) fn process_nic(
    version: PveVersion,
    kind: GuestType,
    key: &str,
    value: &str,
) -> Result<String, ApiError> {
    let subs = keys(version, kind, key);
    let mut map =
        schema::parse_property_string(subs, value).map_err(|e| ApiError::param(key, e))?;
    match kind {
        GuestType::Qemu => {
            let model = get(&map, "model").unwrap_or("virtio").to_string();
            let mac = get(&map, "macaddr")
                .map(str::to_uppercase)
                .unwrap_or_else(random_mac);
            map.retain(|(k, _)| k != "model" && k != "macaddr");
            let rest = schema::print_property_string(subs, &map);
            Ok(if rest.is_empty() {
                format!("{model}={mac}")
            } else {
                format!("{model}={mac},{rest}")
            })
        }
        GuestType::Lxc => {
            if get(&map, "hwaddr").is_none() {
                map.push(("hwaddr".into(), random_mac()));
            }
            if get(&map, "type").is_none() {
                map.push(("type".into(), "veth".into()));
            }
            Ok(schema::print_property_string(subs, &map))
        }
    }
}

/// Removes the volumes a guest owns: those its config references (and, when asked, every other
/// volume carrying its VMID on the node's storages). Fails when a linked clone uses a base volume.
pub(crate) fn destroy_volumes(
    st: &mut State,
    vmid: u32,
    unreferenced: bool,
) -> Result<Vec<String>, String> {
    let Some(g) = st.guests.get(&vmid) else {
        return Ok(Vec::new());
    };
    let node = g.node.clone();
    let referenced: Vec<String> = g
        .config
        .iter()
        .filter(|(k, _)| is_volume(g.kind, k))
        .filter_map(|(_, v)| volid_of(v).map(str::to_string))
        .collect();
    let mut doomed: Vec<String> = st
        .volumes
        .iter()
        .filter(|v| v.vmid == Some(vmid))
        .filter(|v| {
            referenced.contains(&v.volid)
                || (unreferenced && st.storage(&node, &v.storage).is_some())
        })
        .map(|v| v.volid.clone())
        .collect();
    doomed.sort();
    doomed.dedup();
    for volid in &doomed {
        let base = volid.split(':').nth(1).unwrap_or_default();
        if base.starts_with("base-") {
            let users = st
                .volumes
                .iter()
                .any(|v| v.volid.contains(&format!("{base}/")));
            if users {
                return Err(format!(
                    "base volume '{volid}' is still in use by linked cloned"
                ));
            }
        }
    }
    let mut log = Vec::new();
    for volid in doomed {
        st.remove_volume(&node, &volid);
        log.push(format!("Logical volume \"{volid}\" successfully removed"));
    }
    Ok(log)
}
