//! A VM's CD-ROM drives and cloud-init drive (any `ide`/`sata`/`scsi` slot), EFI vars disk and
//! TPM state as their typed `hardware` fields. The volumes stay the ones PVE holds: the planner
//! compares their storage and the sub-keys the manifest writes, never re-creates them
//! (diff.rs `volume`, `cdrom`).

use super::props::{boolean, no_field, parse, push, section};
use serde_json::{Map, Value};

/// A drive slot holding a CD-ROM or the cloud-init drive: `Some(Ok(field))` when written,
/// `Some(Err(reason))` when it cannot be, `None` when the slot holds a disk.
pub(crate) fn drive(
    slot: &str,
    value: &str,
    spec: &mut Map<String, Value>,
) -> Option<Result<String, String>> {
    let pairs = match parse(slot, value) {
        Ok(p) => p,
        Err(e) => return Some(Err(e)),
    };
    let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let file = get("file").unwrap_or("");
    let cloudinit = file
        .split_once(':')
        .is_some_and(|(_, name)| name.ends_with("cloudinit") || name.contains("cloudinit."));
    if get("media") != Some("cdrom") && !cloudinit {
        return None;
    }
    // `size` is what PVE recorded of the volume, not a setting (it is never written).
    let extra = pairs
        .iter()
        .find(|(k, _)| !matches!(k.as_str(), "file" | "media" | "size"));
    if let Some((k, v)) = extra {
        let field = if cloudinit {
            "hardware.cloud-init"
        } else {
            "hardware.cdroms"
        };
        return Some(Err(no_field(slot, k, v, field)));
    }
    if cloudinit {
        let Some((storage, _)) = file.split_once(':') else {
            return Some(Err("the cloud-init drive names no storage".into()));
        };
        if section(spec, &["hardware"]).is_some_and(|h| h.contains_key("cloud-init")) {
            return Some(Err(
                "it is a second cloud-init drive: a VM has one (`hardware.cloud-init`)".into(),
            ));
        }
        let mut ci = Map::new();
        ci.insert("enabled".into(), Value::Bool(true));
        ci.insert("storage".into(), Value::from(storage));
        ci.insert("slot".into(), Value::from(slot));
        section(spec, &["hardware"])?.insert("cloud-init".into(), Value::Object(ci));
        return Some(Ok("hardware.cloud-init".into()));
    }
    let mut cd = Map::new();
    cd.insert("slot".into(), Value::from(slot));
    match file {
        // An empty drive.
        "" | "none" => cd.insert("iso".into(), Value::from("none")),
        // An ISO ProxOps does not manage (or the host's drive, `cdrom`): named as it is.
        v => cd.insert("volume".into(), Value::from(v)),
    };
    push(spec, &["hardware"], "cdroms", Value::Object(cd));
    Some(Ok("hardware.cdroms".into()))
}

/// `efidisk0`: the storage, `efitype`, `pre-enrolled-keys` and `ms-cert`.
pub(crate) fn efidisk(value: &str, spec: &mut Map<String, Value>) -> Result<String, String> {
    const FIELD: &str = "hardware.efi-disk";
    let mut efi = Map::new();
    for (k, v) in parse("efidisk0", value)? {
        match k.as_str() {
            "file" => {
                let Some((storage, _)) = v.split_once(':') else {
                    return Err(format!(
                        "its volume `{v}` is a path, not a storage volume: `{FIELD}` names a storage"
                    ));
                };
                efi.insert("storage".into(), Value::from(storage));
            }
            "size" => {}
            "efitype" => {
                efi.insert("template".into(), Value::from(v));
            }
            "pre-enrolled-keys" => {
                let Some(b) = boolean(&v) else {
                    return Err(no_field("efidisk0", &k, &v, FIELD));
                };
                let sb = if b { "enabled" } else { "disabled" };
                efi.insert("secure-boot".into(), Value::from(sb));
            }
            "ms-cert" => {
                efi.insert("ms-cert".into(), Value::from(v));
            }
            _ => return Err(no_field("efidisk0", &k, &v, FIELD)),
        }
    }
    section(spec, &["hardware"])
        .ok_or_else(|| "`hardware` is not an object".to_owned())?
        .insert("efi-disk".into(), Value::Object(efi));
    Ok(FIELD.into())
}

/// `tpmstate0`: the storage and `version`. Without `version` PVE means `v1.2`
/// (qemu-server `QemuServer/Drive.pm` `$tpmstate_fmt`), while `hardware.tpm` writes `v2.0` unless
/// told: adopt writes the version it reads, and reports a config that names none.
pub(crate) fn tpmstate(value: &str, spec: &mut Map<String, Value>) -> Result<String, String> {
    const FIELD: &str = "hardware.tpm";
    let mut tpm = Map::new();
    for (k, v) in parse("tpmstate0", value)? {
        match k.as_str() {
            "file" => {
                let Some((storage, _)) = v.split_once(':') else {
                    return Err(format!(
                        "its volume `{v}` is a path, not a storage volume: `{FIELD}` names a storage"
                    ));
                };
                tpm.insert("storage".into(), Value::from(storage));
            }
            "size" => {}
            "version" => {
                tpm.insert("version".into(), Value::from(v));
            }
            _ => return Err(no_field("tpmstate0", &k, &v, FIELD)),
        }
    }
    if !tpm.contains_key("version") {
        return Err(format!(
            "it names no `version` (PVE's default `v1.2`): declare `{FIELD}.version: v1.2` by hand and check that PVE writes it"
        ));
    }
    section(spec, &["hardware"])
        .ok_or_else(|| "`hardware` is not an object".to_owned())?
        .insert("tpm".into(), Value::Object(tpm));
    Ok(FIELD.into())
}
