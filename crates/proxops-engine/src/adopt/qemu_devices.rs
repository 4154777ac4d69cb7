//! A VM's devices as their typed `hardware` fields: passed-through PCI and USB devices, serial
//! ports, audio, the random number generator, the display, the machine type and NUMA nodes.
//! Each sub-key the desired renderer writes (desired/vm.rs `hardware_keys`) is read back here
//! in the same spelling, so that the plan after adopt compares equal.

use super::props::{boolean, len, no_field, parse, push, section};
use serde_json::{Map, Value};

/// Translates device key `key`; `None` when it is not one of these devices.
pub(crate) fn place(
    key: &str,
    value: &str,
    spec: &mut Map<String, Value>,
) -> Option<Result<String, String>> {
    let family = key.trim_end_matches(|c: char| c.is_ascii_digit());
    Some(match family {
        "hostpci" => pci(key, value, spec),
        "usb" => usb(key, value, spec),
        "serial" => serial(key, value, spec),
        "audio" => audio(value, spec),
        "rng" => rng(value, spec),
        "vga" => vga(value, spec),
        "machine" => machine(value, spec),
        "numa" if key != "numa" => numa_node(key, value, spec),
        _ => return None,
    })
}

fn hardware(spec: &mut Map<String, Value>) -> Result<&mut Map<String, Value>, String> {
    section(spec, &["hardware"]).ok_or_else(|| "`hardware` is not an object".to_owned())
}

fn flag(k: &str, v: &str, key: &str, field: &str) -> Result<Value, String> {
    boolean(v)
        .map(Value::Bool)
        .ok_or_else(|| no_field(key, k, v, field))
}

fn pci(key: &str, value: &str, spec: &mut Map<String, Value>) -> Result<String, String> {
    const FIELD: &str = "hardware.pci-devices";
    let mut dev = Map::new();
    dev.insert("slot".into(), Value::from(key));
    for (k, v) in parse(key, value)? {
        let (field, v) = match k.as_str() {
            // Several functions (`01:00.0;01:00.1`) are one device to PVE, not to the model.
            "host" if v.contains(';') => {
                return Err(format!(
                    "it passes several host functions (`{v}`) as one device, which `{FIELD}[].device` (one PCI address) cannot say: ProxOps leaves it as it is"
                ));
            }
            "host" => ("device", Value::from(v)),
            "mapping" => ("mapping", Value::from(v)),
            "pcie" | "x-vga" | "rombar" | "legacy-igd" => (k.as_str(), flag(&k, &v, key, FIELD)?),
            "romfile" | "mdev" | "vendor-id" | "device-id" | "sub-vendor-id" | "sub-device-id" => {
                (k.as_str(), Value::from(v))
            }
            _ => return Err(no_field(key, &k, &v, FIELD)),
        };
        dev.insert(field.into(), v);
    }
    push(spec, &["hardware"], "pci-devices", Value::Object(dev));
    Ok(FIELD.into())
}

fn usb(key: &str, value: &str, spec: &mut Map<String, Value>) -> Result<String, String> {
    const FIELD: &str = "hardware.usb-devices";
    let mut dev = Map::new();
    dev.insert("slot".into(), Value::from(key));
    for (k, v) in parse(key, value)? {
        let v = match k.as_str() {
            "host" | "mapping" => Value::from(v),
            "usb3" => flag(&k, &v, key, FIELD)?,
            _ => return Err(no_field(key, &k, &v, FIELD)),
        };
        dev.insert(k, v);
    }
    push(spec, &["hardware"], "usb-devices", Value::Object(dev));
    Ok(FIELD.into())
}

fn serial(key: &str, value: &str, spec: &mut Map<String, Value>) -> Result<String, String> {
    if !matches!(key, "serial0" | "serial1" | "serial2" | "serial3") {
        return Err(format!(
            "PVE has serial0 to serial3 only: `{key}` cannot be declared"
        ));
    }
    hardware(spec)?.insert(key.into(), Value::from(value));
    Ok(format!("hardware.{key}"))
}

