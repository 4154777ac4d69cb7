//! A container's config keys as typed `LXC`/`TemplateCT` fields. The root filesystem and
//! volume mount points keep the volumes they hold: the engine never re-creates a volume in an
//! occupied slot, compares only its storage and grows it only when the manifest's size is
//! larger (diff.rs `volume`). A container adopted has no `template` (PVE does not record it),
//! so ProxOps can take it over but never create it again.

use super::props::{self, bool_value, set, split};
use serde_json::{Map, Value};

/// Writes the container key `key = value` into `spec` as its typed field; `Ok(field)` names
/// the field written, `Err(reason)` says why it was not.
pub(crate) fn place(
    key: &str,
    value: &str,
    field: &str,
    spec: &mut Map<String, Value>,
) -> Result<String, String> {
    let why =
        |why: String| format!("{why}: declare `{field}` by hand from the live value `{value}`");
    let cannot = |w: String| Err(why(w));
    let unreadable = || cannot(format!("adopt cannot read the value of `{key}`"));
    let family = key.trim_end_matches(|c: char| c.is_ascii_digit());
    let (path, v): (&[&str], Option<Value>) = match family {
        "memory" => (&["memory"], mib(value)),
        "swap" => (&["swap"], mib(value)),
        "cores" => (&["cpu", "cores"], int(value)),
        "cpuunits" => (&["cpu", "units"], int(value)),
        "cpulimit" => (&["cpu", "limit"], number(value)),
        "hostname" => (&["dns", "hostname"], Some(Value::from(value))),
        "nameserver" => (
            &["dns", "nameservers"],
            Some(Value::Array(
                value
                    .split([' ', ','])
                    .filter(|w| !w.is_empty())
                    .map(Value::from)
                    .collect(),
            )),
        ),
        "searchdomain" => (&["dns", "domain"], Some(Value::from(value))),
        "arch" => (
            &["arch"],
            one_of(value, &["amd64", "i386", "arm64", "armhf", "riscv64"]),
        ),
        "ostype" => (
            &["ostype"],
            one_of(
                value,
                &[
                    "debian",
                    "devuan",
                    "ubuntu",
                    "centos",
                    "fedora",
                    "opensuse",
                    "archlinux",
                    "alpine",
                    "gentoo",
                    "nixos",
                    "unmanaged",
                ],
            ),
        ),
        "onboot" | "protection" | "console" | "unprivileged" => {
            (&["options", family], bool_value(value))
        }
        "startup" => (&["options", "startup"], Some(Value::from(value))),
        "tty" => (&["options", "ttys"], int(value)),
        "cmode" => (
            &["options", "cmode"],
            one_of(value, &["tty", "console", "shell"]),
        ),
        "timezone" | "hookscript" | "entrypoint" => {
            (&["options", family], Some(Value::from(value)))
        }
        "features" => return features(value, spec).map_err(why),
        "rootfs" => {
            let root = volume(key, value, false).map_err(why)?;
            spec.insert("root".into(), root);
            return Ok("root".into());
        }
        "mp" => return mount(key, value, spec).map_err(why),
        "net" => {
            let nic = network(key, value).map_err(why)?;
            push(spec, "networks", nic);
            return Ok("networks".into());
        }
        "dev" => {
            let dev = device(key, value).map_err(why)?;
            push(spec, "devices", dev);
            return Ok("devices".into());
        }
        _ => return cannot(format!("adopt does not translate `{key}` yet")),
    };
    let Some(v) = v else { return unreadable() };
    set(spec, path, v);
    Ok(path.join("."))
}

/// After every key is placed: list entries in slot order (`mp2` before `mp10`), and the
/// privilege mode PVE defaults to when the config does not say it (`unprivileged: 0`, the
/// schema default of pve-container `PVE/LXC/Config.pm`), since a manifest without it means
/// unprivileged.
pub(crate) fn finish(spec: &mut Map<String, Value>) {
    for list in ["mount-points", "bind-mounts", "networks", "devices"] {
        if let Some(Value::Array(items)) = spec.get_mut(list) {
            items.sort_by_key(|i| {
                i["slot"]
                    .as_str()
                    .map(|s| s.trim_start_matches(|c: char| c.is_ascii_alphabetic()))
                    .and_then(|n| n.parse::<u32>().ok())
            });
        }
    }
    let options = spec
        .entry("options")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(o) = options {
        o.entry("unprivileged").or_insert(Value::Bool(false));
    }
}

fn push(spec: &mut Map<String, Value>, list: &str, v: Value) {
    let entry = spec
        .entry(list.to_owned())
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(items) = entry {
        items.push(v);
    }
}

fn int(v: &str) -> Option<Value> {
    v.parse::<u64>().ok().map(Value::from)
}

fn mib(v: &str) -> Option<Value> {
    v.parse::<u64>()
        .ok()
        .map(|n| Value::from(format!("{n}MiB")))
}

fn number(v: &str) -> Option<Value> {
    let n = v.parse::<f64>().ok()?;
    if n.fract() == 0.0 && n >= 0.0 {
        return Some(Value::from(n as u64));
    }
    serde_json::Number::from_f64(n).map(Value::Number)
}

