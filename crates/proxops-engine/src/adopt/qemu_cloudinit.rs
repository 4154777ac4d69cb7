//! A VM's cloud-init keys as `cloud-init-data`: the user, type, upgrade, custom snippets, DNS,
//! SSH keys and per-NIC addresses, spelled as desired/vm.rs writes them back.

use super::props::{boolean, no_field, parse, push, section};
use serde_json::{Map, Value};

/// Translates cloud-init key `key`; `None` when it is not one.
pub(crate) fn place(
    key: &str,
    value: &str,
    spec: &mut Map<String, Value>,
) -> Option<Result<String, String>> {
    let field = |f: &str| format!("cloud-init-data.{f}");
    let (name, v) = match key {
        "ciuser" => ("ci-user", Value::from(value)),
        "citype" => ("ci-type", Value::from(value)),
        "ciupgrade" => match boolean(value) {
            Some(b) => ("ci-upgrade", Value::Bool(b)),
            None => return Some(Err(format!("`{value}` is not a boolean"))),
        },
        "nameserver" => ("nameservers", words(value)),
        "searchdomain" => ("search-domains", words(value)),
        "cicustom" => return Some(custom(value, spec)),
        "sshkeys" => return Some(ssh_keys(value, spec)),
        k if k.starts_with("ipconfig") => return Some(ipconfig(k, value, spec)),
        _ => return None,
    };
    let Some(ci) = section(spec, &["cloud-init-data"]) else {
        return Some(Err("`cloud-init-data` is not an object".into()));
    };
    ci.insert(name.into(), v);
    Some(Ok(field(name)))
}

fn words(value: &str) -> Value {
    Value::Array(
        value
            .split([' ', ',', ';', '\t'])
            .filter(|w| !w.is_empty())
            .map(Value::from)
            .collect(),
    )
}

fn custom(value: &str, spec: &mut Map<String, Value>) -> Result<String, String> {
    const FIELD: &str = "cloud-init-data.ci-custom";
    let mut parts = Map::new();
    for (k, v) in parse("cicustom", value)? {
        match k.as_str() {
            "user" | "network" | "meta" | "vendor" => parts.insert(k, Value::from(v)),
            _ => return Err(no_field("cicustom", &k, &v, FIELD)),
        };
    }
    section(spec, &["cloud-init-data"])
        .ok_or_else(|| "`cloud-init-data` is not an object".to_owned())?
        .insert("ci-custom".into(), Value::Object(parts));
    Ok(FIELD.into())
}

/// PVE keeps the keys percent-encoded, one per line (qemu-server `API2/Qemu.pm`: `sshkeys` is
/// URI-encoded); each line must be a key PVE would take again (desired/vm.rs `check_ssh_keys`).
fn ssh_keys(value: &str, spec: &mut Map<String, Value>) -> Result<String, String> {
    const FIELD: &str = "cloud-init-data.ssh-keys";
    let text = percent_decode(value)
        .ok_or_else(|| "its value is not percent-encoded UTF-8 as PVE writes it".to_owned())?;
    let mut keys = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Err(e) = proxops_model::kinds::common::check_ssh_public_key(line) {
            return Err(format!(
                "a line is not an SSH public key PVE would take again ({e}): declare `{FIELD}` by hand"
            ));
        }
        keys.push(Value::from(line));
    }
    if keys.is_empty() {
        return Err(format!(
            "it holds no key, which `{FIELD}` cannot say: ProxOps leaves it as it is"
        ));
    }
    section(spec, &["cloud-init-data"])
        .ok_or_else(|| "`cloud-init-data` is not an object".to_owned())?
        .insert("ssh-keys".into(), Value::Array(keys));
    Ok(FIELD.into())
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn ipconfig(key: &str, value: &str, spec: &mut Map<String, Value>) -> Result<String, String> {
    const FIELD: &str = "cloud-init-data.ipconfigs";
    let nic: u32 = key["ipconfig".len()..]
        .parse()
        .map_err(|_| format!("`{key}` has no NIC index"))?;
    let mut ip = Map::new();
    ip.insert("nic".into(), Value::from(nic));
    for (k, v) in parse(key, value)? {
        let field = match k.as_str() {
            "ip" => "ip",
            "gw" => "gateway",
            "ip6" => "ip6",
            "gw6" => "gateway6",
            _ => return Err(no_field(key, &k, &v, FIELD)),
        };
        ip.insert(field.into(), Value::from(v));
    }
    push(spec, &["cloud-init-data"], "ipconfigs", Value::Object(ip));
    Ok(FIELD.into())
}
