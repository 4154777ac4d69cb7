//! `/cluster/sdn/zones[/{zone}]` as pve-network `src/PVE/API2/Network/SDN/Zones.pm` defines
//! them (`index`, `read`, `create`, `update`, `delete`), with the options of
//! `src/PVE/Network/SDN/Zones/SimplePlugin.pm` and `VlanPlugin.pm`. The other zone types
//! (`qinq`, `vxlan`, `evpn`, `faucet`) are not modelled: they are refused as
//! `PVE::Network::SDN::Zones::Plugin->lookup` refuses a type it has no plugin for.

use serde_json::Value;

use super::Ctx;
use crate::error::ApiError;
use crate::sdn::{self, Kind, Section, View};

const SEE: &[&str] = &["SDN.Audit", "SDN.Allocate"];

/// The plugin `options` of a zone type: (key, optional).
fn options(kind: &str) -> Option<&'static [(&'static str, bool)]> {
    match kind {
        "simple" => Some(&[
            ("nodes", true),
            ("mtu", true),
            ("dns", true),
            ("reversedns", true),
            ("dnszone", true),
            ("ipam", true),
            ("dhcp", true),
        ]),
        "vlan" => Some(&[
            ("nodes", true),
            ("bridge", false),
            ("bridge-disable-mac-learning", true),
            ("mtu", true),
            ("dns", true),
            ("reversedns", true),
            ("dnszone", true),
            ("ipam", true),
        ]),
        _ => None,
    }
}

/// Every zone option the endpoints take (`check_config` looks at each given one).
const ALL: &[&str] = &[
    "advertise-subnets",
    "bridge",
    "bridge-disable-mac-learning",
    "controller",
    "dhcp",
    "disable-arp-nd-suppression",
    "dns",
    "dnszone",
    "dp-id",
    "exitnodes",
    "exitnodes-local-routing",
    "exitnodes-primary",
    "fabric",
    "ipam",
    "mac",
    "mtu",
    "nodes",
    "peers",
    "reversedns",
    "rt-import",
    "tag",
    "vlan-protocol",
    "vrf-vxlan",
    "vxlan-port",
];

/// `$api_sdn_zones_config`: the section with `zone` and the file's `digest`.
fn entry(id: &str, s: &Section, digest: &Value) -> Value {
    let mut v = Value::Object(s.clone());
    v["zone"] = id.into();
    v["digest"] = digest.clone();
    v
}

/// `GET /cluster/sdn/zones` (`index`): the zones the caller holds `SDN.Audit` or
/// `SDN.Allocate` on (`/sdn/zones/<zone>`), of the `type` asked for.
pub(crate) fn list(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let which = View::of(ctx.flag("pending"), ctx.flag("running"));
    let (cfg, digest) = sdn::view(&ctx.state(), Kind::Zones, which);
    let kind = ctx.p("type").filter(|t| !t.is_empty());
    Ok(Value::Array(
        cfg.iter()
            .filter(|(id, _)| {
                let path = format!("/sdn/zones/{id}");
                SEE.iter().any(|p| ctx.allowed(&path, p))
            })
            .filter(|(_, s)| kind.is_none_or(|k| s.get("type").and_then(Value::as_str) == Some(k)))
            .map(|(id, s)| entry(id, s, &digest))
            .collect(),
    ))
}

/// `GET /cluster/sdn/zones/{zone}` (`read`): `SDN.Allocate` on `/sdn/zones/<zone>` (not
/// `SDN.Audit`, as the Perl says).
pub(crate) fn read(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let id = ctx.req("zone")?;
    ctx.require(&format!("/sdn/zones/{id}"), "SDN.Allocate")?;
    let which = View::of(ctx.flag("pending"), ctx.flag("running"));
    let (cfg, digest) = sdn::view(&ctx.state(), Kind::Zones, which);
    match cfg.get(&id) {
        Some(s) => Ok(entry(&id, s, &digest)),
        None => Err(ApiError::fail(format!("sdn '{id}' does not exist"))),
    }
}

/// The plugin's `check_config`: each given option must be one of the type's ("unexpected
/// property"), decoded (`nodes` as PVE encodes it back: sorted, once each); on create, the
/// required ones must be there.
fn check_config(ctx: &Ctx, kind: &str, create: bool) -> Result<Section, ApiError> {
    let Some(opts) = options(kind) else {
        return Err(ApiError::fail(format!("unknown section type '{kind}'")));
    };
    let mut out = Section::new();
    for key in ALL {
        let Some(v) = ctx.p(key) else { continue };
        if !opts.iter().any(|(k, _)| k == key) {
            return Err(ApiError::fail(format!("unexpected property '{key}'")));
        }
        let value = match *key {
            "mtu" => ctx.int(key).map_or_else(|| Value::from(v), Value::from),
            "bridge-disable-mac-learning" => sdn::bool_value(v),
            "nodes" => {
                let mut nodes = crate::schema::split_list(v);
                nodes.sort();
                nodes.dedup();
                Value::from(nodes.join(","))
            }
            _ => Value::from(v),
        };
        out.insert((*key).to_owned(), value);
    }
    if create && let Some((k, _)) = opts.iter().find(|(k, o)| !o && !out.contains_key(*k)) {
        return Err(ApiError::fail(format!(
            "missing value for required option '{k}'"
        )));
    }
    Ok(out)
}