fn audio(value: &str, spec: &mut Map<String, Value>) -> Result<String, String> {
    const FIELD: &str = "hardware.audio";
    let mut audio = Map::new();
    for (k, v) in parse("audio0", value)? {
        match k.as_str() {
            "device" | "driver" => audio.insert(k, Value::from(v)),
            _ => return Err(no_field("audio0", &k, &v, FIELD)),
        };
    }
    hardware(spec)?.insert("audio".into(), Value::Object(audio));
    Ok(FIELD.into())
}

fn rng(value: &str, spec: &mut Map<String, Value>) -> Result<String, String> {
    const FIELD: &str = "hardware.rng";
    let mut rng = Map::new();
    for (k, v) in parse("rng0", value)? {
        match k.as_str() {
            "source" => rng.insert(k, Value::from(v)),
            "max_bytes" | "period" => {
                let Ok(n) = v.parse::<u64>() else {
                    return Err(no_field("rng0", &k, &v, FIELD));
                };
                rng.insert(k.replace('_', "-"), Value::from(n))
            }
            _ => return Err(no_field("rng0", &k, &v, FIELD)),
        };
    }
    hardware(spec)?.insert("rng".into(), Value::Object(rng));
    Ok(FIELD.into())
}

fn vga(value: &str, spec: &mut Map<String, Value>) -> Result<String, String> {
    const FIELD: &str = "hardware.display";
    let mut out = Vec::new();
    for (k, v) in parse("vga", value)? {
        match k.as_str() {
            "type" => out.push(("display", Value::from(v))),
            "memory" => match v.parse::<u64>() {
                Ok(n) => out.push(("display-memory", Value::from(format!("{n}MiB")))),
                Err(_) => return Err(no_field("vga", &k, &v, FIELD)),
            },
            "clipboard" => out.push(("display-clipboard", Value::from(v))),
            _ => return Err(no_field("vga", &k, &v, FIELD)),
        }
    }
    let h = hardware(spec)?;
    for (field, v) in out {
        h.insert(field.into(), v);
    }
    Ok(FIELD.into())
}

fn machine(value: &str, spec: &mut Map<String, Value>) -> Result<String, String> {
    const FIELD: &str = "hardware.machine";
    let mut out = Vec::new();
    for (k, v) in parse("machine", value)? {
        match k.as_str() {
            "type" => out.push(("machine", Value::from(v))),
            "viommu" => out.push(("viommu", Value::from(v))),
            _ => return Err(no_field("machine", &k, &v, FIELD)),
        }
    }
    let h = hardware(spec)?;
    for (field, v) in out {
        h.insert(field.into(), v);
    }
    Ok(FIELD.into())
}

/// `numaN` is the N-th entry of `hardware.numa-nodes` (desired/vm.rs writes them by position),
/// so the nodes must come without a gap.
fn numa_node(key: &str, value: &str, spec: &mut Map<String, Value>) -> Result<String, String> {
    const FIELD: &str = "hardware.numa-nodes";
    let index: usize = key[4..]
        .parse()
        .map_err(|_| format!("`{key}` has no index"))?;
    if len(spec, &["hardware"], "numa-nodes") != index {
        return Err(format!(
            "`{key}` follows a gap in the NUMA nodes, and `{FIELD}` numbers them by position: declare the nodes by hand"
        ));
    }
    let mut node = Map::new();
    for (k, v) in parse(key, value)? {
        let v = match k.as_str() {
            "cpus" | "hostnodes" | "policy" => Value::from(v),
            "memory" => match v.parse::<u64>() {
                Ok(n) => Value::from(format!("{n}MiB")),
                Err(_) => return Err(no_field(key, &k, &v, FIELD)),
            },
            _ => return Err(no_field(key, &k, &v, FIELD)),
        };
        node.insert(k, v);
    }
    push(spec, &["hardware"], "numa-nodes", Value::Object(node));
    Ok(FIELD.into())
}