fn one_of(v: &str, allowed: &[&str]) -> Option<Value> {
    allowed.contains(&v).then(|| Value::from(v))
}

/// `features`: each sub-key as its `options` field; nothing is written unless all translate.
fn features(value: &str, spec: &mut Map<String, Value>) -> Result<String, String> {
    let mut out = Vec::new();
    for (k, raw) in split(value).1 {
        let (field, v) = match k {
            "nesting" | "keyctl" | "fuse" | "mknod" => (k, bool_value(raw)),
            "force_rw_sys" => ("force-rw-sys", bool_value(raw)),
            "mount" => (
                "mount",
                Some(Value::Array(
                    raw.split(';')
                        .filter(|f| !f.is_empty())
                        .map(Value::from)
                        .collect(),
                )),
            ),
            _ => return Err(format!("its feature `{k}` is not translated by adopt")),
        };
        let v =
            v.ok_or_else(|| format!("its feature `{k}={raw}` has a value adopt cannot read"))?;
        out.push((field, v));
    }
    for (field, v) in out {
        set(spec, &["options", field], v);
    }
    Ok("options".into())
}

/// The mount options shared by `rootfs` and volume mount points (`backup` only on the latter:
/// the root is always backed up).
fn mount_options(
    key: &str,
    pairs: &[(&str, &str)],
    mp: bool,
) -> Result<Map<String, Value>, String> {
    let mut opts = Map::new();
    for (k, v) in pairs {
        let (field, value) = match *k {
            "volume" | "size" | "mp" => continue,
            "ro" => ("read-only", bool_value(v)),
            "backup" if mp => ("backup", bool_value(v)),
            "acl" | "quota" | "shared" | "replicate" => (*k, bool_value(v)),
            "mountoptions" => ("mount-options", Some(Value::from(*v))),
            _ => {
                return Err(format!(
                    "its option `{k}={v}` of `{key}` is not translated by adopt"
                ));
            }
        };
        let value =
            value.ok_or_else(|| format!("its option `{k}={v}` has a value adopt cannot read"))?;
        opts.insert(field.into(), value);
    }
    Ok(opts)
}

/// The volume `rootfs` or `mpN` holds: its storage, id and size, its mount point for `mpN`, and its options.
fn volume(key: &str, value: &str, mp: bool) -> Result<Value, String> {
    let (default, pairs) = split(value);
    let volume = default
        .or_else(|| pairs.iter().find(|(k, _)| *k == "volume").map(|(_, v)| *v))
        .ok_or_else(|| "it names no volume".to_owned())?;
    let (storage, _) = volume
        .split_once(':')
        .ok_or_else(|| format!("`{volume}` is not a storage volume"))?;
    let size = pairs
        .iter()
        .find(|(k, _)| *k == "size")
        .ok_or_else(|| "PVE records no size for it".to_owned())?
        .1;
    let size = props::size(size).ok_or_else(|| format!("its size `{size}` is not whole MiB"))?;
    let mut out = Map::new();
    out.insert("storage".into(), Value::from(storage));
    out.insert("volume".into(), Value::from(volume));
    out.insert("size".into(), size);
    if mp {
        if let Some((_, path)) = pairs.iter().find(|(k, _)| *k == "mp") {
            out.insert("mount-point".into(), Value::from(*path));
        }
        out.insert("slot".into(), Value::from(key));
    }
    let opts = mount_options(key, &pairs, mp)?;
    if !opts.is_empty() {
        out.insert("options".into(), Value::Object(opts));
    }
    Ok(Value::Object(out))
}

/// `mpN`: a volume (`mount-points`) or a host path or device bind-mounted (`bind-mounts`).
fn mount(key: &str, value: &str, spec: &mut Map<String, Value>) -> Result<String, String> {
    let (default, pairs) = split(value);
    let source = default
        .or_else(|| pairs.iter().find(|(k, _)| *k == "volume").map(|(_, v)| *v))
        .unwrap_or_default();
    if !source.starts_with('/') {
        let mp = volume(key, value, true)?;
        push(spec, "mount-points", mp);
        return Ok("mount-points".into());
    }
    let mut bind = Map::new();
    bind.insert("host-path".into(), Value::from(source));
    for (k, v) in &pairs {
        let (field, value) = match *k {
            "volume" => continue,
            "mp" => ("mount-point", Some(Value::from(*v))),
            "ro" => ("read-only", bool_value(v)),
            "shared" => ("shared", bool_value(v)),
            _ => {
                return Err(format!(
                    "its option `{k}={v}` is not one a bind mount takes in a manifest"
                ));
            }
        };
        let value =
            value.ok_or_else(|| format!("its option `{k}={v}` has a value adopt cannot read"))?;
        bind.insert(field.into(), value);
    }
    if !bind.contains_key("mount-point") {
        return Err("it has no mount point (`mp=`)".into());
    }
    bind.insert("slot".into(), Value::from(key));
    push(spec, "bind-mounts", Value::Object(bind));
    Ok("bind-mounts".into())
}