/// The references `create` and `update` check under the lock: no DNS server is configured in
/// the simulator (`/cluster/sdn/dns` is not modelled), and the only IPAM is the built-in `pve`
/// (`PVE::Network::SDN::Ipams::config` adds it).
fn check_refs(opts: &Section) -> Result<(), ApiError> {
    let s = |k: &str| opts.get(k).and_then(Value::as_str);
    if let Some(dns) = s("dns") {
        return Err(ApiError::param("dns", format!("{dns} don't exist")));
    }
    if let Some(r) = s("reversedns") {
        return Err(ApiError::param("reversedns", format!("{r} don't exist")));
    }
    if s("dnszone").is_some() {
        return Err(ApiError::param("dnszone", "missing dns server"));
    }
    if let Some(ipam) = s("ipam").filter(|i| *i != "pve") {
        return Err(ApiError::param("ipam", format!("{ipam} not existing")));
    }
    Ok(())
}

/// `POST /cluster/sdn/zones` (`create`): `SDN.Allocate` on `/sdn/zones`.
pub(crate) fn create(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/sdn/zones", "SDN.Allocate")?;
    let kind = ctx.req("type")?;
    let id = ctx.req("zone")?;
    let opts = check_config(ctx, &kind, true)?;
    let mut st = ctx.state();
    let mut files = sdn::configs(&st).1;
    let body = || -> Result<(), ApiError> {
        if files.zones.contains_key(&id) {
            return Err(ApiError::fail(format!(
                "sdn zone object ID '{id}' already defined"
            )));
        }
        check_refs(&opts)?;
        let mut s = Section::new();
        s.insert("type".into(), kind.clone().into());
        s.extend(opts);
        files.zones.insert(id.clone(), s);
        Ok(())
    };
    body().map_err(|e| sdn::locked("create sdn zone object failed", e))?;
    *sdn::files_mut(&mut st) = files;
    Ok(Value::Null)
}

/// `PUT /cluster/sdn/zones/{zone}` (`update`): `SDN.Allocate` on `/sdn/zones/<zone>`; the
/// digest, the zone, the options of its type, `delete`; the IPAM stays while the zone has
/// subnets.
pub(crate) fn update(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let id = ctx.req("zone")?;
    ctx.require(&format!("/sdn/zones/{id}"), "SDN.Allocate")?;
    let mut st = ctx.state();
    let mut files = sdn::configs(&st).1;
    let mut body = || -> Result<(), ApiError> {
        sdn::assert_digest(ctx.p("digest"), &files.zones)?;
        let in_zone = files
            .subnets
            .keys()
            .any(|s| s.split('-').next() == Some(id.as_str()));
        let Some(scfg) = files.zones.get_mut(&id) else {
            return Err(ApiError::fail(format!("sdn '{id}' does not exist")));
        };
        let kind = scfg
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let opts = check_config(ctx, &kind, false)?;
        let old_ipam = scfg.get("ipam").cloned();
        if let Some(delete) = ctx.p("delete") {
            sdn::delete_keys(scfg, options(&kind).unwrap_or_default(), &opts, delete)?;
        }
        scfg.extend(opts.clone());
        if scfg.get("ipam") != old_ipam.as_ref() && in_zone {
            return Err(ApiError::param(
                "ipam",
                "can't change ipam if a subnet is already defined in this zone",
            ));
        }
        check_refs(&opts)
    };
    body().map_err(|e| sdn::locked("update sdn zone object failed", e))?;
    *sdn::files_mut(&mut st) = files;
    Ok(Value::Null)
}

/// `DELETE /cluster/sdn/zones/{zone}` (`delete`): refused while a VNet of the files is in it
/// (the plugin's `on_delete_hook`, whose `die` has no newline: PVE appends the Perl source
/// line, which the simulator leaves out).
pub(crate) fn delete(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let id = ctx.req("zone")?;
    ctx.require(&format!("/sdn/zones/{id}"), "SDN.Allocate")?;
    let mut st = ctx.state();
    let mut files = sdn::configs(&st).1;
    let mut body = || -> Result<(), ApiError> {
        if !files.zones.contains_key(&id) {
            return Err(ApiError::fail(format!("sdn '{id}' does not exist")));
        }
        if let Some((vnet, _)) = files
            .vnets
            .iter()
            .find(|(_, v)| v.get("zone").and_then(Value::as_str) == Some(id.as_str()))
        {
            return Err(ApiError::fail(format!("zone {id} is used by vnet {vnet}")));
        }
        files.zones.remove(&id);
        Ok(())
    };
    body().map_err(|e| sdn::locked("delete sdn zone object failed", e))?;
    *sdn::files_mut(&mut st) = files;
    Ok(Value::Null)
}