/// `netN` as a `networks` entry.
fn network(key: &str, value: &str) -> Result<Value, String> {
    let mut nic = Map::new();
    nic.insert("slot".into(), Value::from(key));
    for (k, v) in split(value).1 {
        let (field, value) = match k {
            "name" => ("iface", Some(Value::from(v))),
            "bridge" | "hwaddr" | "ip" | "gw" | "ip6" | "gw6" => (k, Some(Value::from(v))),
            "type" => ("type", Some(Value::from(v))),
            "tag" => ("tag", v.parse::<u16>().ok().map(Value::from)),
            "mtu" => ("mtu", v.parse::<u32>().ok().map(Value::from)),
            "rate" => ("rate-limit", v.parse::<u32>().ok().map(Value::from)),
            "firewall" => ("firewall", bool_value(v)),
            "host-managed" => ("host-managed", bool_value(v)),
            _ => return Err(format!("its option `{k}={v}` is not translated by adopt")),
        };
        let value =
            value.ok_or_else(|| format!("its option `{k}={v}` has a value adopt cannot read"))?;
        nic.insert(field.into(), value);
    }
    if !nic.contains_key("bridge") {
        return Err("it has no bridge".into());
    }
    Ok(Value::Object(nic))
}

/// `devN` as a `devices` entry.
fn device(key: &str, value: &str) -> Result<Value, String> {
    let (default, pairs) = split(value);
    let mut dev = Map::new();
    if let Some(path) = default {
        dev.insert("path".into(), Value::from(path));
    }
    for (k, v) in pairs {
        let (field, value) = match k {
            "path" => ("path", Some(Value::from(v))),
            "uid" | "gid" => (k, v.parse::<u32>().ok().map(Value::from)),
            "mode" => ("mode", Some(Value::from(v))),
            "deny-write" => ("deny-write", bool_value(v)),
            _ => return Err(format!("its option `{k}={v}` is not translated by adopt")),
        };
        let value =
            value.ok_or_else(|| format!("its option `{k}={v}` has a value adopt cannot read"))?;
        dev.insert(field.into(), value);
    }
    if !dev.contains_key("path") {
        return Err("it names no device path".into());
    }
    dev.insert("slot".into(), Value::from(key));
    Ok(Value::Object(dev))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placed(key: &str, value: &str) -> (Result<String, String>, Map<String, Value>) {
        let mut spec = Map::new();
        let r = place(key, value, "field", &mut spec);
        (r, spec)
    }

    #[test]
    fn untranslatable_values_are_reported_and_write_nothing() {
        for (key, value) in [
            ("features", "nesting=1,future=1"),
            ("mp0", "/mnt/a,mp=/a,backup=1"),
            ("mp1", "local-lvm:vm-1-disk-1,mp=/b"),
            ("rootfs", "local-lvm:vm-1-disk-0,size=1536K"),
            ("net0", "name=eth0,type=veth"),
            ("dev0", "gid=44"),
            ("arch", "s390x"),
            ("cmode", "serial"),
            ("memory", "lots"),
        ] {
            let (r, spec) = placed(key, value);
            let why = r.expect_err(key);
            assert!(why.contains("declare `field` by hand"), "{key}: {why}");
            assert!(spec.is_empty(), "{key}: {spec:?}");
        }
    }

    #[test]
    fn volumes_keep_storage_and_size_and_host_paths_are_bind_mounts() {
        let (r, spec) = placed("rootfs", "local:100/vm-100-disk-0.raw,size=204M,acl=0");
        assert_eq!(r.as_deref(), Ok("root"));
        assert_eq!(
            spec["root"],
            serde_json::json!({"storage": "local", "volume": "local:100/vm-100-disk-0.raw", "size": "204MiB", "options": {"acl": false}})
        );
        let (r, spec) = placed("mp3", "/mnt/pve/cephfs/movies,mp=/movies,ro=1,shared=1");
        assert_eq!(r.as_deref(), Ok("bind-mounts"));
        assert_eq!(
            spec["bind-mounts"],
            serde_json::json!([{"host-path": "/mnt/pve/cephfs/movies", "mount-point": "/movies", "read-only": true, "shared": true, "slot": "mp3"}])
        );
    }

    #[test]
    fn finish_orders_slots_numerically_and_says_privileged_when_pve_defaults_to_it() {
        let mut spec = Map::new();
        for (k, v) in [
            ("dev10", "/dev/b"),
            ("dev2", "/dev/a"),
            ("features", "mount=nfs;cifs,force_rw_sys=1"),
        ] {
            assert!(place(k, v, "f", &mut spec).is_ok(), "{k}");
        }
        finish(&mut spec);
        let slots: Vec<&str> = spec["devices"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|d| d["slot"].as_str())
            .collect();
        assert_eq!(slots, ["dev2", "dev10"]);
        assert_eq!(
            spec["options"],
            serde_json::json!({"mount": ["nfs", "cifs"], "force-rw-sys": true, "unprivileged": false})
        );
    }
}
